package filestore

import (
	"bytes"
	"fmt"
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

// TestNewDirectoriesAreSynced: with sync, a write that creates directories
// syncs the parent of each (top-down), so that they survive a power loss
// with what was synced into them; an existing directory is not synced
// again for it, and without sync nothing is.
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
		if err := s.Create("i/0123.4/0.m0", []byte("entry")); err != nil {
			t.Fatal(err)
		}
		want := []string{".", "i", "i/0123.4"} // i's entry, 0123.4's entry, the file's
		if !sync {
			want = nil
		}
		if fmt.Sprint(dirs) != fmt.Sprint(want) {
			t.Fatalf("sync=%v: directories synced %v, want %v", sync, dirs, want)
		}
		dirs = nil
		if err := s.Create("i/0123.4/0.m1", []byte("entry")); err != nil {
			t.Fatal(err)
		}
		if want := []string{"i/0123.4"}; sync && fmt.Sprint(dirs) != fmt.Sprint(want) {
			t.Fatalf("second file: directories synced %v, want %v", dirs, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
