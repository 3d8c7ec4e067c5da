package experiments

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
)

// Faults at rest in the files of a stopped cluster: every stored bit flips
// with probability UBER. Sparse files (an emulated flash device's page file
// is mostly holes) count only their data extents as stored: a hole holds
// no bits to flip.

// atRestFlips is what flipStoredTree did.
type atRestFlips struct {
	Files      int
	BitsStored int64
	Flips      int64
	ByKind     map[string]int64
}

// flipStoredTree flips every stored bit of every regular file under root
// with probability uber, files in sorted order, drawing from rng; kind
// classifies a file for the report.
func flipStoredTree(root string, uber float64, rng *rand.Rand, kind func(path string) string) (atRestFlips, error) {
	res := atRestFlips{ByKind: map[string]int64{}}
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	sort.Strings(files)
	for _, path := range files {
		bits, flips, err := flipStored(path, uber, rng)
		if err != nil {
			return res, err
		}
		res.Files++
		res.BitsStored += bits
		res.Flips += flips
		if flips > 0 {
			res.ByKind[kind(path)] += flips
		}
	}
	return res, nil
}

// flipStored flips each stored bit of path with probability uber (geometric
// gaps: the cost is per flip) and syncs the file once.
func flipStored(path string, uber float64, rng *rand.Rand) (bits, flips int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	extents, err := dataExtents(f)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	var b [1]byte
	for _, e := range extents {
		n := 8 * (e[1] - e[0])
		bits += n
		if uber <= 0 {
			continue
		}
		for pos := geometricGap(rng, uber); pos < n; pos += 1 + geometricGap(rng, uber) {
			off := e[0] + pos/8
			if _, err := f.ReadAt(b[:], off); err != nil {
				return bits, flips, fmt.Errorf("%s: %w", path, err)
			}
			b[0] ^= 1 << (pos % 8)
			if _, err := f.WriteAt(b[:], off); err != nil {
				return bits, flips, fmt.Errorf("%s: %w", path, err)
			}
			flips++
		}
	}
	if flips > 0 {
		err = f.Sync()
	}
	return bits, flips, err
}

// geometricGap draws the number of bits before the next flip at rate p.
func geometricGap(rng *rand.Rand, p float64) int64 {
	u := rng.Float64()
	if u == 0 {
		u = math.SmallestNonzeroFloat64
	}
	g := math.Floor(math.Log(u) / math.Log1p(-p))
	if g > math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return int64(g)
}

// copyTreeSparse copies the directory tree src to dst, writing only the
// data extents of each file (holes stay holes) and keeping sizes.
func copyTreeSparse(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFileSparse(path, to)
	})
}

func copyFileSparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	extents, err := dataExtents(in)
	if err == nil {
		for _, e := range extents {
			if _, err = in.Seek(e[0], io.SeekStart); err != nil {
				break
			}
			if _, err = out.Seek(e[0], io.SeekStart); err != nil {
				break
			}
			if _, err = io.CopyN(out, in, e[1]-e[0]); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = out.Truncate(st.Size())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// dataExtentsBySeek lists the data extents of f with SEEK_DATA / SEEK_HOLE
// (whence values dataWhence, holeWhence); a file system without them gets
// the whole file as one extent.
func dataExtentsBySeek(f *os.File, dataWhence, holeWhence int) ([][2]int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	var out [][2]int64
	for off := int64(0); off < size; {
		start, err := f.Seek(off, dataWhence)
		if err != nil {
			if errors.Is(err, errNoData) {
				break // only a hole is left
			}
			if len(out) == 0 && off == 0 {
				return [][2]int64{{0, size}}, nil // no SEEK_DATA here
			}
			return nil, err
		}
		end, err := f.Seek(start, holeWhence)
		if err != nil {
			return nil, err
		}
		end = min(end, size)
		if end > start {
			out = append(out, [2]int64{start, end})
		}
		off = end
	}
	return out, nil
}
