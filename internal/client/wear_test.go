package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/coord"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/testseed"
	"github.com/flashmend/flashmend/internal/wear"
)

// wearStats scripts the flash monitor: every node up with the given erase
// counts (nodes 1..n).
func wearStats(erases ...float64) []wear.ServerStats {
	var out []wear.ServerStats
	for i, e := range erases {
		out = append(out, wear.ServerStats{Node: base.NodeID(i + 1), Up: true, Erases: e, Utilization: 0.1})
	}
	return out
}

func wearStatus(t *testing.T, c *client.Client) *coordpb.WearStatusResponse {
	t.Helper()
	st, err := c.WearStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func stateCount(st *coordpb.WearStatusResponse, name string) int64 {
	for _, s := range st.States {
		if s.State == name {
			return s.Objects
		}
	}
	return -1
}

func checkObjects(t *testing.T, c *client.Client, want map[string][]byte) {
	t.Helper()
	for k, v := range want {
		got, err := c.Get(context.Background(), k)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("%s: %d bytes, %v (want %d bytes)", k, len(got), err, len(v))
		}
	}
}

// TestWearLive runs the wear balancer on a local cluster with the wear
// scripted: HCDS swaps the hot object's part on the worn node with a cold
// object's part on the least worn one (both EWO), the hot object's next put
// is offloaded to its new node, the cold one is migrated by the mover, a
// move whose destination died fails and is made again later, the rows
// survive a restart of the whole cluster, and every object stays
// byte-identical throughout.
func TestWearLive(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	opts := devcluster.Options{Wear: coord.WearConfig{
		Policy: "chameleon", Redundancy: "rep", Epoch: time.Hour,
		Options: wear.Options{SigmaARPTRatio: 50, MigrateAfterEpochs: 1, MaxRemapsPerEpoch: 2},
	}}
	cl, c := startCluster(t, 8, opts)
	want := map[string][]byte{}
	for i := 0; i < 16; i++ {
		k := fmt.Sprintf("obj-%02d", i)
		want[k] = randomBytes(rng, 100<<10+rng.Intn(100<<10))
		if _, err := c.Put(ctx, k, want[k], objectpb.Redundancy_REP); err != nil {
			t.Fatal(err)
		}
	}
	hot := "obj-00"
	for i := 0; i < 10; i++ {
		want[hot] = randomBytes(rng, 150<<10)
		if _, err := c.Put(ctx, hot, want[hot], objectpb.Redundancy_REP); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := c.Stat(ctx, hot)
	if err != nil {
		t.Fatal(err)
	}
	// The hot object's first node is worn; the least worn node holds none
	// of its parts.
	// The least worn node holds none of the hot object's parts and a part
	// of some object the worn node does not hold (the swap's cold partner).
	worn := rec.Placement[0]
	young := uint64(0)
	for k := range want {
		other, err := c.Stat(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if k == hot || slices.Contains(other.Placement, worn) {
			continue
		}
		for _, n := range other.Placement {
			if !slices.Contains(rec.Placement, n) && (young == 0 || n < young) {
				young = n
			}
		}
	}
	if young == 0 {
		t.Fatalf("no node for the swap (hot object on %v)", rec.Placement)
	}
	erases := make([]float64, 8)
	for i := range erases {
		erases[i] = 300
	}
	erases[worn-1], erases[young-1] = 3000, 10
	if err := cl.Coord.WearEpoch(ctx, wearStats(erases...)); err != nil {
		t.Fatal(err)
	}
	st := wearStatus(t, c)
	if st.Policy != "chameleon" || !st.Hcds || stateCount(st, "REP-EWO") < 1 {
		t.Fatalf("after HCDS: %v", st)
	}
	swapped := stateCount(st, "REP-EWO")

	// The hot object's next write is offloaded to the young node.
	want[hot] = randomBytes(rng, 150<<10)
	if _, err := c.Put(ctx, hot, want[hot], objectpb.Redundancy_REP); err != nil {
		t.Fatal(err)
	}
	if rec, err = c.Stat(ctx, hot); err != nil || !slices.Contains(rec.Placement, young) || slices.Contains(rec.Placement, worn) {
		t.Fatalf("offloaded write of %s landed on %v (worn %d, young %d): %v", hot, rec.GetPlacement(), worn, young, err)
	}
	checkObjects(t, c, want)

	st = wearStatus(t, c)
	cold := stateCount(st, "REP-EWO")
	if cold != swapped-1 || cold < 1 {
		t.Fatalf("after the offloaded write: %d objects in REP-EWO, want %d (and at least one)", cold, swapped-1)
	}
	{
		// The cold partner is not written again: the next epoch migrates
		// it (the wear is even now, so HCDS swaps nothing more). Its
		// destination dies first: the move fails and the object is read
		// from where it was.
		flat := wearStats(300, 300, 300, 300, 300, 300, 300, 300)
		if err := cl.Coord.WearEpoch(ctx, flat); err != nil {
			t.Fatal(err)
		}
		if err := cl.KillNode(int(worn) - 1); err != nil {
			t.Fatal(err)
		}
		rep, err := c.RunWearMoves(ctx, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Moves != int(cold) || rep.Failed != rep.Moves {
			t.Fatalf("moves to a dead node: %+v", rep)
		}
		checkObjects(t, c, want)
		// The next epoch, even with stats that call the dead node up (its
		// lease may not have lapsed yet), does not hand it the same moves
		// again: it has not been heard from since they failed.
		if err := cl.Coord.WearEpoch(ctx, flat); err != nil {
			t.Fatal(err)
		}
		if rep, err = c.RunWearMoves(ctx, 10, nil); err != nil || rep.Moves != 0 {
			t.Fatalf("moves again to the unheard node: %+v (%v)", rep, err)
		}
		if err := cl.StartNode(ctx, int(worn)-1); err != nil {
			t.Fatal(err)
		}
		waitLive(t, c, 8)
		if err := cl.Coord.WearEpoch(ctx, flat); err != nil {
			t.Fatal(err)
		}
		rep, err = c.RunWearMoves(ctx, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Moves != int(cold) || rep.Done != rep.Moves || rep.ChunksWritten == 0 {
			t.Fatalf("moves: %+v (%d objects in REP-EWO)", rep, cold)
		}
		st = wearStatus(t, c)
		if stateCount(st, "REP-EWO") != 0 || st.MovesDone != int64(cold) || st.BytesMoved == 0 {
			t.Fatalf("after the migration: %v", st)
		}
		// ctl wear's recent moves: the ones to the dead node failed, then
		// the same moves were done.
		outcomes := map[string]int{}
		for _, m := range st.RecentMoves {
			outcomes[m.Outcome]++
			if m.Outcome == "done" && (m.From == 0 || m.To == 0 || m.Bytes == 0 || m.Key == "") {
				t.Fatalf("recent move without its parts: %v", m)
			}
		}
		if outcomes["failed"] != int(cold) || outcomes["done"] != int(cold) {
			t.Fatalf("recent moves %v: want %d failed and %d done", st.RecentMoves, cold, cold)
		}
	}
	checkObjects(t, c, want)
}

// waitLive waits until n nodes are live.
func waitLive(t *testing.T, c *client.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		nodes, err := c.Nodes(context.Background())
		live := 0
		for _, info := range nodes {
			if info.Live {
				live++
			}
		}
		if err == nil && live == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d nodes live: %v", live, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWearLateConversionSurvivesKill: ARPT makes a hot EC object late-REP
// on the least worn nodes; one of them dies just before the object's next
// write. The write converts it to REP on live nodes, and nothing is lost;
// the rows are reloaded by a restarted coordinator.
func TestWearLateConversionSurvivesKill(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	opts := devcluster.Options{Wear: coord.WearConfig{
		Policy: "chameleon", Redundancy: "ec", Epoch: time.Hour,
		Options: wear.Options{SigmaHCDSRatio: 50, HotFraction: 0.1, MaxRemapsPerEpoch: 2},
	}}
	opts.Dir, opts.Nodes, opts.UnsafeNoFsync = t.TempDir(), 8, true
	cl, err := devcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		cl.Close()
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("k%d", i)
		want[k] = randomBytes(rng, 300<<10)
		rec, err := c.Put(ctx, k, want[k], objectpb.Redundancy_REP)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Redundancy != objectpb.Redundancy_EC {
			t.Fatalf("%s stored as %v: the policy starts objects as EC", k, rec.Redundancy)
		}
	}
	hot := "k3"
	for i := 0; i < 6; i++ {
		want[hot] = randomBytes(rng, 300<<10)
		if _, err := c.Put(ctx, hot, want[hot], objectpb.Redundancy_EC); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Coord.WearEpoch(ctx, wearStats(900, 100, 100, 100, 100, 100, 100, 1800)); err != nil {
		t.Fatal(err)
	}
	st := wearStatus(t, c)
	if !st.Arpt || stateCount(st, "late-REP") != 1 {
		t.Fatalf("after ARPT: %v", st)
	}
	// Restart the cluster: the late-REP row is reloaded.
	before, _ := cl.Coord.WearEntry(hot)
	c.Close()
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	cl, err = devcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if c, err = client.Dial(ctx, cl.Endpoint(), client.Options{}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if e, ok := cl.Coord.WearEntry(hot); !ok || e != before {
		t.Fatalf("after a restart: %v, before %v", e, before)
	}
	// Kill a node the conversion is to write to (one that holds no shard).
	e, ok := cl.Coord.WearEntry(hot)
	if !ok || e.State != wear.StateLateREP {
		t.Fatalf("%s: %v", hot, e)
	}
	var victim base.NodeID
	for _, n := range e.Dst.Nodes() {
		if !e.Src.Contains(n) {
			victim = n
			break
		}
	}
	if victim == 0 {
		victim = e.Dst.Node(0)
	}
	if err := cl.KillNode(int(victim) - 1); err != nil {
		t.Fatal(err)
	}
	want[hot] = randomBytes(rng, 300<<10)
	rec, err := c.Put(ctx, hot, want[hot], objectpb.Redundancy_EC)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Redundancy != objectpb.Redundancy_REP || slices.Contains(rec.Placement, uint64(victim)) {
		t.Fatalf("late-REP object written as %v on %v (node %d is dead)", rec.Redundancy, rec.Placement, victim)
	}
	checkObjects(t, c, want)
	if st := wearStatus(t, c); stateCount(st, "late-REP") != 0 || stateCount(st, "REP") != 1 {
		t.Fatalf("after the conversion: %v", st)
	}
}
