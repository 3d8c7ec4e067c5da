package kv_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/testseed"
)

// guarded is the protection layer a node puts over fs (to write a replica's
// files as a node would).
func guarded(t *testing.T, fs vfs.FS) vfs.FS {
	t.Helper()
	g, err := guardfs.New(fs, guardfs.Options{SSTReaderOptions: engine.SSTReaderOptions()})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// replicaDir is node's directory of shard 1 in c.
func replicaDir(c *kvcluster.Cluster, node base.NodeID) string {
	return c.Config().FS.PathJoin(c.Config().Dir, fmt.Sprintf("n%d", uint64(node)), "shard-1")
}

// damageBothRaftLogCopies destroys the same bytes in both copies of node's
// raft log (the newest generation), n places, away from the files' ends.
func damageBothRaftLogCopies(t *testing.T, c *kvcluster.Cluster, node base.NodeID, rng *rand.Rand, n int) {
	t.Helper()
	fs := c.Config().FS
	dir := fs.PathJoin(replicaDir(c, node), "raft")
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var newest string
	for _, name := range names {
		if strings.HasSuffix(name, ".0") && name > newest {
			newest = name
		}
	}
	st, err := fs.Stat(fs.PathJoin(dir, newest))
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for i := 0; i < n; i++ {
		offs = append(offs, st.Size()/4+rng.Int63n(st.Size()/2))
	}
	for _, name := range []string{newest, strings.TrimSuffix(newest, ".0") + ".1"} {
		f, err := fs.OpenReadWrite(fs.PathJoin(dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range offs {
			b := make([]byte, 16)
			f.ReadAt(b, at)
			for i := range b {
				b[i] ^= 0xa5
			}
			f.WriteAt(b, at)
		}
		f.Close()
	}
	t.Logf("damaged %d places in both copies of %s/%s (%d bytes)", n, dir, newest, st.Size())
}

// TestRaftLogLostInBothCopiesRepairedFromPeers: entries lost in both copies
// of a replica's raft log are fetched from its peers at open: the replica
// rejoins with its log whole, serves, and is needed for quorum afterwards;
// nothing is rebuilt.
func TestRaftLogLostInBothCopiesRepairedFromPeers(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	for _, role := range []string{"leader", "follower"} {
		t.Run(role, func(t *testing.T) {
			// A long compaction interval keeps the entries in the log.
			c, cl := startCluster(t, kv.Options{LogCompactEntries: 100000, LogKeepEntries: 1000})
			// The deadline bounds a hang; it times nothing.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			for i := 0; i < 600; i++ { // single-entry records
				mustPut(ctx, t, cl, testKey(i), testValue(i))
			}
			leader, err := c.WaitLeader(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			victim := leader
			if role == "follower" {
				victim = leader%3 + 1
			}
			waitAllCaughtUp(t, c, 1)
			// The engine flushes at close, so the whole log is applied
			// state: lose the flush too, so the damaged entries are needed.
			if err := c.StopNode(victim); err != nil {
				t.Fatal(err)
			}
			rollbackEngine(t, c, victim)
			damageBothRaftLogCopies(t, c, victim, rng, 4)
			if err := c.RestartNode(victim); err != nil {
				t.Fatal(err)
			}
			r := c.Node(victim).Replica(1)
			waitFor(t, "raft running", func() bool { return r.RaftUp() })
			st := r.Stats()
			t.Logf("raft log %v; replica %v", r.RaftLog().Stats(), st)
			if st.LogEntriesFilled == 0 {
				t.Fatalf("no entry repaired from a peer: %v", r.RaftLog().Stats())
			}
			// Stop another node: the restarted one is now needed for quorum.
			other := victim%3 + 1
			if err := c.StopNode(other); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 600; i += 7 {
				v, found, err := cl.Get(ctx, testKey(i), kvclient.Strong())
				if err != nil || !found || string(v) != string(testValue(i)) {
					t.Fatalf("key %d: %q %v %v", i, v, found, err)
				}
			}
			mustPut(ctx, t, cl, []byte("after"), []byte("x"))
			if err := c.RestartNode(other); err != nil {
				t.Fatal(err)
			}
			if st := r.Stats(); st.Rebuilds != 0 {
				t.Fatalf("replica rebuilt: %v", st)
			}
			assertSame(t, checksums(t, c, 1))
		})
	}
}

// rollbackEngine replaces node's Pebble with an empty one whose applied
// record says index 1 (as if nothing was ever flushed): every entry must
// then come from the raft log.
func rollbackEngine(t *testing.T, c *kvcluster.Cluster, node base.NodeID) {
	t.Helper()
	fs := c.Config().FS
	dir := fs.PathJoin(replicaDir(c, node), "pebble")
	if err := fs.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	gfs := guarded(t, fs)
	sm, err := engine.Open(gfs, dir, 0, 4<<20, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sm.SetApplied(1, 1); err != nil {
		t.Fatal(err)
	}
	if err := sm.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEngineThatGainedRowsIsRebuilt: rows written into a replica's Pebble
// behind its digest's back (an engine that does not match its applied log)
// are found at open; the replica never serves them and is rebuilt.
func TestEngineThatGainedRowsIsRebuilt(t *testing.T) {
	c, cl := startCluster(t, kv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	loadKeys(t, cl, 500)
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	victim := leader%3 + 1
	waitAllCaughtUp(t, c, 1)
	if err := c.StopNode(victim); err != nil {
		t.Fatal(err)
	}
	fs := guarded(t, c.Config().FS)
	dir := fs.PathJoin(replicaDir(c, victim), "pebble")
	db, err := pebble.Open(dir, engine.PebbleOptions(fs, nil, 4<<20, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(engine.UserKey([]byte("ghost")), []byte("boo"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(engine.UserKey(testKey(7)), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartNode(victim); err != nil {
		t.Fatal(err)
	}
	r := c.Node(victim).Replica(1)
	waitFor(t, "rebuild", func() bool { return r.Stats().Rebuilds >= 1 })
	st := r.Stats()
	if st.RebuildReasons[kv.RebuildDiverged] != 1 {
		t.Fatalf("rebuild reasons %v", st.RebuildReasons)
	}
	waitFor(t, "verified", func() bool { return r.Verified() })
	_, found, _, err := r.Get(ctx, []byte("ghost"), &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
	if err != nil || found {
		t.Fatalf("ghost row after rebuild: found=%v err=%v", found, err)
	}
	assertSame(t, checksums(t, c, 1))
}

// TestReplicaThatCannotOpenIsReplaced: a replica whose Pebble does not open
// (its directory is gone, a file in its place) is the only one affected:
// the node starts, the failure is reported, a fresh replica takes its place
// and catches up from its peers, and the shard serves throughout.
func TestReplicaThatCannotOpenIsReplaced(t *testing.T) {
	c, cl := startCluster(t, kv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	loadKeys(t, cl, 500)
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	victim := leader%3 + 1
	if err := c.StopNode(victim); err != nil {
		t.Fatal(err)
	}
	fs := c.Config().FS
	dir := fs.PathJoin(replicaDir(c, victim), "pebble")
	if err := fs.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(dir, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("not a directory"))
	f.Close()
	if err := c.RestartNode(victim); err != nil {
		t.Fatalf("node did not start: %v", err)
	}
	n := c.Node(victim)
	fails := n.Failures()
	if len(fails) != 1 || !fails[0].Replaced {
		t.Fatalf("failures %v", fails)
	}
	t.Logf("reported: %v", fails[0])
	r := n.Replica(1)
	// It catches up from the leader's log (or, once that is compacted, a
	// peer's state) and then votes again.
	waitFor(t, "fresh replica caught up", func() bool {
		l, err := c.WaitLeader(ctx, 1)
		if err != nil || l == victim {
			return false
		}
		a := r.AppliedIndex()
		b := c.Node(l).Replica(1).AppliedIndex()
		return a == b && a > 1
	})
	for i := 0; i < 500; i += 11 {
		v, found, err := cl.Get(ctx, testKey(i), kvclient.Strong())
		if err != nil || !found || string(v) != string(testValue(i)) {
			t.Fatalf("key %d: %q %v %v", i, v, found, err)
		}
	}
	if _, err := cl.Put(ctx, []byte("after"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "vote floor lifted", func() bool { _, _, ok := r.RaftLog().VoteFloor(); return !ok })
	assertSame(t, checksums(t, c, 1))
}

// TestHelixRepairAtOpen damages a different data block on every replica
// (every key is intact on two of them), restarts all three, and reads every
// key back: each damaged range is patched from a replica that holds it,
// with no rebuild.
func TestHelixRepairAtOpen(t *testing.T) {
	ctx, c, cl := loadedCluster(t)
	for k, id := range c.NodeIDs() {
		corruptReplica(t, c.Node(id).Replica(1), testKey(500+1000*k))
	}
	start := time.Now()
	restartAndReadBack(ctx, t, c, cl)
	t.Logf("every key read back %v after restart", time.Since(start))
	for _, id := range c.NodeIDs() {
		r := c.Node(id).Replica(1)
		waitFor(t, "patched", func() bool { return r.Stats().PatchesApplied >= 1 })
	}
	assertRepairedWithoutRebuild(t, c)
}

// loadedShardKeys is how many keys loadedCluster writes.
const loadedShardKeys = 3000

// loadedCluster starts a three-node cluster of one shard, writes
// loadedShardKeys keys and waits until every replica applied them. The
// context ends with the test.
func loadedCluster(t *testing.T) (context.Context, *kvcluster.Cluster, *kvclient.Client) {
	t.Helper()
	c, cl := startCluster(t, kv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	loadKeys(t, cl, loadedShardKeys)
	if _, err := c.WaitLeader(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitAllCaughtUp(t, c, 1)
	return ctx, c, cl
}

// restartAndReadBack stops and restarts every node and reads every key
// loadedCluster wrote (eventual reads: the client tries the replicas).
func restartAndReadBack(ctx context.Context, t *testing.T, c *kvcluster.Cluster, cl *kvclient.Client) {
	t.Helper()
	for _, id := range c.NodeIDs() {
		if err := c.StopNode(id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.NodeIDs() {
		if err := c.RestartNode(id); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < loadedShardKeys; i++ {
		v, found, err := cl.Get(ctx, testKey(i), kvclient.Eventual())
		if err != nil || !found || string(v) != string(testValue(i)) {
			t.Fatalf("key %d: %q %v %v", i, v, found, err)
		}
	}
}

// assertRepairedWithoutRebuild waits until no replica of shard 1 has a
// range under repair or a patch request in flight, checks that none was
// rebuilt, and that all hold the same rows. It returns the blocks merged.
func assertRepairedWithoutRebuild(t *testing.T, c *kvcluster.Cluster) (merged uint64) {
	t.Helper()
	for _, id := range c.NodeIDs() {
		r := c.Node(id).Replica(1)
		waitFor(t, "repaired", func() bool { rec, pend := r.Repairing(); return rec == 0 && pend == 0 })
		st := r.Stats()
		if st.Rebuilds != 0 {
			t.Fatalf("%s rebuilt: %v", r, st)
		}
		merged += st.BlocksMerged
	}
	assertSame(t, checksums(t, c, 1))
	return merged
}

// TestHelixSharedSeparator damages, on two replicas, the data block that
// ends at a shortened index separator u (a key no one wrote) and, on the
// third, the block that starts after it, then restarts all three. Every key
// is intact on some replica, but every replica's damaged span touches u:
// before repairs read u with the damaged table left out, each replica
// counted u as lost and asked the others for it, and the ranges stayed
// under repair forever (uber-restart-kv, UBER 1e-6).
func TestHelixSharedSeparator(t *testing.T) {
	ctx, c, cl := loadedCluster(t)
	const n = loadedShardKeys
	ids := c.NodeIDs()
	// A shortened separator every replica's tables share, with keys on both
	// sides of it.
	count := map[string]int{}
	for _, id := range ids {
		seps, err := c.Node(id).Replica(1).Separators()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range seps {
			count[string(s)]++
		}
	}
	isKey := func(s string) bool {
		var i int
		_, err := fmt.Sscanf(s, "key-%05d", &i)
		return err == nil && string(testKey(i)) == s
	}
	var u string
	for s, k := range count {
		if k == len(ids) && !isKey(s) && s > string(testKey(n/4)) && s < string(testKey(3*n/4)) && (u == "" || s < u) {
			u = s
		}
	}
	if u == "" {
		t.Fatalf("no shortened separator shared by all %d replicas", len(ids))
	}
	below, above := -1, -1
	for i := 0; i < n; i++ {
		if string(testKey(i)) < u {
			below = i
		} else if above < 0 {
			above = i
		}
	}
	t.Logf("shared separator %q between %s and %s", u, testKey(below), testKey(above))
	for k, id := range ids {
		key := testKey(below)
		if k == 1 {
			key = testKey(above)
		}
		corruptReplica(t, c.Node(id).Replica(1), key)
	}
	restartAndReadBack(ctx, t, c, cl)
	assertRepairedWithoutRebuild(t, c)
}

// TestBlockMergeSameBlockEveryReplica damages the same data block on all
// three replicas, each at a different byte, and restarts them: no peer can
// send the block's keys, but the three damaged copies together hold every
// byte; the block is put back together (block merge) and written in place
// on every replica, with no rebuild and no key lost.
func TestBlockMergeSameBlockEveryReplica(t *testing.T) {
	// The replicas' tables come out the same when each compacts the same
	// applied state; an entry applied on one replica between the others'
	// compactions (an election's empty entry on a loaded machine) shifts
	// its blocks. Such a cluster does not set up the case under test: try
	// a fresh one (seen once in three make test runs at load 15).
	for attempt := 1; ; attempt++ {
		ctx, c, cl := loadedCluster(t)
		ids := c.NodeIDs()
		victim := testKey(loadedShardKeys / 2)
		var offsets []uint64
		for k, id := range ids {
			r := c.Node(id).Replica(1)
			if err := r.Compact(context.Background()); err != nil {
				t.Fatal(err)
			}
			file, off, err := r.CorruptBlockAt(victim, 0.2+0.25*float64(k))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: damaged the block at offset %d of %s", r, off, file)
			offsets = append(offsets, off)
		}
		if offsets[0] != offsets[1] || offsets[1] != offsets[2] {
			if attempt < 5 {
				t.Logf("attempt %d: the replicas' tables differ (block offsets %v): a fresh cluster", attempt, offsets)
				continue
			}
			t.Fatalf("the replicas' tables differ (block offsets %v) in %d clusters: not the case under test", offsets, attempt)
		}
		restartAndReadBack(ctx, t, c, cl)
		if assertRepairedWithoutRebuild(t, c) == 0 {
			t.Fatalf("no block merged")
		}
		return
	}
}

// TestOneRowTablePatched damages the only data block of a shard's only
// table (one row, a shard in the middle of the key space, so the table also
// holds the replica's applied record on both sides of the row): the
// replica is patched, not rebuilt. The excise span used to stop at the
// shard's bounds, and Pebble, cutting the table's remainders outside it,
// had to seek in the damaged block: the applied record's remainders were
// lost, the excise check failed and the replica was rebuilt (seen with
// `kv corrupt` on a dev cluster).
func TestOneRowTablePatched(t *testing.T) {
	c, cl := startCluster(t, kv.Options{}, "a", "z")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	loadKeys(t, cl, 1)
	const shard = 2 // [a, z): testKey(0) is there
	if _, err := c.WaitLeader(ctx, shard); err != nil {
		t.Fatal(err)
	}
	ids := c.NodeIDs()
	waitAllCaughtUp(t, c, shard)
	r := c.Node(ids[0]).Replica(shard)
	corruptReplica(t, r, testKey(0))
	files, damaged, err := r.Scrub()
	t.Logf("scrub: %d %d %v", files, damaged, err)
	v, found, err := cl.Get(ctx, testKey(0), kvclient.Eventual())
	t.Logf("get: %q %v %v", v, found, err)
	waitFor(t, "repaired", func() bool {
		rec, pend := r.Repairing()
		st := r.Stats()
		return rec == 0 && pend == 0 && (st.PatchesApplied > 0 || st.Rebuilds > 0)
	})
	t.Logf("stats %v", r.Stats())
	if r.Stats().Rebuilds != 0 {
		t.Fatalf("rebuilt: %v", r.Stats())
	}
}
