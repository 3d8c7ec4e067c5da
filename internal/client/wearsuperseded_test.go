package client_test

import (
	"bytes"
	"context"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/coord"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/testseed"
	"github.com/flashmend/flashmend/internal/wear"
)

// TestWearMoveSupersededByPut: a wear move that loses a race to a put of a
// newer version of its object is counted superseded, not failed, and the
// newer version is what the object reads back, whole. Two races: the put
// commits before a mover takes the move (the coordinator drops it), and
// the put commits while the mover copies (its CommitReplace is refused and
// the mover reports the failure).
func TestWearMoveSupersededByPut(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	// EDM issues its migration as a move in the epoch that decides it.
	cl, c := startCluster(t, 8, devcluster.Options{Wear: coord.WearConfig{
		Policy: "edm", Redundancy: "rep", Epoch: time.Hour,
		Options: wear.Options{MaxRemapsPerEpoch: 1},
	}})
	const hot = "hot"
	var latest []byte
	put := func() {
		t.Helper()
		latest = randomBytes(rng, 100<<10+rng.Intn(100<<10))
		if _, err := c.Put(ctx, hot, latest, objectpb.Redundancy_REP); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		put()
	}
	// issue makes the balancer move a part of the hot object off its first
	// node (worn) to a node outside its placement (the least worn).
	issue := func() {
		t.Helper()
		rec, err := c.Stat(ctx, hot)
		if err != nil {
			t.Fatal(err)
		}
		erases := []float64{300, 300, 300, 300, 300, 300, 300, 300}
		erases[rec.Placement[0]-1] = 3000
		for id := uint64(1); id <= 8; id++ {
			if !slices.Contains(rec.Placement, id) {
				erases[id-1] = 10
				break
			}
		}
		if err := cl.Coord.WearEpoch(ctx, wearStats(erases...)); err != nil {
			t.Fatal(err)
		}
		if st := wearStatus(t, c); st.MovesPending != 1 {
			t.Fatalf("after the epoch: %d moves pending, want 1 (%v)", st.MovesPending, st)
		}
	}
	check := func(superseded int64, why string) {
		t.Helper()
		st := wearStatus(t, c)
		if st.MovesSuperseded != superseded || st.MovesFailed != 0 || st.MovesDone != 0 || st.MovesPending != 0 {
			t.Fatalf("moves: %d superseded, %d failed %v, %d done, %d pending; want %d superseded and nothing else",
				st.MovesSuperseded, st.MovesFailed, st.MovesFailedByReason, st.MovesDone, st.MovesPending, superseded)
		}
		last := st.RecentMoves[len(st.RecentMoves)-1]
		if last.Outcome != "superseded" || last.Why != why {
			t.Fatalf("last move %v: want superseded (%s)", last, why)
		}
		got, err := c.Get(ctx, hot)
		if err != nil || !bytes.Equal(got, latest) {
			t.Fatalf("read %d bytes, %v: want the newest version (%d bytes)", len(got), err, len(latest))
		}
		rec, err := c.Stat(ctx, hot)
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := c.ScrubObject(ctx, rec, nil, nil); err != nil || rep.Repaired != 0 || rep.RepairFailed != 0 {
			t.Fatalf("the newest version's layout %v is not whole: %+v, %v", rec.Placement, rep, err)
		}
	}

	// 1. The put commits before a mover takes the move.
	issue()
	put()
	if rep, err := c.RunWearMoves(ctx, 10, nil); err != nil || rep.Moves != 0 {
		t.Fatalf("mover after the put: %+v, %v (want no move handed out)", rep, err)
	}
	check(1, "the object's row changed (a write, a re-protection)")

	// 2. The put commits while the mover copies: the mover's commit is
	// refused, it reports the failure, the coordinator finds a newer
	// version.
	issue()
	resp, err := cl.Coord.WearMoves(ctx, &coordpb.WearMovesRequest{Limit: 10})
	if err != nil || len(resp.Moves) != 1 {
		t.Fatalf("WearMoves: %v, %v", resp, err)
	}
	mv := resp.Moves[0]
	_, moveErr := c.MovePart(ctx, client.PartMove{Key: mv.Key, Version: mv.Version, Slot: mv.Slot, From: mv.From, To: mv.To, Reason: mv.Reason}, nil,
		func(s client.MoveStep) error {
			if s == client.MoveCopied {
				put()
			}
			return nil
		})
	if moveErr == nil {
		t.Fatal("the move committed over a newer version")
	}
	if _, err := cl.Coord.WearMoveDone(ctx, &coordpb.WearMoveDoneRequest{Id: mv.Id, Error: moveErr.Error()}); err != nil {
		t.Fatal(err)
	}
	check(2, "a newer version was written")
	t.Logf("the mover's error: %v", moveErr)
}
