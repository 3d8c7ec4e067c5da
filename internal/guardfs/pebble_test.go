package guardfs_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/guardfs/guardtest"
)

func newGuard(t testing.TB, inner vfs.FS, opts guardfs.Options) *guardfs.FS {
	t.Helper()
	g, err := guardfs.New(inner, opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// find returns the files of dir (in the raw FS) whose name starts with
// prefix and ends with suffix, sorted.
func find(t testing.TB, fs vfs.FS, dir, prefix, suffix string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) {
			out = append(out, fs.PathJoin(dir, n))
		}
	}
	sort.Strings(out)
	return out
}

// currentManifest returns the MANIFEST the marker points at.
func currentManifest(t testing.TB, fs vfs.FS, dir string) string {
	t.Helper()
	m := find(t, fs, dir, "marker.manifest.", "")
	if len(m) != 1 {
		t.Fatalf("manifest markers %v", m)
	}
	parts := strings.SplitN(fs.PathBase(m[0]), ".", 4)
	return fs.PathJoin(dir, parts[3])
}

type explicitCase struct {
	name   string
	damage func(t *testing.T, fs vfs.FS, dir string, rng *rand.Rand)
	// sst: the damage is to sstable data, so corruption errors (for the
	// KV store to patch) are expected; otherwise every key must read back.
	sst bool
}

func apply(t *testing.T, fs vfs.FS, path string, f guardtest.Fault, rng *rand.Rand) {
	t.Helper()
	if _, err := guardtest.Apply(fs, path, f, rng); err != nil {
		t.Fatal(err)
	}
}

var explicitCases = []explicitCase{
	{name: "delete current manifest marker", damage: func(t *testing.T, fs vfs.FS, dir string, rng *rand.Rand) {
		apply(t, fs, find(t, fs, dir, "marker.manifest.", "")[0], guardtest.Delete, rng)
	}},
	{name: "truncate current MANIFEST to half", damage: func(t *testing.T, fs vfs.FS, dir string, rng *rand.Rand) {
		apply(t, fs, currentManifest(t, fs, dir), guardtest.TruncateHalf, rng)
	}},
	{name: "zero a block of the current MANIFEST", damage: func(t *testing.T, fs vfs.FS, dir string, rng *rand.Rand) {
		apply(t, fs, currentManifest(t, fs, dir), guardtest.ZeroBlock, rng)
	}},
	{name: "zero OPTIONS", damage: func(t *testing.T, fs vfs.FS, dir string, rng *rand.Rand) {
		apply(t, fs, find(t, fs, dir, "OPTIONS-", "")[0], guardtest.ZeroBlock, rng)
	}},
	{name: "delete format-version marker", damage: func(t *testing.T, fs vfs.FS, dir string, rng *rand.Rand) {
		apply(t, fs, find(t, fs, dir, "marker.format-version.", "")[0], guardtest.Delete, rng)
	}},
	{name: "truncate an sstable to half", sst: true, damage: func(t *testing.T, fs vfs.FS, dir string, rng *rand.Rand) {
		apply(t, fs, find(t, fs, dir, "", ".sst")[0], guardtest.TruncateHalf, rng)
	}},
	{name: "delete an sstable", sst: true, damage: func(t *testing.T, fs vfs.FS, dir string, rng *rand.Rand) {
		apply(t, fs, find(t, fs, dir, "", ".sst")[0], guardtest.Delete, rng)
	}},
}

// TestPebbleExplicitFaults: the damage that made a replica on plain files
// serve wrong answers or refuse to open (issue 18), on a store built
// through guardfs, in memory and on disk: Pebble opens, and every key
// reads back right (or, under a damaged sstable, as corruption).
func TestPebbleExplicitFaults(t *testing.T) {
	const seed = 3
	t.Logf("seed %d", seed)
	for _, disk := range []bool{false, true} {
		base, dir := vfs.FS(vfs.NewMem()), "/db"
		if disk {
			base, dir = vfs.Default, filepath.Join(t.TempDir(), "db")
		}
		want := guardtest.BuildStore(t, newGuard(t, base, guardfs.Options{}), dir, 1200)
		for _, c := range explicitCases {
			t.Run(fmt.Sprintf("disk=%v/%s", disk, c.name), func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				clone, cdir := vfs.FS(vfs.NewMem()), "/db"
				if disk {
					clone, cdir = vfs.Default, filepath.Join(t.TempDir(), "db")
				}
				if err := guardtest.Clone(base, dir, clone, cdir); err != nil {
					t.Fatal(err)
				}
				c.damage(t, clone, cdir, rng)
				g := newGuard(t, clone, guardfs.Options{})
				o := guardtest.ReadBack(t, g, cdir, want)
				if !o.Opened || len(o.Bad) > 0 || !c.sst && o.Corrupt > 0 {
					t.Fatalf("%s; guardfs: %s", o, g.Stats())
				}
				if c.sst && o.Corrupt == 0 {
					t.Fatalf("no corruption reported for a damaged sstable: %s", o)
				}
				t.Logf("%s; guardfs: %s", o, g.Stats())
			})
		}
	}
}

// TestPebbleWithoutGuardfs is the same damage on a store kept on the plain
// file system: the harness must see the failures guardfs prevents (an open
// that fails, or answers that are wrong or missing), or it proves nothing.
func TestPebbleWithoutGuardfs(t *testing.T) {
	const seed = 3
	base := vfs.NewMem()
	want := guardtest.BuildStore(t, base, "/db", 1200)
	failed := 0
	for _, c := range explicitCases {
		rng := rand.New(rand.NewSource(seed))
		clone := vfs.NewMem()
		if err := guardtest.Clone(base, "/db", clone, "/db"); err != nil {
			t.Fatal(err)
		}
		c.damage(t, clone, "/db", rng)
		o := guardtest.ReadBack(t, clone, "/db", want)
		t.Logf("plain FS, %s: %s", c.name, o)
		if !o.Opened || len(o.Bad) > 0 {
			failed++
		}
	}
	if failed != len(explicitCases) {
		t.Fatalf("only %d of %d cases failed without guardfs", failed, len(explicitCases))
	}
}

// TestPebbleConcurrent runs Pebble on guardfs with writers, readers,
// flushes, compactions and Verify passes at once (for the race detector),
// with one copy of every framed file failing its writes, then reopens and
// checks every key.
func TestPebbleConcurrent(t *testing.T) {
	const seed = 5
	t.Logf("seed %d", seed)
	inner := guardtest.NewFS(vfs.NewMem())
	g := newGuard(t, inner, guardfs.Options{})
	opts := guardtest.PebbleOptions(t, g)
	opts.DisableAutomaticCompactions = false
	db, err := pebble.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	inner.SetRules(guardtest.Rule{Match: func(p string) bool { return strings.Contains(p, "/m.2.") }, WriteError: true})
	const writers, perWriter = 3, 600
	var wg sync.WaitGroup
	var mu sync.Mutex
	want := guardtest.Dataset{}
	errs := make(chan error, 16)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				k := w*perWriter + i
				if err := db.Set([]byte(guardtest.KeyOf(k)), guardtest.ValueOf(k, 1), pebble.NoSync); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				want[guardtest.KeyOf(k)] = guardtest.ValueOf(k, 1)
				mu.Unlock()
				if i%200 == 199 {
					if err := db.Flush(); err != nil {
						errs <- err
						return
					}
				}
			}
		}(w)
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { // readers
		defer bg.Done()
		rng := rand.New(rand.NewSource(seed))
		for {
			select {
			case <-stop:
				return
			default:
			}
			k := guardtest.KeyOf(rng.Intn(writers * perWriter))
			if v, c, err := db.Get([]byte(k)); err == nil {
				_ = v
				c.Close()
			} else if err != pebble.ErrNotFound {
				errs <- err
				return
			}
		}
	}()
	go func() { // scrubber
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := g.Verify("/db"); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	if err := db.Compact(context.Background(), []byte(guardtest.KeyOf(0)), []byte(guardtest.KeyOf(writers*perWriter)), false); err != nil {
		t.Fatal(err)
	}
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := g.Stats()
	t.Logf("guardfs: %s", s)
	if s.CopyErrors == 0 {
		t.Fatal("the failing copy was never written")
	}
	inner.SetRules()
	if o := guardtest.ReadBack(t, newGuard(t, inner, guardfs.Options{}), "/db", want); !o.Opened || len(o.Bad) > 0 || o.Corrupt > 0 {
		t.Fatalf("after reopen: %s", o)
	}
}
