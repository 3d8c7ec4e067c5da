package coord

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/coord/etcdstore"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
)

// copyTree copies directory src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// storeFaults damage an embedded etcd store (dir is the coordinator's
// directory): zeros, junk, a flip and a truncation in the used part of the
// WAL, a deleted WAL, and the same in the backend's reachable pages.
var storeFaults = map[string]func(t *testing.T, dir string){
	"wal-zero": func(t *testing.T, dir string) {
		editWAL(t, dir, func(b []byte, u int) []byte { clear(b[u/2 : u/2+4096]); return b })
	},
	"wal-junk": func(t *testing.T, dir string) {
		editWAL(t, dir, func(b []byte, u int) []byte { junk(b[u/2 : u/2+4096]); return b })
	},
	// One bit in each of eight bytes: a record's padding (up to seven
	// bytes, not under its CRC) cannot absorb them all.
	"wal-flips": func(t *testing.T, dir string) {
		editWAL(t, dir, func(b []byte, u int) []byte {
			for i := 0; i < 8; i++ {
				b[u/2+i] ^= 1
			}
			return b
		})
	},
	"wal-truncate": func(t *testing.T, dir string) { editWAL(t, dir, func(b []byte, u int) []byte { return b[:u/2] }) },
	"wal-delete": func(t *testing.T, dir string) {
		if err := os.RemoveAll(filepath.Join(dir, "etcd", "data", "member", "wal")); err != nil {
			t.Fatal(err)
		}
	},
	"db-zero": func(t *testing.T, dir string) {
		editDB(t, dir, func(b []byte, root, ps int) []byte { clear(b[root*ps : (root+1)*ps]); return b })
	},
	"db-flip": func(t *testing.T, dir string) {
		editDB(t, dir, func(b []byte, root, ps int) []byte { b[root*ps+8] ^= 1; return b }) // the page type
	},
}

func junk(b []byte) {
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
}

func editWAL(t *testing.T, dir string, f func(b []byte, used int) []byte) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "etcd", "data", "member", "wal", "*.wal"))
	if len(names) == 0 {
		t.Fatal("no WAL file")
	}
	path := names[len(names)-1]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	used := len(b)
	for used > 0 && b[used-1] == 0 {
		used--
	}
	if err := os.WriteFile(path, f(b, used), 0o600); err != nil {
		t.Fatal(err)
	}
}

// editDB edits etcd's backend; f gets the root bucket's root page (from the
// newer meta page) and the page size, so that it damages a page in use.
func editDB(t *testing.T, dir string, f func(b []byte, root, pageSize int) []byte) {
	t.Helper()
	path := filepath.Join(dir, "etcd", "data", "member", "snap", "db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	ps := int(le.Uint32(b[16+8:]))
	meta := func(off int) (root, txid uint64) { return le.Uint64(b[off+16+16:]), le.Uint64(b[off+16+48:]) }
	root, txid := meta(0)
	if r1, t1 := meta(ps); t1 > txid {
		root = r1
	}
	if err := os.WriteFile(path, f(b, int(root), ps), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdStoreCheck: every damage of storeFaults is found before etcd
// starts (where etcd would panic or wait forever), and a whole store
// passes.
func TestEtcdStoreCheck(t *testing.T) {
	ctx := context.Background()
	golden := t.TempDir()
	c, err := Start(ctx, Config{Dir: golden, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := c.Join(ctx, &coordpb.JoinRequest{Addr: fmt.Sprintf("127.0.0.1:%d", 1000+i)}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if err := etcdstore.Check(filepath.Join(golden, "etcd", "data")); err != nil {
		t.Fatalf("whole store: %v", err)
	}
	if err := etcdstore.Check(filepath.Join(t.TempDir(), "none")); err != nil {
		t.Fatalf("no store yet: %v", err)
	}
	for name, fault := range storeFaults {
		dir := t.TempDir()
		copyTree(t, golden, dir)
		fault(t, dir)
		err := etcdstore.Check(filepath.Join(dir, "etcd", "data"))
		if !base.IsCorruption(err) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestDamagedStoreIsSetAside: a coordinator whose store is damaged starts on
// a new store (the damaged one kept beside it), at once, never hanging; with
// KeepDamagedStore it refuses to start, naming the damage.
func TestDamagedStoreIsSetAside(t *testing.T) {
	ctx := context.Background()
	golden := t.TempDir()
	c, err := Start(ctx, Config{Dir: golden, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(ctx, &coordpb.JoinRequest{Addr: "127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for _, name := range []string{"wal-truncate", "db-flip"} {
		dir := t.TempDir()
		copyTree(t, golden, dir)
		storeFaults[name](t, dir)
		if _, err := Start(ctx, Config{Dir: dir, UnsafeNoFsync: true, KeepDamagedStore: true}); !base.IsCorruption(err) {
			t.Fatalf("%s, keeping the damaged store: %v", name, err)
		}
		var logs strings.Builder
		c, err := Start(ctx, Config{Dir: dir, UnsafeNoFsync: true, Logf: func(f string, a ...any) { fmt.Fprintf(&logs, f+"\n", a...) }})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.Close()
		aside, _ := filepath.Glob(filepath.Join(dir, "etcd", "data.damaged-*"))
		if len(aside) != 1 || !strings.Contains(logs.String(), "is damaged") {
			t.Fatalf("%s: set aside %v, logs:\n%s", name, aside, logs.String())
		}
	}
}
