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
	"github.com/flashmend/flashmend/internal/client/objlayout"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/node"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestDieRepairRepairsExactlyTheDie: a die of a node holding REP and EC
// chunks fails; the node identifies what the die held and opens a job; the
// cluster's repairer re-creates exactly those chunks (not the device); every
// object reads back byte-identical, before and after, and the die ends up
// holding nothing live. The history records the failure and the repair.
func TestDieRepairRepairsExactlyTheDie(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	reparoBytes := dieRepairRun(t, seed, node.DieRepairReparo)
	rebuildBytes := dieRepairRun(t, seed, node.DieRepairRebuild)
	t.Logf("bytes re-created: reparo %d, rebuild %d (%.1fx)", reparoBytes, rebuildBytes, float64(rebuildBytes)/float64(reparoBytes))
	if rebuildBytes <= reparoBytes {
		t.Fatalf("the rebuild baseline moved %d B, reparo %d B", rebuildBytes, reparoBytes)
	}
}

// dieCluster is a 7-node cluster on emulated flash holding REP and EC
// objects, and the die of node 0 that holds the most.
type dieCluster struct {
	cl      *devcluster.Cluster
	c       *client.Client
	objects map[string][]byte
	recs    map[objstore.BlobRef]*objectpb.ObjectRecord
	st      *objstore.SDFStore
	die     flash.DieAddr
	loss    objstore.DieLoss // what the die holds, identified before it fails
}

func startDieCluster(t *testing.T, ctx context.Context, seed int64, mode string) *dieCluster {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	stores := func(dir string, i int) (objstore.Store, error) {
		g := flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 32, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
		return objstore.OpenSDFStore(filepath.Join(dir, "sdf"), objstore.SDFStoreOptions{Geometry: g, Seed: int64(i + 1)})
	}
	opts := devcluster.Options{Dir: t.TempDir(), Nodes: 7, NodeStore: stores, UnsafeNoFsync: true, DieRepair: mode} // seven: an RS(4+2) shard of the retired node needs a node outside its placement
	cl, err := devcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	c, err := client.Dial(ctx, cl.Endpoint(), client.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	dc := &dieCluster{cl: cl, c: c, objects: map[string][]byte{}, recs: map[objstore.BlobRef]*objectpb.ObjectRecord{}}
	for i := 0; i < 24; i++ {
		data := make([]byte, 1+rng.Intn(4*direct.ChunkSize))
		rng.Read(data)
		key := fmt.Sprintf("obj-%02d", i)
		red := objectpb.Redundancy_REP
		if i%2 == 1 {
			red = objectpb.Redundancy_EC
		}
		rec, err := c.Put(ctx, key, data, red)
		if err != nil {
			t.Fatal(err)
		}
		dc.objects[key] = data
		dc.recs[objstore.BlobRef{Object: rec.Object, Version: rec.Version}] = rec
	}
	dc.st = cl.Node(0).Store().(*objstore.SDFStore)
	g := dc.st.Geometry()
	for ch := 0; ch < g.Channels; ch++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			loss, err := dc.st.LostOnDie(flash.DieAddr{Channel: ch, Die: d}, reparo.IdentifyCDRStar)
			if err != nil {
				t.Fatal(err)
			}
			if loss.Bytes > dc.loss.Bytes {
				dc.die, dc.loss = flash.DieAddr{Channel: ch, Die: d}, loss
			}
		}
	}
	if dc.loss.Bytes == 0 || len(dc.loss.Chunks) == 0 {
		t.Fatal("node 0 holds nothing: the test proves nothing")
	}
	return dc
}

// pickDie makes the die under test the fullest die of node 0 whose loss
// ok accepts (the test's cases need chunks of each kind on it).
func (dc *dieCluster) pickDie(t *testing.T, ok func(objstore.DieLoss) bool) {
	t.Helper()
	g := dc.st.Geometry()
	var best objstore.DieLoss
	var die flash.DieAddr
	for ch := 0; ch < g.Channels; ch++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			loss, err := dc.st.LostOnDie(flash.DieAddr{Channel: ch, Die: d}, reparo.IdentifyCDRStar)
			if err != nil {
				t.Fatal(err)
			}
			if ok(loss) && loss.Bytes > best.Bytes {
				die, best = flash.DieAddr{Channel: ch, Die: d}, loss
			}
		}
	}
	if best.Bytes == 0 {
		t.Fatal("no die of node 0 holds chunks of every kind the test needs")
	}
	dc.die, dc.loss = die, best
}

// nodeIndex returns the cluster index of the node with ID id.
func (dc *dieCluster) nodeIndex(t *testing.T, id uint64) int {
	t.Helper()
	for i := 0; i < 7; i++ {
		if uint64(dc.cl.Node(i).ID()) == id {
			return i
		}
	}
	t.Fatalf("no node %d", id)
	return -1
}

// failAndRepair fails the die, checks reads during the repair (with
// readDuring: they repair what they find, through DIRECT's read path), and
// runs the repairer until node 0 has no open job.
func (dc *dieCluster) failAndRepair(t *testing.T, ctx context.Context, readDuring bool) client.DieRepairReport {
	t.Helper()
	n := dc.cl.Node(0)
	g := dc.st.Geometry()
	if err := dc.st.FailDie(dc.die.Channel*g.DiesPerChannel + dc.die.Die); err != nil {
		t.Fatal(err)
	}
	// The node opens a job within moments.
	for deadline := time.Now().Add(30 * time.Second); len(n.DieRepairs()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no die-repair job opened")
		}
	}
	// Reads during the repair are correct (DIRECT's read path).
	if readDuring {
		dc.checkObjects(t, ctx, "during the repair")
	}
	s, err := client.NewScrubber(dc.c, client.ScrubberOptions{DieRepairPoll: -1})
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
		total.BytesFetched += rep.BytesFetched
		total.BytesLost += rep.BytesLost
		total.ChunksSpanned += rep.ChunksSpanned
		total.ChunksWhole += rep.ChunksWhole
		total.Jobs += rep.Jobs
		if time.Now().After(deadline) {
			t.Fatalf("die repair not finished: %v", n.DieRepairs())
		}
	}
	return total
}

func (dc *dieCluster) checkObjects(t *testing.T, ctx context.Context, when string) {
	t.Helper()
	for key, want := range dc.objects {
		got, err := dc.c.Get(ctx, key)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s %s: %d bytes, %v", key, when, len(got), err)
		}
	}
}

// spanCost is what repairing the lost chunks at sector granularity must
// fetch at least (each chunk's sector cover once from a REP replica, from
// four shards in EC) and at most (a span fetched from every other copy,
// the sums that come with the spans, an EC chunk that lost its sums record
// rebuilt from four, five or six other shards whole), and what the
// whole-chunk repair fetched (every copy of each lost chunk).
func (dc *dieCluster) spanCost(t *testing.T) (least, most, whole int64) {
	t.Helper()
	for _, lc := range dc.loss.Chunks {
		rec := dc.recs[objstore.BlobRef{Object: lc.ID.Object, Version: lc.ID.Version}]
		if rec == nil {
			t.Fatalf("chunk %s of no object", lc.ID)
		}
		l, err := objlayout.New(rec)
		if err != nil {
			t.Fatal(err)
		}
		n := l.ChunkLen(int(lc.ID.Index))
		whole += int64(n) * int64(l.Copies)
		cover, err := direct.Cover(n, lc.Lost)
		if err != nil {
			t.Fatal(err)
		}
		var covered int64
		for _, sp := range cover {
			covered += int64(sp.Len)
		}
		if lc.SumsLost && covered == 0 {
			covered = int64(min(n, direct.SectorSize))
		}
		sums := 4 * covered / direct.SectorSize
		switch {
		case l.EC && lc.SumsLost:
			least += covered * direct.DataShards
			most += int64(n) * int64(l.Copies)
		case l.EC:
			least += covered * direct.DataShards
			most += (covered + sums + 4) * (direct.TotalShards - 1)
		default:
			least += covered
			most += (covered+sums+4)*int64(l.Copies-1) + 4*direct.SectorsPerChunk
		}
	}
	return least, most, whole
}

// dieRepairRun fails the fullest die of node 0 in a cluster whose nodes
// run mode, repairs, checks, and returns the bytes the repair re-created.
func dieRepairRun(t *testing.T, seed int64, mode string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dc := startDieCluster(t, ctx, seed, mode)
	c, n, st, die, best := dc.c, dc.cl.Node(0), dc.st, dc.die, dc.loss
	used, err := st.Usage()
	if err != nil {
		t.Fatal(err)
	}
	flash0 := st.FlashBytes()
	total := dc.failAndRepair(t, ctx, true)
	dc.checkObjects(t, ctx, mode+" after the repair")
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
		t.Logf("rebuild: die %s held %d B of a device holding %d B; %d B re-created elsewhere, %d B fetched", die, best.Bytes, used.UsedBytes, total.BytesRepaired, total.BytesFetched)
		return total.BytesRepaired
	}
	left, err := st.LostOnDie(die, reparo.IdentifyCDRStar)
	if err != nil {
		t.Fatal(err)
	}
	programmed := st.FlashBytes() - flash0
	t.Logf("reparo: die %s held %d B in %d ranges of %d blobs, %d chunks (node uses %d B); repair fetched %d B, sent %d chunks, %d B (%d from their lost sectors, %d whole); the device programmed %d B; left %d B",
		die, best.Bytes, best.Ranges, len(best.Blobs), len(best.Chunks), used.UsedBytes, total.BytesFetched, total.ChunksRepaired, total.BytesRepaired,
		total.ChunksSpanned, total.ChunksWhole, programmed, left.Bytes)
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
	// Sector granularity: the repair fetched the lost sectors (once per
	// REP chunk, from four shards per EC chunk), not the chunks.
	least, most, whole := dc.spanCost(t)
	t.Logf("reparo: fetched %d B; sector-granularity bounds [%d, %d] B; fetching the lost chunks whole: %d B", total.BytesFetched, least, most, whole)
	if total.BytesFetched < least || total.BytesFetched > most {
		t.Fatalf("repair fetched %d B, outside [%d, %d] B for %d lost chunks", total.BytesFetched, least, most, len(best.Chunks))
	}
	if total.ChunksSpanned == 0 || total.BytesFetched >= whole {
		t.Fatalf("repair fetched %d B (%d chunks from their lost sectors), fetching the chunks whole takes %d B", total.BytesFetched, total.ChunksSpanned, whole)
	}
	return total.BytesRepaired
}

// TestDieRepairSpansFallBack: before the die fails, the span a REP chunk
// lost is made corrupt on another replica, the span an EC chunk lost on
// another shard, and a REP chunk of node 0 is damaged on a page that
// survives. The repair takes the REP span from the third replica and the
// EC span from another shard combination, patches the copies it found
// corrupt, and repairs the chunk whose patch does not verify whole
// (falling back from its lost sectors); every object reads back
// byte-identical and every injected chunk verifies again.
func TestDieRepairSpansFallBack(t *testing.T) {
	seed := testseed.Seed(t, "DIE_SPANS_SEED")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dc := startDieCluster(t, ctx, seed, node.DieRepairReparo)
	dc.pickDie(t, func(loss objstore.DieLoss) bool {
		var rep, ec int
		for _, lc := range loss.Chunks {
			if len(lc.Lost) == 0 || lc.SumsLost {
				continue
			}
			if dc.recs[objstore.BlobRef{Object: lc.ID.Object, Version: lc.ID.Version}].Redundancy == objectpb.Redundancy_EC {
				ec++
			} else {
				rep++
			}
		}
		return rep >= 2 && ec >= 1
	})
	type injected struct {
		node int // cluster index
		id   direct.ChunkID
	}
	var inj []injected
	var repSpan, ecSpan, local bool
	for _, lc := range dc.loss.Chunks {
		rec := dc.recs[objstore.BlobRef{Object: lc.ID.Object, Version: lc.ID.Version}]
		l, err := objlayout.New(rec)
		if err != nil {
			t.Fatal(err)
		}
		n := l.ChunkLen(int(lc.ID.Index))
		cover, err := direct.Cover(n, lc.Lost)
		if err != nil || len(cover) == 0 || lc.SumsLost {
			continue
		}
		sp := cover[0]
		switch {
		case !l.EC && !repSpan:
			// Another replica's copy of the lost span is corrupt.
			other := rec.Placement[0]
			if other == uint64(dc.cl.Node(0).ID()) {
				other = rec.Placement[1]
			}
			i := dc.nodeIndex(t, other)
			if err := dc.cl.Node(i).Chunks().Corrupt(lc.ID, int64(sp.Off+7), 5); err != nil {
				t.Fatal(err)
			}
			inj = append(inj, injected{i, lc.ID})
			repSpan = true
		case l.EC && !ecSpan:
			// The first other shard the decision reads is corrupt in the
			// span: a fifth shard takes its place.
			sh := 0
			if int(lc.ID.Shard) == 0 {
				sh = 1
			}
			id := l.ID(sh, int(lc.ID.Index))
			i := dc.nodeIndex(t, rec.Placement[sh])
			if err := dc.cl.Node(i).Chunks().Corrupt(id, int64(sp.Off+sp.Len-1), 3); err != nil {
				t.Fatal(err)
			}
			inj = append(inj, injected{i, id})
			ecSpan = true
		case !l.EC && !local:
			// Node 0's own copy is damaged on a sector the die does not
			// hold: the patch of the lost span does not verify. NB: the
			// flip rewrites the chunk's file out of place, which moves its
			// pages; the die is asked again, and the flip undone when the
			// chunk no longer fits the case.
			if off := dc.damageSurvivingSector(t, lc.ID, n); off >= 0 {
				inj = append(inj, injected{0, lc.ID})
				local = true
			}
		}
	}
	if !repSpan || !ecSpan || !local {
		t.Fatalf("seed %d: the die's chunks give no case for every injection (REP span %v, EC span %v, local %v): %v", seed, repSpan, ecSpan, local, dc.loss.Chunks)
	}
	// No reads before the repair: they would repair node 0's damaged
	// chunk (and EC rows) on their own.
	total := dc.failAndRepair(t, ctx, false)
	t.Logf("repair fetched %d B for %d B lost; %d chunks from their lost sectors, %d whole, %d failed objects",
		total.BytesFetched, total.BytesLost, total.ChunksSpanned, total.ChunksWhole, total.ObjectsFailed)
	if total.ObjectsFailed != 0 {
		t.Fatalf("%d objects failed", total.ObjectsFailed)
	}
	// Whole: node 0's damaged chunk.
	wantWhole := int64(1)
	if total.ChunksWhole < wantWhole || total.ChunksSpanned == 0 {
		t.Fatalf("%d chunks repaired from their lost sectors, %d whole (want at least %d): the injected cases did not all run", total.ChunksSpanned, total.ChunksWhole, wantWhole)
	}
	dc.checkObjects(t, ctx, "after the repair")
	for _, in := range inj {
		r, err := dc.cl.Node(in.node).Chunks().ReadChunk(in.id)
		if err != nil || r.Corrupt {
			t.Fatalf("injected chunk %s on node index %d after the repair: %v %v", in.id, in.node, r, err)
		}
	}
}

// damageSurvivingSector flips a bit of node 0's chunk id (of n bytes) in a
// sector the die under test does not hold, such that the die still holds
// some of the chunk; it returns the sector's offset, or -1 (nothing
// changed) when the chunk's pages do not allow it.
func (dc *dieCluster) damageSurvivingSector(t *testing.T, id direct.ChunkID, n int) int {
	t.Helper()
	chunks := dc.cl.Node(0).Chunks()
	for s := 0; s < direct.SectorCount(n); s++ {
		off := s * direct.SectorSize
		if err := chunks.Corrupt(id, int64(off), 1); err != nil {
			t.Fatal(err)
		}
		loss, err := dc.st.LostOnDie(dc.die, reparo.IdentifyCDRStar)
		if err != nil {
			t.Fatal(err)
		}
		for _, lc := range loss.Chunks {
			if lc.ID != id || lc.SumsLost {
				continue
			}
			cover, err := direct.Cover(n, lc.Lost)
			if err != nil {
				t.Fatal(err)
			}
			in := len(cover) == 0
			for _, c := range cover {
				in = in || (off >= c.Off && off < c.End())
			}
			if !in {
				dc.loss = loss
				return off
			}
		}
		if err := chunks.Corrupt(id, int64(off), 1); err != nil { // undo
			t.Fatal(err)
		}
	}
	return -1
}
