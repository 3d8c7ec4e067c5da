package filestore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/testseed"
)

// blobNames are the names a blob of a PUT stream leaves on a node: chunk
// data, a sums file and the copies of its index entry.
func blobNames(blob string, chunks int) []string {
	var names []string
	for c := range chunks {
		names = append(names, fmt.Sprintf("d/%s/0.%d", blob, c))
	}
	names = append(names, "k/"+blob+"/0.g0")
	for c := range 3 {
		names = append(names, fmt.Sprintf("i/%s/0.m%d", blob, c))
	}
	return names
}

func deleteBlob(t *testing.T, s *Store, blob string) {
	t.Helper()
	for _, prefix := range []string{"d/", "k/", "i/"} {
		if err := s.DeleteDir(prefix + blob + "/"); err != nil {
			t.Fatal(err)
		}
	}
}

func poolEntries(t *testing.T, root string) []os.DirEntry {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, recycleDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return ents
}

// A store without sync keeps the pack files and blob directories it
// deletes, emptied, in its pool and makes the next blob's from them: the
// new blob holds exactly what was written to it, nothing of the old one,
// the pool is never listed, and a reopened store starts with an empty pool.
func TestRecycledFilesAndDirs(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root, false)
	if err != nil {
		t.Fatal(err)
	}
	rng := testseed.Rand(t, "OBJSTORE_SEED")
	want := packModel{}
	put := func(blob string) {
		for _, n := range blobNames(blob, 4) {
			b := make([]byte, 1+rng.Intn(70<<10))
			rng.Read(b)
			if err := s.Create(n, b); err != nil {
				t.Fatal(err)
			}
			want[n] = b
		}
	}
	check := func() {
		t.Helper()
		var names []string
		for _, prefix := range []string{"d/", "k/", "i/", ""} {
			got, err := s.List(prefix)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range got {
				if strings.Contains(n, recycleDir) {
					t.Fatalf("List(%q) lists the pool's %s", prefix, n)
				}
			}
			if prefix == "" {
				names = got
			}
		}
		var wantNames []string
		for n := range want {
			wantNames = append(wantNames, n)
		}
		slices.Sort(wantNames)
		if !slices.Equal(names, wantNames) {
			t.Fatalf("List: %v, want %v", names, wantNames)
		}
		for n, w := range want {
			got, err := s.Get(n)
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("%s: %d bytes, %v; want %d bytes", n, len(got), err, len(w))
			}
		}
	}
	put("000a.1")
	put("000b.1")
	deleteBlob(t, s, "000a.1")
	for n := range want {
		if strings.Contains(n, "000a.1") {
			delete(want, n)
		}
	}
	st := s.PackStats()
	if st.PooledFiles != 2 || st.PooledDirs != 2 {
		t.Fatalf("after a blob's delete: %v, want 2 files and 2 directories pooled", st)
	}
	check()
	put("000a.2")
	st = s.PackStats()
	if st.ReusedFiles != 2 || st.ReusedDirs != 2 || len(poolEntries(t, root)) != 0 {
		t.Fatalf("after a new blob: %v, pool %d entries; want 2 files and 2 directories reused, none left", st, len(poolEntries(t, root)))
	}
	check()
	// Every reused file ends at its last record: a store opened on the
	// directory (a crash) loads the same without cutting anything off.
	again, err := Open(root, false)
	if err != nil {
		t.Fatal(err)
	}
	check2 := func(s2 *Store) {
		t.Helper()
		for n, w := range want {
			got, err := s2.Get(n)
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("reloaded %s: %d bytes, %v; want %d bytes", n, len(got), err, len(w))
			}
		}
		names, err := s2.List("")
		if err != nil || len(names) != len(want) {
			t.Fatalf("reloaded List: %d names, %v; want %d", len(names), err, len(want))
		}
	}
	check2(again)
	if st := again.PackStats(); st.TornTails != 0 || st.DamagedRegions != 0 {
		t.Fatalf("reloaded: %v", st)
	}
	// A pooled directory never takes the place of one that exists (made
	// behind the store's back here; a concurrent writer's in practice).
	deleteBlob(t, s, "000b.1")
	for n := range want {
		if strings.Contains(n, "000b.1") {
			delete(want, n)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "d", "000c.1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "d", "000c.1", "keep"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	want["d/000c.1/keep"] = []byte("kept")
	put("000c.1")
	check()
	// Reopened: the pool an earlier process left is emptied.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	deleteBlob(t, s, "000a.2")
	for n := range want {
		if strings.Contains(n, "000a.2") {
			delete(want, n)
		}
	}
	if len(poolEntries(t, root)) == 0 {
		t.Fatal("nothing pooled before the reopen")
	}
	s, err = Open(root, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(poolEntries(t, root)); n != 0 {
		t.Fatalf("reopened store's pool holds %d entries", n)
	}
	check()
}

// A store that syncs pools nothing: a power loss may keep a rename's new
// name without the removal of the old one (see recycle.go).
func TestSyncedStoreDoesNotRecycle(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range blobNames("000a.1", 2) {
		if err := s.Create(n, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	deleteBlob(t, s, "000a.1")
	if st := s.PackStats(); st.PooledFiles != 0 || st.PooledDirs != 0 {
		t.Fatalf("synced store pooled: %v", st)
	}
	if n := len(poolEntries(t, root)); n != 0 {
		t.Fatalf("synced store's pool holds %d entries", n)
	}
	names, err := s.List("")
	if err != nil || len(names) != 0 {
		t.Fatalf("after the delete: %v, %v", names, err)
	}
	if _, err := s.Get("d/000a.1/0.0"); !objstore.IsNotFound(err) {
		t.Fatalf("deleted chunk: %v", err)
	}
}

// A pooled file is reused as it is, its old records past the new pack's
// (until the batch writing it commits): a crash then leaves them there,
// and the load cuts them off as a torn tail, none of them taken for the
// new pack's (they verify only with the old pack's key), the record being
// written at the crash either whole or gone. A file is never reused for the
// pack whose records it holds.
func TestReusedFileCrash(t *testing.T) {
	rng := testseed.Rand(t, "OBJSTORE_SEED")
	for trial := range 12 {
		root := t.TempDir()
		s, err := Open(root, false)
		if err != nil {
			t.Fatal(err)
		}
		// The old blob: more and larger chunks than the new one writes.
		old := "000a.1"
		if trial%3 == 2 {
			// The new blob is the old one again: its own file must not be
			// reused (its records would verify).
			old = "000b.1"
		}
		for c := range 12 {
			b := make([]byte, 60<<10)
			rng.Read(b)
			if err := s.Create(fmt.Sprintf("d/%s/0.%d", old, c), b); err != nil {
				t.Fatal(err)
			}
		}
		deleteBlob(t, s, old)
		want := packModel{}
		b := s.NewBatch()
		n := 1 + rng.Intn(6)
		cut := -1
		if trial%2 == 1 {
			cut = rng.Intn(n)
		}
		var pending string
		var pendingData []byte
		for c := range n {
			name := fmt.Sprintf("d/000b.1/0.%d", c)
			data := make([]byte, 1+rng.Intn(64<<10))
			rng.Read(data)
			if c == cut {
				s.torn = func(string, int) (int, bool) { return rng.Intn(len(data)), true }
				if err := b.Create(name, data); err != errTorn {
					t.Fatalf("torn write: %v", err)
				}
				pending, pendingData = name, data
				break
			}
			if err := b.Create(name, data); err != nil {
				t.Fatal(err)
			}
			want[name] = data
		}
		reused := s.PackStats().ReusedFiles
		if (old == "000b.1") != (reused == 0) {
			t.Fatalf("trial %d: %d files reused for a new pack after %s's delete", trial, reused, old)
		}
		// The crash: no Commit, no Close; a new store loads the files.
		s2, err := Open(root, false)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for c := range 12 {
			names = append(names, fmt.Sprintf("d/000b.1/0.%d", c), fmt.Sprintf("d/%s/0.%d", old, c))
		}
		checkPackModel(t, s2, names, want, pending, nil, pendingData, false)
		if reused > 0 && s2.PackStats().TornTails == 0 {
			t.Fatalf("trial %d: the reused file's old records were not cut off: %v", trial, s2.PackStats())
		}
		// And the pack takes writes and loads again the same.
		name := "d/000b.1/0.99"
		want[name] = []byte("after the crash")
		if err := s2.Create(name, want[name]); err != nil {
			t.Fatal(err)
		}
		s3, err := Open(root, false)
		if err != nil {
			t.Fatal(err)
		}
		checkPackModel(t, s3, append(names, name), want, pending, nil, pendingData, false)
	}
}
