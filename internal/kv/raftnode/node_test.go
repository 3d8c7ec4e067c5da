package raftnode

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/raftlog"
)

// group is a three-member raft group of Nodes on one ManualClock, their
// messages delivered in memory.
type group struct {
	t     *testing.T
	clock *base.ManualClock
	nodes map[uint64]*Node
	hosts map[uint64]*host
	stop  chan struct{}
	wg    sync.WaitGroup
}

// host records what a node hands its replica.
type host struct {
	g        *group
	id       uint64
	mu       sync.Mutex
	applied  []string // data of the applied normal entries
	dropped  int
	handoffs int
	// readCtxs are the read index contexts of the heartbeats it sent.
	readCtxs map[string]bool
	// lastIndex is the index of the last entry applied.
	lastIndex uint64
	// proposed maps a proposal ID to the term Host.Proposed reported.
	proposed map[uint64]uint64
}

func (h *host) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		if m.GetType() == pb.MessageType_MsgHeartbeat && len(m.GetContext()) > 0 {
			h.mu.Lock()
			if h.readCtxs == nil {
				h.readCtxs = map[string]bool{}
			}
			h.readCtxs[string(m.GetContext())] = true
			h.mu.Unlock()
		}
		if to, ok := h.g.nodes[m.GetTo()]; ok {
			to.Step(proto.Clone(m).(*pb.Message))
		}
	}
}

func (h *host) Apply(_ uint64, entries []*pb.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range entries {
		h.lastIndex = max(h.lastIndex, e.GetIndex())
		if e.GetType() == pb.EntryType_EntryNormal && len(e.GetData()) > 0 {
			h.applied = append(h.applied, string(e.GetData()))
		}
	}
}

func (h *host) Proposed(id, term uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proposed == nil {
		h.proposed = map[uint64]uint64{}
	}
	h.proposed[id] = term
}
func (h *host) Dropped(uint64, error) { h.mu.Lock(); h.dropped++; h.mu.Unlock() }
func (h *host) Barrier() []byte       { return nil }
func (h *host) HandedOff()            { h.mu.Lock(); h.handoffs++; h.mu.Unlock() }

func newGroup(t *testing.T) *group { return newGroupOn(t, vfs.NewMem(), 0) }

// newGroupOn starts three nodes whose raft logs live on fs, each taking at
// most batch proposals and messages per Ready (0: the default).
func newGroupOn(t *testing.T, fs vfs.FS, batch int) *group {
	g := &group{t: t, clock: base.NewManualClock(time.Unix(1_700_000_000, 0)),
		nodes: map[uint64]*Node{}, hosts: map[uint64]*host{}, stop: make(chan struct{})}
	for id := uint64(1); id <= 3; id++ {
		lg, err := raftlog.Open(raftlog.Options{FS: fs, Dir: fmt.Sprintf("r%d", id)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lg.Close() })
		if err := lg.Bootstrap([]uint64{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		h := &host{g: g, id: id}
		g.hosts[id] = h
		g.nodes[id] = New(Config{ID: id, Log: lg, ElectionTicks: 10, HeartbeatTicks: 1,
			TickInterval: 10 * time.Millisecond, Clock: g.clock, Host: h, Stop: g.stop, MaxBatch: batch})
	}
	g.start(t)
	return g
}

// until advances the clock one tick at a time until cond holds (a
// generous wall-clock deadline bounds the wait, never the result).
func (g *group) until(what string, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			g.t.Fatalf("no %s", what)
		}
		g.clock.Advance(10 * time.Millisecond)
		time.Sleep(time.Millisecond) // lets the loops take the tick
	}
}

func (g *group) leader() uint64 {
	var lead uint64
	for id, n := range g.nodes {
		if n.Leader() == id {
			lead = id
		}
	}
	return lead
}

// TestGroupOnManualClock runs a group whose ticks come only from a
// ManualClock: no leader while the clock stands still, then an election,
// a proposal applied on every member, a read index on a follower and a
// leadership transfer.
func TestGroupOnManualClock(t *testing.T) {
	g := newGroup(t)
	time.Sleep(50 * time.Millisecond) // wall time passes, the clock does not
	if lead := g.leader(); lead != 0 {
		t.Fatalf("r%d leads without a tick", lead)
	}
	g.until("leader", func() bool { return g.leader() != 0 })
	lead := g.leader()
	ctx := context.Background()
	if err := g.nodes[lead].Propose(ctx, 7, []byte("x=1")); err != nil {
		t.Fatal(err)
	}
	// The leader reports the term it appended the proposal in (the
	// replica answers proposals a later leader overwrote by it); a
	// follower, which forwards, reports 0.
	follower := lead%3 + 1
	proposedTerm := func(id, member uint64) (uint64, bool) {
		h := g.hosts[member]
		h.mu.Lock()
		defer h.mu.Unlock()
		term, ok := h.proposed[id]
		return term, ok
	}
	dropped := func(member uint64) int {
		h := g.hosts[member]
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.dropped
	}
	// A follower drops a proposal until it knows the leader (Host.Dropped):
	// propose again until raft takes it.
	g.until("the follower knows the leader", func() bool { return g.nodes[follower].Leader() == lead })
	drops := dropped(follower)
	if err := g.nodes[follower].Propose(ctx, 8, []byte("x=2")); err != nil {
		t.Fatal(err)
	}
	g.until("proposals taken", func() bool {
		if d := dropped(follower); d > drops {
			drops = d
			if err := g.nodes[follower].Propose(ctx, 8, []byte("x=2")); err != nil {
				t.Fatal(err)
			}
		}
		_, a := proposedTerm(7, lead)
		_, b := proposedTerm(8, follower)
		return a && b
	})
	hs, _, err := g.nodes[lead].cfg.Log.InitialState() // the durable term: the leader's
	if err != nil {
		t.Fatal(err)
	}
	if term, _ := proposedTerm(7, lead); term != hs.GetTerm() || term == 0 {
		t.Fatalf("leader reported term %d for its proposal, its term is %d", term, hs.GetTerm())
	}
	if term, _ := proposedTerm(8, follower); term != 0 {
		t.Fatalf("follower reported term %d for a proposal it forwarded, want 0", term)
	}
	g.until("entry applied everywhere", func() bool {
		for _, h := range g.hosts {
			h.mu.Lock()
			n := len(h.applied)
			h.mu.Unlock()
			if n == 0 {
				return false
			}
		}
		return true
	})
	type result struct {
		idx uint64
		err error
	}
	done := make(chan result, 1)
	go func() {
		idx, err := g.nodes[follower].ReadIndex(ctx, 99, time.Second)
		done <- result{idx, err}
	}()
	var res result
	g.until("read index", func() bool {
		select {
		case res = <-done:
			return true
		default:
			return false
		}
	})
	if res.err != nil || res.idx < 2 {
		t.Fatalf("read index on r%d: %d, %v", follower, res.idx, res.err)
	}
	g.nodes[lead].TransferLeadership()
	g.until("new leader", func() bool { l := g.leader(); return l != 0 && l != lead })
	h := g.hosts[lead]
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.handoffs != 1 {
		t.Fatalf("%d handoffs counted", h.handoffs)
	}
}

// TestVoteFloor checks what a member under a vote floor refuses: votes for
// a candidate whose log ends before the floor, and a commit index past its
// own log in a heartbeat.
func TestVoteFloor(t *testing.T) {
	lg, err := raftlog.Open(raftlog.Options{FS: vfs.NewMem(), Dir: "r"})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	if err := lg.Bootstrap([]uint64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	n := New(Config{ID: 1, Log: lg, ElectionTicks: 10, HeartbeatTicks: 1, TickInterval: time.Millisecond,
		Clock: base.NewManualClock(time.Unix(0, 0)), Stop: make(chan struct{})})
	vote := func(logTerm, index uint64) *pb.Message {
		return &pb.Message{Type: pb.MessageType_MsgVote.Enum(), LogTerm: proto.Uint64(logTerm), Index: proto.Uint64(index)}
	}
	if n.refuseVote(vote(1, 1)) {
		t.Fatal("a vote refused without a floor")
	}
	if err := lg.SetVoteFloor(3, 10); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		logTerm, index uint64
		refuse         bool
	}{{2, 50, true}, {3, 9, true}, {3, 10, false}, {4, 1, false}} {
		if got := n.refuseVote(vote(c.logTerm, c.index)); got != c.refuse {
			t.Errorf("candidate at (%d, %d) under floor (3, 10): refused %v, want %v", c.logTerm, c.index, got, c.refuse)
		}
	}
	if n.refuseVote(&pb.Message{Type: pb.MessageType_MsgApp.Enum()}) {
		t.Error("an append refused as a vote")
	}
	hb := &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), Commit: proto.Uint64(40)}
	n.clampCommit(hb)
	if last, _ := lg.LastIndex(); hb.GetCommit() != last {
		t.Errorf("heartbeat commit %d, want the log's last index %d", hb.GetCommit(), last)
	}
}

// start opens every node of g and runs it until the test ends.
func (g *group) start(t *testing.T) {
	t.Helper()
	for _, n := range g.nodes {
		if err := n.Open(1); err != nil {
			t.Fatal(err)
		}
		g.wg.Add(1)
		go func(n *Node) {
			defer g.wg.Done()
			if err := n.Run(); err != nil {
				t.Errorf("run: %v", err)
			}
		}(n)
	}
	t.Cleanup(func() { close(g.stop); g.wg.Wait() })
}
