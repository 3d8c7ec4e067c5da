package sdfvfs

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestPebbleRandomWorkload runs seeded random sets and deletes on Pebble
// over sdfvfs, with a small MANIFEST limit (manifest rotation renames and
// removes duplicated files), WAL recycling (ReuseForWrite), range copies
// of sstable metadata and a remount of sdf after every round, and checks
// the store against a Go map (the reference) after each round.
func TestPebbleRandomWorkload(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = testseed.Seed(t, "SDFVFS_SEED")
	}
	rng := rand.New(rand.NewSource(seed))
	opts := Options{MetadataRanges: SSTMetadataRanges(sstable.ReaderOptions{})}
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, opts)
	ref := map[string]string{}
	const rounds, opsPerRound, keySpace = 4, 15_000, 5_000
	for round := 0; round < rounds; round++ {
		o := pebbleOptions(t, fs)
		o.MaxManifestFileSize = 1 << 10
		o.MemTableSize = 256 << 10
		db, err := pebble.Open("db", o)
		if err != nil {
			t.Fatalf("round %d: open: %v", round, err)
		}
		check(t, db, ref, round)
		for i := 0; i < opsPerRound; {
			b := db.NewBatch()
			for j := 0; j < 1+rng.Intn(100) && i < opsPerRound; j, i = j+1, i+1 {
				k := fmt.Sprintf("k%06d", rng.Intn(keySpace))
				if rng.Intn(4) == 0 {
					if err := b.Delete([]byte(k), nil); err != nil {
						t.Fatal(err)
					}
					delete(ref, k)
					continue
				}
				v := fmt.Sprintf("v%d-%d-%s", round, i, bytes.Repeat([]byte{'x'}, rng.Intn(64)))
				if err := b.Set([]byte(k), []byte(v), nil); err != nil {
					t.Fatal(err)
				}
				ref[k] = v
			}
			if err := b.Commit(pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}
		check(t, db, ref, round)
		m := db.Metrics()
		manifests := listWithPrefix(t, fs, "db", "MANIFEST-")
		t.Logf("round %d: %d keys; vfs %s; flushes %d, compactions %d, WAL files %d, %v",
			round, len(ref), fs.Stats(), m.Flush.Count, m.Compact.Count, m.WAL.Files, manifests)
		fs = remount(t, db, fs, dev, opts)
		if st := fs.Stats(); st.Orphans != 0 {
			t.Fatalf("round %d: orphaned copies after a clean close: %s", round, st)
		}
	}
	t.Logf("sdf: %s", fs.SDF().Stats())
}

// check requires db to hold exactly ref.
func check(t *testing.T, db *pebble.DB, ref map[string]string, round int) {
	t.Helper()
	keys := make([]string, 0, len(ref))
	for k := range ref {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for valid := it.First(); valid; valid = it.Next() {
		if i >= len(keys) || string(it.Key()) != keys[i] || string(it.Value()) != ref[keys[i]] {
			t.Fatalf("round %d: entry %d: %q=%q", round, i, it.Key(), it.Value())
		}
		i++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if i != len(keys) {
		t.Fatalf("round %d: %d keys, want %d", round, i, len(keys))
	}
}
