package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	idx := e.GetIndex()
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
	if e.GetType() != pb.EntryType_EntryNormal || len(e.GetData()) == 0 {
		r.smMu.RLock()
		err := r.sm.setApplied(idx)
		r.smMu.RUnlock()
		if err != nil {
			return r.failApply(idx, err)
		}
		r.advance(idx)
		return true
	}
	cmd := &kvpb.Command{}
	if err := proto.Unmarshal(e.GetData(), cmd); err != nil {
		// The raft log verified this entry's checksum: a bad command is a bug.
		panic(base.AssertionFailedf("kv: %s: undecodable command at %d: %v", r, idx, err))
	}
	switch {
	case cmd.Patch != nil:
		return r.applyPatchEntry(idx, cmd.Patch)
	case cmd.Write != nil:
		r.smMu.RLock()
		err := r.sm.applyWrite(idx, cmd.Write)
		r.smMu.RUnlock()
		switch {
		case err == nil:
			r.advance(idx)
			r.finish(cmd.ProposalId, idx, nil)
		case errors.Is(err, errConditionFailed):
			r.advance(idx)
			r.finish(cmd.ProposalId, idx, ErrConditionFailed)
		default:
			// This replica could not evaluate the entry (its conditions hit
			// corruption): the outcome must not be guessed. A cascading error
			// (DIRECT 001 4.2): rebuild from a peer that applied it.
			// NB: the entry is committed and other replicas apply it, so
			// the proposer's outcome is unknown, never "retry".
			r.finish(cmd.ProposalId, 0, fmt.Errorf("kv: %s: outcome of entry %d unknown here (apply failed: %v)", r, idx, err))
			return r.failApply(idx, err)
		}
	default:
		r.advance(idx)
	}
	return true
}

// failApply handles an entry this replica cannot apply: it rebuilds its
// state from a peer that has applied idx. err is nil when no patch came.
// The replica is never left out: rebuild retries every peer until one
// serves a state at idx or later (peers' scans re-read past transient
// flips, see readAttempts).
func (r *Replica) failApply(idx uint64, err error) bool {
	r.mu.Lock()
	r.needRebuild = true
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
	compact := idx >= r.lastCompact+r.opts.LogCompactEntries
	if compact {
		r.lastCompact = idx
	}
	r.mu.Unlock()
	if compact {
		r.compactLog(idx)
	}
}

// compactLog records applied index idx as the raft snapshot point and drops
// older entries but the last LogKeepEntries. Failures only leave the log
// longer (an entry not in the log, a snapshot already newer).
func (r *Replica) compactLog(idx uint64) {
	var voters []uint64
	for rid := range r.shard.Replicas {
		voters = append(voters, uint64(rid))
	}
	if _, err := r.log.CreateSnapshot(idx, &pb.ConfState{Voters: voters}, nil); err != nil {
		return
	}
	if idx > r.opts.LogKeepEntries {
		_ = r.log.Compact(idx - r.opts.LogKeepEntries)
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
	r.needRebuild, r.rebuildTarget = true, index
	r.mu.Unlock()
	return r.rebuild(index)
}

// applyPatchEntry is Figure 5 of DIRECT 001: every replica reaches the
// PatchRequest at the same point of the log. Healthy replicas send the
// content of the ranges as of exactly this point; the corrupted replica
// waits here for the first patch and ingests it atomically.
func (r *Replica) applyPatchEntry(idx uint64, req *kvpb.PatchRequest) bool {
	ranges := rangesFromProto(req.Ranges)
	if base.ReplicaID(req.CorruptedReplica) != r.id {
		r.sendPatch(idx, req, ranges)
		r.smMu.RLock()
		err := r.sm.setApplied(idx)
		r.smMu.RUnlock()
		if err != nil {
			return r.failApply(idx, err)
		}
		r.advance(idx)
		return true
	}
	p := r.waitPatch(req.PatchId)
	if r.stopped() {
		return false
	}
	if p == nil {
		// No healthy replica answered in time: rebuild from a raft-ordered
		// state transfer instead.
		return r.failApply(idx, nil)
	}
	r.smMu.RLock()
	err := r.sm.ingestRanges(ranges, p.Rows, idx)
	r.smMu.RUnlock()
	if err != nil {
		return r.failApply(idx, err)
	}
	r.mu.Lock()
	r.stats.PatchesApplied++
	r.stats.PatchBytesReceived += uint64(proto.Size(p))
	r.stats.LastRepair = r.opts.Clock.Now().Sub(r.detectedAt)
	var still []Range
	for _, rec := range r.recovering {
		covered := false
		for _, pr := range ranges {
			if rangeCovers(pr, rec) {
				covered = true
			}
		}
		if !covered {
			still = append(still, rec)
		}
	}
	r.recovering = still
	delete(r.patches, req.PatchId)
	detected := r.patchDetect[req.PatchId]
	delete(r.patchDetect, req.PatchId)
	if pr, ok := r.pending[req.PatchId]; ok {
		if r.repaired == nil {
			r.repaired = map[string][]Range{}
		}
		r.repaired[pr.path] = append(r.repaired[pr.path], ranges...)
	}
	delete(r.pending, req.PatchId)
	r.mu.Unlock()
	r.invalidateSnapshots()
	r.advance(idx)
	if r.opts.OnRepair != nil {
		r.opts.OnRepair(RepairEvent{Node: r.node, Shard: r.shard.ID, Detected: detected, Applied: r.opts.Clock.Now(),
			Bytes: uint64(proto.Size(p)), Rows: len(p.Rows), Ranges: ranges})
	}
	return true
}

func rangeCovers(outer, inner Range) bool {
	return outer.Contains(inner.Start) &&
		(len(outer.End) == 0 || (len(inner.End) != 0 && string(inner.End) <= string(outer.End)))
}

// sendPatch builds this healthy replica's patch for the ranges and sends it
// to the corrupted replica. Its scan re-reads past transient flips
// (readAttempts); a builder whose own copy is damaged on disk stays silent
// (the listener has already reported its damage).
func (r *Replica) sendPatch(idx uint64, req *kvpb.PatchRequest, ranges []Range) {
	to, ok := r.shard.Replicas[base.ReplicaID(req.CorruptedReplica)]
	if !ok {
		return
	}
	r.mu.Lock()
	for _, rec := range r.recovering {
		for _, rg := range ranges {
			if rec.Overlaps(rg) {
				r.mu.Unlock()
				return // our own copy of this range is bad
			}
		}
	}
	r.mu.Unlock()
	var rows []*kvpb.KeyValue
	r.smMu.RLock()
	for _, rg := range ranges {
		part, _, err := scan(r.sm.db, rg.Start, rg.End, 0)
		if err != nil {
			r.smMu.RUnlock()
			return
		}
		rows = append(rows, part...)
	}
	r.smMu.RUnlock()
	p := &kvpb.Patch{
		Shard: uint64(r.shard.ID), PatchId: req.PatchId,
		FromReplica: uint64(r.id), ToReplica: req.CorruptedReplica,
		Ranges: req.Ranges, Rows: rows,
	}
	p.Crc = rowsCRC(p.Ranges, p.Rows)
	r.mu.Lock()
	r.stats.PatchesSent++
	r.mu.Unlock()
	r.env.sendPatch(to, p)
}

// deliverPatch is called when a patch arrives from a peer. The first patch
// with a verifying checksum wins.
func (r *Replica) deliverPatch(p *kvpb.Patch) error {
	if rowsCRC(p.Ranges, p.Rows) != p.Crc {
		return base.CorruptionErrorf("kv: %s: patch %d from r%d fails its checksum", r, p.PatchId, p.FromReplica)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.patches[p.PatchId]; !ok {
		r.patches[p.PatchId] = p
		close(r.patchSig)
		r.patchSig = make(chan struct{})
	}
	return nil
}

func (r *Replica) waitPatch(id uint64) *kvpb.Patch {
	deadline := time.NewTimer(r.opts.PatchTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		p, sig := r.patches[id], r.patchSig
		r.mu.Unlock()
		if p != nil {
			return p
		}
		select {
		case <-sig:
		case <-deadline.C:
			return nil
		case <-r.stopc:
			return nil
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
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := r.env.fetchState(ctx, node, r.shard.ID)
			cancel()
			if err != nil || resp.AppliedIndex < idx || rowsCRC(nil, resp.Rows) != resp.Crc {
				continue
			}
			if err := r.installState(resp); err != nil {
				continue
			}
			return true
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-r.stopc:
			return false
		}
	}
}

func (r *Replica) installState(resp *kvpb.FetchStateResponse) error {
	r.smMu.RLock()
	err := r.sm.ingestRanges([]Range{{Start: nil, End: nil}}, resp.Rows, resp.AppliedIndex)
	r.smMu.RUnlock()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.stats.Rebuilds++
	r.stats.RebuildBytes += uint64(proto.Size(resp))
	if !r.detectedAt.IsZero() {
		r.stats.LastRepair = r.opts.Clock.Now().Sub(r.detectedAt)
	}
	r.recovering = nil
	r.repaired = nil
	r.pending = nil
	r.patchDetect = nil
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

// fetchState serves a peer's rebuild: the whole shard content and the
// applied index it reflects, from one Pebble snapshot.
func (r *Replica) fetchState() (*kvpb.FetchStateResponse, error) {
	if err := r.readable(Range{}); err != nil {
		return nil, err
	}
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed {
		return nil, ErrReplicaUnavailable
	}
	snap := r.sm.db.NewSnapshot()
	defer snap.Close()
	applied, err := readApplied(snap)
	if err != nil {
		return nil, err
	}
	rows, _, err := scan(snap, nil, nil, 0)
	if err != nil {
		return nil, err
	}
	return &kvpb.FetchStateResponse{AppliedIndex: applied, Rows: rows, Crc: rowsCRC(nil, rows)}, nil
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
	_ = r.sm.close()
	dir := r.fs.PathJoin(r.dir, "pebble")
	_ = r.fs.RemoveAll(dir)
	gen := r.smGen.Add(1) // reports about the old instance are now stale
	sm, err := openStateMachine(r.fs, dir, r.opts.CacheBytes, r.opts.MemTableBytes, r.listener(gen))
	if err != nil {
		// Nothing more this replica can do; its peers keep the shard.
		panic(base.AssertionFailedf("kv: %s: reopen after wipe: %v", r, err))
	}
	r.sm = sm
	return !r.stopped()
}
