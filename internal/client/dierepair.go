package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flashmend/flashmend/internal/client/objlayout"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// DieRepairReport is what one RepairDies call did.
type DieRepairReport struct {
	Jobs                           int
	ObjectsRepaired, ObjectsFailed int64
	ChunksRepaired, BytesRepaired  int64
	ObjectsUnknown                 int // blobs a node named that the index no longer holds
	// BytesFetched is what the repair read from the nodes (spans of the
	// other replicas or shards; whole chunks where it fell back); BytesLost
	// what the jobs' dies held. ChunksSpanned counts chunks repaired from
	// their lost sectors alone, ChunksWhole those repaired whole.
	BytesFetched, BytesLost    int64
	ChunksSpanned, ChunksWhole int64
}

// RepairDies is the cluster side of Reparo's die repair (paper 003): it asks
// every live node for its open die-repair jobs (a die its flash layer
// declared failed, with the chunks that had bytes there) and repairs exactly
// those bytes (003 section 4.2, steps 2-4: the host recovers the failed
// LBAs from the RAID redundancy and writes them back). A chunk is repaired
// at sector granularity (DIRECT 000 section 2, principle 1): only the
// sectors covering its lost ranges are fetched, from another replica (REP)
// or as the same span of the row's other shards, decoded alone (EC), each
// verified against its stored sums, and the node lays them over its
// surviving sectors, verifies the whole chunk and rewrites what changed
// (repairSpans); an EC chunk whose sums record the die took too is rebuilt
// from four other shards whole, for its sums. A chunk that cannot be
// repaired that way (a span no copy verifies, a patch that does not verify)
// is repaired whole through the DIRECT cores, and a blob listed without
// its chunks is scrubbed whole, as before. Repair reads and writes go
// through the scrubber's budgets. Each job is then reported done, with the
// bytes fetched against the bytes lost, and the node checks that the die
// holds nothing live any more (reopening the job for what is left).
func (s *Scrubber) RepairDies(ctx context.Context) (DieRepairReport, error) {
	var out DieRepairReport
	nodes, err := s.c.Nodes(ctx)
	if err != nil {
		return out, err
	}
	var recs []*objectpb.ObjectRecord
	for _, n := range nodes {
		if !n.Live {
			continue
		}
		nc, err := s.c.nodeClient(ctx, n.Id)
		if err != nil {
			continue
		}
		resp, err := nc.DieRepairs(ctx, &nodepb.DieRepairsRequest{})
		if err != nil {
			continue // an older node, or unreachable: next round
		}
		for _, job := range resp.Jobs {
			if recs == nil {
				if recs, err = s.c.List(ctx, ""); err != nil {
					return out, err
				}
			}
			var done *nodepb.DieRepairDoneRequest
			if job.Rebuild {
				done = s.rebuildDieJob(ctx, n.Id, job, recs, &out)
			} else {
				done = s.repairDieJob(ctx, n.Id, job, recs, &out)
			}
			out.BytesLost += job.LostBytes
			if _, err := nc.DieRepairDone(ctx, done); err != nil {
				s.c.opts.Logf("die repair: node %d job %d: %v", n.Id, job.Id, err)
			}
			out.Jobs++
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
		}
	}
	return out, nil
}

type blobKey struct{ object, version uint64 }

func (s *Scrubber) repairDieJob(ctx context.Context, nodeID uint64, job *nodepb.DieRepairJob, recs []*objectpb.ObjectRecord, out *DieRepairReport) *nodepb.DieRepairDoneRequest {
	want := map[blobKey]bool{}
	for i := range job.Objects {
		if i < len(job.Versions) {
			want[blobKey{job.Objects[i], job.Versions[i]}] = true
		}
	}
	lost := map[blobKey][]*nodepb.LostChunk{}
	for _, lc := range job.LostChunks {
		if lc.Chunk != nil {
			k := blobKey{lc.Chunk.Object, lc.Chunk.Version}
			lost[k] = append(lost[k], lc)
		}
	}
	done := &nodepb.DieRepairDoneRequest{Id: job.Id}
	found := 0
	for _, rec := range recs {
		k := blobKey{rec.Object, rec.Version}
		if !want[k] {
			continue
		}
		found++
		var failed bool
		if chunks := lost[k]; len(chunks) > 0 {
			failed = s.repairLostChunks(ctx, nodeID, rec, chunks, done)
		} else {
			failed = s.repairBlobWhole(ctx, rec, done)
		}
		if failed {
			done.ObjectsFailed++
		} else {
			done.ObjectsRepaired++
		}
	}
	out.ObjectsUnknown += len(want) - found
	out.ObjectsRepaired += done.ObjectsRepaired
	out.ObjectsFailed += done.ObjectsFailed
	out.ChunksRepaired += done.ChunksRepaired
	out.BytesRepaired += done.BytesRepaired
	out.BytesFetched += done.BytesFetched
	out.ChunksSpanned += done.ChunksSpanned
	out.ChunksWhole += done.ChunksWhole
	return done
}

// repairBlobWhole scrubs every chunk of a blob through the DIRECT cores
// (every replica or shard read whole) and writes the repairs it finds.
func (s *Scrubber) repairBlobWhole(ctx context.Context, rec *objectpb.ObjectRecord, done *nodepb.DieRepairDoneRequest) (failed bool) {
	var repairs []RepairJob
	rep, err := s.c.ScrubObject(ctx, rec, s.wait, func(j RepairJob) { repairs = append(repairs, j) })
	failed = err != nil
	if l, lerr := objlayout.New(rec); lerr == nil && rep != nil {
		for i := 0; i < rep.Chunks && i < l.Chunks; i++ {
			done.BytesFetched += int64(l.ChunkLen(i)) * int64(l.Copies)
		}
	}
	return s.applyWhole(ctx, repairs, done) || failed
}

// repairLostChunks repairs the chunks of one blob that node nodeID lost
// with a die: each from its lost sectors when it can (repairSpans), whole
// otherwise (repairChunkWhole).
func (s *Scrubber) repairLostChunks(ctx context.Context, nodeID uint64, rec *objectpb.ObjectRecord, chunks []*nodepb.LostChunk, done *nodepb.DieRepairDoneRequest) (failed bool) {
	l, err := objlayout.New(rec)
	if err != nil {
		s.c.opts.Logf("die repair: %v", err)
		return true
	}
	for _, lc := range chunks {
		id := direct.ChunkID{Object: lc.Chunk.Object, Version: lc.Chunk.Version, Shard: lc.Chunk.Shard, Index: lc.Chunk.Index}
		i := int(id.Index)
		if i >= l.Chunks || (!l.EC && id.Shard != 0) || int(id.Shard) >= l.Copies {
			// Not a chunk of this version as the index describes it: a
			// leftover the node's next identification lists again.
			s.c.opts.Logf("die repair: node %d: chunk %s is not in %s", nodeID, id, l)
			failed = true
			continue
		}
		var lostSpans []direct.Span
		for k := range lc.Offsets {
			if k < len(lc.Lengths) {
				lostSpans = append(lostSpans, direct.Span{Off: int(lc.Offsets[k]), Len: int(lc.Lengths[k])})
			}
		}
		res, err := s.repairSpans(ctx, nodeID, l, i, id, lostSpans, lc.SumsLost)
		done.BytesFetched += res.fetched
		if err == nil {
			done.ChunksRepaired++
			done.ChunksSpanned++
			done.BytesRepaired += res.sent
			continue
		}
		if ctx.Err() != nil {
			return true
		}
		s.c.opts.Logf("die repair: node %d: %s from its lost sectors: %v; repairing it whole", nodeID, id, err)
		if s.repairChunkWhole(ctx, l, i, done) {
			failed = true
		}
	}
	return failed
}

// spanRepair is what one chunk's span repair moved: bytes read from the
// other copies, bytes sent to the node.
type spanRepair struct{ fetched, sent int64 }

// errSpanFallback marks a chunk the span repair does not handle.
var errSpanFallback = errors.New("needs the whole chunk")

// repairSpans repairs chunk i of layout l on node nodeID from the sectors
// covering its lost ranges alone. REP: each span is read from the other
// replicas, the first that verifies winning (a corrupt span is taken from
// another replica, sector by sector if need be: direct.DecideSpanREP); a
// lost sums record is replaced by a replica's (REP copies share their
// sums). EC: each span is decoded from the same span of four other shards
// that verify (direct.DecideSpanEC); an EC chunk that lost its sums record
// (they exist nowhere else) is rebuilt whole from four other shards
// (rebuildShard) for its sums, and only its lost spans are sent. The node
// then merges and verifies the whole chunk (PatchChunk); other copies found
// corrupt in a span are patched too. An error means the chunk must be
// repaired whole.
func (s *Scrubber) repairSpans(ctx context.Context, nodeID uint64, l objlayout.Layout, i int, id direct.ChunkID, lost []direct.Span, sumsLost bool) (spanRepair, error) {
	var res spanRepair
	n := l.ChunkLen(i)
	spans, err := direct.Cover(n, lost)
	if err != nil {
		return res, err
	}
	if sumsLost && len(spans) == 0 {
		// Only the record was lost: one sector fetched with a replica's
		// sums lets the node check its data against them.
		spans = []direct.Span{{Off: 0, Len: min(n, direct.SectorSize)}}
	}
	if len(spans) == 0 || len(spans) > direct.MaxSpans {
		return res, fmt.Errorf("%d spans: %w", len(spans), errSpanFallback)
	}
	slot := int(id.Shard)
	if !l.EC {
		slot = slices.Index(l.Placement, nodeID)
	}
	if slot < 0 || l.Placement[slot] != nodeID {
		return res, fmt.Errorf("node %d does not hold %s in %s: %w", nodeID, id, l, errSpanFallback)
	}
	data := make([][]byte, len(spans))
	var sums []uint32
	if l.EC && sumsLost {
		// The shard's sums exist nowhere else: they are computed from the
		// shard rebuilt whole from four others, and the node checks its
		// surviving sectors against them.
		shard, err := s.rebuildShard(ctx, l, i, slot, &res)
		if err != nil {
			return res, err
		}
		sums = direct.Sums(id, shard)
		for k, sp := range spans {
			data[k] = shard[sp.Off:sp.End()]
		}
	}
	for k, sp := range spans {
		if data[k] != nil {
			continue // rebuilt with the shard above
		}
		copies := int64(1)
		if l.EC {
			copies = direct.DataShards
		}
		if err := s.wait(ctx, int64(sp.Len)*copies); err != nil {
			return res, err
		}
		var d direct.Decision
		var others []uint64 // nodes of the slots d indexes
		if l.EC {
			d, others = s.decideSpanEC(ctx, l, i, slot, sp, &res)
		} else {
			var all []uint32
			d, others, all = s.decideSpanREP(ctx, l, id, nodeID, sp, sumsLost && sums == nil, &res)
			if sumsLost && sums == nil {
				sums = all
			}
		}
		if d.Err != nil {
			return res, fmt.Errorf("span %v: %w", sp, d.Err)
		}
		for r, who := range d.Repairs {
			if l.EC && who == slot {
				data[k] = d.RepairData[r]
				continue
			}
			// Another copy found corrupt in the span: patched in passing,
			// as a DIRECT read repairs every copy it found wrong.
			oid := id
			if l.EC {
				oid = l.ID(who, i)
			}
			if _, err := s.c.patchChunk(ctx, others[who], oid, []direct.Span{sp}, [][]byte{d.RepairData[r]}, nil); err != nil {
				s.c.opts.Logf("die repair: patching %s %v on node %d: %v", oid, sp, others[who], err)
			}
		}
		if !l.EC {
			data[k] = d.Data
		}
		if data[k] == nil {
			return res, fmt.Errorf("span %v: no data for the lost copy: %w", sp, errSpanFallback)
		}
	}
	if sumsLost && sums == nil {
		return res, fmt.Errorf("no replica's sums record verifies: %w", errSpanFallback)
	}
	var sent int64
	for _, b := range data {
		sent += int64(len(b))
	}
	if err := s.reserveRepair(ctx, sent); err != nil {
		return res, err
	}
	detected := s.opts.Clock.Now()
	_, err = s.c.patchChunk(ctx, nodeID, id, spans, data, sums)
	if s.c.opts.OnRepair != nil && ctx.Err() == nil {
		s.c.opts.OnRepair(RepairEvent{Kind: RepairSpan, Node: nodeID, Bytes: int(sent), Err: err, Latency: s.opts.Clock.Now().Sub(detected)})
	}
	if err != nil {
		return res, err
	}
	res.sent = sent + int64(4*len(sums))
	return res, nil
}

// reserveRepair waits for n bytes of the repair budget.
func (s *Scrubber) reserveRepair(ctx context.Context, n int64) error {
	return s.reserve(ctx, s.repair, n)
}

// rebuildShard reconstructs shard slot's chunk of EC row i whole from four
// other shards that verify whole (direct.DecideEC with the slot's copy
// taken as lost): four chunks read where a scrub of the row reads six.
// Other shards found corrupt on the way are repaired whole.
func (s *Scrubber) rebuildShard(ctx context.Context, l objlayout.Layout, i, slot int, res *spanRepair) ([]byte, error) {
	n := l.ChunkLen(i)
	var ids [direct.TotalShards]direct.ChunkID
	for sh := range ids {
		ids[sh] = l.ID(sh, i)
	}
	if err := s.wait(ctx, int64(n)*direct.DataShards); err != nil {
		return nil, err
	}
	var reads [direct.TotalShards]direct.ReplicaRead
	reads[slot] = direct.ReplicaRead{Fetched: true}
	var d direct.Decision
	for {
		d = direct.DecideEC(s.c.enc, ids, n, reads)
		if len(d.Fetch) == 0 {
			break
		}
		fetchEach(d.Fetch, func(sh int) {
			reads[sh] = s.c.readChunk(ctx, l.Placement[sh], ids[sh])
		})
		for _, sh := range d.Fetch {
			res.fetched += int64(len(reads[sh].Data) + 4*max(len(reads[sh].Sums), len(reads[sh].DamagedSums)))
		}
	}
	if d.Err != nil {
		return nil, fmt.Errorf("EC row %d: %w", i, d.Err)
	}
	var shard []byte
	for r, who := range d.Repairs {
		if who == slot {
			shard = d.RepairData[r]
			continue
		}
		if reads[who].Missing {
			continue // re-created, with its index entry, by the scrubber
		}
		job := RepairJob{Node: l.Placement[who], ID: ids[who], Data: d.RepairData[r], Kind: RepairECRow, Detected: s.opts.Clock.Now()}
		if err := s.applyNow(ctx, job); err != nil {
			s.c.opts.Logf("die repair: shard %s on node %d: %v", ids[who], l.Placement[who], err)
		}
	}
	if shard == nil {
		return nil, fmt.Errorf("EC row %d: shard %d not rebuilt: %w", i, slot, errSpanFallback)
	}
	return shard, nil
}

// decideSpanREP fetches span sp of REP chunk id from the replicas other
// than nodeID until direct.DecideSpanREP decides; with wantSums it also
// returns the whole chunk's sums from a replica whose record verified.
// others maps the decision's read slots to nodes.
func (s *Scrubber) decideSpanREP(ctx context.Context, l objlayout.Layout, id direct.ChunkID, nodeID uint64, sp direct.Span, wantSums bool, res *spanRepair) (d direct.Decision, others []uint64, all []uint32) {
	for r, node := range l.Placement {
		if node != nodeID {
			others = append(others, l.Placement[r])
		}
	}
	reads := make([]direct.ReplicaRead, len(others))
	for {
		d = direct.DecideSpanREP(id, sp, reads)
		if len(d.Fetch) == 0 {
			break
		}
		for _, k := range d.Fetch {
			r, sums, w := s.c.readChunkSpan(ctx, others[k], id, sp, wantSums)
			reads[k] = r
			res.fetched += w
			if all == nil && sums != nil {
				all = sums
			}
		}
	}
	return d, others, all
}

// decideSpanEC fetches span sp of the other shards of EC row i until
// direct.DecideSpanEC decides the lost shard slot's span. others maps the
// decision's shards to nodes.
func (s *Scrubber) decideSpanEC(ctx context.Context, l objlayout.Layout, i, slot int, sp direct.Span, res *spanRepair) (d direct.Decision, others []uint64) {
	var ids [direct.TotalShards]direct.ChunkID
	for sh := range ids {
		ids[sh] = l.ID(sh, i)
	}
	var reads [direct.TotalShards]direct.ReplicaRead
	var fetched [direct.TotalShards]int64
	for {
		d = direct.DecideSpanEC(s.c.enc, ids, slot, sp, reads)
		if len(d.Fetch) == 0 {
			break
		}
		fetchEach(d.Fetch, func(sh int) {
			reads[sh], _, fetched[sh] = s.c.readChunkSpan(ctx, l.Placement[sh], ids[sh], sp, false)
		})
	}
	for _, f := range fetched {
		res.fetched += f
	}
	return d, l.Placement
}

// applyWhole writes repairs of whole chunks now and counts them in done;
// it reports whether any failed.
func (s *Scrubber) applyWhole(ctx context.Context, repairs []RepairJob, done *nodepb.DieRepairDoneRequest) (failed bool) {
	for _, j := range repairs {
		if err := s.applyNow(ctx, j); err != nil {
			failed = true
			continue
		}
		done.ChunksRepaired++
		done.ChunksWhole++
		done.BytesRepaired += int64(len(j.Data))
	}
	return failed
}

// repairChunkWhole repairs chunk (or EC row) i through the DIRECT cores,
// reading every replica or shard whole, as a scrub does.
func (s *Scrubber) repairChunkWhole(ctx context.Context, l objlayout.Layout, i int, done *nodepb.DieRepairDoneRequest) (failed bool) {
	var repairs []RepairJob
	rep := &report{ReadReport: ReadReport{Mode: "scrub", Chunks: 1, RepairsByNode: map[uint64]int{}},
		queue: func(j RepairJob) { repairs = append(repairs, j) }}
	if err := s.wait(ctx, int64(l.ChunkLen(i))*int64(l.Copies)); err != nil {
		return true
	}
	var err error
	if l.EC {
		_, _, err = s.c.readRowEC(ctx, l, i, rep, true, nil)
	} else {
		_, _, err = s.c.readChunkREP(ctx, l, i, rep, true, nil)
	}
	done.BytesFetched += int64(l.ChunkLen(i)) * int64(l.Copies)
	if err != nil {
		s.c.opts.Logf("die repair: chunk %d of %s: %v", i, l, err)
		return true
	}
	return s.applyWhole(ctx, repairs, done) || failed
}

// rebuildDieJob is the `rebuild` baseline: the node retired its device
// with the die, so every replica or shard it held is re-created on another
// node (the dead-node re-protection path, ReprotectObject), the whole
// device's data whatever the die held.
func (s *Scrubber) rebuildDieJob(ctx context.Context, nodeID uint64, job *nodepb.DieRepairJob, recs []*objectpb.ObjectRecord, out *DieRepairReport) *nodepb.DieRepairDoneRequest {
	done := &nodepb.DieRepairDoneRequest{Id: job.Id}
	retired := func(id uint64) bool { return id == nodeID }
	for _, rec := range recs {
		if !slices.Contains(rec.Placement, nodeID) {
			continue
		}
		rp, err := s.c.reprotect(ctx, rec, retired, true, s.wait)
		if rp != nil {
			done.Moved += int64(rp.Moved)
			done.ChunksRepaired += int64(rp.ChunksWritten)
			// About the bytes: a replica is the object, an RS(4+2)
			// shard a quarter of it.
			per := rec.SizeBytes
			if rec.Redundancy == objectpb.Redundancy_EC {
				per = (rec.SizeBytes + 3) / 4
			}
			done.BytesRepaired += int64(rp.Moved) * per
			// The re-creation scrubs the version with the new node in
			// the retired one's slot: every other copy is read whole.
			if l, err := objlayout.New(rec); err == nil {
				done.BytesFetched += int64(rp.Moved) * l.ReplicaBytes() * int64(l.Copies-1)
			}
		}
		if err != nil {
			done.ObjectsFailed++
			s.c.opts.Logf("die rebuild: node %d: %v", nodeID, err)
		} else {
			done.ObjectsRepaired++
		}
	}
	out.ObjectsRepaired += done.ObjectsRepaired
	out.ObjectsFailed += done.ObjectsFailed
	out.ChunksRepaired += done.ChunksRepaired
	out.BytesRepaired += done.BytesRepaired
	out.BytesFetched += done.BytesFetched
	out.ChunksWhole += done.ChunksRepaired
	return done
}

// runDieRepairs polls for die-repair jobs every poll until ctx ends.
func (s *Scrubber) runDieRepairs(ctx context.Context, poll time.Duration) {
	for {
		if rep, err := s.RepairDies(ctx); err != nil && ctx.Err() == nil {
			s.c.opts.Logf("die repair: %v", err)
		} else if rep.Jobs > 0 {
			s.c.opts.Logf("die repair: %d jobs, %d objects repaired, %d failed, %d chunks (%d bytes) written, %d bytes fetched for %d lost (%d chunks from their lost sectors, %d whole)",
				rep.Jobs, rep.ObjectsRepaired, rep.ObjectsFailed, rep.ChunksRepaired, rep.BytesRepaired, rep.BytesFetched, rep.BytesLost, rep.ChunksSpanned, rep.ChunksWhole)
		}
		if err := s.opts.Sleep(ctx, poll); err != nil {
			return
		}
	}
}
