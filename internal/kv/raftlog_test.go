package kv_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/testseed"
)

// damageRaftLog flips bytes in one copy of a node's raft log for shard 1.
func damageRaftLog(t *testing.T, c *kvcluster.Cluster, node base.NodeID, rng *rand.Rand) {
	t.Helper()
	fs := c.Config().FS
	dir := fs.PathJoin(c.Config().Dir, fmt.Sprintf("n%d", uint64(node)), "shard-1", "raft")
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	copyIndex := rng.Intn(2)
	for _, name := range names {
		if !strings.HasSuffix(name, fmt.Sprintf(".%d", copyIndex)) {
			continue
		}
		path := fs.PathJoin(dir, name)
		st, err := fs.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			at := st.Size()/4 + rng.Int63n(st.Size()/2)
			b := []byte{0}
			f.ReadAt(b, at)
			b[0] ^= 0xff
			f.WriteAt(b, at)
		}
		f.Close()
		t.Logf("flipped 5 bytes in %s (%d bytes)", path, st.Size())
	}
}

func TestCorruptRaftLogRecordLosesNothing(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	for _, role := range []string{"leader", "follower"} {
		t.Run(role, func(t *testing.T) {
			c, cl := startCluster(t, kv.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const n = 1000
			loadKeys(t, cl, n)
			for i := 0; i < 100; i++ { // and single-entry records
				if _, err := cl.Put(ctx, testKey(i), testValue(i)); err != nil {
					t.Fatal(err)
				}
			}
			leader, err := c.WaitLeader(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			victim := leader
			if role == "follower" {
				victim = leader%3 + 1
			}
			if err := c.StopNode(victim); err != nil {
				t.Fatal(err)
			}
			damageRaftLog(t, c, victim, rng)
			if err := c.RestartNode(victim); err != nil {
				t.Fatal(err)
			}
			if st := c.Node(victim).Replica(1).RaftLog().Stats(); st.FragmentsRepaired == 0 {
				t.Fatalf("no record repaired: %v", st)
			} else {
				t.Logf("raft log after restart: %v", st)
			}
			// Stop another node: the restarted one is now needed for quorum,
			// so its log must be whole.
			other := victim%3 + 1
			if err := c.StopNode(other); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i += 37 {
				v, found, err := cl.Get(ctx, testKey(i), kvclient.Strong())
				if err != nil || !found || string(v) != string(testValue(i)) {
					t.Fatalf("key %d: %q %v %v", i, v, found, err)
				}
			}
			if _, err := cl.Put(ctx, []byte("after"), []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := c.RestartNode(other); err != nil {
				t.Fatal(err)
			}
			assertSame(t, checksums(t, c, 1))
		})
	}
}

func TestCrashBaselineRereplicatesWhole(t *testing.T) {
	c, cl := startCluster(t, kv.Options{Mode: kv.RepairCrash})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loadKeys(t, cl, 2000)
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Node(leader%3 + 1).Replica(1)
	waitAllCaughtUp(t, c, 1) // every replica: the client reads below are eventual
	corruptReplica(t, victim, testKey(1000))
	for i := 0; i < 10; i++ {
		v, found, err := cl.Get(ctx, testKey(1000), kvclient.Eventual())
		if err != nil || !found || string(v) != string(testValue(1000)) {
			t.Fatalf("client read: %q %v %v", v, found, err)
		}
	}
	// Make sure the victim itself saw the damage.
	victim.Get(ctx, testKey(1000), &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
	waitFor(t, "rebuild", func() bool { return victim.Stats().Rebuilds >= 1 })
	st := victim.Stats()
	t.Logf("crash baseline: %v", st)
	if st.PatchesApplied != 0 || st.RebuildBytes < 2000*100 {
		t.Fatalf("crash baseline did not re-replicate the whole shard: %v", st)
	}
	assertSame(t, checksums(t, c, 1))
}

// TestRaftLogStaysBoundedUnderLargeEntries: 24 MiB of 100 KiB entries
// leave each replica's raft log around LogCompactBytes, not the whole
// history (the engine is flushed before each compaction).
func TestRaftLogStaysBoundedUnderLargeEntries(t *testing.T) {
	c, cl := startCluster(t, kv.Options{LogCompactBytes: 2 << 20})
	// 24 MB through three replicas' raft logs (two copies each) under the
	// race detector on a loaded 2-core machine: the deadline bounds a hang,
	// it does not time the writes.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	value := make([]byte, 100<<10)
	for i := 0; i < 240; i++ {
		// A put whose outcome is unknown (the proposal timed out on a slow
		// machine) is sent again: writing the same value twice is harmless.
		for {
			_, err := cl.Put(ctx, testKey(i), value)
			if err == nil {
				break
			}
			if code := status.Code(err); ctx.Err() != nil || (code != codes.DeadlineExceeded && code != codes.Unavailable) {
				t.Fatalf("put %d: %v", i, err)
			}
			t.Logf("put %d: %v: again", i, err)
		}
	}
	for _, id := range c.NodeIDs() {
		r := c.Node(id).Replica(1)
		waitFor(t, "log compacted", func() bool { return r.RaftLogStats().SizeBytes < 8<<20 })
	}
	// Everything is still there, and survives a restart of every node
	// (entries compacted away are in the flushed engines).
	for _, id := range c.NodeIDs() {
		if err := c.CrashNode(id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.NodeIDs() {
		if err := c.RestartNode(id); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 240; i += 17 {
		v, found, err := cl.Get(ctx, testKey(i), kvclient.Strong())
		if err != nil || !found || len(v) != len(value) {
			t.Fatalf("key %d: %d bytes %v %v", i, len(v), found, err)
		}
	}
	assertSame(t, checksums(t, c, 1))
}
