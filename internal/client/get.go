package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
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

// Get reads a key's current version in the client's read mode.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	data, _, err := c.GetWithReport(ctx, key, ModeDefault)
	return data, err
}

// GetWithReport reads a key in the given mode (ModeDefault for the
// client's) and says what was repaired.
//
// A version is immutable, but a concurrent overwrite or delete lets the
// coordinator collect it while it is being read (DIRECT 000 section 4.2.2:
// reads need not see a deletion instantly). When a read fails and the key
// has meanwhile moved to another version, the new version is read; when
// the key is gone, the result is not found.
func (c *Client) GetWithReport(ctx context.Context, key, mode string) ([]byte, *ReadReport, error) {
	rec, err := c.Stat(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		data, rep, err := c.ReadVersion(ctx, rec, mode)
		if err == nil || attempt == 2 || base.IsInvalidArgument(err) || ctx.Err() != nil {
			return data, rep, err
		}
		now, serr := c.Stat(ctx, key)
		if serr != nil {
			if errors.Is(serr, fs.ErrNotExist) {
				return nil, rep, serr
			}
			return nil, rep, err
		}
		if now.Version == rec.Version {
			return nil, rep, err
		}
		rec = now
	}
}

// ReadVersion reads the version rec describes.
func (c *Client) ReadVersion(ctx context.Context, rec *objectpb.ObjectRecord, mode string) ([]byte, *ReadReport, error) {
	mode, err := c.readMode(mode)
	if err != nil {
		return nil, nil, err
	}
	l, err := newLayout(rec)
	if err != nil {
		return nil, nil, err
	}
	rep := &report{ReadReport: ReadReport{Mode: mode, Chunks: l.chunks, RepairsByNode: map[uint64]int{}}}
	out := make([]byte, rec.SizeBytes)
	switch {
	case l.ec:
		err = c.forEachChunk(ctx, l.chunks, func(ctx context.Context, i int) error {
			return c.readRowEC(ctx, l, i, out, rep, false)
		})
	case mode == ModeHDFS:
		err = c.readHDFS(ctx, rec, l, out, rep)
	default:
		err = c.forEachChunk(ctx, l.chunks, func(ctx context.Context, i int) error {
			return c.readChunkREP(ctx, l, i, out, rep, false)
		})
	}
	if err != nil {
		return nil, &rep.ReadReport, fmt.Errorf("get %q v%d: %w", rec.Key, rec.Version, err)
	}
	return out, &rep.ReadReport, nil
}

// forEachChunk runs f over chunk indexes with bounded parallelism. The
// first failure cancels the rest and is the one returned (the failures it
// causes are not).
func (c *Client) forEachChunk(ctx context.Context, n int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var first error
	fail := func(err error) {
		once.Do(func() {
			first = err
			cancel()
		})
	}
	sem := make(chan struct{}, c.opts.ChunksInFlight)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			fail(ctx.Err())
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				fail(err)
			}
		}(i)
	}
	wg.Wait()
	return first
}

// readChunkREP runs DIRECT for REP chunk i (DIRECT 000 section 4.2.2).
// Replicas are read starting at i mod 3 to spread load; when scrub is set
// every replica is read and every corrupt one repaired.
func (c *Client) readChunkREP(ctx context.Context, l layout, i int, out []byte, rep *report, scrub bool) error {
	id := l.id(0, i)
	n := l.chunkLen(i)
	order := make([]int, l.copies)
	for k := range order {
		order[k] = (i + k) % l.copies
	}
	reads := make([]direct.ReplicaRead, l.copies)
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
				reads[k] = c.readChunk(ctx, l.placement[order[k]], id)
			}
		}
	}
	if d.Err != nil {
		return d.Err
	}
	repairs := make([]int, len(d.Repairs))
	missing := make([]bool, l.copies)
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
		if !scrub && len(d.Repairs) == l.copies {
			r.AllCorrupt++
		}
	})
	if out != nil {
		copy(out[l.offset(i):], d.Data)
	}
	return nil
}

// fetchAll reads chunk i from every replica in parallel (order maps read
// slots to replicas; for EC slot k reads shard order[k]).
func (c *Client) fetchAll(ctx context.Context, l layout, i int, order []int, reads []direct.ReplicaRead) {
	var wg sync.WaitGroup
	for k := range reads {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			shard := 0
			if l.ec {
				shard = order[k]
			}
			reads[k] = c.readChunk(ctx, l.placement[order[k]], l.id(shard, i))
		}(k)
	}
	wg.Wait()
}

// applyRepairs rewrites corrupt chunks out of place on the nodes that had
// them wrong (or queues them for the scrubber). kind is the RepairJob's;
// every kind but RepairECRow is REP, where every replica stores shard 0. missing[r] marks a replica or shard whose
// chunk the node did not have at all: it is re-created, and with chunk 0
// the node's local index entry is written again too.
func (c *Client) applyRepairs(ctx context.Context, l layout, i int, replicas []int, data [][]byte, missing []bool, rep *report, kind string) {
	detected := c.opts.Clock.Now()
	for k, r := range replicas {
		shard := r
		if kind != RepairECRow {
			shard = 0
		}
		nodeID := l.placement[r]
		job := RepairJob{Node: nodeID, ID: l.id(shard, i), Data: data[k], Missing: missing[r], Kind: kind, Detected: detected}
		if job.Missing && i == 0 {
			job.Info = l.blobInfo(shard, c.opts.Clock.Now().UnixMilli())
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
	err := c.writeChunkReq(ctx, j.Node, j.ID, j.Data, true, j.Missing, j.Info)
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
func (c *Client) readRowEC(ctx context.Context, l layout, i int, out []byte, rep *report, scrub bool) error {
	var ids [direct.TotalShards]direct.ChunkID
	for s := range ids {
		ids[s] = l.id(s, i)
	}
	n := l.chunkLen(i)
	var reads [direct.TotalShards]direct.ReplicaRead
	if scrub {
		order := []int{0, 1, 2, 3, 4, 5}
		c.fetchAll(ctx, l, i, order, reads[:])
	}
	var d direct.Decision
	for {
		d = direct.DecideEC(c.enc, ids, n, reads)
		if len(d.Fetch) == 0 {
			break
		}
		var wg sync.WaitGroup
		for _, s := range d.Fetch {
			wg.Add(1)
			go func(s int) {
				defer wg.Done()
				reads[s] = c.readChunk(ctx, l.placement[s], ids[s])
			}(s)
		}
		wg.Wait()
	}
	if d.Err != nil {
		return d.Err
	}
	var missing [direct.TotalShards]bool
	for s := range reads {
		missing[s] = reads[s].Missing
	}
	c.applyRepairs(ctx, l, i, d.Repairs, d.RepairData, missing[:], rep, RepairECRow)
	rep.add(func(r *ReadReport) {
		r.BytesRead += int64(l.dataLen(i))
		if d.Reconstructed {
			r.Reconstructed++
		}
	})
	if out != nil {
		copy(out[l.offset(i):], d.Data[:l.dataLen(i)])
	}
	return nil
}

// readHDFS is the hdfs baseline (DIRECT 000 section 4.2.1): stream the
// block from one replica; at the first chunk that fails verification switch
// to the next replica from that offset and never go back; the read fails
// when every replica has failed. Failed replicas are reported and the whole
// object is re-replicated to them in the background.
func (c *Client) readHDFS(ctx context.Context, rec *objectpb.ObjectRecord, l layout, out []byte, rep *report) error {
	st := direct.NewHDFSState(l.copies)
	next := 0
	var readErr error
	for next < l.chunks && readErr == nil {
		replica := st.Current
		if replica >= l.copies {
			break
		}
		// Stream the rest of the block from the current replica.
		reads := make([]direct.ReplicaRead, l.chunks)
		// The callback returns no error: a failed read is recorded in its
		// ReplicaRead and handled below.
		_ = c.forEachChunk(ctx, l.chunks-next, func(ctx context.Context, k int) error {
			reads[next+k] = c.readChunk(ctx, l.placement[replica], l.id(0, next+k))
			return nil
		})
		for ; next < l.chunks; next++ {
			slot := make([]direct.ReplicaRead, l.copies)
			slot[replica] = reads[next]
			d := direct.DecideHDFS(st, l.id(0, next), l.chunkLen(next), slot)
			if d.Err != nil {
				readErr = d.Err
				break
			}
			if len(d.Fetch) > 0 {
				rep.add(func(r *ReadReport) { r.Failovers++ })
				break // failed over: stream from the new replica at this offset
			}
			copy(out[l.offset(next):], d.Data)
			rep.add(func(r *ReadReport) { r.BytesRead += int64(len(d.Data)) })
		}
	}
	if readErr == nil && next < l.chunks {
		readErr = base.DataLossErrorf("object %q: every replica failed (hdfs mode)", rec.Key)
	}
	var bad []uint64
	for r, failed := range st.Failed {
		if failed {
			bad = append(bad, l.placement[r])
			if _, err := c.coord.ReportBadReplica(ctx, &coordpb.ReportBadReplicaRequest{Key: rec.Key, Version: rec.Version, NodeId: l.placement[r]}); err != nil {
				// Best effort: the report only speeds up re-replication.
				c.opts.Logf("client: report bad replica of %q on node %d: %v", rec.Key, l.placement[r], err)
			}
		}
	}
	if readErr != nil {
		return readErr
	}
	sort.Slice(bad, func(a, b int) bool { return bad[a] < bad[b] })
	rep.add(func(r *ReadReport) { r.Rereplicated = bad })
	for r, failed := range st.Failed {
		if failed {
			c.rereplicate(l, r, append([]byte(nil), out...))
		}
	}
	return nil
}

// rereplicate rewrites every chunk of the object on replica r, in the
// background: HDFS recovers at block granularity.
func (c *Client) rereplicate(l layout, r int, data []byte) {
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		for i := 0; i < l.chunks; i++ {
			chunk := data[l.offset(i) : l.offset(i)+int64(l.chunkLen(i))]
			if err := c.writeChunk(c.bgCtx, l.placement[r], l.id(0, i), chunk, true, nil); err != nil {
				c.opts.Logf("client: hdfs re-replication to node %d: %v", l.placement[r], err)
				return
			}
		}
	}()
}

// WaitBackground waits for background re-replications to finish.
func (c *Client) WaitBackground() { c.bg.Wait() }
