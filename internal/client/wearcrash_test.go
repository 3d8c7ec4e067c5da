package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync/atomic"
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

// offsetClock is the system clock moved on by the test: pending writes
// expire without the test waiting for them.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *offsetClock) advance(d time.Duration) { c.off.Add(int64(d)) }

var errMoverCrash = errors.New("the mover crashed here (failpoint)")

// moveCluster is a dev cluster a test restarts.
type moveCluster struct {
	t     *testing.T
	opts  devcluster.Options
	cl    *devcluster.Cluster
	c     *client.Client
	clock *offsetClock
}

func startMoveCluster(t *testing.T, nodes int) *moveCluster {
	t.Helper()
	m := &moveCluster{t: t, clock: &offsetClock{}}
	m.opts = devcluster.Options{Dir: t.TempDir(), Nodes: nodes, UnsafeNoFsync: true, MaxObjectBytes: 32 * base.MiB, Clock: m.clock}
	m.start()
	t.Cleanup(m.stop)
	return m
}

func (m *moveCluster) start() {
	m.t.Helper()
	ctx := context.Background()
	cl, err := devcluster.Start(ctx, m.opts)
	if err != nil {
		m.t.Fatal(err)
	}
	c, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		cl.Close()
		m.t.Fatal(err)
	}
	m.cl, m.c = cl, c
}

func (m *moveCluster) stop() {
	if m.cl == nil {
		return
	}
	m.c.Close()
	if err := m.cl.Close(); err != nil {
		m.t.Logf("close: %v", err)
	}
	m.cl, m.c = nil, nil
}

// movable picks a part of key's current version and a node outside its
// placement to move it to.
func (m *moveCluster) movable(key string, rng *rand.Rand) (*objectpb.ObjectRecord, client.PartMove) {
	m.t.Helper()
	rec, err := m.c.Stat(context.Background(), key)
	if err != nil {
		m.t.Fatal(err)
	}
	var outside []uint64
	for id := uint64(1); id <= uint64(m.opts.Nodes); id++ {
		if !slices.Contains(rec.Placement, id) {
			outside = append(outside, id)
		}
	}
	slot := uint32(rng.Intn(len(rec.Placement)))
	return rec, client.PartMove{Key: key, Version: rec.Version, Slot: slot, From: rec.Placement[slot], To: outside[rng.Intn(len(outside))]}
}

// moveCase is one move cut short, and what the object looked like before.
type moveCase struct {
	name string
	key  string
	old  *objectpb.ObjectRecord
	mv   client.PartMove
	data []byte
	// committed: the move was cut after its commit.
	committed bool
}

// check verifies that the object is readable, byte-identical, from either
// its old layout or its new one (the move committed), and returns which.
func (m *moveCase) check(t *testing.T, c *client.Client) (moved bool) {
	t.Helper()
	ctx := context.Background()
	rec, err := c.Stat(ctx, m.key)
	if err != nil {
		t.Fatalf("%s: stat: %v", m.name, err)
	}
	newPlacement := slices.Clone(m.old.Placement)
	newPlacement[m.mv.Slot] = m.mv.To
	switch {
	case rec.Version != m.old.Version:
		t.Fatalf("%s: version %d, want %d", m.name, rec.Version, m.old.Version)
	case slices.Equal(rec.Placement, m.old.Placement):
	case slices.Equal(rec.Placement, newPlacement):
		moved = true
	default:
		t.Fatalf("%s: placement %v is neither the old %v nor the new %v", m.name, rec.Placement, m.old.Placement, newPlacement)
	}
	got, err := c.Get(ctx, m.key)
	if err != nil || !bytes.Equal(got, m.data) {
		t.Fatalf("%s: read %d bytes, %v (want %d bytes)", m.name, len(got), err, len(m.data))
	}
	return moved
}

// whole verifies, with every node up, that every chunk of the layout the
// record names is in place and intact (a scrub that finds nothing to
// repair), and, once the sweeper has run past every pending deadline, that
// no node outside it keeps a chunk of the version.
func (m *moveCase) whole(t *testing.T, mc *moveCluster) {
	t.Helper()
	ctx := context.Background()
	rec, err := mc.c.Stat(ctx, m.key)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := mc.c.ScrubObject(ctx, rec, nil, nil)
	if err != nil || rep.Repaired != 0 || rep.RepairFailed != 0 {
		t.Fatalf("%s: the layout %v is not whole: %v, %v", m.name, rec.Placement, rep, err)
	}
	holders := func() map[uint64]bool {
		out := map[uint64]bool{}
		for i := 0; i < mc.opts.Nodes; i++ {
			n := mc.cl.Node(i)
			if n == nil {
				t.Fatalf("node %d is down", i+1)
			}
			counts, err := n.Chunks().ChunkCounts()
			if err != nil {
				t.Fatal(err)
			}
			for bs, k := range counts {
				if bs.Object == rec.Object && bs.Version == rec.Version && k > 0 {
					out[uint64(n.ID())] = true
				}
			}
		}
		return out
	}
	deadline := time.Now().Add(time.Minute)
	for {
		h := holders()
		stray := false
		for id := range h {
			if !slices.Contains(rec.Placement, id) {
				stray = true
			}
		}
		for _, id := range rec.Placement {
			if !h[id] {
				t.Fatalf("%s: node %d of the placement %v holds no chunk of v%d", m.name, id, rec.Placement, rec.Version)
			}
		}
		if !stray {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: chunks of v%d left outside the placement %v: %v", m.name, rec.Version, rec.Placement, h)
		}
		if err := mc.cl.Coord.Sweep(ctx); err != nil {
			t.Logf("sweep: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var moveSteps = []client.MoveStep{client.MoveBegun, client.MoveCopying, client.MoveCopied, client.MoveCommitted}

// putMoveObject writes a REP object of five chunks or an EC object of
// three rows.
func putMoveObject(t *testing.T, c *client.Client, rng *rand.Rand, key string, red objectpb.Redundancy) []byte {
	t.Helper()
	size := 5*64<<10 - 100
	if red == objectpb.Redundancy_EC {
		size = 3*256<<10 - 100
	}
	data := randomBytes(rng, size)
	if _, err := c.Put(context.Background(), key, data, red); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestWearMoveCrashAtEachStep stops a part move (client.MovePart, what
// the wear mover runs) at each of its steps, REP and EC, with three kinds
// of crash: the mover and the coordinator (the whole cluster restarted
// on its directories: only etcd's state survives), the source node killed,
// the destination node killed (the move going on without it). After each,
// the object must be readable, byte-identical, from its old layout or
// from its new one, never neither; the layout its record names must be
// whole; and once the pending deadlines pass, the sweeper must leave no
// chunk of the version outside it.
func TestWearMoveCrashAtEachStep(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	mc := startMoveCluster(t, 8)
	reds := []objectpb.Redundancy{objectpb.Redundancy_REP, objectpb.Redundancy_EC}

	// The mover and the coordinator crash: one move cut at each step,
	// then the cluster restarts once.
	var cases []*moveCase
	for _, step := range moveSteps {
		for _, red := range reds {
			k := fmt.Sprintf("coord-%v-%v", step, red)
			mcase := &moveCase{name: "coordinator crash " + k, key: k, data: putMoveObject(t, mc.c, rng, k, red), committed: step == client.MoveCommitted}
			mcase.old, mcase.mv = mc.movable(k, rng)
			calls := 0
			_, err := mc.c.MovePart(ctx, mcase.mv, nil, func(s client.MoveStep) error {
				if s != step {
					return nil
				}
				if calls++; s == client.MoveCopying && calls < 2 {
					return nil // one chunk or row copied first
				}
				return errMoverCrash
			})
			if !errors.Is(err, errMoverCrash) {
				t.Fatalf("%s: move: %v (want the failpoint's crash)", mcase.name, err)
			}
			cases = append(cases, mcase)
		}
	}
	mc.stop()
	mc.start()
	waitLive(t, mc.c, mc.opts.Nodes)
	for _, mcase := range cases {
		if moved := mcase.check(t, mc.c); moved != mcase.committed {
			t.Fatalf("%s: moved %v, want %v", mcase.name, moved, mcase.committed)
		}
	}
	mc.clock.advance(time.Hour) // past every pending replacement's deadline
	for _, mcase := range cases {
		mcase.whole(t, mc)
	}

	// A node is killed at each step and the move goes on without it.
	for _, victim := range []string{"source", "destination"} {
		for _, step := range moveSteps {
			for _, red := range reds {
				k := fmt.Sprintf("%s-%v-%v", victim, step, red)
				mcase := &moveCase{name: victim + " killed " + k, key: k, data: putMoveObject(t, mc.c, rng, k, red)}
				mcase.old, mcase.mv = mc.movable(k, rng)
				killed := -1
				calls := 0
				_, err := mc.c.MovePart(ctx, mcase.mv, nil, func(s client.MoveStep) error {
					if s != step || killed >= 0 {
						return nil
					}
					if calls++; s == client.MoveCopying && calls < 2 {
						return nil
					}
					killed = int(mcase.mv.From) - 1
					if victim == "destination" {
						killed = int(mcase.mv.To) - 1
					}
					return mc.cl.KillNode(killed)
				})
				t.Logf("%s: move: %v", mcase.name, err)
				if killed < 0 {
					t.Fatalf("%s: the failpoint never ran", mcase.name)
				}
				// Readable with the node still down, then with it back.
				mcase.check(t, mc.c)
				if err := mc.cl.StartNode(ctx, killed); err != nil {
					t.Fatal(err)
				}
				waitLive(t, mc.c, mc.opts.Nodes)
				mcase.check(t, mc.c)
				mc.clock.advance(time.Hour)
				mcase.whole(t, mc)
			}
		}
	}
}

// TestWearMoveBackBeforeSweep moves a part away and straight back: the
// node it left still holds the version's garbage, which the sweeper
// deletes whole, so the move back is refused until the sweeper has run
// (before, it was accepted and the sweep deleted the part it had just
// re-created there).
func TestWearMoveBackBeforeSweep(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	mc := startMoveCluster(t, 7)
	for _, red := range []objectpb.Redundancy{objectpb.Redundancy_REP, objectpb.Redundancy_EC} {
		k := "back-" + red.String()
		m := &moveCase{name: k, key: k, data: putMoveObject(t, mc.c, rng, k, red)}
		m.old, m.mv = mc.movable(k, rng)
		if _, err := mc.c.MovePart(ctx, m.mv, nil, nil); err != nil {
			t.Fatal(err)
		}
		back := client.PartMove{Key: k, Version: m.old.Version, Slot: m.mv.Slot, From: m.mv.To, To: m.mv.From}
		_, err := mc.c.MovePart(ctx, back, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "still holds garbage") {
			t.Fatalf("move back onto the node holding the version's garbage: %v (want unavailable)", err)
		}
		m.check(t, mc.c)
		m.whole(t, mc) // sweeps the garbage
		if _, err := mc.c.MovePart(ctx, back, nil, nil); err != nil {
			t.Fatalf("move back after the sweep: %v", err)
		}
		m.mv = back
		m.old.Placement[m.mv.Slot] = m.mv.From
		if !m.check(t, mc.c) {
			t.Fatalf("%s: the move back did not commit", k)
		}
		m.whole(t, mc)
	}
}

// TestWearConversionNodeKilled kills a node of the new layout while a put
// converts an object from EC to REP (ARPT's late-REP taking effect on the
// object's next write): the put either fails, and the object reads back
// as its last committed version in its old layout, or it commits (a
// writer that cannot reach a node retries elsewhere), and the object reads
// back as the new version; after the node restarts, the layout the record
// names is whole. The kill lands at a random point of the put.
func TestWearConversionNodeKilled(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	opts := devcluster.Options{Wear: coord.WearConfig{
		Policy: "chameleon", Epoch: time.Hour, // epochs scripted below
		Options: wear.Options{SigmaHCDSRatio: 50, HotFraction: 0.5},
	}}
	cl, c := startCluster(t, 8, opts)
	const objects = 8
	want := map[string][]byte{}
	for i := 0; i < objects; i++ {
		k := fmt.Sprintf("conv-%d", i)
		for w := 0; w < 6; w++ { // hot: written every epoch
			want[k] = randomBytes(rng, 16*64<<10)
			if _, err := c.Put(ctx, k, want[k], objectpb.Redundancy_EC); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Skewed wear: ARPT marks the hot objects late-REP, their REP copies
	// bound for the least worn nodes.
	erases := []float64{3000, 3000, 3000, 3000, 100, 100, 100, 100}
	if err := cl.Coord.WearEpoch(ctx, wearStats(erases...)); err != nil {
		t.Fatal(err)
	}
	converted := 0
	for i := 0; i < objects; i++ {
		k := fmt.Sprintf("conv-%d", i)
		e, ok := cl.Coord.WearEntry(k)
		if !ok || e.State != wear.StateLateREP {
			continue
		}
		victim := int(e.Dst.Node(rng.Intn(e.Dst.Width()))) - 1
		next := randomBytes(rng, 16*64<<10)
		done := make(chan error, 1)
		go func() {
			_, err := c.Put(ctx, k, next, objectpb.Redundancy_EC)
			done <- err
		}()
		time.Sleep(time.Duration(rng.Intn(30)) * time.Millisecond)
		if err := cl.KillNode(victim); err != nil {
			t.Fatal(err)
		}
		err := <-done
		t.Logf("%s: put with node %d killed: %v", k, victim+1, err)
		if err == nil {
			want[k] = next
			converted++
		}
		// Readable with the node down, then with it back, and whole.
		got, gerr := c.Get(ctx, k)
		if gerr != nil || !bytes.Equal(got, want[k]) {
			t.Fatalf("%s with node %d down: %d bytes, %v (want the last committed version, %d bytes)", k, victim+1, len(got), gerr, len(want[k]))
		}
		if err := cl.StartNode(ctx, victim); err != nil {
			t.Fatal(err)
		}
		waitLive(t, c, 8)
		rec, err := c.Stat(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := c.ScrubObject(ctx, rec, nil, nil)
		if err != nil || rep.RepairFailed != 0 {
			t.Fatalf("%s: layout %v %v: %v, %v", k, rec.Redundancy, rec.Placement, rep, err)
		}
		t.Logf("%s: now %v on %v (%d chunks re-created after the restart)", k, rec.Redundancy, rec.Placement, rep.Repaired)
	}
	if converted == 0 {
		t.Fatalf("no conversion committed (of %d objects none was late-REP, or every put failed)", objects)
	}
	checkObjects(t, c, want)
}

// TestConcurrentReplacementsOfOneVersion begins a replacement of every
// part of an EC version onto the same node at once: exactly one may have
// it (two parts of one version on one node would go together when the
// sweeper deletes either), the others are refused.
func TestConcurrentReplacementsOfOneVersion(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	mc := startMoveCluster(t, 8)
	for round := 0; round < 5; round++ {
		k := fmt.Sprintf("race-%d", round)
		putMoveObject(t, mc.c, rng, k, objectpb.Redundancy_EC)
		rec, _ := mc.movable(k, rng)
		var to uint64
		for id := uint64(1); id <= 8 && to == 0; id++ {
			if !slices.Contains(rec.Placement, id) {
				to = id
			}
		}
		errs := make(chan error, len(rec.Placement))
		for slot := range rec.Placement {
			go func() {
				_, err := mc.cl.Coord.BeginReplace(ctx, &coordpb.BeginReplaceRequest{
					Key: k, Version: rec.Version, Slot: uint32(slot), From: rec.Placement[slot], To: to,
				})
				errs <- err
			}()
		}
		won := 0
		for range rec.Placement {
			if err := <-errs; err == nil {
				won++
			} else if !strings.Contains(err.Error(), "pending part") && !strings.Contains(err.Error(), "changed meanwhile") {
				t.Fatalf("%s: refused for another reason: %v", k, err)
			}
		}
		if won != 1 {
			t.Fatalf("%s: %d replacements onto node %d began, want exactly 1", k, won, to)
		}
	}
}
