package fsys

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, m FS, name string, data []byte, sync bool) File {
	t.Helper()
	f, err := m.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// A power loss keeps exactly what was synced at KeepPercent 0: a synced
// file whose directory entry was not synced is gone, a synced entry whose
// file was not synced is empty, and both synced survive whole.
func TestMemCrashKeepsWhatWasSynced(t *testing.T) {
	m := NewMem()
	if err := MkdirAllDurable(m, "/r/a", 0o755, nil); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/r/a/synced", []byte("one"), true)
	write(t, m, "/r/a/unsynced-data", []byte("two"), false)
	if err := m.SyncDir("/r/a"); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/r/a/unsynced-entry", []byte("three"), true)
	if err := m.Mkdir("/r/b", 0o755); err != nil { // parent not synced
		t.Fatal(err)
	}
	write(t, m, "/r/b/x", []byte("four"), true)
	if err := m.SyncDir("/r/b"); err != nil {
		t.Fatal(err)
	}
	img := m.Crash(CrashConfig{})
	if _, err := m.Stat("/r/a/synced"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("the crashed Mem still answers: %v", err)
	}
	if b, err := ReadFile(img, "/r/a/synced"); err != nil || string(b) != "one" {
		t.Fatalf("synced file: %q %v", b, err)
	}
	if b, err := ReadFile(img, "/r/a/unsynced-data"); err != nil || len(b) != 0 {
		t.Fatalf("unsynced data: %q %v", b, err)
	}
	for _, lost := range []string{"/r/a/unsynced-entry", "/r/b"} {
		if _, err := img.Stat(lost); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s survived a power loss unsynced: %v", lost, err)
		}
	}
}

// Unsynced writes survive sector by sector; a rename is atomic: after a
// crash the target holds the old or the new file, never neither.
func TestMemCrashTearsSectorsAndKeepsRenamesAtomic(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	old := bytes.Repeat([]byte{'o'}, 4*SectorBytes)
	next := bytes.Repeat([]byte{'n'}, 4*SectorBytes)
	mixed := 0
	for trial := 0; trial < 200; trial++ {
		m := NewMem()
		f := write(t, m, "/f", old, true)
		if err := m.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(next, 0); err != nil {
			t.Fatal(err)
		}
		write(t, m, "/f.tmp", []byte("new"), true)
		if err := m.Rename("/f.tmp", "/g"); err != nil {
			t.Fatal(err)
		}
		if err := m.Rename("/g", "/h"); err != nil {
			t.Fatal(err)
		}
		img := m.Crash(CrashConfig{KeepPercent: 50, Rand: rng})
		b, err := ReadFile(img, "/f")
		if err != nil || len(b) != len(old) {
			t.Fatalf("trial %d: %d bytes, %v", trial, len(b), err)
		}
		for s := 0; s < len(b); s += SectorBytes {
			sec := b[s : s+SectorBytes]
			if !bytes.Equal(sec, old[s:s+SectorBytes]) && !bytes.Equal(sec, next[s:s+SectorBytes]) {
				t.Fatalf("trial %d: sector %d torn inside", trial, s/SectorBytes)
			}
		}
		if !bytes.Equal(b, old) && !bytes.Equal(b, next) {
			mixed++
		}
		ents, err := img.ReadDir("/")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		// The directory's changes are kept in order (create, rename,
		// rename): a prefix of them, each rename whole.
		switch filepath.Join(names...) {
		case "f", "f/f.tmp", "f/g", "f/h":
		default:
			t.Fatalf("trial %d: entries after the crash %v", trial, names)
		}
	}
	if mixed == 0 {
		t.Fatal("no trial tore a multi-sector write")
	}
}

// The hook sees every mutating operation before it applies; a Crash from
// the hook leaves the operation unapplied in the image and failing.
func TestMemHookCrashBeforeOperation(t *testing.T) {
	m := NewMem()
	f := write(t, m, "/f", []byte("a"), true)
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	var img *Mem
	m.SetHook(func(op Op) {
		if op.Kind == "sync" {
			img = m.Crash(CrashConfig{KeepPercent: 100})
		}
	})
	if _, err := f.WriteAt([]byte("bc"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("sync after the crash: %v", err)
	}
	if b, err := ReadFile(img, "/f"); err != nil || string(b) != "bc" {
		t.Fatalf("%q %v", b, err)
	}
}

// OS and Mem agree on the operations the store uses.
func TestMemAgreesWithOS(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		fs   FS
		root string
	}{{"os", OS{}, dir}, {"mem", NewMem(), "/x"}} {
		root := c.root
		if err := MkdirAll(c.fs, filepath.Join(root, "a", "b"), 0o755); err != nil {
			t.Fatal(c.name, err)
		}
		if err := MkdirAll(c.fs, filepath.Join(root, "a", "b"), 0o755); err != nil {
			t.Fatal(c.name, "again:", err)
		}
		p := filepath.Join(root, "a", "b", "f")
		f := write(t, c.fs, p, []byte("hello world"), false)
		if _, err := c.fs.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("%s: O_EXCL on an existing file: %v", c.name, err)
		}
		if err := f.Truncate(5); err != nil {
			t.Fatal(c.name, err)
		}
		f.Close()
		if b, err := ReadFile(c.fs, p); err != nil || string(b) != "hello" {
			t.Fatalf("%s: %q %v", c.name, b, err)
		}
		if err := c.fs.Remove(filepath.Join(root, "a", "b")); err == nil {
			t.Fatalf("%s: removed a non-empty directory", c.name)
		}
		var walked []string
		if err := WalkDir(c.fs, root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			walked = append(walked, rel)
			return nil
		}); err != nil {
			t.Fatal(c.name, err)
		}
		if got := filepath.Join(walked...); got != filepath.Join(".", "a", "a/b", "a/b/f") {
			t.Fatalf("%s: walked %v", c.name, walked)
		}
		if _, err := c.fs.Stat(filepath.Join(root, "nope")); !os.IsNotExist(err) {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

// A crash image is durable as it is: crashing it again keeps it all.
func TestMemCrashImageIsDurable(t *testing.T) {
	m := NewMem()
	write(t, m, "/f", []byte("unsynced"), false)
	img := m.Crash(CrashConfig{KeepPercent: 100})
	again := img.Crash(CrashConfig{})
	if b, err := ReadFile(again, "/f"); err != nil || string(b) != "unsynced" {
		t.Fatalf("%q %v", b, err)
	}
}

// The same draws give the same image (Mem's directories are maps: the
// image walks them in name order).
func TestMemCrashIsDeterministic(t *testing.T) {
	build := func() *Mem {
		m := NewMem()
		var files []File
		for i := 0; i < 20; i++ {
			files = append(files, write(t, m, filepath.Join("/", string(rune('a'+i))), make([]byte, 4*SectorBytes), true))
		}
		if err := m.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		for _, f := range files { // unsynced: each sector kept by a draw
			if _, err := f.WriteAt(bytes.Repeat([]byte{1}, 4*SectorBytes), 0); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	var first []string
	for run := 0; run < 5; run++ {
		img := build().Crash(CrashConfig{KeepPercent: 50, Rand: rand.New(rand.NewSource(9))})
		ents, err := img.ReadDir("/")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range ents {
			b, _ := ReadFile(img, "/"+e.Name())
			sectors := ""
			for off := 0; off < len(b); off += SectorBytes {
				sectors += fmt.Sprint(b[off])
			}
			got = append(got, e.Name()+":"+sectors)
		}
		if run == 0 {
			first = got
		} else if strings.Join(got, ",") != strings.Join(first, ",") {
			t.Fatalf("run %d: %v, first %v", run, got, first)
		}
	}
}
