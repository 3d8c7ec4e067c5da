package sweep_test

import (
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/guardfs/guardtest"
)

// storeKeys is how many keys the swept store holds.
const storeKeys = 1500

// world is a place to build stores in and clone them from: a MemFS, or
// the OS file system under a temporary directory.
type world struct {
	name  string
	fresh func(t *testing.T) (vfs.FS, string)
}

var worlds = []world{
	{"mem", func(*testing.T) (vfs.FS, string) { return vfs.NewMem(), "/db" }},
	{"disk", func(t *testing.T) (vfs.FS, string) { return vfs.Default, filepath.Join(t.TempDir(), "db") }},
}

func newGuard(t *testing.T, inner vfs.FS) *guardfs.FS {
	t.Helper()
	g, err := guardfs.New(inner, guardfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// manifestMarker returns the name of the store's manifest marker.
func manifestMarker(t *testing.T, fs vfs.FS, dir string) string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "marker.manifest.") {
			return n
		}
	}
	t.Fatal("no manifest marker")
	return ""
}

// fileKind names a stored file's role for the sweep's summary.
func fileKind(p string) string {
	b := filepath.Base(p)
	if strings.Contains(p, guardfs.ReservedDir) {
		switch {
		case strings.HasPrefix(b, "m."):
			return "copy"
		case strings.HasPrefix(b, "s."):
			return "sidecar"
		}
		return "reserved"
	}
	switch {
	case strings.HasPrefix(b, "marker."):
		return "marker"
	case strings.HasSuffix(b, ".sst"):
		return "sstable"
	}
	return strings.SplitN(b, "-", 2)[0]
}

// sweepable reports whether the sweep damages the file: everything Pebble
// and guardfs keep except the LOCK (no content) and WAL files (the KV
// store runs without a WAL; guardfs passes them through).
func sweepable(p string) bool {
	b := filepath.Base(p)
	return b != "LOCK" && !strings.HasSuffix(b, ".log")
}

// TestPebbleSingleFaultSweep builds a store through guardfs, then for every
// file it left and every fault (one at a time, on a fresh clone) reopens
// it: Pebble must open, and every key must read back right or fail as
// corruption, never wrong or silently missing.
func TestPebbleSingleFaultSweep(t *testing.T) {
	const seed = 1
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewSource(seed))
			base, dir := w.fresh(t)
			want := guardtest.BuildStore(t, newGuard(t, base), dir, storeKeys)
			files, err := guardtest.Walk(base, dir)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			for _, f := range files {
				kinds[fileKind(f)]++
			}
			t.Logf("%d files: %v", len(files), kinds)
			for _, need := range []string{"MANIFEST", "OPTIONS", "marker", "sstable", "copy", "sidecar"} {
				if kinds[need] == 0 {
					t.Fatalf("no %s file to damage", need)
				}
			}
			if kinds["sstable"] < 8 {
				t.Fatalf("only %d sstables", kinds["sstable"])
			}
			if m := manifestMarker(t, base, dir); !strings.Contains(m, "manifest.00000") || strings.Contains(m, ".000001.") {
				t.Fatalf("manifest marker %s: want a rotated MANIFEST", m)
			}
			cases, corruptKeys := 0, 0
			for _, f := range files {
				if !sweepable(f) {
					continue
				}
				rel, _ := filepath.Rel(dir, f)
				if w.name == "mem" {
					rel = strings.TrimPrefix(f, dir+"/")
				}
				for _, fault := range guardtest.Faults {
					clone, cdir := w.fresh(t)
					if err := guardtest.Clone(base, dir, clone, cdir); err != nil {
						t.Fatal(err)
					}
					what, err := guardtest.Apply(clone, clone.PathJoin(cdir, rel), fault, rng)
					if err != nil {
						t.Fatal(err)
					}
					g := newGuard(t, clone)
					o := guardtest.ReadBack(t, g, cdir, want)
					cases++
					corruptKeys += o.Corrupt
					if !o.Opened || len(o.Bad) > 0 {
						t.Errorf("%s %s (%s): %s; guardfs: %s", rel, fault, what, o, g.Stats())
					} else if o.Corrupt > 0 && !strings.HasSuffix(rel, ".sst") {
						t.Errorf("%s %s (%s): %d corruption errors from damage guardfs should have repaired; guardfs: %s",
							rel, fault, what, o.Corrupt, g.Stats())
					}
				}
			}
			t.Logf("%d cases, %d key reads failed as corruption (all under damaged sstables)", cases, corruptKeys)
		})
	}
}

// group names the set of stored files that hold one protected unit: a
// framed file and its copies, or an sstable and its sidecar copies. Damage
// to every member of a group may lose data; damage to fewer must not.
func group(p string) string {
	b := filepath.Base(p)
	if strings.Contains(p, guardfs.ReservedDir) {
		parts := strings.SplitN(b, ".", 4)
		if len(parts) == 4 {
			return parts[3]
		}
		return b
	}
	return b
}

// groupSizes counts the members of each group among files.
func groupSizes(files []string) map[string]int {
	out := map[string]int{}
	for _, f := range files {
		out[group(f)]++
	}
	return out
}

// TestPebbleRandomFaults damages several files of a store at once (seeded
// random files and faults, several rounds per seed) and reopens it. When
// no group lost every member, Pebble must open and every key read back
// right or as corruption; when one did, the store may fail to open, but
// what it serves is still never wrong.
func TestPebbleRandomFaults(t *testing.T) {
	const rounds = 40
	t.Logf("seeds 1..%d", rounds)
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			base, dir := w.fresh(t)
			want := guardtest.BuildStore(t, newGuard(t, base), dir, storeKeys)
			all, err := guardtest.Walk(base, dir)
			if err != nil {
				t.Fatal(err)
			}
			var files []string
			for _, f := range all {
				if sweepable(f) {
					files = append(files, f)
				}
			}
			sizes := groupSizes(files)
			members := map[string][]string{}
			for _, f := range files {
				members[group(f)] = append(members[group(f)], f)
			}
			exempt, strict := 0, 0
			for seed := int64(1); seed <= rounds; seed++ {
				rng := rand.New(rand.NewSource(seed))
				clone, cdir := w.fresh(t)
				if err := guardtest.Clone(base, dir, clone, cdir); err != nil {
					t.Fatal(err)
				}
				hit := map[string]map[string]bool{}
				var did []string
				last := ""
				for n := 2 + rng.Intn(4); n > 0; n-- {
					f := files[rng.Intn(len(files))]
					if last != "" && rng.Intn(2) == 0 {
						// Half the time another copy of the unit just
						// damaged: copies failing together is the case
						// that matters.
						ms := members[last]
						f = ms[rng.Intn(len(ms))]
					}
					last = group(f)
					rel := strings.TrimPrefix(strings.TrimPrefix(f, dir), string(filepath.Separator))
					rel = strings.TrimPrefix(rel, "/")
					fault := guardtest.Faults[rng.Intn(len(guardtest.Faults))]
					p := clone.PathJoin(cdir, rel)
					if _, err := clone.Stat(p); err != nil {
						continue // deleted by an earlier fault of this round
					}
					what, err := guardtest.Apply(clone, p, fault, rng)
					if err != nil {
						t.Fatal(err)
					}
					did = append(did, rel+": "+what)
					g := group(f)
					if hit[g] == nil {
						hit[g] = map[string]bool{}
					}
					hit[g][f] = true
				}
				whole := false
				for g, members := range hit {
					whole = whole || len(members) == sizes[g]
				}
				gfs := newGuard(t, clone)
				o := guardtest.ReadBack(t, gfs, cdir, want)
				if len(o.Bad) > 0 || (!whole && !o.Opened) {
					t.Errorf("seed %d, faults %v: %s; guardfs: %s", seed, did, o, gfs.Stats())
				}
				if whole {
					exempt++
					t.Logf("seed %d: every copy of a unit damaged (%v): %s", seed, did, o)
				} else {
					strict++
				}
			}
			t.Logf("%d rounds with a recoverable set of faults, %d with some unit damaged in every copy", strict, exempt)
		})
	}
}
