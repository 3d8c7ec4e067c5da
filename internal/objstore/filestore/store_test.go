package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/objstore"
)

func stores(t *testing.T) map[string]objstore.Store {
	fs, err := Open(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]objstore.Store{"file": fs, "mem": objstore.NewMemStore()}
}

func TestStoreBasics(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			if err := s.Put("a/b/c", []byte("hello")); err != nil {
				t.Fatal(err)
			}
			if err := s.Put("a/b/c", []byte("world")); err != nil {
				t.Fatal(err)
			}
			if err := s.Put("a/d", nil); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get("a/b/c")
			if err != nil || string(got) != "world" {
				t.Fatalf("get %q %v", got, err)
			}
			names, err := s.List("a/")
			if err != nil || len(names) != 2 || names[0] != "a/b/c" || names[1] != "a/d" {
				t.Fatalf("list %v %v", names, err)
			}
			if err := s.FlipBits("a/b/c", 8, 3); err != nil {
				t.Fatal(err)
			}
			got, _ = s.Get("a/b/c")
			if want := []byte("w" + string(rune('o'^7)) + "rld"); !bytes.Equal(got, want) {
				t.Fatalf("after flip %q want %q", got, want)
			}
			if err := s.FlipBits("a/b/c", 39, 2); !base.IsInvalidArgument(err) {
				t.Fatalf("flip past the end: %v", err)
			}
			if err := s.Delete("a/b/c"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get("a/b/c"); !objstore.IsNotFound(err) {
				t.Fatalf("deleted file: %v", err)
			}
			if err := s.Delete("a/b/c"); err != nil {
				t.Fatalf("delete missing: %v", err)
			}
			for _, bad := range []string{"", "/x", "x/", "a/../b", "a//b", "a b", "a/./b"} {
				if err := s.Put(bad, nil); !base.IsInvalidArgument(err) {
					t.Fatalf("name %q accepted: %v", bad, err)
				}
			}
		})
	}
}

func TestDeleteLeavesNoDirectories(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	cs := objstore.NewChunkStore(s)
	id := direct.ChunkID{Object: 5, Version: 6}
	data := []byte("chunk")
	if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
		t.Fatal(err)
	}
	if err := cs.PutBlobInfo(objstore.BlobInfo{Key: "k", Object: 5, Version: 6, Chunks: 1}); err != nil {
		t.Fatal(err)
	}
	if err := cs.DeleteBlob(5, 6); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"d", "k", "i"} {
		entries, _ := os.ReadDir(dir + "/" + sub)
		if len(entries) != 0 {
			t.Fatalf("%s/ keeps %d entries", sub, len(entries))
		}
	}
	// The store still works in the same directories.
	if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
		t.Fatal(err)
	}
	if r, err := cs.ReadChunk(id); err != nil || r.Corrupt {
		t.Fatalf("%s %v", r, err)
	}
}

// TestNewDirectoriesAreSynced: with sync, a write of a plain file (x/ is
// not packed) that creates directories syncs the parent of each
// (top-down), so that they survive a power loss with what was synced into
// them; an existing directory is not synced again for it, and without sync
// nothing is.
func TestNewDirectoriesAreSynced(t *testing.T) {
	for _, sync := range []bool{true, false} {
		root := t.TempDir()
		s, err := Open(root, sync)
		if err != nil {
			t.Fatal(err)
		}
		var dirs []string
		s.synced = func(dir string) {
			rel, _ := filepath.Rel(root, dir)
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		if err := s.Create("x/0123.4/0.m0", []byte("entry")); err != nil {
			t.Fatal(err)
		}
		want := []string{".", "x", "x/0123.4"} // x's entry, 0123.4's entry, the file's
		if !sync {
			want = nil
		}
		if fmt.Sprint(dirs) != fmt.Sprint(want) {
			t.Fatalf("sync=%v: directories synced %v, want %v", sync, dirs, want)
		}
		dirs = nil
		if err := s.Create("x/0123.4/0.m1", []byte("entry")); err != nil {
			t.Fatal(err)
		}
		if want := []string{"x/0123.4"}; sync && fmt.Sprint(dirs) != fmt.Sprint(want) {
			t.Fatalf("second file: directories synced %v, want %v", dirs, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIndexEntriesInSumsPack: the copies of a blob's local index entry
// (i/<blob>/<shard>.m<copy>) are members of the blob's sums pack: no
// directory or file of their own, listed under i/ and not under k/, kept
// across a reopen, removed with the pack or by DeleteDir of their prefix
// (the sums staying). Copies in the format before (plain files under i/)
// are still read, listed, damaged and deleted.
func TestIndexEntriesInSumsPack(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root, true)
	if err != nil {
		t.Fatal(err)
	}
	copies := objstore.CopyNames("i/0123.4/0")
	for i, n := range copies {
		if err := s.Put(n, []byte(fmt.Sprintf("entry %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put("k/0123.4/0.g0", []byte("sums")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "i")); !os.IsNotExist(err) {
		t.Fatalf("index entries made a directory of their own: %v", err)
	}
	if got := FileOf(copies[0]); got != "k/0123.4/0.pack" {
		t.Fatalf("FileOf(%s) = %s", copies[0], got)
	}
	// The format before: an entry's copies as plain files.
	legacy := objstore.CopyNames("i/0123.5/1")
	for i, n := range legacy {
		p := filepath.Join(root, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("old %d", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for i, n := range copies {
			if b, err := s.Get(n); err != nil || string(b) != fmt.Sprintf("entry %d", i) {
				t.Fatalf("%s: Get(%s) = %q, %v", when, n, b, err)
			}
		}
		for i, n := range legacy {
			if b, err := s.Get(n); err != nil || string(b) != fmt.Sprintf("old %d", i) {
				t.Fatalf("%s: Get(%s) = %q, %v", when, n, b, err)
			}
			if b, err := s.GetRange(n, 1, 2); err != nil || string(b) != "ld" {
				t.Fatalf("%s: GetRange(%s) = %q, %v", when, n, b, err)
			}
		}
		all := append(append([]string(nil), copies...), legacy...)
		if got, err := s.List("i/"); err != nil || fmt.Sprint(got) != fmt.Sprint(all) {
			t.Fatalf("%s: List(i/) = %v, %v; want %v", when, got, err, all)
		}
		if got, err := s.List("i/0123.4/"); err != nil || fmt.Sprint(got) != fmt.Sprint(copies) {
			t.Fatalf("%s: List(i/0123.4/) = %v, %v", when, got, err)
		}
		if got, err := s.List("k/"); err != nil || fmt.Sprint(got) != "[k/0123.4/0.g0]" {
			t.Fatalf("%s: List(k/) = %v, %v", when, got, err)
		}
	}
	check("written")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(root, true); err != nil {
		t.Fatal(err)
	}
	check("reopened")
	for _, n := range []string{copies[1], legacy[1]} {
		if err := s.FlipBits(n, 0, 1); err != nil {
			t.Fatal(err)
		}
		if b, _ := s.Get(n); b[0] == 'e' || b[0] == 'o' {
			t.Fatalf("FlipBits(%s) left %q", n, b)
		}
	}
	if err := s.Delete(legacy[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(legacy[2]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deleted %s: %v", legacy[2], err)
	}
	if err := s.DeleteDir("i/0123.5/"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDir("i/0123.4/"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.List("i/"); err != nil || len(got) != 0 {
		t.Fatalf("after DeleteDir: List(i/) = %v, %v", got, err)
	}
	if b, err := s.Get("k/0123.4/0.g0"); err != nil || string(b) != "sums" {
		t.Fatalf("DeleteDir of the index entries took the sums: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, "i", "0123.5")); !os.IsNotExist(err) {
		t.Fatalf("the directory of the format before stays: %v", err)
	}
	// A sums pack removed whole takes the index entries with it.
	if err := s.Put(copies[0], []byte("again")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDir("k/0123.4/"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.List("i/"); err != nil || len(got) != 0 {
		t.Fatalf("after the sums pack's removal: List(i/) = %v, %v", got, err)
	}
}
