package kv_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/testseed"
)

// transientFS flips one bit in the caller's buffer (never in the stored
// file) on the first read that covers an armed offset of an armed file: a
// transient flip, gone on a re-read.
type transientFS struct {
	vfs.FS
	mu    sync.Mutex
	armed map[string][]int64 // path -> offsets; guarded by mu
	flips int                // guarded by mu
}

func (f *transientFS) arm(path string, offsets []int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed == nil {
		f.armed = map[string][]int64{}
	}
	f.armed[path] = offsets
}

func (f *transientFS) flipped() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flips
}

func (f *transientFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	return &transientFile{File: file, fs: f, path: name}, nil
}

type transientFile struct {
	vfs.File
	fs   *transientFS
	path string
}

func (t *transientFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := t.File.ReadAt(p, off)
	t.fs.mu.Lock()
	defer t.fs.mu.Unlock()
	for _, at := range t.fs.armed[t.path] {
		if at >= off && at < off+int64(n) {
			p[at-off] ^= 0x10
			t.fs.flips++
			delete(t.fs.armed, t.path)
			break
		}
	}
	return n, err
}

// startTransientCluster starts 3 nodes, each on its own transientFS, with
// no block cache (every read goes to the file).
func startTransientCluster(t *testing.T) (*kvcluster.Cluster, *kvclient.Client, map[base.NodeID]*transientFS) {
	t.Helper()
	fss := map[base.NodeID]*transientFS{}
	var mu sync.Mutex
	c, err := kvcluster.Start(kvcluster.Config{
		Options: kv.Options{CacheBytes: -1},
		NodeFS: func(id base.NodeID) (vfs.FS, error) {
			mu.Lock()
			defer mu.Unlock()
			fss[id] = &transientFS{FS: vfs.NewMem()}
			return fss[id], nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cl, err := c.NewClient(kvclient.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.WaitLeader(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return c, cl, fss
}

// loadedTransientCluster starts the cluster of startTransientCluster, loads
// 3000 keys into it, waits until every replica applied them and names the
// follower after shard 1's leader (the victim of the tests).
func loadedTransientCluster(ctx context.Context, t *testing.T) (c *kvcluster.Cluster, cl *kvclient.Client,
	fss map[base.NodeID]*transientFS, victimNode base.NodeID) {
	t.Helper()
	c, cl, fss = startTransientCluster(t)
	loadKeys(t, cl, 3000)
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Every replica: the tests read eventually from any of them.
	waitAllCaughtUp(t, c, 1)
	return c, cl, fss, leader%3 + 1
}

// compactAndArm compacts r's Pebble to quiescence and arms fs to flip the
// next read of any data block of the sstable holding key.
func compactAndArm(t *testing.T, r *kv.Replica, fs *transientFS, key []byte) string {
	t.Helper()
	sm, unlock := r.LockSM()
	defer unlock()
	if err := sm.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	if err := sm.DB().Compact(context.Background(), []byte("u"), []byte("v"), false); err != nil {
		t.Fatal(err)
	}
	levels, err := sm.DB().SSTables()
	if err != nil {
		t.Fatal(err)
	}
	pk := engine.UserKey(key)
	for _, level := range levels {
		for _, tbl := range level {
			if string(pk) < string(tbl.Smallest.UserKey) || string(pk) > string(tbl.Largest.UserKey) {
				continue
			}
			path := sm.FS().PathJoin(sm.Dir(), fmt.Sprintf("%06d.sst", uint64(tbl.BackingSSTNum)))
			layout, err := engine.TableLayout(sm.FS(), path, sm.Opts().MakeReaderOptions())
			if err != nil {
				t.Fatal(err)
			}
			var offs []int64
			for _, h := range layout.Data {
				offs = append(offs, int64(h.Offset+h.Length/2))
			}
			fs.arm(path, offs)
			return path
		}
	}
	t.Fatalf("%s: no sstable holds %q", r, key)
	return ""
}

// TestTransientFlipNotRepaired: a flip on one read of a data block is seen
// as corruption, verifies on the re-read, and is counted as transient: the
// application read succeeds with the right value, nothing is patched and no
// range is refused.
func TestTransientFlipNotRepaired(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, cl, fss, victimNode := loadedTransientCluster(ctx, t)
	victim := c.Node(victimNode).Replica(1)
	target := testKey(1500)
	compactAndArm(t, victim, fss[victimNode], target)
	v, found, _, err := victim.Get(ctx, target, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
	if err != nil || !found || string(v) != string(testValue(1500)) {
		t.Fatalf("read through a transient flip: %q %v %v", v, found, err)
	}
	if got := fss[victimNode].flipped(); got != 1 {
		t.Fatalf("%d flips injected, want 1", got)
	}
	waitFor(t, "transient error counted", func() bool { return victim.Stats().TransientErrors == 1 })
	// A scan over the block's neighbourhood and client reads also succeed.
	rows, _, _, err := victim.Scan(ctx, testKey(1400), testKey(1600), 0, 0, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
	if err != nil || len(rows) != 200 {
		t.Fatalf("scan after transient flip: %d rows, %v", len(rows), err)
	}
	for i := 1490; i < 1510; i++ {
		v, found, err := cl.Get(ctx, testKey(i), kvclient.Eventual())
		if err != nil || !found || string(v) != string(testValue(i)) {
			t.Fatalf("client read %d: %q %v %v", i, v, found, err)
		}
	}
	time.Sleep(100 * time.Millisecond) // a patch, if wrongly proposed, would be applied by now
	st := victim.Stats()
	t.Logf("victim stats: %v", st)
	if st.CorruptionsDetected != 0 || st.PatchesApplied != 0 || st.Rebuilds != 0 {
		t.Fatalf("a transient flip was repaired: %v", st)
	}
	recovering, pending := victim.Repairing()
	if recovering != 0 || pending != 0 {
		t.Fatalf("%d ranges refused, %d patches pending after a transient flip", recovering, pending)
	}
	for _, id := range c.NodeIDs() {
		if s := c.Node(id).Replica(1).Stats(); s.PatchesSent != 0 {
			t.Fatalf("node %s sent a patch: %v", id, s)
		}
	}
	assertSame(t, checksums(t, c, 1))
}

// TestTransientFlipDuringPatchBuild: the victim's block is damaged on disk
// (persistent: patched, one block), and both healthy replicas hit a
// transient flip while scanning the range for the patch. The builders
// re-read; the repair is a patch, not a rebuild.
func TestTransientFlipDuringPatchBuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, fss, victimNode := loadedTransientCluster(ctx, t)
	victim := c.Node(victimNode).Replica(1)
	target := testKey(1500)
	corruptReplica(t, victim, target)
	var healthy []base.NodeID
	for _, id := range c.NodeIDs() {
		if id != victimNode {
			healthy = append(healthy, id)
			compactAndArm(t, c.Node(id).Replica(1), fss[id], target)
		}
	}
	// The victim's read hits the persistent damage: it fails as corruption
	// (never wrong data) and starts the repair.
	// (or the repaired value, if the patch landed between its re-reads).
	if v, _, _, err := victim.Get(ctx, target, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL}); !base.IsCorruption(err) &&
		(err != nil || string(v) != string(testValue(1500))) {
		t.Fatalf("read of damaged block: %q %v", v, err)
	}
	waitFor(t, "patch applied", func() bool {
		return victim.Stats().PatchesApplied == 1
	})
	st := victim.Stats()
	t.Logf("victim stats: %v", st)
	if st.Rebuilds != 0 || st.TransientErrors != 0 || st.CorruptionsDetected != 1 {
		t.Fatalf("victim: %v; want one detection repaired by a patch", st)
	}
	if st.PatchBytesReceived > 64<<10 {
		t.Fatalf("patch of %d bytes: more than a block's worth", st.PatchBytesReceived)
	}
	// Each healthy replica builds its patch when it applies the PatchRequest
	// entry; the victim installs the first one that verifies, so the slower
	// builder may not have applied the entry yet: wait for its flip rather
	// than assume it has happened.
	waitFor(t, "both builders read through their flip", func() bool {
		for _, id := range healthy {
			if fss[id].flipped() != 1 {
				return false
			}
		}
		return true
	})
	for _, id := range healthy {
		if got := fss[id].flipped(); got != 1 {
			t.Fatalf("node %s: %d flips injected, want 1", id, got)
		}
		s := c.Node(id).Replica(1).Stats()
		t.Logf("node %s stats: %v", id, s)
		if s.CorruptionsDetected != 0 || s.Rebuilds != 0 {
			t.Fatalf("healthy node %s repaired a transient flip: %v", id, s)
		}
	}
	waitFor(t, "builders' transient errors counted", func() bool {
		for _, id := range healthy {
			if c.Node(id).Replica(1).Stats().TransientErrors != 1 {
				return false
			}
		}
		return true
	})
	v, found, _, err := victim.Get(ctx, target, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
	if err != nil || !found || string(v) != string(testValue(1500)) {
		t.Fatalf("repaired read: %q %v %v", v, found, err)
	}
	assertSame(t, checksums(t, c, 1))
}

// TestIsolationPastTransientFlip: a transient flip in a healthy block on
// the way to the damaged one must not widen the isolated span: isolation
// re-reads past it and finds the same one-block span as without it.
func TestIsolationPastTransientFlip(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 4; round++ {
		fs := &transientFS{FS: vfs.NewMem()}
		sm, err := engine.Open(fs, "sm", 0, 4<<20, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		rows, n := &kvpb.WriteBatch{}, 2000+rng.Intn(1000)
		for j := 0; j < n; j++ {
			rows.Ops = append(rows.Ops, &kvpb.Op{Kind: kvpb.Op_PUT, Key: []byte(fmt.Sprintf("key-%05d", j)), Value: []byte(fmt.Sprintf("value-%05d-%0100d", j, j))})
		}
		if err := sm.ApplyWrite(2, 1, rows); err != nil {
			t.Fatal(err)
		}
		if err := sm.DB().Compact(context.Background(), engine.UserPrefix, engine.UserEnd, false); err != nil {
			t.Fatal(err)
		}
		levels, _ := sm.DB().SSTables()
		var path string
		for _, l := range levels {
			for _, tbl := range l {
				path = fs.PathJoin("sm", fmt.Sprintf("%06d.sst", uint64(tbl.BackingSSTNum)))
			}
		}
		layout, err := engine.TableLayout(fs, path, sm.Opts().MakeReaderOptions())
		if err != nil {
			t.Fatal(err)
		}
		if len(layout.Data) < 4 {
			t.Fatalf("seed %d: %d data blocks", seed, len(layout.Data))
		}
		// Damage a block in the middle half; flip transiently one before it
		// (forward pass) or after it (backward pass).
		bad := len(layout.Data)/4 + rng.Intn(len(layout.Data)/2)
		h := layout.Data[bad]
		if err := engine.FlipByteAt(fs, path, int64(h.Offset+h.Length/2)); err != nil {
			t.Fatal(err)
		}
		ro := sm.Opts().MakeReaderOptions()
		want, err := engine.IsolateCorruption(fs, path, ro, nil, nil)
		if err != nil || want.WholeFile {
			t.Fatalf("seed %d: isolation %v, %v", seed, want, err)
		}
		other := rng.Intn(bad)
		if rng.Intn(2) == 0 {
			other = bad + 1 + rng.Intn(len(layout.Data)-bad-1)
		}
		oh := layout.Data[other]
		fs.arm(path, []int64{int64(oh.Offset + oh.Length/2)})
		got, err := engine.IsolateCorruption(fs, path, ro, nil, nil)
		if fs.flipped() != 1 {
			t.Fatalf("seed %d: %d transient flips injected, want 1", seed, fs.flipped())
		}
		if err != nil || got.String() != want.String() {
			t.Fatalf("seed %d: block %d damaged, transient flip in block %d: isolation %v, want %v (%v)", seed, bad, other, got, want, err)
		}
		sm.Close()
	}
}
