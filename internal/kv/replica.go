package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/patch"
	"github.com/flashmend/flashmend/internal/kv/raftnode"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/raftlog"
)

// ReplicaStats counts what a replica detected and repaired.
type ReplicaStats struct {
	CorruptionsDetected uint64
	// TransientErrors counts corruption reports whose block verified on a
	// re-read (a transient flip): not repaired.
	TransientErrors    uint64
	PatchesApplied     uint64
	PatchesSent        uint64
	PatchBytesReceived uint64
	// PatchesSkipped counts patch entries for this replica that found no
	// repair waiting for them (replayed after a restart): the damage, if
	// still there, is found again.
	PatchesSkipped uint64
	Rebuilds       uint64
	RebuildBytes   uint64
	// RebuildReasons counts rebuilds by why they happened.
	RebuildReasons  map[string]uint64
	TxnsInvalidated uint64
	// ApplyFailures counts committed entries this replica could not apply
	// (a read of the entry's conditions, or a patch ingest, failed after
	// its re-reads): each is repaired by a rebuild, never skipped.
	ApplyFailures uint64
	// LogEntriesFilled counts raft log entries repaired from peers at open.
	LogEntriesFilled uint64
	// BlocksMerged counts damaged data blocks put back together from the
	// replicas' copies (block merge: a range no peer could send).
	BlocksMerged uint64
	// RemaindersLost counts ranges around a patch that its excise could
	// not keep (a damaged table cut where Pebble seeks in the damage):
	// patched in turn, not a rebuild.
	RemaindersLost uint64
	// OwnRowsRead and OwnBytesRead count the rows (and their key and value
	// bytes) patches read from this replica itself to carry them through
	// an excise wider than what was lost (a damaged table that lists its
	// keys is cut out whole); OwnReadFailures counts patch pieces whose
	// read of those rows met damage no one had reported yet: the piece is
	// requested again later.
	OwnRowsRead, OwnBytesRead, OwnReadFailures uint64
	// PatchWaitTimeouts counts patch entries of this replica at which its
	// apply worker waited the whole PatchTimeout for peers' pieces (not
	// every range covered, not every peer answered): every later entry of
	// the shard waited on this replica with it.
	PatchWaitTimeouts uint64
	// LeaderHandoffs counts leaderships this replica gave away because it
	// was about to wait for a patch of its own (see handOffLeadership).
	LeaderHandoffs uint64
	// LastRepair is detection-to-patch-applied time of the last repair.
	LastRepair time.Duration
	// LastDetection says what happened to the last corruption report:
	// "transient", "pending", "patched", "rebuilt", "already repaired".
	LastDetection string
	// ReportsHandled counts the corruption reports (reads', compactions'
	// and Scrub's) the replica has finished handling, whatever the
	// outcome: a caller of Scrub waits for its reports with it.
	ReportsHandled uint64
}

func (s ReplicaStats) String() string {
	return fmt.Sprintf("detected=%d transient=%d patches=%d sent=%d skipped=%d patchBytes=%d ownRows=%d ownBytes=%d ownFailures=%d waitTimeouts=%d merged=%d remaindersLost=%d handoffs=%d rebuilds=%d%v rebuildBytes=%d txnsInvalidated=%d applyFailures=%d logFilled=%d last=%q",
		s.CorruptionsDetected, s.TransientErrors, s.PatchesApplied, s.PatchesSent, s.PatchesSkipped, s.PatchBytesReceived, s.OwnRowsRead, s.OwnBytesRead, s.OwnReadFailures, s.PatchWaitTimeouts, s.BlocksMerged, s.RemaindersLost, s.LeaderHandoffs, s.Rebuilds, s.RebuildReasons,
		s.RebuildBytes, s.TxnsInvalidated, s.ApplyFailures, s.LogEntriesFilled, s.LastDetection)
}

func (s ReplicaStats) clone() ReplicaStats {
	if s.RebuildReasons != nil {
		m := make(map[string]uint64, len(s.RebuildReasons))
		for k, v := range s.RebuildReasons {
			m[k] = v
		}
		s.RebuildReasons = m
	}
	return s
}

// Rebuild reasons (ReplicaStats.RebuildReasons, `kv status`).
const (
	rebuildNoPatch      = "no patch in time"
	rebuildApplyFailed  = "entry could not be applied"
	rebuildSnapshot     = "raft snapshot (log compacted past this replica)"
	rebuildBehindLog    = "state machine behind the raft log"
	rebuildDiverged     = "state machine diverged from its digest"
	rebuildCrash        = "crash baseline"
	rebuildEngineFailed = "engine could not open"
	rebuildExcise       = "excise check failed"
	rebuildAppliedLost  = "applied record unreadable"
)

// Transport is what a replica needs from the node that hosts it: raft
// messages and patches out to the replicas of its shard on other nodes, and
// a peer's state or raft entries in (internal/kv/kvserver implements it over
// gRPC). Sends are best effort (raft retransmits; a patch that does not
// arrive is requested again); fetches return the peer's error.
type Transport interface {
	SendRaft(shard base.ShardID, msgs []*pb.Message)
	SendPatch(to base.NodeID, p *kvpb.Patch)
	FetchState(ctx context.Context, from base.NodeID, shard base.ShardID) (*kvpb.FetchStateResponse, error)
	FetchEntries(ctx context.Context, from base.NodeID, req *kvpb.FetchEntriesRequest) (*kvpb.FetchEntriesResponse, error)
	FetchBlock(ctx context.Context, from base.NodeID, req *kvpb.FetchBlockRequest) (*kvpb.FetchBlockResponse, error)
}

type proposalResult struct {
	index uint64
	err   error
}

// waiter is a proposal waiting to be applied here.
type waiter struct {
	ch chan proposalResult
	// term is the term in which this replica, leading, appended the
	// entry (Host.Proposed); 0 if unknown (raft forwarded the proposal to
	// another leader, or a rebuild or snapshot may have applied it without
	// its entry passing through here).
	term uint64
}

// applyTask is one unit of the apply worker's queue: a raft snapshot to
// install (only its index matters: the state comes from a peer) or
// committed entries.
type applyTask struct {
	snapshotIndex uint64
	entries       []*pb.Entry
}

// Replica is one replica of a shard: a raft RawNode driven by one loop
// goroutine, and an apply worker that applies committed entries to the
// Pebble state machine in log order.
type Replica struct {
	env   Transport
	shard kvapi.ShardSpec
	id    base.ReplicaID
	node  base.NodeID
	opts  Options
	fs    vfs.FS
	dir   string
	log   *raftlog.Log

	// raft is the replica's member of its shard's raft group; its loop
	// runs once the raft log is whole.
	raft     *raftnode.Node
	corruptc chan corruptionReport
	smGen    atomic.Uint64 // generation of the Pebble instance (wipes)
	// stopc is closed when the replica stops: by close, or by failStop
	// (its engine failed). Every loop ends then.
	stopc    chan struct{}
	stopOnce sync.Once
	// failed is the engine failure that fail-stopped the replica (nil:
	// none); onFail tells the host (ReplicaConfig.OnFail).
	failed atomic.Pointer[error]
	onFail func(*Replica, error)
	wg     sync.WaitGroup

	// verified is set once the engine's rows were checked against the
	// applied digest (verifyEngine); reads wait for it.
	verified atomic.Bool

	nextID atomic.Uint64
	// awaitCommit is set while a patch request of this replica waits for
	// its entry to commit (noteCommitted looks for it).
	awaitCommit atomic.Bool
	queueMu     sync.Mutex
	queue       []applyTask
	queueSig    chan struct{}

	// smMu guards sm: readers hold it shared, the crash baseline replaces
	// the state machine under the exclusive lock.
	smMu     sync.RWMutex
	sm       *engine.StateMachine
	smClosed bool // set by close; requests still in flight then fail
	// readMu is held shared by a client read (Get, Scan) from its check
	// that the range is readable to the end of its read. A patch that is
	// about to excise refuses reads around its span (repair.Hold), then
	// takes readMu exclusively once: a read that passed the check before
	// the refusal must be done before the excise lands. Pebble installs an
	// excise before it publishes the ingested table's sequence number, and
	// a read that opened its iterator between the two saw the span's rows
	// neither in the cut tables nor in the patch: a row read as absent
	// (TestCorruptBlockRepairedThroughLog under the race detector, once
	// the check before an excise stopped reading the rows around it).
	readMu sync.RWMutex

	mu        sync.Mutex
	applied   uint64
	appliedCh chan struct{} // closed when applied advances
	waiters   map[uint64]*waiter
	// repair is the DIRECT repair state: ranges refused to reads (CORRUPTION)
	// until their patch is in, patch requests and the pieces received.
	repair patch.Tracker
	// absent lists keys that damaged tables of this replica provably do not
	// hold (engine/tableid.go): repair reads take them with the table left
	// out.
	absent []engine.AbsentPoint
	// holes lists damaged tables of this replica whose every key is known
	// (engine/tablekeys.go), by file: reads of other keys leave them out
	// until no request for the file is pending.
	holes []hole
	// aroundP is absent and holes as one immutable engine.Around
	// (publishAroundLocked), read without r.mu by every read.
	aroundP     atomic.Pointer[engine.Around]
	detectedAt  time.Time
	patchSig    chan struct{} // closed and replaced when a patch adds pieces
	down        bool          // crash baseline: no reads until rebuilt
	logFailed   error         // the raft log failed to persist; the replica is out
	needRebuild bool
	// rebuildTarget is the least applied index a rebuild must reach (a raft
	// snapshot's index).
	rebuildTarget uint64
	rebuildReason string
	lastCompact   uint64 // applied index of the last log compaction
	compacting    bool   // a flush-then-compact is running
	appliedBytes  uint64 // entry bytes applied since the last compaction
	// appliedTerm is the term of the newest entry applyEntry applied;
	// owned by the apply worker (see dropSuperseded).
	appliedTerm uint64
	epoch       uint64 // snapshot epoch; a repair bumps it
	txns        map[uint64]*txn
	stats       ReplicaStats
	// logRepair describes a raft log repair in progress at open ("" when
	// the log is whole).
	logRepair string
	// barrier is the nonce of the barrier entry this replica proposed to
	// lift its vote floor (0: none outstanding).
	barrier uint64
}

// OpenReplica opens (or creates) a replica in cfg.Dir and starts its loops.
func OpenReplica(cfg ReplicaConfig) (*Replica, error) {
	if cfg.Transport == nil || cfg.FS == nil || cfg.Dir == "" || cfg.ID == 0 || cfg.Node == 0 {
		return nil, base.AssertionFailedf("kv: replica config %+v incomplete", cfg)
	}
	fs, dir, opts, shard := cfg.FS, cfg.Dir, cfg.Options, cfg.Shard
	r := &Replica{
		env: cfg.Transport, shard: shard, id: cfg.ID, node: cfg.Node, opts: opts, fs: fs, dir: dir, onFail: cfg.OnFail,
		corruptc:  make(chan corruptionReport, 64),
		stopc:     make(chan struct{}),
		queueSig:  make(chan struct{}, 1),
		appliedCh: make(chan struct{}),
		waiters:   map[uint64]*waiter{},
		patchSig:  make(chan struct{}),
		txns:      map[uint64]*txn{},
	}
	// NB: proposal, read and patch ids must not repeat across restarts (a
	// replayed entry must not answer a new waiter), hence a time base
	// rather than a seeded generator: a clock injected in Options must move
	// forward between a replica's runs.
	r.nextID.Store(uint64(opts.Clock.Now().UnixNano()) << 8)
	lg, err := raftlog.Open(raftlog.Options{FS: fs, Dir: fs.PathJoin(dir, "raft")})
	if err != nil {
		return nil, err
	}
	r.log = lg
	r.raft = raftnode.New(raftnode.Config{ID: uint64(cfg.ID), Log: lg, ElectionTicks: opts.ElectionTicks, HeartbeatTicks: opts.HeartbeatTicks,
		TickInterval: opts.TickInterval, Clock: opts.Clock, Host: (*raftHost)(r), Stop: r.stopc, MaxBatch: opts.ProposalBatch})
	if cfg.Replaced {
		// Before anything else is created: a fresh replica whose engine
		// then fails to open leaves a directory that a restart opens as it
		// is, and it must still vote for no one.
		if err := lg.SetVoteFloor(math.MaxUint64, math.MaxUint64); err != nil {
			lg.Close()
			return nil, err
		}
	}
	sm, err := engine.Open(fs, fs.PathJoin(dir, "pebble"), opts.CacheBytes, opts.MemTableBytes, r.listener(0), r.failStop)
	if err != nil {
		lg.Close()
		return nil, err
	}
	r.sm = sm
	st := sm.Applied()
	if lg.IsEmpty() && st.Index == 0 {
		var voters []uint64
		for rid := range shard.Replicas {
			voters = append(voters, uint64(rid))
		}
		if err := lg.Bootstrap(voters); err != nil {
			sm.Close()
			lg.Close()
			return nil, err
		}
	}
	r.applied = st.Index
	r.lastCompact = st.Index
	if sm.AppliedLost() != nil {
		r.needRebuild, r.rebuildReason = true, rebuildAppliedLost
	}
	if !lg.Sealed() {
		// The log lost entries in both copies. What the engine already
		// holds needs no repair; the rest comes from the peers before
		// raft sees the log.
		first, _ := lg.FirstIndex()
		at, term := st.Index, st.Term
		if at < first-1 {
			// The engine is behind the log's start: its state is fetched
			// from a peer (below); the log needs no entries before its
			// start.
			at, term = first-1, 0
		}
		if err := lg.DiscardApplied(at, term); err != nil {
			sm.Close()
			lg.Close()
			return nil, err
		}
	}
	r.wg.Add(2)
	go r.applyLoop()
	go r.detectLoop()
	if lg.Sealed() {
		if err := r.startRaft(); err != nil {
			r.close(false)
			return nil, err
		}
	} else {
		r.mu.Lock()
		r.logRepair = lg.Damage().String()
		r.mu.Unlock()
		r.wg.Add(1)
		go r.repairLog()
	}
	r.wg.Add(1)
	go r.verifyEngine()
	return r, nil
}

// startRaft creates the RawNode on the sealed log and starts its loop.
func (r *Replica) startRaft() error {
	st := r.sm.Applied()
	applied := st.Index
	first, _ := r.log.FirstIndex()
	snap, _ := r.log.Snapshot()
	switch snapIndex := snap.GetMetadata().GetIndex(); {
	case snapIndex > applied && snapIndex > 1:
		// The log was reset to a snapshot from the leader but the state
		// was not fetched before the stop: fetch it before applying
		// anything.
		r.setRebuild(snapIndex, rebuildSnapshot)
	case applied < first-1 && first-1 > 1:
		// The log was compacted past what the engine holds durably (the
		// engine lost flushed state): fetch a peer's state at or past the
		// log's start. (Index 1 is the bootstrap snapshot: no state.)
		r.setRebuild(first-1, rebuildBehindLog)
	}
	applied = max(applied, snap.GetMetadata().GetIndex(), first-1)
	if err := r.raft.Open(applied); err != nil {
		return err
	}
	r.wg.Add(1)
	go r.raftLoop()
	if r.needsRebuild() {
		r.enqueue(applyTask{})
	}
	return nil
}

// setRebuild marks the replica for a rebuild to at least target, keeping
// the first reason given.
func (r *Replica) setRebuild(target uint64, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.needRebuild {
		r.rebuildReason = reason
	}
	r.needRebuild = true
	r.rebuildTarget = max(r.rebuildTarget, target)
}

func (r *Replica) needsRebuild() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.needRebuild
}

// logRepairTimeout bounds the repair of a damaged raft log from peers at
// open; what no peer supplied by then is cut (GiveUp) and replicated again
// by the leader.
func (r *Replica) logRepairTimeout() time.Duration {
	return 50 * time.Duration(r.opts.ElectionTicks) * r.opts.TickInterval
}

// repairLog repairs a raft log that lost entries in both copies from the
// peers' logs (raftnode.RepairLog), seals it, and starts raft.
func (r *Replica) repairLog() {
	defer r.wg.Done()
	err := raftnode.RepairLog(raftnode.LogRepair{
		Log: r.log, Peers: r.peers, Fetch: r.fetchEntries, FetchTimeout: time.Second,
		Timeout: r.logRepairTimeout(), Clock: r.opts.Clock, Stop: r.stopc,
		Filled: func(n int) {
			r.mu.Lock()
			r.stats.LogEntriesFilled += uint64(n)
			r.mu.Unlock()
		},
	})
	if errors.Is(err, raftnode.ErrStopped) {
		return
	}
	r.mu.Lock()
	r.logRepair = ""
	if err != nil {
		r.logFailed = err
	}
	r.mu.Unlock()
	if err != nil {
		return
	}
	if err := r.startRaft(); err != nil {
		r.mu.Lock()
		r.logFailed = err
		r.mu.Unlock()
	}
}

// peers returns the nodes of the shard's other replicas.
func (r *Replica) peers() []base.NodeID {
	var out []base.NodeID
	for rid, node := range r.shard.Replicas {
		if rid != r.id {
			out = append(out, node)
		}
	}
	return out
}

// fetchEntries asks the replica on node from for the entries [lo, hi] of
// its raft log.
func (r *Replica) fetchEntries(ctx context.Context, from base.NodeID, lo, hi uint64) ([]*pb.Entry, uint64, error) {
	resp, err := r.env.FetchEntries(ctx, from, &kvpb.FetchEntriesRequest{
		Shard: uint64(r.shard.ID), Lo: lo, Hi: hi, MaxBytes: 4 << 20})
	if err != nil {
		return nil, 0, err
	}
	ents, err := decodeEntries(resp)
	return ents, resp.Commit, err
}

// decodeEntries checks a FetchEntries response end to end and decodes it.
func decodeEntries(resp *kvpb.FetchEntriesResponse) ([]*pb.Entry, error) {
	if entriesCRC(resp.Entries) != resp.Crc {
		return nil, base.CorruptionErrorf("kv: fetched raft entries fail their checksum")
	}
	out := make([]*pb.Entry, 0, len(resp.Entries))
	for _, b := range resp.Entries {
		e := &pb.Entry{}
		if err := proto.Unmarshal(b, e); err != nil {
			return nil, base.CorruptionErrorf("kv: fetched raft entry: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

func entriesCRC(ents [][]byte) uint32 {
	var crc uint32
	var lenBuf [binary.MaxVarintLen64]byte
	for _, b := range ents {
		n := binary.PutUvarint(lenBuf[:], uint64(len(b)))
		crc = base.CRC32CUpdate(crc, lenBuf[:n])
		crc = base.CRC32CUpdate(crc, b)
	}
	return crc
}

// EntriesForPeer serves a peer's raft log repair from this replica's log
// (whole or itself under repair: its intact entries).
func (r *Replica) EntriesForPeer(req *kvpb.FetchEntriesRequest) (*kvpb.FetchEntriesResponse, error) {
	maxBytes := req.MaxBytes
	if maxBytes == 0 || maxBytes > 16<<20 {
		maxBytes = 16 << 20
	}
	ents, commit := r.log.PeerEntries(req.Lo, req.Hi, maxBytes)
	resp := &kvpb.FetchEntriesResponse{Commit: commit}
	for _, e := range ents {
		b, err := proto.Marshal(e)
		if err != nil {
			return nil, err
		}
		resp.Entries = append(resp.Entries, b)
	}
	resp.Crc = entriesCRC(resp.Entries)
	return resp, nil
}

// verifyEngine checks, after open, that the engine holds exactly the rows
// its applied digest accounts for (no MANIFEST that went back in time, no
// lost table): a full scan of a snapshot against the digest in the same
// snapshot. Reads wait for the first scan (readable). A replica that fails
// the check never serves: it is rebuilt. A scan that runs into damage
// cannot decide; the damage is reported like any read's and patched, the
// replica serves meanwhile (every read is still checked against its block
// checksums), and the scan is retried until it decides. Then the scrubber
// runs once, so damage in files no scan touched is repaired at once too.
func (r *Replica) verifyEngine() {
	defer r.wg.Done()
	deadline := r.opts.Clock.Now().Add(r.logRepairTimeout() + 10*r.opts.PatchTimeout)
	scrubbed := false
	for {
		if r.stopped() {
			return
		}
		ok, err := r.checkDigest()
		switch {
		case err == nil && ok:
			r.verified.Store(true)
			if !scrubbed {
				_, _, _ = r.Scrub()
			}
			return
		case err == nil && r.repairing():
			// Rows of ranges still under repair are missing or old (an
			// excise that lost a damaged table's remainder refuses it until
			// its own patch): the digest cannot match yet. Check again once
			// they are patched; past the deadline, cannot tell (the refused
			// ranges and the checksums guard every read). It used to rebuild
			// such a replica (TestHelixRepairAtOpen, now and then under
			// load).
			if r.opts.Clock.Now().After(deadline) {
				r.verified.Store(true)
				return
			}
		case err == nil:
			r.verified.Store(false)
			r.mu.Lock()
			r.needRebuild, r.rebuildReason = true, rebuildDiverged
			r.mu.Unlock()
			r.enqueue(applyTask{})
			return
		case !base.IsCorruption(err) || r.opts.Clock.Now().After(deadline):
			// Cannot tell (the replica closed, or damage no peer repairs):
			// the checksums still guard every read.
			r.verified.Store(true)
			return
		}
		r.verified.Store(true)
		if !scrubbed {
			scrubbed = true
			_, _, _ = r.Scrub()
		}
		select {
		case <-base.After(r.opts.Clock, 200*time.Millisecond):
		case <-r.stopc:
			return
		}
	}
}

// checkDigest compares a scan of the engine with the digest recorded in the
// same snapshot. ok is true if they agree or the digest is unknown.
// repairing reports whether some key range of the replica is under repair
// or a patch request is in flight.
func (r *Replica) repairing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.repair.Recovering()) > 0 || r.repair.Requests() > 0
}

func (r *Replica) checkDigest() (bool, error) {
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed {
		return false, r.unavailable()
	}
	snap := r.sm.DB().NewSnapshot()
	defer snap.Close()
	st, err := engine.ReadApplied(snap)
	if err != nil {
		return false, err
	}
	if st.Digest.Dirty {
		return true, nil
	}
	got, err := r.sm.ScanDigest(snap)
	if err != nil {
		return false, err
	}
	return got.Same(st.Digest), nil
}

func (r *Replica) String() string { return fmt.Sprintf("%s/%s@%s", r.shard.ID, r.id, r.node) }

// close stops the loops and closes the log and the state machine (without
// flushing the engine if crash).
func (r *Replica) close(crash bool) error {
	r.halt()
	r.wg.Wait()
	r.mu.Lock()
	for id, t := range r.txns {
		t.release()
		delete(r.txns, id)
	}
	r.mu.Unlock()
	err := r.log.Close()
	r.smMu.Lock()
	defer r.smMu.Unlock()
	if r.smClosed {
		return err // a wipe closed it and could not reopen it
	}
	closeSM := r.sm.Close
	if crash {
		closeSM = r.sm.DB().Close
	}
	if cerr := closeSM(); err == nil {
		err = cerr
	}
	r.smClosed = true
	return err
}

// halt closes stopc (once).
func (r *Replica) halt() { r.stopOnce.Do(func() { close(r.stopc) }) }

// failStop is called (once per engine, from whichever goroutine Pebble hit
// the failure on, possibly holding Pebble's mutex: it takes no lock and
// does not block) when the engine failed (engine.ErrEngineFailed): a
// MANIFEST or marker write that failed, after which Pebble's state cannot
// be trusted. The replica stops: its loops end (it takes no further part
// in raft, applies nothing, serves no read, write or peer's state), and
// its host is told (ReplicaConfig.OnFail), which closes it and starts a
// fresh replica in its place that rebuilds from the peers, or, when the
// device had no space, reopens it from its own intact files once the device
// takes writes again (kvserver's replicaFailed and reopen). The node and
// its other replicas go on.
func (r *Replica) failStop(err error) {
	if !r.failed.CompareAndSwap(nil, &err) {
		return
	}
	r.halt()
	if r.onFail != nil {
		go r.onFail(r, err)
	}
}

// Failed returns the engine failure that fail-stopped the replica, or nil.
func (r *Replica) Failed() error {
	if p := r.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// unavailable is the error of a request to a stopped replica.
func (r *Replica) unavailable() error {
	if err := r.Failed(); err != nil {
		return kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "%s fail-stopped: %v", r, err)
	}
	return kvapi.ErrReplicaUnavailable
}

// ---- raft loop -------------------------------------------------------------

// raftLoop runs the raft node until the replica stops or its raft log
// cannot persist a Ready (a write or sync the device refused: an I/O
// error, no space). Then the replica fail-stops as on an engine failure:
// it takes no further part, refuses requests saying why, and its host
// reopens it from its own files once the device takes writes again when
// the device had no space (its files are intact: two fresh replicas of one
// shard, each voting for no one until it has rebuilt, left the shard with
// no leader for good), and otherwise replaces it with a fresh replica that
// rebuilds from the peers. (It used to stop silently and stay out until
// the node restarted: two such replicas of a shard, say on two devices a
// burst of object writes filled, lost the shard's quorum for good.)
func (r *Replica) raftLoop() {
	defer r.wg.Done()
	if err := r.raft.Run(); err != nil {
		r.mu.Lock()
		r.logFailed = err
		r.mu.Unlock()
		r.failStop(fmt.Errorf("raft log: %w", err))
	}
}

// raftHost is the replica as its raft node's host (raftnode.Host).
type raftHost Replica

func (h *raftHost) Send(msgs []*pb.Message) { h.env.SendRaft(h.shard.ID, msgs) }

func (h *raftHost) Apply(snapshotIndex uint64, entries []*pb.Entry) {
	r := (*Replica)(h)
	r.noteCommitted(entries)
	r.enqueue(applyTask{snapshotIndex: snapshotIndex, entries: entries})
}

func (h *raftHost) Proposed(id, term uint64) {
	if term == 0 {
		return
	}
	h.mu.Lock()
	if w, ok := h.waiters[id]; ok {
		w.term = term
	}
	h.mu.Unlock()
}

// dropSuperseded answers the proposals that can no longer commit once an
// entry of term is applied: each was appended by this replica as leader
// in an earlier term and has not been applied. Terms only grow along the
// log, so an entry of an earlier term that committed lies before this one
// and was applied already. Raft dropped them silently when a new leader
// overwrote the old one's uncommitted tail; their clients waited for the
// whole ProposalTimeout (5 s) before they tried again.
func (r *Replica) dropSuperseded(term uint64) {
	var lost []*waiter
	r.mu.Lock()
	for id, w := range r.waiters {
		if w.term != 0 && w.term < term {
			lost = append(lost, w)
			delete(r.waiters, id)
		}
	}
	r.mu.Unlock()
	for _, w := range lost {
		w.ch <- proposalResult{err: kvapi.NewError(kvpb.ErrorDetail_NOT_LEADER,
			"%s: the proposal of term %d was overwritten by a leader of term %d before it committed (not applied)", r, w.term, term)}
	}
}

// forgetProposalTerms makes every waiting proposal's outcome unknown to
// dropSuperseded: a rebuild or snapshot moved the state past entries that
// never passed through applyEntry here, and one of them may be it.
func (r *Replica) forgetProposalTerms() {
	r.mu.Lock()
	for _, w := range r.waiters {
		w.term = 0
	}
	r.mu.Unlock()
}

func (h *raftHost) Dropped(id uint64, err error) {
	r := (*Replica)(h)
	r.finish(id, 0, kvapi.NewError(kvpb.ErrorDetail_NOT_LEADER, "proposal dropped: %v", err))
	r.proposalDropped(id)
}

// Barrier is the barrier entry that lifts this replica's vote floor when
// it applies here (applyBarrier); its nonce is kept until then.
func (h *raftHost) Barrier() []byte {
	r := (*Replica)(h)
	r.mu.Lock()
	nonce := r.barrier
	if nonce == 0 {
		nonce = r.nextID.Add(1)
		r.barrier = nonce
	}
	r.mu.Unlock()
	data, err := proto.Marshal(&kvpb.Command{Barrier: &kvpb.Barrier{Replica: uint64(r.id), Nonce: nonce}})
	if err != nil {
		return nil
	}
	return data
}

func (h *raftHost) HandedOff() {
	h.mu.Lock()
	h.stats.LeaderHandoffs++
	h.mu.Unlock()
}

// handOffLeadership asks the raft loop to give this replica's leadership to
// a follower, if it leads. A replica calls it when it is about to wait at a
// patch entry of its own: its apply worker waits there (up to PatchTimeout,
// DIRECT's Figure 5 orders the patch in the log), and a leader that does
// not apply answers no write, so every write of the shard would wait with
// it. A follower that applies keeps the shard writable meanwhile. The
// repair itself is unchanged: the patch entry is applied at the same point
// of the log on every replica.
func (r *Replica) handOffLeadership() {
	if r.opts.Mode != RepairDirect || !r.IsLeader() {
		return
	}
	r.raft.TransferLeadership()
}

func (r *Replica) enqueue(t applyTask) {
	r.queueMu.Lock()
	r.queue = append(r.queue, t)
	r.queueMu.Unlock()
	select {
	case r.queueSig <- struct{}{}:
	default:
	}
}

// Step hands a received raft message to the raft loop; a full queue drops
// it (raft tolerates lost messages).
func (r *Replica) Step(m *pb.Message) { r.raft.Step(m) }

// IsLeader reports whether this replica leads its shard.
func (r *Replica) IsLeader() bool { return r.raft.Leader() == uint64(r.id) }

// leaderNode is the node of the current leader, or 0.
func (r *Replica) leaderNode() base.NodeID {
	return r.shard.Replicas[base.ReplicaID(r.raft.Leader())]
}

// Shard returns the shard this replica belongs to.
func (r *Replica) Shard() kvapi.ShardSpec { return r.shard }

// ID returns the replica's raft ID.
func (r *Replica) ID() base.ReplicaID { return r.id }

// AppliedIndex returns the index of the last entry the replica applied.
func (r *Replica) AppliedIndex() uint64 {
	applied, _ := r.appliedIndex()
	return applied
}

// Close stops the replica: its loops end, its engine is flushed (so a
// restart replays little of the raft log) and its files closed.
func (r *Replica) Close() error { return r.close(false) }

// Crash stops the replica as a crash would: the engine is closed without a
// flush (Pebble runs without a WAL, so what is only in memtables is gone and
// the raft log must bring it back). Files stay as they are.
func (r *Replica) Crash() error { return r.close(true) }

// ---- proposals ---------------------------------------------------------------

func (r *Replica) finish(id, index uint64, err error) {
	r.mu.Lock()
	w, ok := r.waiters[id]
	delete(r.waiters, id)
	r.mu.Unlock()
	if ok {
		w.ch <- proposalResult{index: index, err: err}
	}
}

// propose submits cmd and waits until it is applied here; it returns the
// entry's log index.
func (r *Replica) propose(ctx context.Context, cmd *kvpb.Command) (uint64, error) {
	id := r.nextID.Add(1)
	cmd.ProposalId = id
	data, err := proto.Marshal(cmd)
	if err != nil {
		return 0, err
	}
	ch := make(chan proposalResult, 1)
	r.mu.Lock()
	r.waiters[id] = &waiter{ch: ch}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiters, id)
		r.mu.Unlock()
	}()
	timeout := base.After(r.opts.Clock, r.opts.ProposalTimeout)
	if err := r.raft.Propose(ctx, id, data); errors.Is(err, raftnode.ErrStopped) {
		return 0, r.unavailable()
	} else if err != nil {
		return 0, err
	}
	// From here on the entry may be in the log: every failure is ambiguous.
	select {
	case res := <-ch:
		return res.index, res.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-timeout:
		return 0, fmt.Errorf("kv: %s: proposal not applied within %v: %w", r, r.opts.ProposalTimeout, context.DeadlineExceeded)
	case <-r.stopc:
		return 0, fmt.Errorf("kv: %s stopped with a proposal in flight (outcome unknown): %w", r, r.unavailable())
	}
}

// ---- reads -------------------------------------------------------------------

// appliedIndex returns the applied index and a channel closed when it moves.
func (r *Replica) appliedIndex() (uint64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied, r.appliedCh
}

func (r *Replica) waitApplied(ctx context.Context, index uint64) error {
	timeout := base.After(r.opts.Clock, r.opts.ReadTimeout)
	for {
		applied, ch := r.appliedIndex()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return fmt.Errorf("kv: %s: index %d not applied within %v (at %d): %w", r, index, r.opts.ReadTimeout, applied, context.DeadlineExceeded)
		case <-r.stopc:
			return r.unavailable()
		}
	}
}

// readIndex runs raft's read index protocol and returns the index a
// linearizable read must wait for.
func (r *Replica) readIndex(ctx context.Context) (uint64, error) {
	if !r.raft.Up() {
		return 0, kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "%s: raft not running yet (raft log repair)", r)
	}
	// A read index that raft drops (no leader, leadership lost) never
	// answers; bound the wait well below the client's deadline.
	idx, err := r.raft.ReadIndex(ctx, r.nextID.Add(1), min(r.opts.ReadTimeout, 20*r.opts.TickInterval*time.Duration(r.opts.ElectionTicks)))
	switch {
	case errors.Is(err, raftnode.ErrStopped):
		return 0, r.unavailable()
	case errors.Is(err, raftnode.ErrNotConfirmed):
		return 0, kvapi.NewError(kvpb.ErrorDetail_NOT_LEADER, "%s: read index not confirmed", r)
	}
	return idx, err
}

// prepareRead waits until this replica may serve a read with opts.
func (r *Replica) prepareRead(ctx context.Context, opts *kvpb.ReadOptions) error {
	switch opts.GetConsistency() {
	case kvpb.Consistency_STRONG:
		idx, err := r.readIndex(ctx)
		if err != nil {
			return err
		}
		return r.waitApplied(ctx, idx)
	case kvpb.Consistency_READ_AFTER_WRITE:
		return r.waitApplied(ctx, opts.GetMinIndex())
	case kvpb.Consistency_EVENTUAL:
		return nil
	}
	return base.InvalidArgumentf("kv: unknown consistency %d", opts.GetConsistency())
}

// readable refuses reads of ranges this replica is repairing, and all reads
// while it is down.
func (r *Replica) readable(rg Range) error {
	if r.Failed() != nil {
		return r.unavailable()
	}
	if !r.verified.Load() {
		return kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "%s is checking its engine against its digest", r)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.logFailed != nil {
		return kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "%s: raft log failed: %v", r, r.logFailed)
	}
	if r.logRepair != "" {
		return kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "%s is repairing its raft log (%s)", r, r.logRepair)
	}
	if _, _, floored := r.log.VoteFloor(); floored {
		// It lost entries it had acknowledged (or everything): until it
		// holds them again its state is behind what it once served.
		return kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "%s is catching up on raft entries it lost", r)
	}
	if r.down || r.needRebuild {
		return kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "%s is rebuilding", r)
	}
	if rec, refused := r.repair.Refused(rg); refused {
		return base.CorruptionErrorf("kv: %s: range %s is under repair", r, rec)
	}
	return nil
}

// around is what the replica knows of its damaged tables' keys, for reads
// past them (engine.Around): one atomic load, no lock, on the read path.
func (r *Replica) around() engine.Around {
	if a := r.aroundP.Load(); a != nil {
		return *a
	}
	return engine.Around{}
}

// publishAroundLocked publishes absent and holes, after each change to
// them, as a new immutable Around (nil when both are empty) for around.
func (r *Replica) publishAroundLocked() {
	if len(r.absent) == 0 && len(r.holes) == 0 {
		r.aroundP.Store(nil)
		return
	}
	a := &engine.Around{Points: slices.Clone(r.absent)}
	for _, h := range r.holes {
		a.Tables = append(a.Tables, h.keys)
	}
	r.aroundP.Store(a)
}

// Get reads key with the given consistency.
func (r *Replica) Get(ctx context.Context, key []byte, opts *kvpb.ReadOptions) ([]byte, bool, uint64, error) {
	if err := r.prepareRead(ctx, opts); err != nil {
		return nil, false, 0, err
	}
	// NB: readable and the read happen under one smMu read lock: the crash
	// baseline's wipe (exclusive lock) must not slip in between and let
	// the read see the emptied state machine.
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed {
		return nil, false, 0, r.unavailable()
	}
	r.readMu.RLock()
	defer r.readMu.RUnlock()
	if err := r.readable(Range{Start: key, End: append(append([]byte(nil), key...), 0)}); err != nil {
		return nil, false, 0, err
	}
	applied, _ := r.appliedIndex()
	v, found, err := engine.GetWith(r.sm.DB(), key, r.around())
	return v, found, applied, err
}

// Scan reads up to limit rows of [start, end) with the given consistency,
// stopping once their keys and values reach maxBytes (0: no byte bound);
// more reports whether rows remain.
func (r *Replica) Scan(ctx context.Context, start, end []byte, limit, maxBytes int, opts *kvpb.ReadOptions) ([]*kvpb.KeyValue, bool, uint64, error) {
	if err := r.prepareRead(ctx, opts); err != nil {
		return nil, false, 0, err
	}
	r.smMu.RLock() // see Get
	defer r.smMu.RUnlock()
	if r.smClosed {
		return nil, false, 0, r.unavailable()
	}
	r.readMu.RLock()
	defer r.readMu.RUnlock()
	if err := r.readable(Range{Start: start, End: end}); err != nil {
		return nil, false, 0, err
	}
	applied, _ := r.appliedIndex()
	rows, more, err := engine.ScanBoundedWith(r.sm.DB(), start, end, limit, maxBytes, r.around())
	return rows, more, applied, err
}

// Write proposes a batch; this replica must lead the shard.
func (r *Replica) Write(ctx context.Context, b *kvpb.WriteBatch) (uint64, error) {
	if !r.IsLeader() {
		return 0, &kvapi.Error{Reason: kvpb.ErrorDetail_NOT_LEADER, Leader: r.leaderNode(), Msg: r.String() + " is not the leader"}
	}
	return r.propose(ctx, &kvpb.Command{Write: b})
}

// RaftLogStats returns the raft log's counters (its own repairs).
func (r *Replica) RaftLogStats() raftlog.Stats { return r.log.Stats() }

// Stats returns the replica's counters.
func (r *Replica) Stats() ReplicaStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats.clone()
}

// RepairsPending is the number of repairs this replica waits for: patch
// requests not yet applied and key ranges it refuses to read, plus one if
// it must be rebuilt. Zero means every damage it found is repaired.
func (r *Replica) RepairsPending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.repair.Requests() + len(r.repair.Recovering())
	if r.down || r.needRebuild {
		n++
	}
	return n
}

// ContentChecksum is the CRC32C over every user row and the applied index
// it reflects.
func (r *Replica) ContentChecksum() (crc uint32, rows int, applied uint64, err error) {
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed {
		return 0, 0, 0, r.unavailable()
	}
	snap := r.sm.DB().NewSnapshot()
	defer snap.Close()
	st, err := engine.ReadApplied(snap)
	if err != nil {
		return 0, 0, 0, err
	}
	all, _, err := engine.Scan(snap, nil, nil, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	return engine.RowsCRC(nil, all), len(all), st.Index, nil
}

// Compact compacts the replica's user key space in its engine, flushing
// what is in memtables: its rows then sit in sstable data blocks (the demo
// and tests damage those).
func (r *Replica) Compact(ctx context.Context) error {
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed || r.Failed() != nil {
		return r.unavailable()
	}
	// A compaction's flush waits for the memtable to flush, and Pebble
	// retries a flush that failed without end: stop waiting if the engine
	// fails.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Taken under smMu: the goroutine may first run after Compact returned,
	// when a wipe may be replacing r.sm.
	failed := r.sm.FailedC()
	go func() {
		select {
		case <-failed:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := r.sm.DB().Compact(ctx, engine.UserPrefix, engine.UserEnd, false)
	if ferr := r.Failed(); ferr != nil {
		return r.unavailable()
	}
	return err
}

// CorruptBlock damages the sstable data block holding key (tests, `ctl kv
// corrupt`).
func (r *Replica) CorruptBlock(key []byte) (string, uint64, error) {
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed {
		return "", 0, r.unavailable()
	}
	return r.sm.CorruptBlock(key)
}

// Files returns the file system and directory the replica keeps its files
// in (its engine in the "pebble" subdirectory): where a tool damages them
// at rest once the replica is stopped (engine.CorruptBlocksAtRest).
func (r *Replica) Files() (vfs.FS, string) { return r.fs, r.dir }

// CorruptBlockAt is CorruptBlock flipping the byte at fraction frac (in
// [0, 1)) of the block instead of its middle: replicas damaged at
// different bytes of the same block (block merge's case), or a harness
// (internal/torture/helix) damaging many blocks of one replica.
func (r *Replica) CorruptBlockAt(key []byte, frac float64) (string, uint64, error) {
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed {
		return "", 0, r.unavailable()
	}
	return r.sm.CorruptBlockAt(key, frac)
}

// Separators compacts the replica's engine into one level and returns the
// index separators (user keys, ascending) of its data blocks: a user key k
// lies in the first block whose separator is >= k. Tests and the torture
// harness use it to choose which blocks to damage (CorruptBlockAt).
func (r *Replica) Separators() ([][]byte, error) {
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed {
		return nil, r.unavailable()
	}
	return r.sm.Separators()
}

// Status reports the replica's state for operators and tests.
func (r *Replica) Status() (*kvpb.ReplicaStatusResponse, error) {
	crc, rows, applied, err := r.ContentChecksum()
	state := "healthy"
	r.mu.Lock()
	st := r.stats.clone()
	pending, recovering := r.repair.Requests(), r.repair.Recovering()
	switch {
	case r.Failed() != nil:
		state = "fail-stopped: " + r.Failed().Error()
	case r.logFailed != nil:
		state = "raft log failed: " + r.logFailed.Error()
	case r.logRepair != "":
		state = "repairing raft log: " + r.logRepair
	case r.down || r.needRebuild:
		state = "rebuilding (" + r.rebuildReason + ")"
	case len(recovering) > 0:
		state = fmt.Sprintf("repairing %v", recovering)
	case !r.verified.Load():
		state = "checking engine against its digest"
	}
	r.mu.Unlock()
	if _, _, ok := r.log.VoteFloor(); ok && state == "healthy" {
		state = "healthy (vote floor: catching up on entries it lost)"
	}
	if err != nil && state == "healthy" {
		state = "unreadable: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return &kvpb.ReplicaStatusResponse{
		Replica: uint64(r.id), AppliedIndex: applied, Leader: r.IsLeader(),
		ContentCrc: crc, Keys: uint64(rows), PatchesApplied: st.PatchesApplied,
		CorruptionsDetected: st.CorruptionsDetected, Rebuilds: st.Rebuilds, State: state,
		TransientErrors: st.TransientErrors, PendingRepairs: uint64(pending), LastDetection: st.LastDetection,
		RebuildReasons: st.RebuildReasons, RaftLog: r.log.Stats().String(), BlocksMerged: st.BlocksMerged,
	}, nil
}
