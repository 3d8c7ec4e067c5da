package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
)

// TestSmallTablesDamagedOnEveryReplica: every replica loses one block of a
// small flushed table (a few rows and the applied record's two copies, so
// the table's bounds are the whole key space: what a patch's flush makes),
// each a different table with different rows. Isolated by the index alone
// each such block is the whole shard: every replica refused every key the
// others asked for, and the shard stopped (kv-recovery-latency's
// persistent series). Each table lists its keys (engine/tablekeys.go), so
// each replica loses exactly its table's rows, reads every other key past
// the damaged table, and serves its peers' patches: all three are patched,
// none rebuilt, and every key reads back its value on every replica.
func TestSmallTablesDamagedOnEveryReplica(t *testing.T) {
	c, cl := startCluster(t, kv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 2000
	loadKeys(t, cl, n)
	waitAllCaughtUp(t, c, 1)
	ids := c.NodeIDs()
	for _, id := range ids {
		if err := c.Node(id).Replica(1).Compact(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{}
	for i := 0; i < n; i++ {
		want[string(testKey(i))] = string(testValue(i))
	}
	// Three groups of new values, each flushed on every replica into a
	// small table of its own; replica g loses a block of group g's table
	// (right after its flush: no compaction merged it yet).
	groups := [][]int{{100, 900, 1700}, {300, 1100, 1900}, {500, 1300, 1500}}
	for g, keys := range groups {
		for _, i := range keys {
			v := []byte("group-" + string(rune('a'+g)) + "-" + string(testValue(i)))
			mustPut(ctx, t, cl, testKey(i), v)
			want[string(testKey(i))] = string(v)
		}
		waitAllCaughtUp(t, c, 1)
		for k, id := range ids {
			for attempt := 0; ; attempt++ {
				sm, unlock := c.Node(id).Replica(1).LockSM()
				err := sm.Flush()
				var file string
				var off uint64
				if err == nil && k == g {
					file, off, err = sm.CorruptSmallTable(testKey(keys[0]), 16<<10)
				}
				unlock()
				if err == nil {
					if k == g {
						t.Logf("n%d: damaged the data block at offset %d of %s", id, off, file)
					}
					break
				}
				if attempt == 5 {
					t.Fatal(err)
				}
				// A compaction merged the small table already: write the
				// group again (the same values) and flush again.
				t.Logf("n%d: %v: again", id, err)
				for _, i := range keys {
					mustPut(ctx, t, cl, testKey(i), []byte(want[string(testKey(i))]))
				}
				waitAllCaughtUp(t, c, 1)
			}
		}
	}
	// Reads find the damage; each replica reads every key until it
	// answers every one with its value.
	eventual := &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL}
	for _, id := range ids {
		r := c.Node(id).Replica(1)
		waitFor(t, r.String()+" reading every key back", func() bool {
			for i := 0; i < n; i++ {
				v, found, _, err := r.Get(ctx, testKey(i), eventual)
				if err != nil {
					return false
				}
				if !found || string(v) != want[string(testKey(i))] {
					t.Fatalf("%s: key %s reads %q (found %t), want %q", r, testKey(i), v, found, want[string(testKey(i))])
				}
			}
			return r.RepairsPending() == 0
		})
	}
	for _, id := range ids {
		r := c.Node(id).Replica(1)
		st := r.Stats()
		if st.PatchesApplied == 0 || len(st.RebuildReasons) > 0 {
			t.Fatalf("%s: %d patches applied, rebuilds %v: want patched, not rebuilt", r, st.PatchesApplied, st.RebuildReasons)
		}
	}
	assertSame(t, checksums(t, c, 1))
}
