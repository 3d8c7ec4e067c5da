package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client/objlayout"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/wire"
)

// ParseRedundancy parses "rep" or "ec".
func ParseRedundancy(s string) (objectpb.Redundancy, error) {
	switch s {
	case "rep", "REP":
		return objectpb.Redundancy_REP, nil
	case "ec", "EC":
		return objectpb.Redundancy_EC, nil
	}
	return 0, base.InvalidArgumentf("unknown redundancy %q (want rep or ec)", s)
}

// Put writes data as a new version of key and commits it once every chunk
// is durable on every replica or shard. A node that fails during the write
// is excluded and the write starts again on a new placement.
//
// data must not change until Put returns: a REP write sends its chunks
// straight from it (sliceSource), without copying them into buffers of
// its own.
func (c *Client) Put(ctx context.Context, key string, data []byte, red objectpb.Redundancy) (*objectpb.ObjectRecord, error) {
	return c.PutReader(ctx, key, &sliceSource{Reader: bytes.NewReader(data), data: data}, int64(len(data)), red)
}

// sliceSource is Put's source: a reader of data whose REP units alias data
// instead of being read into the write's buffers (produceUnits). It seeks
// as bytes.Reader does, so a write placed again starts over.
type sliceSource struct {
	*bytes.Reader
	data []byte
}

// take returns the next n bytes of the source as a slice of data (fewer at
// its end), advancing the reader past them as a read would.
func (s *sliceSource) take(n int64) ([]byte, error) {
	off, err := s.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	n = min(n, int64(len(s.data))-off)
	if _, err := s.Seek(n, io.SeekCurrent); err != nil {
		return nil, err
	}
	return s.data[off : off+n], nil
}

// PutReader writes the bytes of src as a new version of key, streaming: it
// holds at most Options.WindowBytes of them at a time (see the package
// doc), read, checksummed and encoded while earlier chunks are on the wire.
// size is the number of bytes src yields (a source that ends early is an
// error wrapping io.ErrUnexpectedEOF; bytes past size are not read), or -1
// when unknown: src is then read to io.EOF, and the version's first chunk
// (which carries the blob's size to the nodes' local indexes) is written
// last. When a node fails mid-write the write is placed again from the
// start of src, which takes an io.Seeker: a source that cannot seek fails
// with the node's error instead.
func (c *Client) PutReader(ctx context.Context, key string, src io.Reader, size int64, red objectpb.Redundancy) (*objectpb.ObjectRecord, error) {
	if err := checkUTF8("object key", key); err != nil {
		return nil, err
	}
	if size < -1 {
		return nil, base.InvalidArgumentf("object size %d (want -1 for unknown, or at least 0)", size)
	}
	if size > c.info.MaxObjectBytes {
		return nil, base.InvalidArgumentf("object of %d bytes exceeds the cluster's limit of %s", size, base.Bytes(c.info.MaxObjectBytes))
	}
	seeker, _ := src.(io.Seeker)
	var start int64
	if seeker != nil {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			seeker = nil // a pipe, say: not seekable after all
		}
	}
	var exclude []uint64
	var lastErr error
	for attempt := 0; attempt < c.opts.WriteAttempts; attempt++ {
		if attempt > 0 {
			if seeker == nil {
				return nil, fmt.Errorf("put %q: nodes %v failed (%w); the source cannot seek, so the write cannot be placed again", key, exclude, lastErr)
			}
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return nil, fmt.Errorf("put %q: nodes %v failed (%w); rewinding the source: %v", key, exclude, lastErr, err)
			}
		}
		begin, err := c.coord.BeginPut(ctx, &coordpb.BeginPutRequest{
			// NB: an unknown size is checked against the cluster's limit
			// at CommitPut (and by the client as it reads).
			Key: key, SizeBytes: max(size, 0), Redundancy: red, Exclude: exclude,
		})
		if err != nil {
			if lastErr != nil {
				// No placement left without the nodes that failed: their
				// reason (a full device, say) is the one that matters.
				return nil, fmt.Errorf("put %q: nodes %v failed (%w); no placement left without them: %v", key, exclude, lastErr, wire.FromStatus(err))
			}
			return nil, wire.FromStatus(err)
		}
		if begin.Redundancy != objectpb.Redundancy_REDUNDANCY_UNSPECIFIED {
			red = begin.Redundancy // the cluster's wear policy decides
		}
		placement := make([]uint64, len(begin.Placement))
		for i, n := range begin.Placement {
			placement[i] = n.Id
		}
		rec := &objectpb.ObjectRecord{Key: key, Object: begin.Object, Version: begin.Version,
			SizeBytes: size, Redundancy: red, Placement: placement}
		failed, err := c.writeStream(ctx, rec, src)
		if err == nil {
			resp, err := c.coord.CommitPut(ctx, &coordpb.CommitPutRequest{
				Key: key, Version: begin.Version, SizeBytes: rec.SizeBytes, Redundancy: red, Placement: placement,
			})
			if err != nil {
				c.abort(key, begin.Version)
				return nil, wire.FromStatus(err)
			}
			return resp.Record, nil
		}
		c.abort(key, begin.Version)
		if len(failed) == 0 || ctx.Err() != nil {
			return nil, err
		}
		c.opts.Logf("client: put %q v%d: nodes %v failed (%v); placing again", key, begin.Version, failed, err)
		exclude = append(exclude, failed...)
		lastErr = err
	}
	return nil, fmt.Errorf("put %q: gave up after %d placements: %w", key, c.opts.WriteAttempts, lastErr)
}

// abort tells the coordinator to drop a pending version (best effort: an
// unreachable coordinator expires it on its own).
func (c *Client) abort(key string, version uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.coord.AbortPut(ctx, &coordpb.AbortPutRequest{Key: key, Version: version}); err != nil {
		c.opts.Logf("client: abort of %q version %d: %v (it expires on its own)", key, version, err)
	}
}

// unitBuf holds one unit of a streamed write: a REP chunk, or an EC row's
// six shard chunks (data shards first, back to back, then parity). It
// returns to its write's free list when every replica's or shard's stream
// has sent its chunk (or given up on it).
type unitBuf struct {
	buf     []byte
	shards  [][]byte
	pending atomic.Int32
	free    chan *unitBuf
	// alias: buf is the caller's data (sliceSource), not a buffer of the
	// write's; it is never written to and never pooled.
	alias bool
}

func (u *unitBuf) done() {
	if u.pending.Add(-1) == 0 {
		u.free <- u
	}
}

// writeTask is one chunk bound for one replica or shard.
type writeTask struct {
	replica int
	id      direct.ChunkID
	data    []byte
	sums    []uint32
	info    *nodepb.BlobInfo
	unit    *unitBuf // nil for an empty object's index entries
}

// writeStream reads rec's bytes from src and writes every chunk to its
// replicas or shards, one WriteChunks stream each, a window of units ahead
// of the slowest stream. With rec.SizeBytes -1 (unknown) it sets
// rec.SizeBytes to the bytes read. It returns the nodes that failed with
// operating errors (to be excluded), or a hard error (bad input,
// corruption, a source that fails) with no failed nodes.
func (c *Client) writeStream(ctx context.Context, rec *objectpb.ObjectRecord, src io.Reader) ([]uint64, error) {
	known := rec.SizeBytes >= 0
	if !known {
		rec.SizeBytes = 0 // for the layout's geometry; set when src ends
	}
	l, err := objlayout.New(rec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var failed []uint64
	var firstErr error
	setErr := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	// One stream per replica or shard, each fed by its own queue: a slow
	// node holds back only its own stream until the window is full.
	queues := make([]chan writeTask, l.Copies)
	var wg sync.WaitGroup
	for r := range queues {
		queues[r] = make(chan writeTask, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.writeReplica(ctx, l.Placement[r], queues[r])
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if firstErr == nil {
				firstErr = err
			}
			if base.IsInvalidArgument(err) || base.IsCorruption(err) {
				cancel()
			} else if !slices.Contains(failed, l.Placement[r]) {
				failed = append(failed, l.Placement[r])
			}
		}()
	}
	send := func(ts []writeTask) bool {
		for k, t := range ts {
			select {
			case queues[t.replica] <- t:
			case <-ctx.Done():
				// The tasks not queued are released here: no stream
				// will see them.
				for _, t := range ts[k:] {
					if t.unit != nil {
						t.unit.done()
					}
				}
				return false
			}
		}
		return true
	}
	win := &unitWindow{free: make(chan *unitBuf, c.unitsAhead(l))}
	size, err := c.produceUnits(ctx, l, src, known, send, win)
	if err != nil {
		setErr(err)
		cancel()
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	c.reclaimUnits(l, win)
	mu.Lock()
	defer mu.Unlock()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil && len(failed) > 0 && (base.IsInvalidArgument(firstErr) || base.IsCorruption(firstErr) || firstErr == err) {
		failed = nil
	}
	if firstErr == nil {
		rec.SizeBytes = size
	}
	return failed, firstErr
}

// writeReplica sends every chunk of tasks to node nodeID on one
// WriteChunks stream and waits until the node has stored them all. Each
// task's unit is released once gRPC's transport has written its chunk to
// the connection (or dropped it): the chunk is sent from the unit's buffer,
// not copied into the message (wire.ChunkSend), so the window bounds the
// units read ahead and not yet sent, not the chunks not yet stored; the
// stream's flow control bounds those. After a failure the remaining tasks
// are released unsent. A stream that makes no progress for RPCTimeout (a
// send blocked, or the final answer late) is cancelled and fails.
func (c *Client) writeReplica(ctx context.Context, nodeID uint64, tasks <-chan writeTask) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Bool
	watchdog := time.AfterFunc(c.opts.RPCTimeout, func() {
		stalled.Store(true)
		cancel()
	})
	watchdog.Stop()
	var stream nodepb.Node_WriteChunksClient
	var err error
	sent := uint32(0)
	for t := range tasks {
		if err == nil && stream == nil {
			stream, err = c.openWriteChunks(ctx, nodeID)
		}
		if err != nil {
			if t.unit != nil {
				t.unit.done() // released unsent
			}
			continue
		}
		var release func()
		if t.unit != nil {
			release = t.unit.done
		}
		// The chunk goes out from the unit's buffer (or the caller's
		// slice), not copied into the message: gRPC releases the unit
		// once its transport wrote the chunk to the connection.
		msg := wire.NewChunkSend(&nodepb.WriteChunkRequest{
			Chunk: &nodepb.ChunkRef{Object: t.id.Object, Version: t.id.Version, Shard: t.id.Shard, Index: t.id.Index},
			Sums:  t.sums, Info: t.info,
		}, t.data, release)
		watchdog.Reset(c.opts.RPCTimeout)
		err = stream.SendMsg(msg)
		watchdog.Stop()
		if err != nil {
			msg.ReleaseUnsent() // not taken by the codec: never released by gRPC
		}
		sent++
	}
	if stream == nil {
		if err != nil {
			return fmt.Errorf("node %d: write: %w", nodeID, err)
		}
		return nil // nothing to write
	}
	if err != nil && err != io.EOF {
		// Not the node's answer (that comes as io.EOF, then the status):
		// the stream broke on this side, its context most likely.
		return c.writeStreamErr(nodeID, stalled.Load(), err)
	}
	watchdog.Reset(c.opts.RPCTimeout)
	resp, err := stream.CloseAndRecv()
	watchdog.Stop()
	if err != nil {
		return c.writeStreamErr(nodeID, stalled.Load(), err)
	}
	if resp.Chunks != sent {
		return fmt.Errorf("node %d: stored %d of the %d chunks written", nodeID, resp.Chunks, sent)
	}
	return nil
}

// openWriteChunks opens a WriteChunks stream to a live node.
//
// NB: gRPC keeps a client stream's first messages (up to its retry buffer,
// 256 KiB by default) for a transparent retry until the stream is
// committed: the server's first answer, the stream's end, or more than the
// buffer sent. Their chunks are sent from the write's units
// (wire.ChunkSend), which come back only when gRPC lets go of them: with a
// window smaller than that buffer the write waited for units the buffer
// held while the buffer waited for more messages (TestStreamRoundTrip's
// one-chunk window hung). A retry buffer of zero commits the stream at its
// first message; the write's own placement retry is what recovers a failed
// node.
func (c *Client) openWriteChunks(ctx context.Context, nodeID uint64) (nodepb.Node_WriteChunksClient, error) {
	nc, err := c.nodeClient(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	return nc.WriteChunks(ctx, grpc.MaxRetryRPCBufferSize(0))
}

// writeStreamErr is the error of a WriteChunks stream that failed.
func (c *Client) writeStreamErr(nodeID uint64, stalled bool, err error) error {
	if stalled {
		return fmt.Errorf("node %d: write: no progress for %v: %w", nodeID, c.opts.RPCTimeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("node %d: write: %w", nodeID, wire.FromStatus(err))
}

// produceUnits reads src unit by unit into the window's buffers, computes
// the checksums (and EC parity), and sends each chunk's writes. It returns
// the bytes read. An error is a hard one (the source, the size, a bug);
// false from send means the write was stopped.
func (c *Client) produceUnits(ctx context.Context, l objlayout.Layout, src io.Reader, known bool, send func([]writeTask) bool, win *unitWindow) (int64, error) {
	unit := l.UnitBytes()
	ahead := cap(win.free)
	free := win.free
	// A REP write of a byte slice (Put) sends its chunks from the slice:
	// no unit buffer is filled, only the window's count of units is kept.
	slice, _ := src.(*sliceSource)
	alias := slice != nil && known && !l.EC
	acquire := func() (*unitBuf, error) {
		select {
		case u := <-free:
			return u, nil
		default:
		}
		if win.allocated < ahead {
			win.allocated++
			if alias {
				return &unitBuf{free: free, alias: true}, nil
			}
			return getUnitBuf(l, free), nil
		}
		select {
		case u := <-free:
			return u, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	now := c.opts.Clock.Now().UnixMilli()
	var total int64
	var held []writeTask // unit 0 of an object of unknown size
	// cur and heldUnit are units this producer holds, handed to no stream:
	// back to the free list when it returns early (reclaimUnits waits for
	// every unit).
	var cur, heldUnit *unitBuf
	defer func() {
		for _, u := range []*unitBuf{cur, heldUnit} {
			if u != nil {
				free <- u
			}
		}
	}()
	for i := 0; ; i++ {
		want := unit
		if known {
			want = min(unit, l.Size-total)
			if want <= 0 {
				break
			}
		}
		u, err := acquire()
		if err != nil {
			return total, err
		}
		cur = u
		var n int
		if u.alias {
			u.buf, err = slice.take(want)
			if n = len(u.buf); err == nil && int64(n) < want {
				err = io.ErrUnexpectedEOF
				if n == 0 {
					err = io.EOF
				}
			}
		} else {
			n, err = io.ReadFull(src, u.buf[:want])
		}
		last := false
		switch {
		case err == nil:
		case known && (err == io.EOF || err == io.ErrUnexpectedEOF):
			return total, base.InvalidArgumentf("the source ended after %d of %d bytes: %w", total+int64(n), l.Size, io.ErrUnexpectedEOF)
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			last = true
		default:
			return total, fmt.Errorf("reading the object's bytes after %d: %w", total, err)
		}
		if n == 0 {
			cur = nil
			free <- u
			break
		}
		total += int64(n)
		if total > c.info.MaxObjectBytes {
			return total, base.InvalidArgumentf("object exceeds the cluster's limit of %s", base.Bytes(c.info.MaxObjectBytes))
		}
		ts, err := c.unitTasks(l, i, u, n)
		if err != nil {
			return total, err
		}
		cur = nil
		switch {
		case i == 0 && !known:
			held, heldUnit = ts, u
		case i == 0:
			for k := range ts {
				ts[k].info = l.BlobInfo(int(ts[k].id.Shard), now)
			}
			fallthrough
		default:
			if !send(ts) {
				return total, ctx.Err()
			}
		}
		if last {
			break
		}
	}
	if known && total != l.Size {
		return total, base.AssertionFailedf("put read %d of %d bytes", total, l.Size)
	}
	if !known {
		l.Rec.SizeBytes = total
		final, err := objlayout.New(l.Rec)
		if err != nil {
			return total, err
		}
		l = final
		for k := range held {
			held[k].info = l.BlobInfo(int(held[k].id.Shard), now)
		}
		heldUnit = nil
		if !send(held) {
			return total, ctx.Err()
		}
	}
	if total == 0 {
		// An empty object stores no chunk; its replicas or shards are
		// only local index entries (so a rebuilt index still has it).
		var ts []writeTask
		for r := 0; r < l.Copies; r++ {
			shard := 0
			if l.EC {
				shard = r
			}
			ts = append(ts, writeTask{replica: r, id: l.ID(shard, 0), info: l.BlobInfo(shard, now)})
		}
		if !send(ts) {
			return total, ctx.Err()
		}
	}
	return total, nil
}

// unitWindow is one write's window of units: free holds those no stream
// refers to any more (its capacity is the window's size in units),
// allocated counts the units made so far.
type unitWindow struct {
	free      chan *unitBuf
	allocated int
}

// unitsReclaimWait bounds how long a finished write waits for gRPC to
// release the units its transport still refers to (reclaimUnits).
const unitsReclaimWait = 10 * time.Second

// reclaimUnits waits, once every stream of a write has ended, until gRPC
// released every unit of win (its transport writes a chunk from the unit's
// buffer or the caller's slice, or drops it when its stream ends), and
// hands their buffers to the next writes' windows: an 8 MiB window is
// otherwise 8 MiB of new, zeroed memory per write. So no unit is referred
// to once Put returns, and the caller may change its slice. NB: a unit
// gRPC has not released after unitsReclaimWait (never seen; it frees a
// stream's queued frames when the stream ends) is left to the collector,
// and logged.
func (c *Client) reclaimUnits(l objlayout.Layout, win *unitWindow) {
	var timeout <-chan time.Time
	for n := 0; n < win.allocated; n++ {
		var u *unitBuf
		select {
		case u = <-win.free:
		default:
			if timeout == nil {
				t := time.NewTimer(unitsReclaimWait)
				defer t.Stop()
				timeout = t.C
			}
			select {
			case u = <-win.free:
			case <-timeout:
				c.opts.Logf("client: put: %d of %d units of the write still held by gRPC after %v; left to the collector", win.allocated-n, win.allocated, unitsReclaimWait)
				return
			}
		}
		putUnitBuf(l, u)
	}
}

// unitBufs hold the unit buffers of finished writes, by kind (REP: one
// chunk, EC: a row's six shard chunks), for the next writes' windows.
var unitBufs [2]sync.Pool

// getUnitBuf returns one unit's buffer for a write of layout l: one a
// finished write left (its bytes are stale: every unit is filled before it
// is used), or a new one.
func getUnitBuf(l objlayout.Layout, free chan *unitBuf) *unitBuf {
	k, n := 0, direct.ChunkSize
	if l.EC {
		k, n = 1, direct.TotalShards*direct.ChunkSize
	}
	if b, ok := unitBufs[k].Get().(*[]byte); ok && len(*b) == n {
		return &unitBuf{buf: *b, free: free}
	}
	return &unitBuf{buf: make([]byte, n), free: free}
}

// putUnitBuf hands a unit's buffer to later writes. Only a unit whose
// every task is done may be put: nothing refers to its buffer any more
// (gRPC released it, see writeReplica).
func putUnitBuf(l objlayout.Layout, u *unitBuf) {
	if u.alias {
		return
	}
	k := 0
	if l.EC {
		k = 1
	}
	b := u.buf[:cap(u.buf)]
	unitBufs[k].Put(&b)
}

// unitTasks checksums (REP) or encodes and checksums (EC) unit i, whose n
// object bytes are at the start of u.buf, and returns its writes: one per
// replica or shard, the checksums computed once per chunk.
func (c *Client) unitTasks(l objlayout.Layout, i int, u *unitBuf, n int) ([]writeTask, error) {
	var ts []writeTask
	if !l.EC {
		id := l.ID(0, i)
		data := u.buf[:n]
		sums := direct.Sums(id, data)
		for r := 0; r < l.Copies; r++ {
			ts = append(ts, writeTask{replica: r, id: id, data: data, sums: sums, unit: u})
		}
		u.pending.Store(int32(len(ts)))
		return ts, nil
	}
	cl := (n + direct.DataShards - 1) / direct.DataShards
	clear(u.buf[n : direct.DataShards*cl]) // the last row's padding
	u.shards = u.shards[:0]
	for s := 0; s < direct.TotalShards; s++ {
		u.shards = append(u.shards, u.buf[s*cl:(s+1)*cl])
	}
	if err := c.enc.Encode(u.shards); err != nil {
		return nil, base.AssertionFailedf("encode row %d: %v", i, err)
	}
	for s, sh := range u.shards {
		id := l.ID(s, i)
		ts = append(ts, writeTask{replica: s, id: id, data: sh, sums: direct.Sums(id, sh), unit: u})
	}
	u.pending.Store(int32(len(ts)))
	return ts, nil
}

// writeChunk sends one chunk with its checksums, computed here once.
func (c *Client) writeChunk(ctx context.Context, nodeID uint64, id direct.ChunkID, data []byte, repair bool, info *nodepb.BlobInfo) error {
	return c.writeChunkReq(ctx, nodeID, id, data, nil, repair, false, info)
}

// writeChunkReq is writeChunk with the checksums when already computed
// (nil: computed here) and the missing flag: the repair re-creates a chunk
// the node did not have.
func (c *Client) writeChunkReq(ctx context.Context, nodeID uint64, id direct.ChunkID, data []byte, sums []uint32, repair, missing bool, info *nodepb.BlobInfo) error {
	if sums == nil {
		sums = direct.Sums(id, data)
	}
	nc, err := c.nodeClient(ctx, nodeID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.RPCTimeout)
	defer cancel()
	_, err = nc.WriteChunk(ctx, &nodepb.WriteChunkRequest{
		Chunk: &nodepb.ChunkRef{Object: id.Object, Version: id.Version, Shard: id.Shard, Index: id.Index},
		Data:  data, Sums: sums, Repair: repair, Info: info, Missing: missing,
	})
	if err != nil {
		return fmt.Errorf("node %d: write %s: %w", nodeID, id, wire.FromStatus(err))
	}
	return nil
}

// readChunk asks a node for a chunk; the node verifies and re-reads once.
func (c *Client) readChunk(ctx context.Context, nodeID uint64, id direct.ChunkID) direct.ReplicaRead {
	nc, err := c.memberClient(ctx, nodeID, false)
	if err != nil {
		return direct.ReplicaRead{Fetched: true, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.RPCTimeout)
	defer cancel()
	resp, err := nc.ReadChunk(ctx, &nodepb.ReadChunkRequest{
		Chunk: &nodepb.ChunkRef{Object: id.Object, Version: id.Version, Shard: id.Shard, Index: id.Index},
	})
	if err != nil {
		err = wire.FromStatus(err)
		if errors.Is(err, fs.ErrNotExist) {
			// The node answered and has no such chunk, although the
			// index places it there: damage, re-created by the repair.
			return direct.ReplicaRead{Fetched: true, Missing: true}
		}
		return direct.ReplicaRead{Fetched: true, Err: fmt.Errorf("node %d: read %s: %w", nodeID, id, err)}
	}
	return replicaReadOf(resp)
}

// replicaReadOf is what a node's answer for one chunk tells DIRECT.
func replicaReadOf(resp *nodepb.ReadChunkResponse) direct.ReplicaRead {
	r := direct.ReplicaRead{Fetched: true, Data: resp.Data}
	if resp.SumsValid {
		r.Sums = resp.Sums
		if r.Sums == nil {
			r.Sums = []uint32{}
		}
	} else {
		r.DamagedSums = resp.Sums
	}
	return r
}
