package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client/objlayout"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/wire"
)

// ReadReport says what a read (or scrub) found and repaired.
type ReadReport struct {
	Mode   string
	Chunks int // chunks (REP) or rows (EC) read
	// Repaired counts chunks rewritten on the nodes that had them wrong;
	// RepairsByNode breaks it down.
	Repaired int
	// RepairedMissing counts the repairs that re-created a chunk the node
	// did not have (also in Repaired).
	RepairedMissing int
	RepairsByNode   map[uint64]int
	// RepairFailed counts repairs that could not be written (the node is
	// full or down, the write failed); RepairFailures says which and why
	// (the first MaxRepairFailures). The chunk stays damaged on that node
	// until a later read or scrub repairs it.
	RepairFailed   int
	RepairFailures []RepairFailure
	Voted          int // chunks rebuilt by majority vote
	// AllCorrupt counts REP chunks whose every replica was read corrupt
	// (rebuilt sector by sector and by vote): where chunk-granularity
	// recovery alone would have failed (the direct-read-errors experiment).
	AllCorrupt    int
	Reconstructed int // EC rows rebuilt from parity
	// Failovers counts hdfs-mode switches to another replica; Rereplicated
	// the nodes the whole object is re-replicated to.
	Failovers    int
	Rereplicated []uint64
	BytesRead    int64
}

func (r *ReadReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mode=%s chunks=%d repaired=%d", r.Mode, r.Chunks, r.Repaired)
	if r.RepairedMissing > 0 {
		fmt.Fprintf(&b, " missing=%d", r.RepairedMissing)
	}
	if r.Voted > 0 {
		fmt.Fprintf(&b, " voted=%d", r.Voted)
	}
	if r.Reconstructed > 0 {
		fmt.Fprintf(&b, " reconstructed=%d", r.Reconstructed)
	}
	if r.RepairFailed > 0 {
		fmt.Fprintf(&b, " repair-failed=%d", r.RepairFailed)
		if len(r.RepairFailures) > 0 {
			fmt.Fprintf(&b, " (first: %s)", r.RepairFailures[0])
		}
	}
	if r.Failovers > 0 {
		fmt.Fprintf(&b, " failovers=%d rereplicated=%v", r.Failovers, r.Rereplicated)
	}
	if len(r.RepairsByNode) > 0 {
		ids := make([]uint64, 0, len(r.RepairsByNode))
		for id := range r.RepairsByNode {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		b.WriteString(" by-node=")
		for i, id := range ids {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "n%d:%d", id, r.RepairsByNode[id])
		}
	}
	return b.String()
}

// MaxRepairFailures bounds the failures a ReadReport lists (all are
// counted).
const MaxRepairFailures = 16

// RepairFailure is one repair that could not be written.
type RepairFailure struct {
	Node  uint64
	Chunk direct.ChunkID
	// NoSpace: the node's device is full (base.ErrNoSpace).
	NoSpace bool
	Reason  string
}

func (f RepairFailure) String() string {
	return fmt.Sprintf("node %d chunk %s: %s", f.Node, f.Chunk, f.Reason)
}

// addRepairFailure counts a failed repair and keeps its reason.
func (r *ReadReport) addRepairFailure(j RepairJob, err error) {
	r.RepairFailed++
	if len(r.RepairFailures) < MaxRepairFailures {
		r.RepairFailures = append(r.RepairFailures, RepairFailure{Node: j.Node, Chunk: j.ID, NoSpace: base.IsNoSpace(err), Reason: err.Error()})
	}
}

// reportMu guards a ReadReport filled by concurrent chunk readers.
type report struct {
	mu sync.Mutex
	ReadReport
	// queue, when set, takes repairs instead of writing them at once (the
	// scrubber's budgeted repair queue).
	queue func(RepairJob)
}

// RepairJob is one chunk rewrite.
type RepairJob struct {
	Node uint64
	ID   direct.ChunkID
	Data []byte
	// Missing: the node did not have the chunk; Info, when set, rewrites
	// its local index entry too.
	Missing bool
	Info    *nodepb.BlobInfo
	// Kind is how the good data was found (RepairChunk, RepairVote,
	// RepairECRow); Detected is when the read that found the damage
	// decided (repair latency is measured from it).
	Kind     string
	Detected time.Time
}

// Repair kinds (RepairJob.Kind, RepairEvent.Kind).
const (
	// RepairChunk: a REP replica rewritten from a replica that verified.
	RepairChunk = "chunk"
	// RepairVote: a REP chunk no replica of which verified, rebuilt sector
	// by sector and by majority vote, then rewritten.
	RepairVote = "vote"
	// RepairECRow: an EC shard's row reconstructed from the row's other
	// shards (Reed-Solomon), then rewritten.
	RepairECRow = "ec_row"
)

// RepairEvent is one repair write this client attempted (Options.OnRepair).
type RepairEvent struct {
	Kind string
	Node uint64
	// Bytes is the chunk's size; Missing is set when the node did not have
	// the chunk at all.
	Bytes   int
	Missing bool
	// Latency is from the read that found the damage to the write's
	// answer (a queued repair includes its wait in the scrubber's queue).
	Latency time.Duration
	Err     error
}

func (r *report) add(f func(*ReadReport)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.ReadReport)
}

// readChunkREP runs DIRECT for REP chunk i (DIRECT 000 section 4.2.2).
// Replicas are read starting at i mod 3 to spread load; when scrub is set
// every replica is read and every corrupt one repaired.
//
// It returns the chunk's verified bytes (owned by the caller: the decision's
// buffer, not copied).
//
// br, when set, serves the first replica's read from its batch calls.
//
// own reports that the data returned is the chunk's own memory, which
// nothing else refers to (no repair was made from it): the caller may
// recycle it (wire.RecycleChunkData) once it has delivered it.
func (c *Client) readChunkREP(ctx context.Context, l objlayout.Layout, i int, rep *report, scrub bool, br *batchReader) (data []byte, own bool, err error) {
	id := l.ID(0, i)
	n := l.ChunkLen(i)
	order := make([]int, l.Copies)
	for k := range order {
		order[k] = (i + k) % l.Copies
	}
	reads := make([]direct.ReplicaRead, l.Copies)
	var d direct.Decision
	if scrub {
		c.fetchAll(ctx, l, i, order, reads)
		d = direct.ScrubREP(id, n, reads)
	} else {
		for {
			d = direct.DecideREP(id, n, reads)
			if len(d.Fetch) == 0 {
				break
			}
			for _, k := range d.Fetch {
				if br != nil && !reads[k].Fetched {
					reads[k] = br.read(ctx, order[k], i)
					continue
				}
				reads[k] = c.readChunk(ctx, l.Placement[order[k]], id)
			}
		}
	}
	if d.Err != nil {
		return nil, false, d.Err
	}
	repairs := make([]int, len(d.Repairs))
	missing := make([]bool, l.Copies)
	for k, r := range d.Repairs {
		repairs[k] = order[r]
		missing[order[r]] = reads[r].Missing
	}
	kind := RepairChunk
	if d.Voted {
		kind = RepairVote
	}
	c.applyRepairs(ctx, l, i, repairs, d.RepairData, missing, rep, kind)
	rep.add(func(r *ReadReport) {
		r.BytesRead += int64(n)
		if d.Voted {
			r.Voted++
		}
		if !scrub && len(d.Repairs) == l.Copies {
			r.AllCorrupt++
		}
	})
	return d.Data, len(d.Repairs) == 0 && !scrub, nil
}

// fetchAll reads chunk i from every replica in parallel (order maps read
// slots to replicas; for EC slot k reads shard order[k]).
func (c *Client) fetchAll(ctx context.Context, l objlayout.Layout, i int, order []int, reads []direct.ReplicaRead) {
	var wg sync.WaitGroup
	for k := range reads {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			shard := 0
			if l.EC {
				shard = order[k]
			}
			reads[k] = c.readChunk(ctx, l.Placement[order[k]], l.ID(shard, i))
		}(k)
	}
	wg.Wait()
}

// applyRepairs rewrites corrupt chunks out of place on the nodes that had
// them wrong (or queues them for the scrubber). kind is the RepairJob's;
// every kind but RepairECRow is REP, where every replica stores shard 0. missing[r] marks a replica or shard whose
// chunk the node did not have at all: it is re-created, and with chunk 0
// the node's local index entry is written again too.
func (c *Client) applyRepairs(ctx context.Context, l objlayout.Layout, i int, replicas []int, data [][]byte, missing []bool, rep *report, kind string) {
	detected := c.opts.Clock.Now()
	for k, r := range replicas {
		shard := r
		if kind != RepairECRow {
			shard = 0
		}
		nodeID := l.Placement[r]
		job := RepairJob{Node: nodeID, ID: l.ID(shard, i), Data: data[k], Missing: missing[r], Kind: kind, Detected: detected}
		if job.Missing && i == 0 {
			job.Info = l.BlobInfo(shard, c.opts.Clock.Now().UnixMilli())
		}
		if rep.queue != nil {
			rep.queue(job)
			continue
		}
		err := c.applyRepair(ctx, job)
		rep.add(func(rr *ReadReport) {
			if err != nil {
				rr.addRepairFailure(job, err)
				return
			}
			rr.Repaired++
			if job.Missing {
				rr.RepairedMissing++
			}
			rr.RepairsByNode[nodeID]++
		})
		if err != nil {
			c.opts.Logf("client: repair of %s on node %d: %v", job.ID, nodeID, err)
		}
	}
}

// applyRepair writes one repair and tells Options.OnRepair.
func (c *Client) applyRepair(ctx context.Context, j RepairJob) error {
	err := c.writeChunkReq(ctx, j.Node, j.ID, j.Data, nil, true, j.Missing, j.Info)
	if c.opts.OnRepair != nil && ctx.Err() == nil {
		ev := RepairEvent{Kind: j.Kind, Node: j.Node, Bytes: len(j.Data), Missing: j.Missing, Err: err}
		if !j.Detected.IsZero() {
			ev.Latency = c.opts.Clock.Now().Sub(j.Detected)
		}
		c.opts.OnRepair(ev)
	}
	return err
}

// readRowEC runs DIRECT for EC row i: only this row is reconstructed from
// the other shards' same rows; with scrub every shard, parity included, is
// read and verified.
// It returns the row's verified object bytes (the data shards, without the
// last row's padding); own (always, but for a scrub): the row is in memory
// of its own that nothing else refers to, which the caller may recycle
// (wire.RecycleChunkData) once it has delivered it.
//
// br, when set, serves the data shards' first reads from its batch calls.
func (c *Client) readRowEC(ctx context.Context, l objlayout.Layout, i int, rep *report, scrub bool, br *batchReader) (data []byte, own bool, err error) {
	var ids [direct.TotalShards]direct.ChunkID
	for s := range ids {
		ids[s] = l.ID(s, i)
	}
	n := l.ChunkLen(i)
	var reads [direct.TotalShards]direct.ReplicaRead
	if scrub {
		order := []int{0, 1, 2, 3, 4, 5}
		c.fetchAll(ctx, l, i, order, reads[:])
	}
	// The row is assembled in a buffer of the data path's pool, which
	// the caller may recycle once it has delivered the row (own).
	var row *[]byte
	if !scrub {
		row = wire.ChunkBufferPool.Get(direct.DataShards * n)
	}
	var d direct.Decision
	for {
		if row != nil {
			d = direct.DecideECInto(c.enc, ids, n, reads, (*row)[:0])
		} else {
			d = direct.DecideEC(c.enc, ids, n, reads)
		}
		if len(d.Fetch) == 0 {
			break
		}
		fetchEach(d.Fetch, func(s int) {
			if br != nil {
				reads[s] = br.read(ctx, s, i)
				return
			}
			reads[s] = c.readChunk(ctx, l.Placement[s], ids[s])
		})
	}
	if d.Err != nil {
		if row != nil {
			wire.ChunkBufferPool.Put(row)
		}
		return nil, false, d.Err
	}
	var missing [direct.TotalShards]bool
	for s := range reads {
		missing[s] = reads[s].Missing
	}
	c.applyRepairs(ctx, l, i, d.Repairs, d.RepairData, missing[:], rep, RepairECRow)
	if len(d.Repairs) == 0 && !scrub {
		// The row is decoded into a buffer of its own (DecideEC): the
		// shards' data, which no repair refers to, are done with.
		for s := range reads {
			if reads[s].Data != nil {
				wire.RecycleChunkData(reads[s].Data)
			}
		}
	}
	rep.add(func(r *ReadReport) {
		r.BytesRead += int64(l.DataLen(i))
		if d.Reconstructed {
			r.Reconstructed++
		}
	})
	return d.Data[:l.DataLen(i)], !scrub, nil
}

// fetchEach runs read for every shard in shards at once and returns when
// all are done (each writes only its own shard's slot).
func fetchEach(shards []int, read func(sh int)) {
	var wg sync.WaitGroup
	for _, sh := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			read(sh)
		}()
	}
	wg.Wait()
}
