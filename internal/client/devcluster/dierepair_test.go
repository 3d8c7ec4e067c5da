package devcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/node"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/reparo"
)

// TestDieRepairRepairsExactlyTheDie: a die of a node holding REP and EC
// chunks fails; the node identifies what the die held and opens a job; the
// cluster's repairer re-creates exactly those chunks (not the device); every
// object reads back byte-identical, before and after, and the die ends up
// holding nothing live. The history records the failure and the repair.
func TestDieRepairRepairsExactlyTheDie(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	reparoBytes := dieRepairRun(t, seed, node.DieRepairReparo)
	rebuildBytes := dieRepairRun(t, seed, node.DieRepairRebuild)
	t.Logf("bytes re-created: reparo %d, rebuild %d (%.1fx)", reparoBytes, rebuildBytes, float64(rebuildBytes)/float64(reparoBytes))
	if rebuildBytes <= reparoBytes {
		t.Fatalf("the rebuild baseline moved %d B, reparo %d B", rebuildBytes, reparoBytes)
	}
}

// dieRepairRun fails the fullest die of node 0 in a cluster whose nodes
// run mode, repairs, checks, and returns the bytes the repair re-created.
func dieRepairRun(t *testing.T, seed int64, mode string) int64 {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stores := func(dir string, i int) (objstore.Store, error) {
		g := flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 32, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
		return objstore.OpenSDFStore(filepath.Join(dir, "sdf"), objstore.SDFStoreOptions{Geometry: g, Seed: int64(i + 1)})
	}
	opts := devcluster.Options{Dir: t.TempDir(), Nodes: 7, NodeStore: stores, UnsafeNoFsync: true, DieRepair: mode} // seven: an RS(4+2) shard of the retired node needs a node outside its placement
	cl, err := devcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c, err := client.Dial(ctx, cl.Endpoint(), client.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	objects := map[string][]byte{}
	for i := 0; i < 24; i++ {
		data := make([]byte, 1+rng.Intn(4*direct.ChunkSize))
		rng.Read(data)
		key := fmt.Sprintf("obj-%02d", i)
		red := objectpb.Redundancy_REP
		if i%2 == 1 {
			red = objectpb.Redundancy_EC
		}
		if _, err := c.Put(ctx, key, data, red); err != nil {
			t.Fatal(err)
		}
		objects[key] = data
	}
	// The node and die: the die of node 0 that holds the most.
	n := cl.Node(0)
	st := n.Store().(*objstore.SDFStore)
	g := st.Geometry()
	var die flash.DieAddr
	var best objstore.DieLoss
	for ch := 0; ch < g.Channels; ch++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			loss, err := st.LostOnDie(flash.DieAddr{Channel: ch, Die: d}, reparo.IdentifyCDRStar)
			if err != nil {
				t.Fatal(err)
			}
			if loss.Bytes > best.Bytes {
				die, best = flash.DieAddr{Channel: ch, Die: d}, loss
			}
		}
	}
	if best.Bytes == 0 {
		t.Fatal("node 0 holds nothing: the test proves nothing")
	}
	used, err := st.Usage()
	if err != nil {
		t.Fatal(err)
	}
	flash0 := st.FlashBytes()
	if err := st.FailDie(die.Channel*g.DiesPerChannel + die.Die); err != nil {
		t.Fatal(err)
	}
	// The node opens a job within moments.
	var jobs int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if jobs = len(n.DieRepairs()); jobs > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no die-repair job opened")
		}
	}
	// Reads during the repair are correct (DIRECT's read path).
	for key, want := range objects {
		got, err := c.Get(ctx, key)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s during the repair: %d bytes, %v", key, len(got), err)
		}
	}
	s, err := client.NewScrubber(c, client.ScrubberOptions{DieRepairPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	var total client.DieRepairReport
	for deadline := time.Now().Add(60 * time.Second); len(n.DieRepairs()) > 0; {
		rep, err := s.RepairDies(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total.BytesRepaired += rep.BytesRepaired
		total.ChunksRepaired += rep.ChunksRepaired
		total.ObjectsFailed += rep.ObjectsFailed
		if time.Now().After(deadline) {
			t.Fatalf("die repair not finished: %v", n.DieRepairs())
		}
	}
	for key, want := range objects {
		got, err := c.Get(ctx, key)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %s after the repair: %d bytes, %v", mode, key, len(got), err)
		}
	}
	hist := n.RepairHistory()
	var failed, repaired bool
	for _, e := range hist.Recent {
		failed = failed || e.Kind == node.KindDieFailed
		repaired = repaired || (e.Kind == node.KindDieRepaired && strings.Contains(e.Detail, "die "+die.String()))
	}
	if !failed || !repaired {
		t.Fatalf("%s: history lacks the die events: %v", mode, hist.Recent)
	}
	if total.ObjectsFailed != 0 {
		t.Fatalf("%s: %d objects failed", mode, total.ObjectsFailed)
	}
	if mode == node.DieRepairRebuild {
		// The whole device is retired: nothing is placed on node 0 any more.
		recs, err := c.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if slices.Contains(rec.Placement, uint64(n.ID())) {
				t.Fatalf("rebuild: %s still placed on the retired node: %v", rec.Key, rec.Placement)
			}
		}
		t.Logf("rebuild: die %s held %d B of a device holding %d B; %d B re-created elsewhere", die, best.Bytes, used.UsedBytes, total.BytesRepaired)
		return total.BytesRepaired
	}
	left, err := st.LostOnDie(die, reparo.IdentifyCDRStar)
	if err != nil {
		t.Fatal(err)
	}
	programmed := st.FlashBytes() - flash0
	t.Logf("reparo: die %s held %d B in %d ranges of %d blobs (node uses %d B); repair sent %d chunks, %d B; the device programmed %d B; left %d B",
		die, best.Bytes, best.Ranges, len(best.Blobs), used.UsedBytes, total.ChunksRepaired, total.BytesRepaired, programmed, left.Bytes)
	// Every blob's files are off the die. NB: the three copies of a small
	// metadata file (local index entry, identity, history) may share a die
	// (the layer does not place them apart yet); those the node could not
	// rewrite from a surviving copy are listed, not failed.
	if len(left.Blobs) != 0 || len(left.OtherFiles) != 0 {
		t.Fatalf("after the repair: blobs %v and files %v still on the die", left.Blobs, left.OtherFiles)
	}
	if len(left.MetaFiles) > 0 {
		t.Logf("metadata files whose every copy was on the die: %v", left.MetaFiles)
	}
	// About one die's worth: every repaired chunk had pages on the die
	// (a 64 KiB chunk is striped over the dies), never the whole device.
	if total.BytesRepaired == 0 || total.BytesRepaired > int64(used.UsedBytes)*3/4 {
		t.Fatalf("repair wrote %d B for a die holding %d B of a device holding %d B", total.BytesRepaired, best.Bytes, used.UsedBytes)
	}
	return total.BytesRepaired
}
