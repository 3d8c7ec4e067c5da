package node

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf"
)

// Die repair (Reparo, paper 003), the node's part. When the flash layer
// declares a die failed, the node asks the identifier what the die held
// (objstore.DieReporter.LostOnDie: window by window, CDR* by default) and
// opens a die-repair job naming the blobs with a file there and each
// chunk's lost byte ranges (lostChunksProto). The cluster's repairer
// (client.Scrubber.RepairDies) polls DieRepairs, fetches only the sectors
// covering those ranges from the other replicas or the EC row and has this
// node patch them over its surviving sectors (service.PatchChunk, verified
// whole before it writes, out of place on the surviving dies), repairs
// whole through the DIRECT read path what it cannot patch, and reports
// DieRepairDone with the bytes it fetched.
// The node then identifies again: a job is finished only when the die holds
// nothing the store still maps, so a crash, a lost report or a repair that
// failed leaves the job open; after a restart, every failed die that still
// holds live data opens a job again (the state is on flash, not in memory).

// Die repair modes (Config.DieRepair).
const (
	DieRepairReparo  = "reparo"
	DieRepairRebuild = "rebuild"
)

// dieRepairRounds bounds how often a job is reopened for what is left.
const dieRepairRounds = 5

// maxJobChunks bounds the lost chunks one job lists (about 40 bytes each
// on the wire, well inside gRPC's 4 MiB message): the blobs past it are
// listed without their chunks and repaired whole, and what is left opens
// the next round.
const maxJobChunks = 16384

type dieJob struct {
	pb     *nodepb.DieRepairJob
	rounds int
	done   bool
	opened time.Time
	// flash is the device's programmed bytes when the job opened.
	flash int64
}

type dieRepairs struct {
	mu     sync.Mutex
	seq    uint64
	jobs   map[uint64]*dieJob
	method reparo.Method
}

// dieLoop opens a job for each die failure, and at start for every failed
// die that still holds live data.
func (n *Node) dieLoop(ctx context.Context, dr objstore.DieReporter) {
	defer n.wg.Done()
	for _, d := range dr.FailedDies() {
		n.openDieJob(ctx, dr, sdf.DieFailure{Die: d, First: time.Now(), At: time.Now()}, true)
	}
	for {
		select {
		case ev := <-dr.DieEvents():
			n.openDieJob(ctx, dr, ev, false)
		case <-ctx.Done():
			return
		}
	}
}

func (n *Node) openDieJob(ctx context.Context, dr objstore.DieReporter, ev sdf.DieFailure, atStart bool) {
	loss, err := dr.LostOnDie(ev.Die, n.dies.method)
	if err != nil {
		n.cfg.Logf("node %s: die %s failed; identifying what it held: %v", n.id, ev.Die, err)
		return
	}
	n.repairMetaCopies(loss)
	kvShards := n.repairKV(ctx, ev.Die, loss.OtherFiles)
	rebuild := n.cfg.DieRepair == DieRepairRebuild
	if rebuild {
		// The baseline: the device is retired with its die; every blob
		// it holds goes elsewhere.
		// Every blob with a chunk on the device (from the chunk files'
		// names: the local index may have lost entries with the die).
		names, err := n.chunks.Store().List("d/")
		if err != nil {
			n.cfg.Logf("node %s: die %s failed; listing the device's chunks for the rebuild: %v", n.id, ev.Die, err)
			return
		}
		seen := map[objstore.BlobRef]bool{}
		loss.Blobs = loss.Blobs[:0]
		for _, name := range names {
			if ref, ok := objstore.BlobOfFile(name); ok && !seen[ref] {
				seen[ref] = true
				loss.Blobs = append(loss.Blobs, ref)
			}
		}
	}
	degraded := ""
	if hr, ok := dr.(objstore.HealthReporter); ok {
		if h := hr.Health(); h.Degraded {
			degraded = "; device degraded: " + h.Reason
			n.cfg.Logf("node %s: die %s failed: device degraded: %s", n.id, ev.Die, h.Reason)
		}
	}
	if !atStart {
		n.history.record(KindDieFailed, nil, fmt.Sprintf("die %s failed (%d bad blocks, detected %v after its first failure); lost %d ranges, %s in %d files of %d blobs and %d KV shards",
			ev.Die, ev.BadBlocks, ev.Latency().Round(time.Microsecond), loss.Ranges, base.Bytes(loss.Bytes), loss.Files, len(loss.Blobs), kvShards)+degraded)
	}
	if len(loss.Blobs) == 0 {
		return
	}
	n.cfg.Logf("node %s: die %s failed: %d ranges, %s in %d files of %d blobs to repair (identified by %v in %v, %d windows)",
		n.id, ev.Die, loss.Ranges, base.Bytes(loss.Bytes), loss.Files, len(loss.Blobs), loss.Method, loss.Elapsed, loss.Windows)
	n.dies.mu.Lock()
	defer n.dies.mu.Unlock()
	n.dies.seq++
	pb := jobProto(n.dies.seq, ev, loss)
	pb.Rebuild = rebuild
	n.dies.jobs[n.dies.seq] = &dieJob{pb: pb, opened: time.Now(), flash: dr.FlashBytes()}
}

// repairKV starts the repair of the KV replicas' files the die held (the
// replicas live on the same flash device, see kvFiles): every shard with a
// file there is scrubbed, which verifies every block of its live tables;
// the blocks the die took read as corruption and are patched from the other
// replicas through the raft log (DIRECT's key-range repair), the rest of
// the table stays. Pebble's own metadata and the sstables' metadata blocks
// have copies on other channels (sdfvfs) and are served and rewritten from
// them; raft log records lost in both copies come back from the peers when
// the log is next opened. Once a shard's replica has nothing left to
// repair, its sstables' and raft logs' ranges still mapped to the dead die
// are retired off it (retireKV). It returns the shards it scrubs.
func (n *Node) repairKV(ctx context.Context, die flash.DieAddr, files []string) int {
	kn := n.KV()
	if kn == nil {
		return 0
	}
	shards := map[base.ShardID]bool{}
	for _, f := range files {
		if id, ok := kvShardOfFile(f); ok {
			shards[id] = true
		}
	}
	for id := range shards {
		r := kn.Replica(id)
		if r == nil {
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			verified, damaged, err := r.Scrub()
			n.cfg.Logf("node %s: die %s failed: kv %s scrubbed: %d tables verified, %d damaged (patched from the other replicas) %v",
				n.id, die, id, verified, damaged, err)
			if err == nil {
				n.retireKV(ctx, die, id, r)
			}
		}()
	}
	return len(shards)
}

// kvRepairSettle is how long a replica must report nothing left to repair
// before its files' ranges on a dead die are retired: the scrub's reports
// reach the replica's repair loop asynchronously.
const kvRepairSettle = time.Second

// retireKV waits (while ctx lives) until replica r of shard id has
// repaired what it found, then retires the ranges of the shard's sstables
// (with their guardfs sidecars) and raft log copies that the dead die still
// maps (objstore.LossRetirer).
// Their content is back (the key ranges of the lost data blocks are
// patched; the raft log's other copy, or the peers at the next open, hold
// its records), and each checks its own content (block and fragment
// checksums, a sidecar's framing), so the zeros that take the ranges' place
// are refused like the dead die's pages were, never read as data. First,
// the files sdfvfs keeps two copies of (Pebble's MANIFEST, OPTIONS, CURRENT
// and markers, their shadows, sstables' range copies) are rewritten off the
// die from their other copy (sdfvfs.FS.RetireCopies), without waiting for a
// read to find the damage; NB: before the zeros, so that no range copy is
// made again from a range the die took. guardfs's own copies (.guardfs/m.*)
// are restored by guardfs when it next reads them.
func (n *Node) retireKV(ctx context.Context, die flash.DieAddr, id base.ShardID, r *kv.Replica) {
	lr, ok := n.inner.(objstore.LossRetirer)
	if !ok {
		return
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var quiet time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if r.RepairsPending() > 0 {
				quiet = time.Time{}
				continue
			}
			if quiet.IsZero() {
				quiet = now
			}
			if now.Sub(quiet) < kvRepairSettle {
				continue
			}
		}
		break
	}
	n.kv.mu.Lock()
	vfs := n.kv.flashFS
	n.kv.mu.Unlock()
	if vfs != nil {
		ret, err := vfs.RetireCopies(die)
		if err != nil {
			n.cfg.Logf("node %s: die %s: kv %s: rewriting Pebble's copied files off the die: %v", n.id, die, id, err)
		} else if ret.Ranges > 0 || ret.RangeCopies > 0 || ret.Unrepairable > 0 {
			n.history.record(KindDieRepaired, nil, fmt.Sprintf("die %s: Pebble's copied files: %s", die, ret))
		}
	}
	// An sstable's footer and index blocks on the die are still in its
	// range copy (the reads served them from it): they go back in place of
	// the zeros, or the table would no longer open.
	var fill objstore.RetireFill
	if vfs != nil {
		fill = func(name string, off int64, buf []byte) { vfs.FillFromRangeCopy(name, off, buf) }
	}
	ranges, bytes, err := lr.RetireLost(die, n.dies.method, func(name string) bool {
		s, ok := kvShardOfFile(name)
		return ok && s == id && !strings.HasPrefix(name, ".sdfvfs/") &&
			(strings.HasSuffix(name, ".sst") || strings.Contains(name, "/raft/"))
	}, fill)
	if err != nil {
		n.cfg.Logf("node %s: die %s: kv %s: retiring its ranges on the die: %v", n.id, die, id, err)
		return
	}
	if ranges > 0 {
		n.history.record(KindDieRepaired, nil, fmt.Sprintf("die %s: kv %s repaired from its peers; %d ranges (%s) of its sstables and raft log retired off the die",
			die, id, ranges, base.Bytes(bytes)))
	}
}

// kvShardOfFile returns the shard whose replica keeps the flash file name
// (kvFlashDir/shard-N/..., or a copy of one under sdfvfs's reserved
// directory).
func kvShardOfFile(name string) (base.ShardID, bool) {
	i := strings.Index(name, kvFlashDir+"/shard-")
	if i < 0 || (i > 0 && name[i-1] != '/') {
		return 0, false
	}
	rest := name[i+len(kvFlashDir+"/shard-"):]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		rest = rest[:j]
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || id == 0 {
		return 0, false
	}
	return base.ShardID(id), true
}

// repairMetaCopies rewrites the copies of triplicated metadata files that
// were on the die from their other copies (reading a MetaFiles file
// rewrites every copy that does not verify).
func (n *Node) repairMetaCopies(loss objstore.DieLoss) {
	fixed := 0
	for _, name := range loss.MetaFiles {
		res, err := n.chunks.Meta().Read(name)
		if err != nil {
			n.cfg.Logf("node %s: die %s: metadata file %s: %v", n.id, loss.Die, name, err)
			continue
		}
		fixed += res.Repaired
	}
	if fixed > 0 {
		n.history.record(KindMetaRepaired, nil, fmt.Sprintf("die %s: %d metadata copies rewritten from their other copies", loss.Die, fixed))
	}
}

func jobProto(id uint64, ev sdf.DieFailure, loss objstore.DieLoss) *nodepb.DieRepairJob {
	pb := &nodepb.DieRepairJob{
		Id: id, Channel: int32(ev.Die.Channel), Die: int32(ev.Die.Die),
		FirstFailureUnixNano: ev.First.UnixNano(), DetectedUnixNano: ev.At.UnixNano(),
		Ranges: int64(loss.Ranges), LostBytes: loss.Bytes, Files: int64(loss.Files),
		MetaFiles: append(append([]string(nil), loss.MetaFiles...), loss.OtherFiles...), Identifier: loss.Method.String(), IdentifyNanos: loss.Elapsed.Nanoseconds(),
	}
	sort.Slice(loss.Blobs, func(a, b int) bool {
		return loss.Blobs[a].Object < loss.Blobs[b].Object ||
			(loss.Blobs[a].Object == loss.Blobs[b].Object && loss.Blobs[a].Version < loss.Blobs[b].Version)
	})
	for _, b := range loss.Blobs {
		pb.Objects = append(pb.Objects, b.Object)
		pb.Versions = append(pb.Versions, b.Version)
	}
	pb.LostChunks = lostChunksProto(loss.Chunks, maxJobChunks)
	return pb
}

// lostChunksProto lists the chunks the die took (Reparo's failed LBAs,
// 003 section 4.2.2, at the chunk store's granularity: the byte ranges of
// each chunk), at most limit of them and only whole blobs: a blob whose
// chunks do not all fit is left out and repaired whole. chunks are sorted
// by ID (objstore.DieLoss.Chunks).
func lostChunksProto(chunks []objstore.ChunkLoss, limit int) []*nodepb.LostChunk {
	var out []*nodepb.LostChunk
	for i := 0; i < len(chunks); {
		j := i
		for j < len(chunks) && chunks[j].ID.Object == chunks[i].ID.Object && chunks[j].ID.Version == chunks[i].ID.Version {
			j++
		}
		if len(out)+j-i > limit {
			i = j
			continue
		}
		for _, c := range chunks[i:j] {
			lc := &nodepb.LostChunk{
				Chunk:    &nodepb.ChunkRef{Object: c.ID.Object, Version: c.ID.Version, Shard: c.ID.Shard, Index: c.ID.Index},
				SumsLost: c.SumsLost,
			}
			for _, sp := range c.Lost {
				lc.Offsets = append(lc.Offsets, int64(sp.Off))
				lc.Lengths = append(lc.Lengths, int64(sp.Len))
			}
			out = append(out, lc)
		}
		i = j
	}
	return out
}

// DieRepairs lists the open die-repair jobs.
func (n *Node) DieRepairs() []*nodepb.DieRepairJob {
	n.dies.mu.Lock()
	defer n.dies.mu.Unlock()
	var out []*nodepb.DieRepairJob
	for _, j := range n.dies.jobs {
		if !j.done {
			out = append(out, j.pb)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Id < out[b].Id })
	return out
}

// DieRepairDone records the repairer's report for a job, identifies the die
// again and reopens the job for what is left (up to dieRepairRounds).
func (n *Node) DieRepairDone(req *nodepb.DieRepairDoneRequest) error {
	n.dies.mu.Lock()
	j, ok := n.dies.jobs[req.Id]
	if !ok || j.done {
		n.dies.mu.Unlock()
		return base.InvalidArgumentf("node %s: no open die-repair job %d", n.id, req.Id)
	}
	j.done = true
	j.rounds++
	pb, rounds, opened, flash0 := j.pb, j.rounds, j.opened, j.flash
	n.dies.mu.Unlock()
	dr, _ := n.inner.(objstore.DieReporter)
	die := flash.DieAddr{Channel: int(pb.Channel), Die: int(pb.Die)}
	if pb.Rebuild {
		detail := fmt.Sprintf("die %s: rebuild: the device is retired; %d blobs, %d replicas or shards re-created on other nodes (%d chunks, %s; %s fetched), %d failed, %v after detection",
			die, len(pb.Objects), req.Moved, req.ChunksRepaired, base.Bytes(req.BytesRepaired), base.Bytes(req.BytesFetched), req.ObjectsFailed,
			time.Since(time.Unix(0, pb.DetectedUnixNano)).Round(time.Millisecond))
		n.history.record(KindDieRepaired, nil, detail)
		n.cfg.Logf("node %s: %s", n.id, detail)
		return nil
	}
	var left objstore.DieLoss
	if dr != nil {
		var err error
		if left, err = dr.LostOnDie(die, n.dies.method); err != nil {
			return err
		}
		if len(left.MetaFiles) > 0 {
			n.repairMetaCopies(left)
			if left, err = dr.LostOnDie(die, n.dies.method); err != nil {
				return err
			}
		}
	}
	took := time.Since(time.Unix(0, pb.DetectedUnixNano)).Round(time.Millisecond)
	detail := fmt.Sprintf("die %s: %d ranges, %s lost in %d files; %d blobs repaired, %d failed, %d chunks (%s) written, %s fetched (%d chunks from their lost sectors, %d whole), %v after detection (round %d)",
		die, pb.Ranges, base.Bytes(pb.LostBytes), pb.Files, req.ObjectsRepaired, req.ObjectsFailed, req.ChunksRepaired,
		base.Bytes(req.BytesRepaired), base.Bytes(req.BytesFetched), req.ChunksSpanned, req.ChunksWhole, took, rounds)
	if dr != nil {
		// Everything the device programmed meanwhile (other writes too).
		detail += fmt.Sprintf("; device programmed %s meanwhile", base.Bytes(dr.FlashBytes()-flash0))
	}
	if left.Ranges > 0 {
		detail += fmt.Sprintf("; %d ranges (%s) still on the die", left.Ranges, base.Bytes(left.Bytes))
	}
	n.history.record(KindDieRepaired, nil, detail)
	n.cfg.Logf("node %s: %s", n.id, detail)
	if left.Ranges > 0 && rounds < dieRepairRounds {
		n.dies.mu.Lock()
		defer n.dies.mu.Unlock()
		n.dies.seq++
		ev := sdf.DieFailure{Die: die, First: time.Unix(0, pb.FirstFailureUnixNano), At: time.Unix(0, pb.DetectedUnixNano)}
		n.dies.jobs[n.dies.seq] = &dieJob{pb: jobProto(n.dies.seq, ev, left), rounds: rounds, opened: opened, flash: dr.FlashBytes()}
	}
	return nil
}
