package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/raftlog"
)

// ErrStopped is returned by calls on a node whose replica stopped.
var ErrStopped = errors.New("raftnode: stopped")

// ErrNotConfirmed is returned by ReadIndex when raft did not confirm the
// read in time (no leader, or leadership lost: raft drops such a request).
var ErrNotConfirmed = errors.New("raftnode: read index not confirmed")

// Host is what a node needs from the replica that runs it. Its methods are
// called on the node's loop goroutine and must not block long.
type Host interface {
	// Send hands messages, persisted first, to the transport (best effort).
	Send(msgs []*pb.Message)
	// Apply hands the apply worker a raft snapshot point (snapshotIndex >
	// 0: the state comes from a peer) or committed entries, in log order.
	Apply(snapshotIndex uint64, entries []*pb.Entry)
	// Proposed says raft took proposal id: term is the term this replica,
	// leading, appended it in, or 0 when raft forwarded it to the leader
	// (its term is then unknown here).
	Proposed(id, term uint64)
	// Dropped says raft refused proposal id (no leader): err says why.
	Dropped(id uint64, err error)
	// Barrier returns the encoded command that lifts this replica's vote
	// floor once applied here (see raftlog.Log.VoteFloor), or nil.
	Barrier() []byte
	// HandedOff counts a leadership transfer the node started.
	HandedOff()
}

// Config says what a node drives.
type Config struct {
	// ID is the replica's raft ID; Log its raft log (raft's Storage).
	ID  uint64
	Log *raftlog.Log
	// ElectionTicks and HeartbeatTicks are raft's timeouts in ticks of
	// TickInterval on Clock.
	ElectionTicks, HeartbeatTicks int
	TickInterval                  time.Duration
	Clock                         base.Clock
	Host                          Host
	// Stop is closed when the replica stops: every call and the loop end.
	Stop <-chan struct{}
	// MaxBatch bounds what one Ready gathers (see takeQueued): 0 is
	// MaxBatch, 1 one Ready per proposal or message.
	MaxBatch int
}

type proposal struct {
	id   uint64
	data []byte
}

type readRequest struct {
	ctx []byte
	ch  chan uint64
}

// readGroup is the read index requests answered by one raft read index:
// the first one's context and every request queued with it (see
// takeReads).
type readGroup struct {
	chans []chan uint64
}

// Node is one replica's member of its shard's raft group: a RawNode driven
// by one loop goroutine (Run) that persists each Ready to the raft log
// (before it sends, but on the leader; see sendsBeforeSave), and hands
// committed entries to the host.
type Node struct {
	cfg Config

	rn         *raft.RawNode // owned by the loop
	floorTicks int           // ticks skipped under a vote floor; owned by the loop
	// stepDownPending: the log lost entries this replica may have
	// acknowledged; owned by the loop (see stepDownOnContact).
	stepDownPending bool

	propc    chan proposal
	recvc    chan *pb.Message
	readc    chan readRequest
	handoffc chan struct{} // see TransferLeadership

	up     atomic.Bool   // set by Open: raft runs (the log is whole)
	leader atomic.Uint64 // raft ID of the leader, 0 if unknown

	// hardTerm and hardVote are the term and vote of the last HardState
	// persisted (zero before the first); owned by the loop.
	hardTerm, hardVote uint64

	mu    sync.Mutex
	reads map[string]*readGroup // read index requests by the context raft carries
}

// New returns a node that takes proposals and messages at once (they wait
// in bounded queues) and runs once Open and Run are called.
func New(cfg Config) *Node {
	return &Node{
		cfg:      cfg,
		propc:    make(chan proposal, 256),
		recvc:    make(chan *pb.Message, 4096),
		readc:    make(chan readRequest, 256),
		handoffc: make(chan struct{}, 1),
		reads:    map[string]*readGroup{},
	}
}

// Open creates the RawNode on the sealed log, with entries up to applied
// already in the state machine. Run drives it.
func (n *Node) Open(applied uint64) error {
	// The log writes a commit index that moved alone lazily, so the state
	// machine may hold entries past the commit index the log kept.
	if err := n.cfg.Log.CommitAtLeast(applied); err != nil {
		return fmt.Errorf("raftnode: r%d: %w", n.cfg.ID, err)
	}
	rn, err := n.newRawNode(applied)
	if err != nil {
		return err
	}
	n.rn = rn
	// A log that lost entries this replica may have acknowledged carries a
	// vote floor. The current leader may still believe this replica holds
	// them (raft never lowers a follower's match index), so at the first
	// contact the replica moves past the leader's term: the leader steps
	// down, and the next one probes this replica's log afresh.
	_, _, n.stepDownPending = n.cfg.Log.VoteFloor()
	n.up.Store(true)
	return nil
}

func (n *Node) newRawNode(applied uint64) (*raft.RawNode, error) {
	rn, err := raft.NewRawNode(&raft.Config{
		ID:              n.cfg.ID,
		ElectionTick:    n.cfg.ElectionTicks,
		HeartbeatTick:   n.cfg.HeartbeatTicks,
		Storage:         n.cfg.Log,
		Applied:         applied,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		CheckQuorum:     true,
		PreVote:         true,
		Logger:          &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)},
	})
	if err != nil {
		return nil, fmt.Errorf("raftnode: raft node r%d: %w", n.cfg.ID, err)
	}
	return rn, nil
}

// Up reports whether raft runs (Open succeeded).
func (n *Node) Up() bool { return n.up.Load() }

// Leader returns the raft ID of the leader this node knows of, or 0.
func (n *Node) Leader() uint64 { return n.leader.Load() }

// Step hands a received raft message to the loop; a full queue drops it
// (raft tolerates lost messages).
func (n *Node) Step(m *pb.Message) {
	select {
	case n.recvc <- m:
	default:
	}
}

// Propose queues an encoded command as proposal id. A proposal raft
// refuses comes back through Host.Dropped; one it takes is applied through
// Host.Apply like any entry.
func (n *Node) Propose(ctx context.Context, id uint64, data []byte) error {
	select {
	case n.propc <- proposal{id: id, data: data}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.cfg.Stop:
		return ErrStopped
	}
}

// TransferLeadership asks the loop to hand this replica's leadership to
// its most caught-up follower (see transferLeadership); a request already
// queued absorbs it.
func (n *Node) TransferLeadership() {
	select {
	case n.handoffc <- struct{}{}:
	default:
	}
}

// ReadIndex runs raft's read index protocol under the request context id
// and returns the index a linearizable read must wait for. A request raft
// drops never answers: the wait is bounded by timeout (ErrNotConfirmed).
func (n *Node) ReadIndex(ctx context.Context, id uint64, timeout time.Duration) (uint64, error) {
	reqCtx := make([]byte, 8)
	for i := range reqCtx {
		reqCtx[i] = byte(id >> (8 * i))
	}
	ch := make(chan uint64, 1)
	select {
	case n.readc <- readRequest{ctx: reqCtx, ch: ch}:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.cfg.Stop:
		return 0, ErrStopped
	}
	defer n.forgetRead(ch)
	expired := base.After(n.cfg.Clock, timeout)
	select {
	case idx := <-ch:
		return idx, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-expired:
		return 0, ErrNotConfirmed
	case <-n.cfg.Stop:
		return 0, ErrStopped
	}
}

// Run is the loop: ticks (none while a vote floor holds and the replica
// does not lead), proposals, messages, leadership transfers and read
// index requests, each followed by the Ready it produced. It returns when
// Stop closes, or with the error of a Ready the raft log could not persist
// (nothing may follow a Ready the log could not persist: the replica is out).
func (n *Node) Run() error {
	tick, stopTick := base.NewTicker(n.cfg.Clock, n.cfg.TickInterval)
	defer stopTick()
	for {
		select {
		case <-tick:
			floorTerm, floorIndex, floored := n.cfg.Log.VoteFloor()
			if floored && n.leader.Load() != n.cfg.ID {
				// A replica whose log lost entries it may have acknowledged
				// does not campaign until the floor is lifted (see
				// raftlog.Log.VoteFloor): it lets a replica that holds them
				// lead, and asks that leader for a barrier entry.
				n.maybeProposeBarrier(floorTerm, floorIndex)
				break
			}
			n.rn.Tick()
		case p := <-n.propc:
			n.propose(p)
			n.takeQueued()
		case m := <-n.recvc:
			n.step(m)
			n.takeQueued()
		case <-n.handoffc:
			// Proposals queued before the hand-off was asked for go
			// into the log first (a leader that is handing off drops
			// them).
			n.takeQueued()
			n.transferLeadership()
		case req := <-n.readc:
			n.takeReads(req)
		case <-n.cfg.Stop:
			return nil
		}
		if err := n.handleReady(); err != nil {
			return err
		}
	}
}

// MaxBatch is the most proposals and messages one Ready gathers (see
// takeQueued; Config.MaxBatch lowers it).
const MaxBatch = 256

// takeQueued hands raft the proposals and peers' messages already queued,
// up to Config.MaxBatch in all with the one the loop took, without waiting
// for more: group commit. The Ready that
// follows then carries all their entries, persisted by one raft log write
// (one sync of each copy) and sent in the same messages, where one Ready
// per proposal paid a log sync per entry on the leader and on every
// follower. Each proposal stays its own entry, so each is applied, and
// answered, on its own; nothing waits for a batch to fill.
func (n *Node) takeQueued() {
	batch := n.cfg.MaxBatch
	if batch <= 0 || batch > MaxBatch {
		batch = MaxBatch
	}
	for i := 1; i < batch; i++ {
		select {
		case p := <-n.propc:
			n.propose(p)
		case m := <-n.recvc:
			n.step(m)
		default:
			return
		}
	}
}

// takeReads asks raft for one read index on behalf of req and of every
// read index request already queued (up to Config.MaxBatch in all), as
// etcd's server does: each of them arrived before raft was asked, so the
// index raft confirms (at least the leader's commit index when it took the
// request) is one each may read at. One heartbeat round then serves the
// group where each request took its own.
func (n *Node) takeReads(req readRequest) {
	batch := n.cfg.MaxBatch
	if batch <= 0 || batch > MaxBatch {
		batch = MaxBatch
	}
	g := &readGroup{chans: []chan uint64{req.ch}}
take:
	for len(g.chans) < batch {
		select {
		case more := <-n.readc:
			g.chans = append(g.chans, more.ch)
		default:
			break take
		}
	}
	n.rn.ReadIndex(req.ctx)
	n.mu.Lock()
	n.reads[string(req.ctx)] = g
	n.mu.Unlock()
}

// forgetRead drops ch from the read index request it waits on (its caller
// gave up, or was answered).
func (n *Node) forgetRead(ch chan uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for key, g := range n.reads {
		for i, c := range g.chans {
			if c == ch {
				g.chans = append(g.chans[:i], g.chans[i+1:]...)
				if len(g.chans) == 0 {
					delete(n.reads, key)
				}
				return
			}
		}
	}
}

func (n *Node) propose(p proposal) {
	if err := n.rn.Propose(p.data); err != nil {
		n.cfg.Host.Dropped(p.id, err)
		return
	}
	var term uint64
	if st := n.rn.BasicStatus(); st.RaftState == raft.StateLeader {
		term = st.GetTerm() // a leader appends a proposal in its own term
	}
	n.cfg.Host.Proposed(p.id, term)
}

func (n *Node) step(m *pb.Message) {
	if n.refuseVote(m) || n.stepDownOnContact(m) {
		return
	}
	n.clampCommit(m)
	_ = n.rn.Step(m)
}

func (n *Node) handleReady() error {
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		if rd.SoftState != nil {
			n.leader.Store(rd.SoftState.Lead)
		}
		sendFirst := n.sendsBeforeSave(rd)
		if sendFirst {
			n.cfg.Host.Send(rd.Messages)
		}
		if err := n.cfg.Log.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
			return err
		}
		if hs := rd.HardState; hs != nil && !raft.IsEmptyHardState(hs) {
			n.hardTerm, n.hardVote = hs.GetTerm(), hs.GetVote()
		}
		if !sendFirst {
			n.cfg.Host.Send(rd.Messages)
		}
		if rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot) {
			n.cfg.Host.Apply(rd.Snapshot.GetMetadata().GetIndex(), nil)
		}
		if len(rd.CommittedEntries) > 0 {
			n.cfg.Host.Apply(0, rd.CommittedEntries)
		}
		if len(rd.ReadStates) > 0 {
			n.mu.Lock()
			for _, rs := range rd.ReadStates {
				if g, ok := n.reads[string(rs.RequestCtx)]; ok {
					for _, ch := range g.chans {
						ch <- rs.Index
					}
					delete(n.reads, string(rs.RequestCtx))
				}
			}
			n.mu.Unlock()
		}
		n.rn.Advance(rd)
		// A snapshot message carries only the snapshot point; the follower
		// fetches the state itself, so the send is as good as done.
		for _, m := range rd.Messages {
			if m.GetType() == pb.MessageType_MsgSnap {
				n.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
			}
		}
	}
	return nil
}

// sendsBeforeSave reports whether rd's messages may go out while rd is
// persisted rather than after: on the leader, when rd changes neither
// term nor vote and carries no snapshot (Raft thesis section 10.2.1; etcd's
// server does the same). The leader's log write then overlaps the
// followers' instead of preceding it, one sync instead of two on a
// proposal's path. Safe because the loop is serial: the followers' replies
// are stepped only after this Ready is persisted and Advance'd, so an
// entry commits, and anything is applied or acknowledged, only once the
// leader's own copy is durable too; what the leader sends are appends,
// heartbeats and read index replies, none of which promises anything of
// its own log. MaxBatch 1 keeps the loop as it was (persist, then send).
func (n *Node) sendsBeforeSave(rd raft.Ready) bool {
	if n.cfg.MaxBatch == 1 || len(rd.Messages) == 0 || (rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot)) {
		return false
	}
	if hs := rd.HardState; hs != nil && !raft.IsEmptyHardState(hs) && (hs.GetTerm() != n.hardTerm || hs.GetVote() != n.hardVote) {
		return false
	}
	return n.rn.BasicStatus().RaftState == raft.StateLeader
}

// transferLeadership starts a leadership transfer to the follower whose
// log is the most complete, unless one is under way or this replica no
// longer leads. Raft transfers only to a follower that caught up (it sends
// MsgTimeoutNow then), and falls back to this leader after an election
// timeout if the follower does not take over; proposals made meanwhile are
// dropped and their clients retry.
func (n *Node) transferLeadership() {
	st := n.rn.Status()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 {
		return
	}
	var to, best uint64
	for id, pr := range st.Progress {
		if id == n.cfg.ID || pr.IsLearner {
			continue
		}
		if to == 0 || pr.Match > best || (pr.Match == best && id < to) {
			to, best = id, pr.Match
		}
	}
	if to == 0 {
		return
	}
	n.rn.TransferLeader(to)
	n.cfg.Host.HandedOff()
}
