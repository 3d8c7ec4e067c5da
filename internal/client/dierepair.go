package client

import (
	"context"
	"slices"
	"time"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// DieRepairReport is what one RepairDies call did.
type DieRepairReport struct {
	Jobs                           int
	ObjectsRepaired, ObjectsFailed int64
	ChunksRepaired, BytesRepaired  int64
	ObjectsUnknown                 int // blobs a node named that the index no longer holds
}

// RepairDies is the cluster side of Reparo's die repair (paper 003): it asks
// every live node for its open die-repair jobs (a die its flash layer
// declared failed, with the blobs that had a file there) and repairs exactly
// those blobs: each is scrubbed through the DIRECT decision cores, so the
// chunks that were on the dead die (they read as corruption) are re-created
// from the other replicas or the EC row and written out of place on the
// node's surviving dies; nothing else on the node is touched. Repair writes
// go through the scrubber's repair budget (RepairBytesPerSecond). Each job
// is then reported done, and the node checks that the die holds nothing
// live any more (reopening the job for what is left).
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
				done = s.repairDieJob(ctx, job, recs, &out)
			}
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

func (s *Scrubber) repairDieJob(ctx context.Context, job *nodepb.DieRepairJob, recs []*objectpb.ObjectRecord, out *DieRepairReport) *nodepb.DieRepairDoneRequest {
	type blob struct{ object, version uint64 }
	want := map[blob]bool{}
	for i := range job.Objects {
		if i < len(job.Versions) {
			want[blob{job.Objects[i], job.Versions[i]}] = true
		}
	}
	done := &nodepb.DieRepairDoneRequest{Id: job.Id}
	found := 0
	for _, rec := range recs {
		if !want[blob{rec.Object, rec.Version}] {
			continue
		}
		found++
		var repairs []RepairJob
		_, err := s.c.ScrubObject(ctx, rec, s.wait, func(j RepairJob) { repairs = append(repairs, j) })
		failed := err != nil
		for _, j := range repairs {
			if err := s.applyNow(ctx, j); err != nil {
				failed = true
				continue
			}
			done.ChunksRepaired++
			done.BytesRepaired += int64(len(j.Data))
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
	return done
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
	return done
}

// runDieRepairs polls for die-repair jobs every poll until ctx ends.
func (s *Scrubber) runDieRepairs(ctx context.Context, poll time.Duration) {
	for {
		if rep, err := s.RepairDies(ctx); err != nil && ctx.Err() == nil {
			s.c.opts.Logf("die repair: %v", err)
		} else if rep.Jobs > 0 {
			s.c.opts.Logf("die repair: %d jobs, %d objects repaired, %d failed, %d chunks (%d bytes) written",
				rep.Jobs, rep.ObjectsRepaired, rep.ObjectsFailed, rep.ChunksRepaired, rep.BytesRepaired)
		}
		if err := s.opts.Sleep(ctx, poll); err != nil {
			return
		}
	}
}
