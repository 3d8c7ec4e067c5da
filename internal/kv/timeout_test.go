package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

// TestSilentPatchBuildersRetryUntilAPeerHasTheRange damages the same block
// on two replicas while the third is down: each patch builder hits the
// damage itself and stays silent, no patch comes within the timeout, the
// range stays under repair (reads fail as corruption, never wrong data), and
// the request is made again at later entries; once the third replica is
// back it sends the range and both damaged replicas are patched, not
// rebuilt.
func TestSilentPatchBuildersRetryUntilAPeerHasTheRange(t *testing.T) {
	c, cl := startCluster(t, kv.Options{PatchTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	loadKeys(t, cl, 2000)
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, b, down := leader, leader%3+1, (leader+1)%3+1
	waitAllCaughtUp(t, c, 1)
	if err := c.StopNode(down); err != nil {
		t.Fatal(err)
	}
	target := testKey(1000)
	ra, rb := c.Node(a).Replica(1), c.Node(b).Replica(1)
	corruptReplica(t, ra, target)
	corruptReplica(t, rb, target)
	for _, r := range []*kv.Replica{ra, rb} {
		if _, _, _, err := r.Get(ctx, target, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL}); !base.IsCorruption(err) {
			t.Fatalf("%s: read of damaged block: %v", r, err)
		}
	}
	// Every copy reachable is damaged: an explicit error, never wrong data.
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	_, _, err = cl.Get(short, target, kvclient.Eventual())
	cancelShort()
	if err == nil {
		t.Fatal("read with every reachable copy damaged succeeded")
	}
	time.Sleep(time.Second) // well past the patch timeout
	if ra.Stats().PatchesApplied+rb.Stats().PatchesApplied != 0 {
		t.Fatal("a patch was built from a damaged copy")
	}
	// Both copies are damaged at the same byte: block merge has nothing
	// to put together either.
	if ra.Stats().BlocksMerged+rb.Stats().BlocksMerged != 0 {
		t.Fatal("a block was merged from copies damaged at the same byte")
	}
	if err := c.RestartNode(down); err != nil {
		t.Fatal(err)
	}
	// Repaired from the third replica: by its patch, or by its intact copy
	// of the block (block merge), whichever comes first.
	repaired := func(r *kv.Replica) bool { st := r.Stats(); return st.PatchesApplied+st.BlocksMerged > 0 }
	waitFor(t, "repairs from the third replica", func() bool { return repaired(ra) && repaired(rb) })
	for _, r := range []*kv.Replica{ra, rb} {
		if st := r.Stats(); st.Rebuilds != 0 {
			t.Fatalf("%s rebuilt: %v", r, st)
		}
	}
	v, found, err := cl.Get(ctx, target, kvclient.Strong())
	if err != nil || !found || string(v) != string(testValue(1000)) {
		t.Fatalf("read after repair: %q %v %v", v, found, err)
	}
	assertSame(t, checksums(t, c, 1))
}
