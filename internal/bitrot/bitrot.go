package bitrot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
)

// Report is what Flip did.
type Report struct {
	Files      int
	BitsStored int64
	Flips      int64
	// ByKind counts flips by file kind (Kind).
	ByKind map[string]int64
	// ByFile counts flips by path (only files that took a flip).
	ByFile map[string]int64
}

func (r Report) String() string {
	kinds := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.ByKind[k]))
	}
	return fmt.Sprintf("%d flips in %d files (%d bits): %s", r.Flips, r.Files, r.BitsStored, strings.Join(parts, " "))
}

// Files lists every regular file under root, sorted.
func Files(fs vfs.FS, root string) ([]string, error) {
	var out []string
	var walk func(dir string) error
	walk = func(dir string) error {
		names, err := fs.List(dir)
		if err != nil {
			return fmt.Errorf("bitrot: list %s: %w", dir, err)
		}
		sort.Strings(names)
		for _, n := range names {
			p := fs.PathJoin(dir, n)
			st, err := fs.Stat(p)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				return fmt.Errorf("bitrot: stat %s: %w", p, err)
			}
			if st.IsDir() {
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			out = append(out, p)
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return out, nil
}

// Flip flips each stored bit of every regular file under root with
// probability uber, independently, drawing from rng. Files are visited in
// sorted order, so a seed reproduces the same flips on the same files.
func Flip(fs vfs.FS, root string, uber float64, rng *rand.Rand) (Report, error) {
	rep := Report{ByKind: map[string]int64{}, ByFile: map[string]int64{}}
	if uber < 0 || uber >= 1 || math.IsNaN(uber) {
		return rep, base.InvalidArgumentf("bitrot: UBER %g outside [0, 1)", uber)
	}
	files, err := Files(fs, root)
	if err != nil {
		return rep, err
	}
	for _, p := range files {
		st, err := fs.Stat(p)
		if err != nil {
			return rep, fmt.Errorf("bitrot: stat %s: %w", p, err)
		}
		bits := st.Size() * 8
		rep.Files++
		rep.BitsStored += bits
		if bits == 0 || uber == 0 {
			continue
		}
		var at []int64
		for pos := geometric(rng, uber); pos < bits; pos += 1 + geometric(rng, uber) {
			at = append(at, pos)
		}
		if len(at) == 0 {
			continue
		}
		for _, b := range at {
			if err := FlipBit(fs, p, b); err != nil {
				return rep, err
			}
		}
		rep.Flips += int64(len(at))
		rep.ByKind[Kind(p)] += int64(len(at))
		rep.ByFile[p] += int64(len(at))
	}
	return rep, nil
}

// geometric draws the number of bits before the next flip.
func geometric(rng *rand.Rand, p float64) int64 {
	u := rng.Float64()
	if u == 0 {
		u = math.SmallestNonzeroFloat64
	}
	g := math.Floor(math.Log(u) / math.Log1p(-p))
	if g > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(g)
}

// FlipBit flips bit number bit (0 is the lowest bit of byte 0) of the file.
func FlipBit(fs vfs.FS, path string, bit int64) error {
	return rewrite(fs, path, bit/8, 1, func(b []byte) { b[0] ^= 1 << (bit % 8) })
}

// Zero overwrites n bytes at off with zeros (clipped to the file).
func Zero(fs vfs.FS, path string, off, n int64) error {
	return rewrite(fs, path, off, n, func(b []byte) { clear(b) })
}

// Junk overwrites n bytes at off with random bytes from rng (clipped to the
// file).
func Junk(fs vfs.FS, path string, off, n int64, rng *rand.Rand) error {
	return rewrite(fs, path, off, n, func(b []byte) { rng.Read(b) })
}

// Truncate cuts the file to size bytes.
func Truncate(fs vfs.FS, path string, size int64) error {
	st, err := fs.Stat(path)
	if err != nil {
		return fmt.Errorf("bitrot: stat %s: %w", path, err)
	}
	if size >= st.Size() {
		return nil
	}
	data := make([]byte, size)
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("bitrot: open %s: %w", path, err)
	}
	_, err = io.ReadFull(f, data)
	f.Close()
	if err != nil {
		return fmt.Errorf("bitrot: read %s: %w", path, err)
	}
	w, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("bitrot: recreate %s: %w", path, err)
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return fmt.Errorf("bitrot: write %s: %w", path, err)
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return fmt.Errorf("bitrot: sync %s: %w", path, err)
	}
	return w.Close()
}

// Delete removes the file.
func Delete(fs vfs.FS, path string) error {
	if err := fs.Remove(path); err != nil {
		return fmt.Errorf("bitrot: remove %s: %w", path, err)
	}
	return nil
}

// rewrite applies change to the bytes [off, off+n) of the file (clipped to
// its length) in place.
func rewrite(fs vfs.FS, path string, off, n int64, change func([]byte)) error {
	st, err := fs.Stat(path)
	if err != nil {
		return fmt.Errorf("bitrot: stat %s: %w", path, err)
	}
	if off < 0 || off >= st.Size() {
		return base.InvalidArgumentf("bitrot: offset %d outside %s (%d bytes)", off, path, st.Size())
	}
	n = min(n, st.Size()-off)
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("bitrot: open %s: %w", path, err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return fmt.Errorf("bitrot: read %s: %w", path, err)
	}
	change(b)
	if _, err := f.WriteAt(b, off); err != nil {
		return fmt.Errorf("bitrot: write %s: %w", path, err)
	}
	return f.Sync()
}

// kinds maps file names to kinds, first match wins.
var kinds = []struct {
	re   *regexp.Regexp
	kind string
}{
	{regexp.MustCompile(`^raftlog-\d+\.\d+(\.tmp)?$`), "raft log"},
	{regexp.MustCompile(`^MANIFEST-\d+$`), "pebble MANIFEST"},
	{regexp.MustCompile(`^OPTIONS-\d+$`), "pebble OPTIONS"},
	{regexp.MustCompile(`^marker\.`), "pebble marker"},
	{regexp.MustCompile(`^CURRENT$`), "pebble CURRENT"},
	{regexp.MustCompile(`^\d+\.log$`), "pebble WAL"},
	// Pebble writes an OPTIONS file as "temporary.<n>.dbtmp" and renames it.
	{regexp.MustCompile(`^temporary\.\d+\.dbtmp$`), "pebble OPTIONS"},
	{regexp.MustCompile(`^(\d+|patch-\d+)\.sst$`), "sstable"},
	{regexp.MustCompile(`^LOCK$`), "lock"},
}

// guardfsEntry is a guardfs reserved-directory entry: copy k of a framed
// file, "m.<k>.<16 hex id>.<name>", or of an sstable's sidecar,
// "s.<k>.<id>.<name>" (guardfs.ParseReserved; bitrot cannot import
// guardfs, whose tests use bitrot).
var guardfsEntry = regexp.MustCompile(`^([ms])\.\d\.[0-9a-f]{16}\.(.+)$`)

// Kind names the type of the file at path by its name (and, for files in a
// protection layer's reserved directory, says so). A guardfs copy is of the
// kind of the file it protects, whatever that file's number (".guardfs
// pebble MANIFEST"; ".guardfs sstable sidecar"): a write fault of a kind
// must meet the copies written after the fault, which have new numbers.
func Kind(path string) string {
	base := filepath.Base(path)
	prefix := ""
	for _, part := range strings.Split(filepath.ToSlash(filepath.Dir(path)), "/") {
		if strings.HasPrefix(part, ".") && part != "." && part != ".." {
			prefix = part + " "
		}
	}
	if prefix == ".guardfs " {
		if m := guardfsEntry.FindStringSubmatch(base); m != nil {
			k := Kind(m[2])
			if m[1] == "s" {
				k += " sidecar"
			}
			return prefix + k
		}
	}
	for _, k := range kinds {
		if k.re.MatchString(base) {
			return prefix + k.kind
		}
	}
	if ext := filepath.Ext(base); ext != "" {
		return prefix + "*" + ext
	}
	return prefix + base
}

// Copy copies every file under srcDir in src to dstDir in dst (a store to
// damage, leaving the original for the next fault).
func Copy(src vfs.FS, srcDir string, dst vfs.FS, dstDir string) error {
	files, err := Files(src, srcDir)
	if err != nil {
		return err
	}
	if err := dst.MkdirAll(dstDir, 0o755); err != nil {
		return fmt.Errorf("bitrot: mkdir %s: %w", dstDir, err)
	}
	for _, p := range files {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, srcDir), "/")
		to := dst.PathJoin(dstDir, rel)
		if err := dst.MkdirAll(dst.PathDir(to), 0o755); err != nil {
			return fmt.Errorf("bitrot: mkdir %s: %w", dst.PathDir(to), err)
		}
		if err := vfs.CopyAcrossFS(src, p, dst, to); err != nil {
			return fmt.Errorf("bitrot: copy %s: %w", p, err)
		}
	}
	return nil
}

// XORAt XORs mask[2:] into b at the offset held, little endian, in
// mask[0:2] (modulo len(b)), stopping at b's end; it returns whether any
// byte changed. Fuzz targets use it to damage an encoding with bytes the
// fuzzer chooses.
func XORAt(b, mask []byte) bool {
	if len(b) == 0 || len(mask) < 3 {
		return false
	}
	off := int(binary.LittleEndian.Uint16(mask)) % len(b)
	changed := false
	for i, x := range mask[2:] {
		if off+i >= len(b) {
			break
		}
		changed = changed || x != 0
		b[off+i] ^= x
	}
	return changed
}
