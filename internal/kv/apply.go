package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/keyspan"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/patch"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// applyLoop applies committed entries in log order. It is the state
// machine's only writer. It may block at a patch entry (waiting for the
// patch) without blocking the raft loop.
func (r *Replica) applyLoop() {
	defer r.wg.Done()
	for {
		r.queueMu.Lock()
		tasks := r.queue
		r.queue = nil
		r.queueMu.Unlock()
		if len(tasks) == 0 {
			r.mu.Lock()
			rebuild, applied := r.needRebuild, r.applied
			r.mu.Unlock()
			if rebuild {
				if r.opts.Mode == RepairCrash && !r.wipe() {
					return
				}
				r.mu.Lock()
				target := max(applied, r.rebuildTarget)
				r.mu.Unlock()
				if !r.rebuild(target) {
					return
				}
				continue
			}
			select {
			case <-r.queueSig:
				continue
			case <-r.stopc:
				return
			}
		}
		for _, t := range tasks {
			if t.snapshotIndex > 0 && !r.installSnapshot(t.snapshotIndex) {
				return
			}
			for _, e := range t.entries {
				if !r.applyEntry(e) {
					return
				}
			}
		}
	}
}

func (r *Replica) stopped() bool {
	select {
	case <-r.stopc:
		return true
	default:
		return false
	}
}

// applyEntry applies one committed entry; false means the replica stopped.
func (r *Replica) applyEntry(e *pb.Entry) bool {
	if r.stopped() {
		return false // closed, or fail-stopped: nothing more is applied
	}
	idx, term := e.GetIndex(), e.GetTerm()
	r.mu.Lock()
	applied, rebuild := r.applied, r.needRebuild
	r.mu.Unlock()
	if rebuild {
		if r.opts.Mode == RepairCrash && !r.wipe() {
			return false
		}
		r.mu.Lock()
		target := max(idx-1, r.rebuildTarget)
		r.mu.Unlock()
		if !r.rebuild(target) {
			return false
		}
		r.mu.Lock()
		applied = r.applied
		r.mu.Unlock()
	}
	if idx <= applied {
		return true // already in the state (restart, or a rebuild went past it)
	}
	if term > r.appliedTerm {
		r.appliedTerm = term
		r.dropSuperseded(term)
	}
	r.mu.Lock()
	r.appliedBytes += uint64(len(e.GetData()))
	r.mu.Unlock()
	if e.GetType() != pb.EntryType_EntryNormal || len(e.GetData()) == 0 {
		return r.applyNoop(idx, term)
	}
	cmd := &kvpb.Command{}
	if err := proto.Unmarshal(e.GetData(), cmd); err != nil {
		// The raft log verified this entry's checksum: a bad command is a bug.
		panic(base.AssertionFailedf("kv: %s: undecodable command at %d: %v", r, idx, err))
	}
	switch {
	case cmd.Patch != nil:
		return r.applyPatchEntry(idx, term, cmd.Patch)
	case cmd.Barrier != nil:
		if !r.applyNoop(idx, term) {
			return false
		}
		r.applyBarrier(cmd.Barrier)
		return true
	case cmd.Write != nil:
		r.smMu.RLock()
		r.sm.SetAround(r.aroundP.Load())
		err := r.sm.ApplyWrite(idx, term, cmd.Write)
		digestLost := r.sm.Applied().Digest.Dirty
		r.smMu.RUnlock()
		switch {
		case err == nil:
			r.advance(idx)
			r.finish(cmd.ProposalId, idx, nil)
		case errors.Is(err, engine.ErrConditionFailed):
			r.advance(idx)
			r.finish(cmd.ProposalId, idx, kvapi.ErrConditionFailed)
		default:
			// This replica could not evaluate the entry (its conditions hit
			// corruption): the outcome must not be guessed. A cascading error
			// (DIRECT 001 4.2): rebuild from a peer that applied it.
			// NB: the entry is committed and other replicas apply it, so
			// the proposer's outcome is unknown, never "retry".
			r.finish(cmd.ProposalId, 0, fmt.Errorf("kv: %s: outcome of entry %d unknown here (apply failed: %v)", r, idx, err))
			return r.failApply(idx, err, rebuildApplyFailed)
		}
		_ = digestLost
	default:
		return r.applyNoop(idx, term)
	}
	return true
}

// applyNoop records idx as applied with no change to the rows.
func (r *Replica) applyNoop(idx, term uint64) bool {
	r.smMu.RLock()
	err := r.sm.SetApplied(idx, term)
	r.smMu.RUnlock()
	if err != nil {
		return r.failApply(idx, err, rebuildApplyFailed)
	}
	r.advance(idx)
	return true
}

// applyBarrier lifts this replica's vote floor when its own barrier
// applies: a leader replicated it after every entry committed before the
// replica's raft log was damaged (see raftlog.Log.ClearFloor).
func (r *Replica) applyBarrier(b *kvpb.Barrier) {
	if base.ReplicaID(b.Replica) != r.id {
		return
	}
	r.mu.Lock()
	mine := b.Nonce == r.barrier
	if mine {
		r.barrier = 0
	}
	r.mu.Unlock()
	if mine {
		_ = r.log.ClearFloor()
	}
}

// failApply handles an entry this replica cannot apply: it rebuilds its
// state from a peer that has applied idx. The replica is never left out:
// rebuild retries every peer until one serves a state at idx or later
// (peers' scans re-read past transient flips, see engine.ReadAttempts).
func (r *Replica) failApply(idx uint64, err error, reason string) bool {
	r.mu.Lock()
	r.needRebuild = true
	r.rebuildReason = reason
	if err != nil {
		r.stats.ApplyFailures++
	}
	r.mu.Unlock()
	return r.rebuild(idx)
}

func (r *Replica) advance(idx uint64) {
	r.mu.Lock()
	if idx > r.applied {
		r.applied = idx
		close(r.appliedCh)
		r.appliedCh = make(chan struct{})
	}
	compact := !r.compacting && (idx >= r.lastCompact+r.opts.LogCompactEntries || r.appliedBytes >= r.opts.LogCompactBytes)
	if compact {
		r.compacting = true
		r.appliedBytes = 0
	}
	r.mu.Unlock()
	if compact {
		r.wg.Add(1)
		go r.flushAndCompact()
	}
}

// flushAndCompact makes the applied state durable (Pebble runs without a
// WAL: a flush is what makes applied entries durable) and then records the
// durable index as the raft snapshot point and compacts the raft log up to
// LogKeepEntries before it. The log never drops an entry the engine does
// not hold durably. Failures only leave the log longer.
func (r *Replica) flushAndCompact() {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		r.compacting = false
		r.mu.Unlock()
	}()
	r.smMu.RLock()
	if r.smClosed {
		r.smMu.RUnlock()
		return
	}
	st := r.sm.Applied() // NB: read before the flush starts
	ch, err := r.sm.DB().AsyncFlush()
	r.smMu.RUnlock()
	if err != nil {
		return
	}
	select {
	case <-ch:
	case <-r.stopc:
		return
	}
	idx := st.Index
	r.mu.Lock()
	r.lastCompact = idx
	r.mu.Unlock()
	var voters []uint64
	for rid := range r.shard.Replicas {
		voters = append(voters, uint64(rid))
	}
	if _, err := r.log.CreateSnapshot(idx, &pb.ConfState{Voters: voters}, nil); err != nil {
		return
	}
	// Keep at most LogKeepEntries entries and about LogCompactBytes of
	// them for slow followers.
	to := r.log.KeepFrom(idx, r.opts.LogCompactBytes)
	if idx > r.opts.LogKeepEntries {
		to = max(to, idx-r.opts.LogKeepEntries)
	}
	if to > 1 {
		_ = r.log.Compact(to)
	}
}

// installSnapshot handles a raft snapshot from the leader: the log now
// starts at index; the state is fetched from a peer that applied at least
// that much.
func (r *Replica) installSnapshot(index uint64) bool {
	r.mu.Lock()
	applied := r.applied
	r.mu.Unlock()
	if index <= applied {
		return true
	}
	r.mu.Lock()
	r.needRebuild, r.rebuildTarget, r.rebuildReason = true, index, rebuildSnapshot
	r.mu.Unlock()
	return r.rebuild(index)
}

// applyPatchEntry is Figure 5 of DIRECT 001: every replica reaches the
// PatchRequest at the same point of the log. Healthy replicas send the
// content of the ranges as of exactly this point; the corrupted replica
// waits here until each range is covered, piece by piece, by whichever
// replicas hold those pieces intact (helix recovery: when every replica is
// damaged somewhere, a range can still come together from several), and
// ingests it atomically.
//
// Ranges not covered within PatchTimeout stay under repair and are
// requested again at a later entry: no rebuild, which would need a peer
// whose whole state reads back. A patch entry of this replica that no
// repair is waiting for (replayed after a restart: the ingest is durable
// before the entry counts as applied) is skipped; damage still there is
// found again.
func (r *Replica) applyPatchEntry(idx, term uint64, req *kvpb.PatchRequest) bool {
	ranges := keyspan.FromProto(req.Ranges)
	if base.ReplicaID(req.CorruptedReplica) != r.id {
		r.sendPatch(idx, req, ranges)
		return r.applyNoop(idx, term)
	}
	r.mu.Lock()
	pr, waiting := r.repair.Waiting(req.PatchId)
	if !waiting {
		r.stats.PatchesSkipped++
	}
	r.mu.Unlock()
	if !waiting {
		return r.applyNoop(idx, term)
	}
	r.handOffLeadership()
	r.mu.Lock()
	phases := RepairPhases{Proposed: pr.FirstProposed, Committed: pr.CommittedAt, Reached: r.opts.Clock.Now()}
	r.mu.Unlock()
	got := r.waitPatch(req.PatchId, ranges)
	if r.stopped() {
		return false
	}
	phases.Gathered = r.opts.Clock.Now()
	// Each covered range is excised over its wide span; the rows there
	// outside the range (the separator key the replica still reads, or
	// every key of a small damaged table's span but its own) come from the
	// replica itself, as of this entry. Every range the replica refuses is
	// left out of its own rows (it cannot vouch for them: what this excise
	// drops there stays refused until its own patch), and a wide span
	// shared by several ranges (one per key of a damaged table that lists
	// its keys) is read and excised once.
	covered, missing := patch.Assemble(pr, ranges, got)
	r.mu.Lock()
	refused := r.repair.Recovering()
	r.mu.Unlock()
	skip := append(slices.Clone(ranges), refused...)
	var done, wide []Range
	var doneBlocks []uint64
	var rows, ownRows []*kvpb.KeyValue
	ownOK := map[string]bool{}
	for _, p := range covered {
		w := p.Wide.String()
		ok, read := ownOK[w]
		if !read {
			own, err := r.ownRowsOutside(p.Wide, skip)
			ok = err == nil
			ownOK[w] = ok
			var n uint64
			for _, kv := range own {
				n += uint64(len(kv.Key) + len(kv.Value))
			}
			r.mu.Lock()
			r.stats.OwnRowsRead += uint64(len(own))
			r.stats.OwnBytesRead += n
			if !ok {
				r.stats.OwnReadFailures++
			}
			r.mu.Unlock()
			if ok {
				wide = append(wide, p.Wide)
				ownRows = append(ownRows, own...)
			}
		}
		if !ok {
			missing = append(missing, p)
			continue
		}
		done = append(done, p.Range)
		doneBlocks = append(doneBlocks, p.Blocks...)
		rows = append(rows, p.Rows...)
	}
	// Two covered ranges whose wide spans overlap both read the replica's
	// own rows there, and one range's own rows may lie in the other range,
	// which its peers sent: each key once, the peers' row first (a
	// duplicate key failed the patch table's write, and the replica
	// rebuilt).
	rows = uniqueRows(rows, ownRows)
	// A range no peer could send is damaged on every replica (the same
	// block of the same table, at different bytes): its blocks are put
	// back together from the replicas' copies and written in place.
	// The ranges of one damaged run of a table that lists its keys (one
	// per key) share their blocks: those are merged once, and a merge that
	// failed is not tried again for the run's other keys.
	var merged []Range
	var still []patch.Piece
	mergedBlocks := map[string]bool{}
	for _, p := range missing {
		key := fmt.Sprint(p.Blocks)
		ok, tried := mergedBlocks[key]
		switch {
		case len(p.Blocks) == 0:
			ok = false
		case !tried:
			ok = r.mergeRange(pr.Path, p.Blocks, p.Range)
			mergedBlocks[key] = ok
		}
		if ok {
			merged = append(merged, p.Range)
		} else {
			still = append(still, p)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return bytes.Compare(rows[i].Key, rows[j].Key) < 0 })
	var lost []Range // rows an excise could not keep: patched in turn
	ingested := len(done) > 0
	if ingested {
		// Reads of the rows around each span wait while it is excised and
		// checked: an excise that loses a damaged table's remainder (Pebble
		// seeks for its bound in the damaged block) must not be read as
		// absent rows.
		hold := func(around []Range) func([]Range) {
			r.mu.Lock()
			r.repair.Hold(around)
			r.mu.Unlock()
			// Reads that found these ranges readable before the hold
			// finish before the excise (see Replica.readMu).
			r.readMu.Lock()
			r.readMu.Unlock() //nolint:staticcheck // an empty critical section: a barrier
			return func(keep []Range) {
				r.mu.Lock()
				r.repair.Release(around, keep)
				r.mu.Unlock()
			}
		}
		r.smMu.RLock()
		err := r.sm.IngestRanges(wide, rows, idx, term, hold)
		r.smMu.RUnlock()
		var el *engine.ExciseLossError
		if errors.As(err, &el) {
			lost, err = el.Lost, nil
		}
		if len(lost) > 0 {
			// Already refused (hold kept them): patched below. The
			// part of a range that is lost (blocks of it that did not
			// read back, or a remainder grown over it) is not settled:
			// it stays refused until that patch; the rest is.
			r.mu.Lock()
			r.stats.RemaindersLost += uint64(len(lost))
			r.mu.Unlock()
			var kept []Range
			for _, d := range done {
				kept = append(kept, keyspan.Subtract(d, lost)...)
			}
			done = kept
		}
		if err != nil {
			reason := rebuildApplyFailed
			if base.IsCorruption(err) {
				reason = rebuildExcise
			}
			return r.failApply(idx, err, reason)
		}
	} else if !r.applyNoop(idx, term) {
		return false
	}
	now := r.opts.Clock.Now()
	r.mu.Lock()
	if len(done) > 0 {
		r.stats.PatchesApplied++
		r.stats.PatchBytesReceived += got.Bytes
		r.stats.LastRepair = now.Sub(pr.Detected)
		r.stats.LastDetection = "patched"
	} else if len(merged) > 0 {
		r.stats.LastRepair = now.Sub(pr.Detected)
		r.stats.LastDetection = "merged"
	}
	if r.repair.Settle(req.PatchId, pr.Path, done, merged, doneBlocks) {
		r.absent = nil
		r.publishAroundLocked()
	}
	r.mu.Unlock()
	if ingested {
		r.invalidateSnapshots()
	}
	if len(merged) > 0 {
		// The merged bytes verify against the blocks' checksums; the
		// engine as a whole must still match its digest, which it can
		// only once no range is under repair (a range still missing, or
		// a remainder an excise lost, is not the merge's doing):
		// verifyEngine checks it once they are patched.
		r.wg.Add(1)
		go r.verifyEngine()
	}
	r.advance(idx)
	if q := patch.Remainders(pr.Path, now, lost); q != nil {
		// What the excise cut off around the spans comes from the peers
		// like any damage (reads there are refused meanwhile).
		r.proposeRepair(q)
	}
	// Ranges no peer could send: a peer damaged there too is usually
	// patched within moments, so ask again soon, backing off to a patch
	// timeout (it waited a whole patch timeout, 3 s, at once: the KV
	// repair latency's tail).
	if q := patch.Retry(pr, still, now, retryFirst, r.opts.PatchTimeout); q != nil {
		r.proposeRepair(q)
	}
	// (After the requests for what is still damaged are in: a table they
	// name stays one reads go around.)
	r.mu.Lock()
	r.settleHolesLocked()
	r.mu.Unlock()
	if len(done) > 0 && r.opts.OnRepair != nil {
		r.opts.OnRepair(RepairEvent{Node: r.node, Shard: r.shard.ID, Detected: pr.Detected, Applied: now,
			Bytes: got.Bytes, Rows: len(rows), Ranges: done, Phases: phases})
	}
	return true
}

// retryFirst is the first wait before a patch request asks again for
// ranges no peer could send (patch.Retry doubles it for each retry). A
// peer that could not send a range is usually repairing it itself (damage
// it met reading it for the patch, or a range it holds while its own
// excise runs), which takes 10-20 ms (the p50 of a repair): at 100 ms the
// first wait was the whole p99 of the repair latency (kv-recovery-latency
// at bb8badd: detected to proposed p99 100.3 ms). A retry is one small
// entry and one piece from each peer.
const retryFirst = 25 * time.Millisecond

// uniqueRows is first and then then, each key once: its first row.
func uniqueRows(first, then []*kvpb.KeyValue) []*kvpb.KeyValue {
	seen := make(map[string]bool, len(first)+len(then))
	out := make([]*kvpb.KeyValue, 0, len(first)+len(then))
	for _, rows := range [][]*kvpb.KeyValue{first, then} {
		for _, kv := range rows {
			if !seen[string(kv.Key)] {
				seen[string(kv.Key)] = true
				out = append(out, kv)
			}
		}
	}
	return out
}

// ownRowsOutside reads this replica's own rows in the parts of wide outside
// skip (the rows a patch excises but the replica did not lose: the
// separator key, or every key of a damaged table's span but the table's
// own), past its damaged tables (engine.Around).
func (r *Replica) ownRowsOutside(wide Range, skip []Range) ([]*kvpb.KeyValue, error) {
	var out []*kvpb.KeyValue
	a := r.around()
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	// Outside the shard the engine holds no user row (toShardEdges widens
	// spans there): nothing to read, and a read there could only run into
	// the damaged block.
	outside := []Range{{End: r.shard.Range.Start}, {Start: r.shard.Range.End}}
	if len(r.shard.Range.Start) == 0 {
		outside = outside[1:]
	}
	if len(r.shard.Range.End) == 0 {
		outside = outside[:len(outside)-1]
	}
	for _, part := range keyspan.Subtract(wide, append(slices.Clone(skip), outside...)) {
		rows, err := engine.ScanAround(r.sm.DB(), part, a)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// sendPatch builds this replica's patch for the ranges and sends it to the
// corrupted replica: of each range, the pieces outside its own damage that
// read back (the scan re-reads past transient flips, see engine.ReadAttempts).
// The corrupted replica assembles each range from whichever replicas sent
// its pieces.
func (r *Replica) sendPatch(idx uint64, req *kvpb.PatchRequest, ranges []Range) {
	to, ok := r.shard.Replicas[base.ReplicaID(req.CorruptedReplica)]
	if !ok {
		return
	}
	r.mu.Lock()
	own := r.repair.Recovering()
	a := r.around()
	r.mu.Unlock()
	var built []Range
	var rows []*kvpb.KeyValue
	r.smMu.RLock()
	for _, rg := range ranges {
		for _, piece := range keyspan.Subtract(rg, own) {
			// Damaged here too: the parts on either side of this
			// replica's damage still help cover the range.
			got, part := engine.ScanPieces(r.sm.DB(), piece, a)
			built = append(built, got...)
			rows = append(rows, part...)
		}
	}
	r.smMu.RUnlock()
	// A peer answers even with nothing (every piece is damaged here too):
	// the damaged replica stops waiting once every peer has answered, and
	// goes on to block merge at once instead of after PatchTimeout.
	p := &kvpb.Patch{
		Shard: uint64(r.shard.ID), PatchId: req.PatchId,
		FromReplica: uint64(r.id), ToReplica: req.CorruptedReplica,
		Ranges: keyspan.ToProto(built), Rows: rows,
	}
	p.Crc = engine.RowsCRC(p.Ranges, p.Rows)
	if len(built) > 0 {
		r.mu.Lock()
		r.stats.PatchesSent++
		r.mu.Unlock()
	}
	r.env.SendPatch(to, p)
}

// DeliverPatch is called when a patch arrives from a peer
// (patch.Tracker.Deliver).
func (r *Replica) DeliverPatch(p *kvpb.Patch) error {
	if engine.RowsCRC(p.Ranges, p.Rows) != p.Crc {
		return base.CorruptionErrorf("kv: %s: patch %d from r%d fails its checksum", r, p.PatchId, p.FromReplica)
	}
	size := uint64(proto.Size(p))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.repair.Deliver(p.PatchId, p.FromReplica, keyspan.FromProto(p.Ranges), p.Rows, size) {
		close(r.patchSig)
		r.patchSig = make(chan struct{})
	}
	return nil
}

// waitPatch waits until every range of patch id is covered, every peer has
// answered, or PatchTimeout, and returns what arrived.
func (r *Replica) waitPatch(id uint64, ranges []Range) patch.Parts {
	peers := len(r.shard.Replicas) - 1
	deadline := base.After(r.opts.Clock, r.opts.PatchTimeout)
	for {
		r.mu.Lock()
		got, answered := r.repair.Received(id)
		sig := r.patchSig
		r.mu.Unlock()
		all := true
		for _, rg := range ranges {
			if !got.Covers(rg) {
				all = false
			}
		}
		if all || answered >= peers {
			return got
		}
		select {
		case <-sig:
		case <-deadline:
			// The apply worker waited a whole PatchTimeout here, and
			// every entry after this one with it.
			r.mu.Lock()
			r.stats.PatchWaitTimeouts++
			r.mu.Unlock()
			return got
		case <-r.stopc:
			return got
		}
	}
}

// rebuild replaces this replica's whole state with a peer's, taken at an
// applied index of at least idx (callers pass the entry they cannot apply,
// or the index the state must reach). It is the fallback when no patch
// comes, the repair of a cascading error, the install of a raft snapshot
// point, and the crash baseline's re-replication. It returns false if the
// replica stopped first.
func (r *Replica) rebuild(idx uint64) bool {
	for attempt := 0; ; attempt++ {
		if r.stopped() {
			return false
		}
		for rid, node := range r.shard.Replicas {
			if rid == r.id {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			resp, err := r.env.FetchState(ctx, node, r.shard.ID)
			cancel()
			if err != nil || resp.AppliedIndex < idx || engine.RowsCRC(nil, resp.Rows) != resp.Crc {
				continue
			}
			if d := engine.DigestFromProto(resp.Summary); !d.Dirty && !engine.DigestOf(resp.Rows).Same(d) {
				continue // the source's engine does not match its own digest
			}
			if err := r.installState(resp); err != nil {
				continue
			}
			r.forgetProposalTerms()
			return true
		}
		select {
		case <-base.After(r.opts.Clock, 50*time.Millisecond):
		case <-r.stopc:
			return false
		}
	}
}

func (r *Replica) installState(resp *kvpb.FetchStateResponse) error {
	d := engine.DigestFromProto(resp.Summary)
	if d.Dirty {
		// The source's digest is unknown: start from the rows themselves.
		d = engine.DigestOf(resp.Rows)
	}
	r.smMu.RLock()
	err := r.sm.InstallState(resp.Rows, resp.AppliedIndex, resp.AppliedTerm, d)
	r.smMu.RUnlock()
	if err != nil {
		return err
	}
	r.verified.Store(true) // installState checked the engine against d
	r.mu.Lock()
	r.stats.Rebuilds++
	reason := r.rebuildReason
	if reason == "" {
		reason = rebuildNoPatch
	}
	if r.stats.RebuildReasons == nil {
		r.stats.RebuildReasons = map[string]uint64{}
	}
	r.stats.RebuildReasons[reason]++
	r.rebuildReason = ""
	r.stats.LastDetection = "rebuilt"
	r.stats.RebuildBytes += uint64(proto.Size(resp))
	if !r.detectedAt.IsZero() {
		r.stats.LastRepair = r.opts.Clock.Now().Sub(r.detectedAt)
	}
	r.repair.Reset()
	r.absent, r.holes = nil, nil
	r.publishAroundLocked()
	r.needRebuild = false
	r.rebuildTarget = 0
	r.down = false
	detected := r.detectedAt
	r.mu.Unlock()
	r.invalidateSnapshots()
	r.advance(resp.AppliedIndex)
	if r.opts.OnRepair != nil {
		r.opts.OnRepair(RepairEvent{Node: r.node, Shard: r.shard.ID, Rebuild: true, Detected: detected,
			Applied: r.opts.Clock.Now(), Bytes: uint64(proto.Size(resp)), Rows: len(resp.Rows)})
	}
	return nil
}

// StateForPeer serves a peer's rebuild: the whole shard content and the
// applied index it reflects, from one Pebble snapshot.
func (r *Replica) StateForPeer() (*kvpb.FetchStateResponse, error) {
	if err := r.readable(Range{}); err != nil {
		return nil, err
	}
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed || r.Failed() != nil {
		return nil, r.unavailable()
	}
	snap := r.sm.DB().NewSnapshot()
	defer snap.Close()
	st, err := engine.ReadApplied(snap)
	if err != nil {
		return nil, err
	}
	rows, _, err := engine.Scan(snap, nil, nil, 0)
	if err != nil {
		return nil, err
	}
	return &kvpb.FetchStateResponse{AppliedIndex: st.Index, AppliedTerm: st.Term, Rows: rows,
		Crc: engine.RowsCRC(nil, rows), Summary: st.Digest.ToProto()}, nil
}

// wipe is the crash baseline's "replica down": close Pebble, delete its
// files, and start again empty; rebuild then re-replicates the whole shard.
func (r *Replica) wipe() bool {
	r.smMu.Lock()
	defer r.smMu.Unlock()
	// Open transactions read snapshots of the Pebble being closed: abort
	// them and release the snapshots first (release waits for a read in
	// progress).
	r.mu.Lock()
	for _, t := range r.txns {
		if !t.invalid {
			t.invalid = true
			r.stats.TxnsInvalidated++
		}
		t.release()
	}
	r.mu.Unlock()
	_ = r.sm.Close()
	dir := r.fs.PathJoin(r.dir, "pebble")
	_ = r.fs.RemoveAll(dir)
	gen := r.smGen.Add(1) // reports about the old instance are now stale
	sm, err := engine.Open(r.fs, dir, r.opts.CacheBytes, r.opts.MemTableBytes, r.listener(gen), r.failStop)
	if err != nil {
		// Nothing more this replica can do; its peers keep the shard: it
		// fail-stops (its host replaces it).
		r.smClosed = true
		r.failStop(fmt.Errorf("kv: %s: reopen after wipe: %w", r, err))
		return false
	}
	r.sm = sm
	return !r.stopped()
}
