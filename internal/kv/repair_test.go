package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

func testKey(i int) []byte   { return []byte(fmt.Sprintf("key-%05d", i)) }
func testValue(i int) []byte { return []byte(fmt.Sprintf("value-%05d-%0100d", i, i)) }

// loadKeys writes n keys in batches and returns the last index. A batch
// whose outcome is unknown (its proposal timed out on a loaded machine, or
// the leader moved) is sent again: writing the same values twice is
// harmless. The deadline bounds a hang; it times nothing.
func loadKeys(t *testing.T, cl *kvclient.Client, n int) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var idx uint64
	for i := 0; i < n; i += 100 {
		var ops []kvclient.Op
		for j := i; j < i+100 && j < n; j++ {
			ops = append(ops, kvclient.Op{Key: testKey(j), Value: testValue(j)})
		}
		for {
			var err error
			if idx, err = cl.Batch(ctx, ops, nil); err == nil {
				break
			}
			if code := status.Code(err); ctx.Err() != nil || (code != codes.DeadlineExceeded && code != codes.Unavailable) {
				t.Fatalf("batch at key %d: %v", i, err)
			}
			t.Logf("batch at key %d: %v: again", i, err)
		}
	}
	return idx
}

// mustPut writes key, sending it again while its outcome is unknown (a
// proposal not applied in time on a loaded machine: writing the same value
// twice is harmless) until ctx ends.
func mustPut(ctx context.Context, t *testing.T, cl *kvclient.Client, key, value []byte) {
	t.Helper()
	for {
		_, err := cl.Put(ctx, key, value)
		if err == nil {
			return
		}
		if code := status.Code(err); ctx.Err() != nil || (code != codes.DeadlineExceeded && code != codes.Unavailable) {
			t.Fatalf("put %q: %v", key, err)
		}
		t.Logf("put %q: %v: again", key, err)
	}
}

// waitFor polls cond until it holds; the minute only bounds a hang (the
// race detector on a loaded 2-core machine is slow), it times nothing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// corruptReplica compacts the replica's Pebble to one level and damages the
// data block holding key.
func corruptReplica(t *testing.T, r *kv.Replica, key []byte) {
	t.Helper()
	if err := r.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	file, off, err := r.CorruptBlock(key)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: damaged the data block at offset %d of %s", r, off, file)
}

func TestCorruptBlockRepairedThroughLog(t *testing.T) {
	for _, role := range []string{"leader", "follower"} {
		t.Run(role, func(t *testing.T) {
			c, cl := startCluster(t, kv.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const n = 3000
			loadKeys(t, cl, n)
			leader, err := c.WaitLeader(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			victimNode := leader
			if role == "follower" {
				victimNode = leader%3 + 1
			}
			victim := c.Node(victimNode).Replica(1)
			waitAllCaughtUp(t, c, 1) // every replica: the client reads below are eventual
			// An open transaction on the leader, begun before the damage.
			lr := c.Node(leader).Replica(1)
			txnID, err := lr.TxnBegin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := lr.TxnGet(txnID, testKey(7)); err != nil {
				t.Fatal(err)
			}

			target := testKey(1500)
			corruptReplica(t, victim, target)
			// A key that must not exist (a stray row next to the damage):
			// the patch's implicit delete removes it.
			stray := append(append([]byte(nil), target...), '~')
			sm, unlock := victim.LockSM()
			if err := sm.DB().Set(engine.UserKey(stray), []byte("stray"), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			unlock()

			// A read on the damaged replica fails as corruption (or, if the
			// patch it started landed between its re-reads, returns the
			// repaired value): never wrong data...
			v, _, _, err := victim.Get(ctx, target, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
			if !base.IsCorruption(err) && (err != nil || string(v) != string(testValue(1500))) {
				t.Fatalf("read of damaged block: %q %v", v, err)
			}
			// ...while the client library retries elsewhere: correct data.
			for i := 0; i < 20; i++ {
				v, found, err := cl.Get(ctx, target, kvclient.Eventual())
				if err != nil || !found || string(v) != string(testValue(1500)) {
					t.Fatalf("client read: %q %v %v", v, found, err)
				}
			}
			waitFor(t, "patch applied", func() bool { return victim.Stats().PatchesApplied == 1 })
			st := victim.Stats()
			t.Logf("victim stats: %v; repair took %v", st, st.LastRepair)
			if st.Rebuilds != 0 {
				t.Fatalf("replica was rebuilt, not patched: %v", st)
			}
			if c.Node(victimNode).Replica(1) != victim {
				t.Fatal("replica was restarted")
			}
			// A leader about to wait for its own patch hands leadership to
			// a follower, so the shard's writes do not wait with it.
			if role == "leader" && st.LeaderHandoffs == 0 {
				t.Fatalf("the damaged leader kept its leadership: %v", st)
			}
			if st.PatchBytesReceived > 64<<10 {
				t.Fatalf("patch of %d bytes: more than a block's worth", st.PatchBytesReceived)
			}
			sm, unlock = victim.LockSM()
			_, strayFound, err := engine.Get(sm.DB(), stray)
			unlock()
			if err != nil || strayFound {
				t.Fatalf("implicit delete: found=%v err=%v", strayFound, err)
			}
			v, found, _, err := victim.Get(ctx, target, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
			if err != nil || !found || string(v) != string(testValue(1500)) {
				t.Fatalf("repaired read: %q %v %v", v, found, err)
			}
			// Writes go on, and every replica holds the same data.
			if _, err := cl.Put(ctx, target, []byte("after")); err != nil {
				t.Fatal(err)
			}
			sums := checksums(t, c, 1)
			t.Logf("checksums %v", sums)
			assertSame(t, sums)

			// The open transaction on the leader aborts only if the leader
			// was the one repaired.
			_, err = lr.TxnCommit(ctx, txnID, []*kvpb.Op{{Kind: kvpb.Op_PUT, Key: testKey(8), Value: []byte("t")}})
			if role == "leader" && !errors.Is(err, kvapi.ErrTxnAborted) {
				t.Fatalf("txn on repaired replica: %v; want aborted", err)
			}
			if role == "follower" && err != nil {
				t.Fatalf("txn on healthy leader: %v", err)
			}
			if role == "leader" && lr.Stats().TxnsInvalidated == 0 {
				t.Fatal("no transaction invalidated")
			}
		})
	}
}

// TestPatchWaitsForReadsInFlight: a patch does not excise while a read that
// found its range readable before the patch refused it is still reading.
// Pebble installs an excise before it publishes the patch's rows, and a
// read that opened its iterator in between read the span's rows as absent
// (found by TestCorruptBlockRepairedThroughLog under the race detector).
func TestPatchWaitsForReadsInFlight(t *testing.T) {
	c, cl := startCluster(t, kv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loadKeys(t, cl, 2000)
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Node(leader%3 + 1).Replica(1) // a follower
	waitAllCaughtUp(t, c, 1)
	target := testKey(1000)
	corruptReplica(t, victim, target)
	release := victim.HoldReads()
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	// The read meets the damage and starts the repair.
	if _, _, _, err := victim.Get(ctx, target, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL}); !base.IsCorruption(err) {
		t.Fatalf("read of the damaged block: %v, want corruption", err)
	}
	// With a read in flight the patch waits before its excise (a patch
	// takes tens of milliseconds here; this waits 300).
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if st := victim.Stats(); st.PatchesApplied > 0 {
			t.Fatalf("patch applied while a read was in flight: %v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	released = true
	waitFor(t, "patch applied", func() bool { return victim.Stats().PatchesApplied == 1 })
	v, found, _, err := victim.Get(ctx, target, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
	if err != nil || !found || string(v) != string(testValue(1000)) {
		t.Fatalf("repaired read: %q %v %v", v, found, err)
	}
}
