package sdfvfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf"
)

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "/": "", ".": "", "db": "db", "/db": "db", "./db/": "db", "db//a/../b": "db/b",
		"/../x": "x", `db\x`: "db/x",
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}

func mustCreate(t *testing.T, fs *FS, name string, data []byte) {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustList(t *testing.T, fs *FS, dir string) string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatalf("list %q: %v", dir, err)
	}
	return strings.Join(names, ",")
}

func TestNamespace(t *testing.T) {
	dev := memDevice(t, flash.Options{Seed: 1})
	fs := mount(t, dev, false, Options{})
	notExist := func(what string, err error) {
		t.Helper()
		if !oserror.IsNotExist(err) {
			t.Fatalf("%s: %v, want not-exist", what, err)
		}
	}
	_, err := fs.Create("a/f", vfs.WriteCategoryUnspecified)
	notExist("create in a missing directory", err)
	if err := fs.MkdirAll("/a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll("a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, fs, "a/f", []byte("hello"))
	mustCreate(t, fs, "/a/b/g", []byte("world!"))
	mustCreate(t, fs, "top", nil)
	if got := mustList(t, fs, ""); got != "a,top" {
		t.Fatalf("list root: %s", got)
	}
	if got := mustList(t, fs, "/a/"); got != "b,f" {
		t.Fatalf("list a: %s", got)
	}
	if got := mustList(t, fs, "a/b/c"); got != "" {
		t.Fatalf("list a/b/c: %s", got)
	}
	_, err = fs.List("nope")
	notExist("list a missing directory", err)
	for name, want := range map[string]string{"a": "a/", "a/b/c": "c/", "a/f": "f (5 B)", "/a/b/g": "g (6 B)", "": "//"} {
		fi, err := fs.Stat(name)
		if err != nil {
			t.Fatalf("stat %q: %v", name, err)
		}
		if got := fmt.Sprint(fi); got != want {
			t.Fatalf("stat %q = %s, want %s", name, got, want)
		}
	}
	_, err = fs.Stat("a/zz")
	notExist("stat", err)
	_, err = fs.Open("a/zz")
	notExist("open", err)
	notExist("remove", fs.Remove("a/zz"))
	if _, err := fs.Create("a/b", vfs.WriteCategoryUnspecified); err == nil {
		t.Fatal("created a file over a directory")
	}
	if err := fs.MkdirAll("a/f/x", 0o755); err == nil {
		t.Fatal("made a directory under a file")
	}
	if err := fs.Remove("a/b"); err == nil {
		t.Fatal("removed a non-empty directory")
	}
	if err := fs.Remove("a/b/c"); err != nil {
		t.Fatal(err)
	}
	_, err = fs.Stat("a/b/c")
	notExist("stat removed dir", err)
	// Rename replaces the target.
	if err := fs.Rename("a/b/g", "a/f"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, fs, "a/f"); string(got) != "world!" {
		t.Fatalf("after rename: %q", got)
	}
	notExist("rename a missing file", fs.Rename("a/b/g", "a/h"))
	if err := fs.Rename("a/f", "zz/f"); !oserror.IsNotExist(err) {
		t.Fatalf("rename into a missing directory: %v", err)
	}
	// The reserved directory is invisible and refused.
	for _, name := range []string{".sdfvfs", "/.sdfvfs/dup/x"} {
		if _, err := fs.Create(name, vfs.WriteCategoryUnspecified); !base.IsInvalidArgument(err) {
			t.Fatalf("create %q: %v", name, err)
		}
	}
	// Empty directories survive a remount (markers).
	if err := fs.MkdirAll("empty", 0o755); err != nil {
		t.Fatal(err)
	}
	fs = remount(t, nil, fs, dev, Options{})
	if got := mustList(t, fs, ""); got != "a,empty,top" {
		t.Fatalf("root after remount: %s", got)
	}
	if got := mustList(t, fs, "a"); got != "b,f" {
		t.Fatalf("a after remount: %s", got)
	}
	if err := fs.RemoveAll("a"); err != nil {
		t.Fatal(err)
	}
	if err := fs.RemoveAll("a"); err != nil {
		t.Fatalf("RemoveAll of a missing path: %v", err)
	}
	if got := mustList(t, fs, ""); got != "empty,top" {
		t.Fatalf("root after RemoveAll: %s", got)
	}
	d, err := fs.OpenDir("empty")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write([]byte("x")); err == nil {
		t.Fatal("wrote to a directory")
	}
	d.Close()
	_, err = fs.OpenDir("top/x")
	notExist("opendir", err)
}

func TestFileHandles(t *testing.T) {
	const seed = 3
	rng := rand.New(rand.NewSource(seed))
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, Options{})
	content := make([]byte, 30_000)
	rng.Read(content)
	f, err := fs.Create("f", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(content); off += 7000 {
		if _, err := f.Write(content[off:min(off+7000, len(content))]); err != nil {
			t.Fatal(err)
		}
	}
	// Readable before sync and close, through the writer.
	buf := make([]byte, 100)
	if n, err := f.ReadAt(buf, 29_950); n != 50 || err != io.EOF || !bytes.Equal(buf[:50], content[29_950:]) {
		t.Fatalf("read at the end: n=%d err=%v", n, err)
	}
	if full, err := f.SyncTo(10); full || err != nil {
		t.Fatalf("SyncTo: %t %v", full, err)
	}
	if _, err := f.WriteAt([]byte("x"), 30_001); !base.IsInvalidArgument(err) {
		t.Fatalf("WriteAt past the end: %v", err)
	}
	if f.Fd() != vfs.InvalidFd || f.Preallocate(0, 1<<20) != nil || f.Prefetch(0, 10) != nil {
		t.Fatal("Fd/Preallocate/Prefetch")
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(content)) || fi.Name() != "f" || fi.IsDir() {
		t.Fatalf("stat: %v %v", fi, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := fs.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("x")); err == nil {
		t.Fatal("wrote through a read handle")
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("sequential read: %v", err)
	}
	r.Close()
	// OpenReadWrite: existing files open readable, missing ones are created.
	rw, err := fs.OpenReadWrite("f", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	rw.Close()
	rw, err = fs.OpenReadWrite("g", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	// ReuseForWrite drops the old file and starts a new one.
	w, err := fs.ReuseForWrite("g", "h", "pebble-wal")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := fs.Stat("g"); !oserror.IsNotExist(err) {
		t.Fatalf("old name after reuse: %v", err)
	}
	if fi, err := fs.Stat("h"); err != nil || fi.Size() != 0 {
		t.Fatalf("reused file: %v %v", fi, err)
	}
	// Link is refused in a way that makes LinkOrCopy copy.
	err = fs.Link("f", "f2")
	if err == nil || oserror.IsExist(err) || oserror.IsNotExist(err) || oserror.IsPermission(err) {
		t.Fatalf("link: %v", err)
	}
	if err := vfs.LinkOrCopy(fs, "f", "f2"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readAll(t, fs, "f2"), content) {
		t.Fatal("copy differs")
	}
	// Locks are exclusive within the process.
	l, err := fs.Lock("LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Lock("/LOCK"); err == nil {
		t.Fatal("locked twice")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err == nil {
		t.Fatal("released twice")
	}
	l, err = fs.Lock("LOCK")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	du, err := fs.GetDiskUsage("")
	if err != nil || du.TotalBytes == 0 || du.UsedBytes == 0 || du.AvailBytes+du.UsedBytes != du.TotalBytes {
		t.Fatalf("disk usage %+v %v", du, err)
	}
	if fs.PathJoin("a", "b") != "a/b" || fs.PathBase("a/b/") != "b" || fs.PathDir("a/b") != "a" {
		t.Fatal("path helpers")
	}
	if _, err := New(nil, Options{}); !base.IsInvalidArgument(err) {
		t.Fatal("New(nil)")
	}
	if _, err := New(fs.SDF(), Options{MaxRangeCopyBytes: 2 * base.GiB}); !base.IsInvalidArgument(err) {
		t.Fatal("MaxRangeCopyBytes out of bounds accepted")
	}
	if _, err := New(fs.SDF(), Options{CopyReadAttempts: 17}); !base.IsInvalidArgument(err) {
		t.Fatal("CopyReadAttempts out of bounds accepted")
	}
}

// TestShadowFollowsFile: a duplicated file's shadow holds the same bytes and
// follows renames, replacement and removal.
func TestShadowFollowsFile(t *testing.T) {
	dev := memDevice(t, flash.Options{Seed: 4})
	fs := mount(t, dev, false, Options{})
	shadowOf := func(p string) ([]byte, bool) {
		f, err := fs.SDF().OpenFile(shadowName(p))
		if err != nil {
			return nil, false
		}
		defer f.Close()
		b := make([]byte, f.Size())
		if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		return b, true
	}
	mustCreate(t, fs, "OPTIONS-000003.dbtmp", []byte("options"))
	if b, ok := shadowOf("OPTIONS-000003.dbtmp"); !ok || string(b) != "options" {
		t.Fatalf("shadow: %q %t", b, ok)
	}
	if err := fs.Rename("OPTIONS-000003.dbtmp", "OPTIONS-000003"); err != nil {
		t.Fatal(err)
	}
	if _, ok := shadowOf("OPTIONS-000003.dbtmp"); ok {
		t.Fatal("shadow left under the old name")
	}
	if b, ok := shadowOf("OPTIONS-000003"); !ok || string(b) != "options" {
		t.Fatalf("renamed shadow: %q %t", b, ok)
	}
	// A plain file renamed to a duplicated name gets a shadow of its own
	// content, not the replaced file's.
	mustCreate(t, fs, "staging", []byte("plain"))
	if _, ok := shadowOf("staging"); ok {
		t.Fatal("shadow of a plain file")
	}
	if err := fs.Rename("staging", "OPTIONS-000003"); err != nil {
		t.Fatal(err)
	}
	if b, ok := shadowOf("OPTIONS-000003"); !ok || string(b) != "plain" {
		t.Fatalf("shadow after replacing rename: %q %t", b, ok)
	}
	// A duplicated file renamed to a plain name keeps its shadow; one
	// renamed over it by a plain file loses the replaced file's shadow.
	if err := fs.Rename("OPTIONS-000003", "kept"); err != nil {
		t.Fatal(err)
	}
	if b, ok := shadowOf("kept"); !ok || string(b) != "plain" {
		t.Fatalf("shadow after rename to a plain name: %q %t", b, ok)
	}
	mustCreate(t, fs, "other", []byte("other"))
	if err := fs.Rename("other", "kept"); err != nil {
		t.Fatal(err)
	}
	if _, ok := shadowOf("kept"); ok {
		t.Fatal("stale shadow of a replaced file")
	}
	mustCreate(t, fs, "MANIFEST-000001", []byte("m1"))
	if err := fs.Remove("MANIFEST-000001"); err != nil {
		t.Fatal(err)
	}
	if _, ok := shadowOf("MANIFEST-000001"); ok {
		t.Fatal("shadow outlived its file")
	}
	if got := mustList(t, fs, ""); got != "kept" {
		t.Fatalf("list: %s", got)
	}
	// With duplication off, nothing is shadowed.
	fs2, err := New(fs.SDF(), Options{NoDuplication: true})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, fs2, "MANIFEST-000002", []byte("m2"))
	if _, ok := shadowOf("MANIFEST-000002"); ok {
		t.Fatal("shadow written with NoDuplication")
	}
}

// TestConcurrentReadsAndRepair: readers race over a duplicated file with
// damaged pages while the layer repairs them; every read is correct.
func TestConcurrentReadsAndRepair(t *testing.T) {
	const seed = 5
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, Options{})
	content := make([]byte, 40_000)
	rng.Read(content)
	mustCreate(t, fs, "MANIFEST-000009", content)
	fs = remount(t, nil, fs, dev, Options{})
	flipPages(dev, rng, filePages(t, dev, fs, "MANIFEST-000009"))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			f, err := fs.Open("MANIFEST-000009")
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for k := 0; k < 20; k++ {
				off := (g*997 + k*4093) % len(content)
				buf := make([]byte, min(5000, len(content)-off))
				if n, err := f.ReadAt(buf, int64(off)); err != nil && !(err == io.EOF && n == len(buf)) {
					errs <- fmt.Errorf("read at %d: %w", off, err)
					return
				}
				if !bytes.Equal(buf, content[off:off+len(buf)]) {
					errs <- fmt.Errorf("read at %d: wrong data", off)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := fs.Stats()
	t.Logf("vfs: %s", st)
	if st.CopyReads == 0 || st.Repairs == 0 || st.Corruptions != 0 {
		t.Fatalf("stats: %s", st)
	}
}

// TestErrorsAreClassified: corruption is marked for Pebble and keeps its sdf
// detail; a closed sdf is an operating error.
func TestErrorsAreClassified(t *testing.T) {
	dev := memDevice(t, flash.Options{Seed: 6})
	fs := mount(t, dev, false, Options{})
	mustCreate(t, fs, "x", bytes.Repeat([]byte("x"), 10_000))
	fs = remount(t, nil, fs, dev, Options{})
	flipPages(dev, rand.New(rand.NewSource(6)), filePages(t, dev, fs, "x"))
	f, err := fs.Open("x")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(make([]byte, 10), 0)
	var ce *sdf.CorruptionError
	if !errors.As(err, &ce) || !base.IsCorruption(err) || !isPebbleCorruption(err) {
		t.Fatalf("err %v: want a marked *sdf.CorruptionError", err)
	}
	f.Close()
	if err := fs.SDF().Close(); err != nil {
		t.Fatal(err)
	}
	_, err = fs.Create("y", vfs.WriteCategoryUnspecified)
	if err == nil || base.IsCorruption(err) || isPebbleCorruption(err) || !errors.Is(err, sdf.ErrClosed) {
		t.Fatalf("create on closed sdf: %v", err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("not a path error: %T", err)
	}
}

func TestDefaultLifetime(t *testing.T) {
	for _, c := range []struct {
		path     string
		category vfs.DiskWriteCategory
		want     sdf.Lifetime
	}{
		{"db/000004.log", "pebble-wal", sdf.LifetimeShort},
		{"db/000005.sst", "pebble-memtable-flush", sdf.LifetimeMedium},
		{"db/000006.sst", "pebble-compaction", sdf.LifetimeLong},
		{"db/000007.blob", "pebble-blob-file-rewrite", sdf.LifetimeLong},
		{"db/MANIFEST-000001", "pebble-manifest", sdf.LifetimeMedium},
		{"db/OPTIONS-000003", vfs.WriteCategoryUnspecified, sdf.LifetimeMedium},
	} {
		if got := DefaultLifetime(c.path, c.category); got != c.want {
			t.Errorf("%s (%s): %s, want %s", c.path, c.category, got, c.want)
		}
	}
	for path, want := range map[string]bool{"db/MANIFEST-000001": true, "OPTIONS-000003": true, "db/CURRENT": true,
		"db/marker.manifest.000001.MANIFEST-000001": true, "db/000005.sst": false, "db/temporary.000003.dbtmp": true, "db/000002.log": false} {
		if got := DefaultDuplicateFile(path); got != want {
			t.Errorf("DefaultDuplicateFile(%s) = %t", path, got)
		}
	}
}

// TestBothCopiesDamaged: a page damaged in the file and in its shadow is a
// corruption error (DIRECT: report, never guess); a page damaged in only
// one of them reads correctly.
func TestBothCopiesDamaged(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, Options{NoRepair: true})
	content := make([]byte, 5*4096)
	rng.Read(content)
	mustCreate(t, fs, "MANIFEST-000005", content)
	fs = remount(t, nil, fs, dev, Options{NoRepair: true})
	primary, shadow := filePages(t, dev, fs, "MANIFEST-000005"), copyPages(t, dev, fs, "MANIFEST-000005")
	// Page 1 in both copies, page 3 in the primary only, page 4 in the
	// shadow only.
	flipPages(dev, rng, map[int][]flash.PageAddr{1: primary[1], 3: primary[3]})
	flipPages(dev, rng, map[int][]flash.PageAddr{1: shadow[1], 4: shadow[4]})
	f, err := fs.Open("MANIFEST-000005")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for pg, wantErr := range map[int]bool{0: false, 1: true, 2: false, 3: false, 4: false} {
		n, err := f.ReadAt(buf, int64(pg*4096))
		if wantErr {
			if !isPebbleCorruption(err) || !strings.Contains(err.Error(), "no good copy") {
				t.Fatalf("page %d: n=%d err=%v, want corruption", pg, n, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(buf, content[pg*4096:(pg+1)*4096]) {
			t.Fatalf("page %d: n=%d err=%v", pg, n, err)
		}
	}
	// A read across the bad page returns the bytes before it and the error.
	n, err := f.ReadAt(make([]byte, 3*4096), 0)
	if n != 4096 || !isPebbleCorruption(err) {
		t.Fatalf("spanning read: n=%d err=%v", n, err)
	}
	if st := fs.Stats(); st.CopyReads != 1 || st.Repairs != 0 || st.Corruptions != 2 {
		t.Fatalf("stats: %s", st)
	}
}

// TestOrphanedCopiesRemoved: copies left without their file (a crash between
// removing a file and its copies) are removed when the FS is created.
func TestOrphanedCopiesRemoved(t *testing.T) {
	dev := memDevice(t, flash.Options{Seed: 8})
	fs := mount(t, dev, false, Options{})
	mustCreate(t, fs, "MANIFEST-000001", []byte("manifest"))
	mustCreate(t, fs, "data", bytes.Repeat([]byte("d"), 9000))
	if err := fs.DuplicateRanges("data", []Range{{Off: 0, Len: 100}}); err != nil {
		t.Fatal(err)
	}
	// Remove the files behind the layer's back, as a crash would leave it.
	for _, n := range []string{"MANIFEST-000001", "data"} {
		if err := fs.SDF().Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	fs2, err := New(fs.SDF(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st := fs2.Stats(); st.Orphans != 2 {
		t.Fatalf("stats: %s", st)
	}
	if names := fs2.SDF().List(); len(names) != 0 {
		t.Fatalf("left: %v", names)
	}
}

// TestWriteAt: bytes inside a file are rewritten out of place and its copies
// follow; appending through WriteAt works only at the end of a file being
// written.
func TestWriteAt(t *testing.T) {
	const seed = 9
	rng := rand.New(rand.NewSource(seed))
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, Options{})
	content := make([]byte, 20_000)
	rng.Read(content)
	mustCreate(t, fs, "MANIFEST-000001", content)
	mustCreate(t, fs, "data", content)
	if err := fs.DuplicateRanges("data", []Range{{Off: 10_000, Len: 5000}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"MANIFEST-000001", "data"} {
		f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := f.WriteAt([]byte("patched"), 12_000); n != 7 || err != nil {
			t.Fatalf("%s: WriteAt: %d %v", name, n, err)
		}
		if _, err := f.WriteAt([]byte("x"), 20_000); !base.IsInvalidArgument(err) {
			t.Fatalf("%s: append through a read-write handle: %v", name, err)
		}
		if _, err := f.WriteAt([]byte("x"), -1); !base.IsInvalidArgument(err) {
			t.Fatalf("%s: negative offset: %v", name, err)
		}
		f.Close()
	}
	want := append([]byte(nil), content...)
	copy(want[12_000:], "patched")
	for _, name := range []string{"MANIFEST-000001", "data"} {
		if !bytes.Equal(readAll(t, fs, name), want) {
			t.Fatalf("%s: content after WriteAt", name)
		}
	}
	// The copies hold the new bytes: served from them, reads still match.
	got := make([]byte, 1000)
	if !fs.fillFromCopy("MANIFEST-000001", got, 11_500) || !bytes.Equal(got, want[11_500:12_500]) {
		t.Fatal("shadow not rewritten")
	}
	if !fs.fillFromCopy("data", got, 11_500) || !bytes.Equal(got, want[11_500:12_500]) {
		t.Fatal("range copy not rebuilt")
	}
	// A writer appends through WriteAt at its end.
	w, err := fs.Create("log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if n, err := w.WriteAt([]byte("def"), 3); n != 3 || err != nil {
		t.Fatalf("append via WriteAt: %d %v", n, err)
	}
	w.Close()
	if got := readAll(t, fs, "log"); string(got) != "abcdef" {
		t.Fatalf("log: %q", got)
	}
}
