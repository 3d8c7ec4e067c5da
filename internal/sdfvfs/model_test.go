package sdfvfs

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/testseed"
)

var modelSeed = flag.Int64("model-seed", 0, "seed of TestAgainstMemFS (0: time)")

// TestAgainstMemFS applies a seeded random sequence of namespace and file
// operations to FS and to Pebble's in-memory vfs (the reference) and
// requires the same outcome from both: the same error or success, the same
// listings, sizes and contents. Halfway through, sdf is remounted: the
// namespace must survive it unchanged.
func TestAgainstMemFS(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = testseed.Seed(t, "SDFVFS_SEED")
	}
	var history []string
	rng := rand.New(rand.NewSource(seed))
	dev := memDevice(t, flash.Options{Seed: 1})
	fs := mount(t, dev, false, Options{})
	ref := vfs.NewMem()
	dirs := []string{"a", "a/b", "c"}
	names := []string{"f", "g", "MANIFEST-000001", "OPTIONS-000002", "x.sst", "temporary.000003.dbtmp"}
	// Files are never created under a directory's name: MemFS departs
	// from an OS there (it replaces directories).
	randFile := func() string { return dirs[rng.Intn(len(dirs))] + "/" + names[rng.Intn(len(names))] }
	randPath := func() string {
		if rng.Intn(6) == 0 {
			return dirs[rng.Intn(len(dirs))]
		}
		return randFile()
	}
	// Only success or failure is compared: the two implementations word
	// their errors differently.
	same := func(op string, e1, e2 error) {
		t.Helper()
		history = append(history, fmt.Sprintf("%s: %v / %v", op, e1, e2))
		if (e1 == nil) != (e2 == nil) {
			t.Fatalf("%s: sdfvfs err %v, reference err %v; history:\n%s", op, e1, e2, strings.Join(history, "\n"))
		}
	}
	const ops = 600
	for i := 0; i < ops; i++ {
		if i == ops/2 {
			fs = remount(t, nil, fs, dev, Options{})
		}
		switch k := rng.Intn(10); k {
		case 0:
			d := dirs[rng.Intn(len(dirs))]
			same("mkdirall "+d, fs.MkdirAll(d, 0o755), ref.MkdirAll(d, 0o755))
		case 1, 2, 3:
			p := randFile()
			data := make([]byte, rng.Intn(3*4096))
			rng.Read(data)
			f1, e1 := fs.Create(p, vfs.WriteCategoryUnspecified)
			f2, e2 := ref.Create(p, vfs.WriteCategoryUnspecified)
			same("create "+p, e1, e2)
			if e1 != nil {
				continue
			}
			for off := 0; off < len(data); {
				n := min(len(data)-off, 1+rng.Intn(5000))
				if _, err := f1.Write(data[off : off+n]); err != nil {
					t.Fatal(err)
				}
				if _, err := f2.Write(data[off : off+n]); err != nil {
					t.Fatal(err)
				}
				if rng.Intn(3) == 0 {
					same("sync", f1.Sync(), f2.Sync())
				}
				off += n
			}
			same("close", f1.Close(), f2.Close())
		case 4:
			p := randPath()
			same("remove "+p, fs.Remove(p), ref.Remove(p))
		case 5:
			p, q := randFile(), randFile()
			if fi, err := ref.Stat(ref.PathDir(q)); err != nil || !fi.IsDir() {
				continue // MemFS loses the source of a rename into a missing directory
			}
			same(fmt.Sprintf("rename %s %s", p, q), fs.Rename(p, q), ref.Rename(p, q))
		case 6:
			d := dirs[rng.Intn(len(dirs))]
			l1, e1 := fs.List(d)
			l2, e2 := ref.List(d)
			same("list "+d, e1, e2)
			sort.Strings(l2)
			if strings.Join(l1, ",") != strings.Join(l2, ",") {
				t.Fatalf("op %d: list %s: %v, reference %v", i, d, l1, l2)
			}
		case 7:
			p := randPath()
			s1, e1 := fs.Stat(p)
			s2, e2 := ref.Stat(p)
			same("stat "+p, e1, e2)
			if e1 == nil && (s1.IsDir() != s2.IsDir() || (!s1.IsDir() && s1.Size() != s2.Size())) {
				t.Fatalf("op %d: stat %s: %v, reference %v/%d", i, p, s1, s2.IsDir(), s2.Size())
			}
		case 8, 9:
			p := randPath()
			f1, e1 := fs.Open(p)
			f2, e2 := ref.Open(p)
			same("open "+p, e1, e2)
			if e1 != nil {
				continue
			}
			if fi, _ := f2.Stat(); !fi.IsDir() {
				b1, err1 := io.ReadAll(f1)
				b2, err2 := io.ReadAll(f2)
				if err1 != nil || err2 != nil || !bytes.Equal(b1, b2) {
					t.Fatalf("op %d: read %s: %d bytes (%v), reference %d bytes (%v)", i, p, len(b1), err1, len(b2), err2)
				}
			}
			f1.Close()
			f2.Close()
		}
	}
	// Every shadow belongs to a live file with the same content.
	for _, n := range fs.SDF().List() {
		if !strings.HasPrefix(n, shadowPrefix) {
			continue
		}
		p := strings.TrimPrefix(n, shadowPrefix)
		want, err := readFileRef(ref, p)
		if err != nil {
			t.Fatalf("shadow %s of missing file: %v", n, err)
		}
		f, _ := fs.SDF().OpenFile(n)
		got := make([]byte, f.Size())
		f.ReadAt(got, 0)
		f.Close()
		if !bytes.Equal(got, want) {
			t.Fatalf("shadow %s differs from its file", n)
		}
	}
}

func readFileRef(fs vfs.FS, p string) ([]byte, error) {
	f, err := fs.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
