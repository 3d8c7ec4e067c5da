package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client/objlayout"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/wire"
)

// Get reads a key's current version in the client's read mode.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	data, _, err := c.GetWithReport(ctx, key, ModeDefault)
	return data, err
}

// GetWithReport reads a key in the given mode (ModeDefault for the
// client's) into memory and says what was repaired. GetTo streams instead.
//
// A version is immutable, but a concurrent overwrite or delete lets the
// coordinator collect it while it is being read (DIRECT 000 section 4.2.2:
// reads need not see a deletion instantly). When a read fails and the key
// has meanwhile moved to another version, the new version is read; when
// the key is gone, the result is not found.
func (c *Client) GetWithReport(ctx context.Context, key, mode string) ([]byte, *ReadReport, error) {
	var data []byte
	_, rep, err := c.readLatest(ctx, key, func(rec *objectpb.ObjectRecord) (*ReadReport, bool, error) {
		d, rep, err := c.ReadVersion(ctx, rec, mode)
		data = d
		return rep, true, err
	})
	return data, rep, err
}

// GetTo streams a key's current version to w in the given mode and returns
// the version read. Only verified bytes reach w, in order; memory is bounded
// by the read-ahead window (Options.WindowBytes, see the package doc), not
// by the object's size. When the read fails before any byte reached w and
// the key has moved to another version meanwhile, the new version is read
// (as GetWithReport); once bytes went out, the error is returned.
func (c *Client) GetTo(ctx context.Context, key, mode string, w io.Writer) (*objectpb.ObjectRecord, *ReadReport, error) {
	return c.readLatest(ctx, key, func(rec *objectpb.ObjectRecord) (*ReadReport, bool, error) {
		cw := &countingWriter{w: w}
		rep, err := c.ReadVersionTo(ctx, rec, mode, cw)
		return rep, cw.n == 0, err
	})
}

// readLatest runs read on a key's current version, and again on the new
// version when the read failed, read says it may be retried, and the key
// moved meanwhile.
func (c *Client) readLatest(ctx context.Context, key string, read func(*objectpb.ObjectRecord) (*ReadReport, bool, error)) (*objectpb.ObjectRecord, *ReadReport, error) {
	rec, err := c.Stat(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		rep, retryable, err := read(rec)
		if err == nil || !retryable || attempt == 2 || base.IsInvalidArgument(err) || ctx.Err() != nil {
			return rec, rep, err
		}
		now, serr := c.Stat(ctx, key)
		if serr != nil {
			if errors.Is(serr, fs.ErrNotExist) {
				return rec, rep, serr
			}
			return rec, rep, err
		}
		if now.Version == rec.Version {
			return rec, rep, err
		}
		rec = now
	}
}

// countingWriter counts the bytes that went through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}

// sliceWriter fills a preallocated slice.
type sliceWriter struct {
	b []byte
	n int
}

func (sw *sliceWriter) Write(p []byte) (int, error) {
	if len(p) > len(sw.b)-sw.n {
		return 0, base.AssertionFailedf("read delivered %d bytes past the object's %d", sw.n+len(p)-len(sw.b), len(sw.b))
	}
	copy(sw.b[sw.n:], p)
	sw.n += len(p)
	return len(p), nil
}

// ReadVersion reads the version rec describes into memory.
func (c *Client) ReadVersion(ctx context.Context, rec *objectpb.ObjectRecord, mode string) ([]byte, *ReadReport, error) {
	if rec.SizeBytes < 0 {
		return nil, nil, base.CorruptionErrorf("object %q: negative size %d in index", rec.Key, rec.SizeBytes)
	}
	sw := &sliceWriter{b: make([]byte, rec.SizeBytes)}
	rep, err := c.ReadVersionTo(ctx, rec, mode, sw)
	if err != nil {
		return nil, rep, err
	}
	if sw.n != len(sw.b) {
		return nil, rep, base.AssertionFailedf("get %q v%d: read %d of %d bytes", rec.Key, rec.Version, sw.n, len(sw.b))
	}
	return sw.b, rep, nil
}

// ReadVersionTo streams the version rec describes to w: chunks (REP) or
// rows (EC) are fetched in parallel, up to Options.WindowBytes ahead of the
// oldest one not yet written, each verified (and repaired) by the DIRECT
// decision cores before it is written, in order.
func (c *Client) ReadVersionTo(ctx context.Context, rec *objectpb.ObjectRecord, mode string, w io.Writer) (*ReadReport, error) {
	mode, err := c.readMode(mode)
	if err != nil {
		return nil, err
	}
	l, err := objlayout.New(rec)
	if err != nil {
		return nil, err
	}
	rep := &report{ReadReport: ReadReport{Mode: mode, Chunks: l.Chunks, RepairsByNode: map[uint64]int{}}}
	deliverOwned := func(_ int, u ownedChunk) error {
		_, err := w.Write(u.data)
		if u.own {
			// Delivered (w keeps no reference: io.Writer's contract):
			// its buffer goes back to the data path's pool for the
			// units still to come.
			wire.RecycleChunkData(u.data)
		}
		return err
	}
	// The units' first reads come from batched ReadChunks calls (see
	// batchReader), cancelled when the read ends.
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	br := newBatchReader(bctx, c, l)
	switch {
	case l.EC:
		err = pipeline(ctx, l.Chunks, c.unitsAhead(l), c.opts.ChunksInFlight, func(ctx context.Context, i int) (ownedChunk, error) {
			data, own, err := c.readRowEC(ctx, l, i, rep, false, br)
			return ownedChunk{data: data, own: own}, err
		}, deliverOwned)
	case mode == ModeHDFS:
		err = c.readHDFS(ctx, rec, l, w, rep)
	default:
		err = pipeline(ctx, l.Chunks, c.unitsAhead(l), c.opts.ChunksInFlight, func(ctx context.Context, i int) (ownedChunk, error) {
			data, own, err := c.readChunkREP(ctx, l, i, rep, false, br)
			return ownedChunk{data: data, own: own}, err
		}, deliverOwned)
	}
	if err != nil {
		return &rep.ReadReport, fmt.Errorf("get %q v%d: %w", rec.Key, rec.Version, err)
	}
	return &rep.ReadReport, nil
}

// ownedChunk is a REP chunk or EC row read for a streamed GET; own:
// nothing but the GET refers to its data (readChunkREP, readRowEC).
type ownedChunk struct {
	data []byte
	own  bool
}

// unitsAhead is how many units of l fit the read-ahead (or write) window.
func (c *Client) unitsAhead(l objlayout.Layout) int {
	return int(max(2, c.opts.WindowBytes/l.UnitBytes()))
}

// hdfsUnit is one chunk as the hdfs reader prefetched it.
type hdfsUnit struct {
	replica int
	read    direct.ReplicaRead
}

// readHDFS is the hdfs baseline (DIRECT 000 section 4.2.1): stream the
// block from one replica; at the first chunk that fails verification switch
// to the next replica from that offset and never go back; the read fails
// when every replica has failed. Failed replicas are reported and the whole
// object is re-replicated to them in the background. Chunks are prefetched
// from the current replica within the window; the decisions run in order.
func (c *Client) readHDFS(ctx context.Context, rec *objectpb.ObjectRecord, l objlayout.Layout, w io.Writer, rep *report) error {
	st := direct.NewHDFSState(l.Copies)
	var mu sync.Mutex // guards st: the deliverer moves it, fetchers read Current
	current := func() int {
		mu.Lock()
		defer mu.Unlock()
		return st.Current
	}
	readErr := pipeline(ctx, l.Chunks, c.unitsAhead(l), c.opts.ChunksInFlight, func(ctx context.Context, i int) (hdfsUnit, error) {
		r := current()
		if r >= l.Copies {
			return hdfsUnit{replica: r}, nil
		}
		return hdfsUnit{replica: r, read: c.readChunk(ctx, l.Placement[r], l.ID(0, i))}, nil
	}, func(i int, u hdfsUnit) error {
		slot := make([]direct.ReplicaRead, l.Copies)
		if u.replica < l.Copies {
			// Either the current replica or one that failed since (the
			// decision skips it).
			slot[u.replica] = u.read
		}
		for {
			mu.Lock()
			before := st.Current
			d := direct.DecideHDFS(st, l.ID(0, i), l.ChunkLen(i), slot)
			failedOver := st.Current != before && slot[before].Fetched
			mu.Unlock()
			if d.Err != nil {
				return d.Err
			}
			if len(d.Fetch) == 0 {
				rep.add(func(r *ReadReport) { r.BytesRead += int64(len(d.Data)) })
				_, err := w.Write(d.Data)
				return err
			}
			if failedOver {
				rep.add(func(r *ReadReport) { r.Failovers++ })
			}
			k := d.Fetch[0]
			slot[k] = c.readChunk(ctx, l.Placement[k], l.ID(0, i))
		}
	})
	var bad []uint64
	for r, failed := range st.Failed {
		if failed {
			bad = append(bad, l.Placement[r])
			if _, err := c.coord.ReportBadReplica(ctx, &coordpb.ReportBadReplicaRequest{Key: rec.Key, Version: rec.Version, NodeId: l.Placement[r]}); err != nil {
				// Best effort: the report only speeds up re-replication.
				c.opts.Logf("client: report bad replica of %q on node %d: %v", rec.Key, l.Placement[r], err)
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
			c.rereplicate(l, r, st.Current)
		}
	}
	return nil
}

// rereplicate rewrites every chunk of the object on replica r, in the
// background: HDFS recovers at block granularity. Each chunk is copied from
// the first replica, from `from` on, whose copy verifies; one chunk is held
// at a time.
func (c *Client) rereplicate(l objlayout.Layout, r, from int) {
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		for i := 0; i < l.Chunks; i++ {
			var data []byte
			for k := 0; k < l.Copies && data == nil; k++ {
				src := (from + k) % l.Copies
				if src == r {
					continue
				}
				rr := c.readChunk(c.bgCtx, l.Placement[src], l.ID(0, i))
				if rr.Err == nil && !rr.Missing && rr.Sums != nil && direct.Verify(l.ID(0, i), rr.Data, rr.Sums) == nil && len(rr.Data) == l.ChunkLen(i) {
					data = rr.Data
				}
			}
			if data == nil {
				c.opts.Logf("client: hdfs re-replication to node %d: no replica of chunk %d verifies", l.Placement[r], i)
				return
			}
			if err := c.writeChunk(c.bgCtx, l.Placement[r], l.ID(0, i), data, true, nil); err != nil {
				c.opts.Logf("client: hdfs re-replication to node %d: %v", l.Placement[r], err)
				return
			}
		}
	}()
}

// WaitBackground waits for background re-replications to finish.
func (c *Client) WaitBackground() { c.bg.Wait() }

// ObjectReader streams one object version (Open). Read returns verified
// bytes only; a read that cannot be verified or repaired ends with its
// error instead of io.EOF.
type ObjectReader struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	rec    *objectpb.ObjectRecord
	rep    *ReadReport
}

// Open starts streaming a key's current version in the given mode. The
// caller must Close the reader. Memory is bounded as for GetTo.
func (c *Client) Open(ctx context.Context, key, mode string) (*ObjectReader, error) {
	if _, err := c.readMode(mode); err != nil {
		return nil, err
	}
	if err := checkUTF8("object key", key); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	r := &ObjectReader{pr: pr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		rec, rep, err := c.GetTo(ctx, key, mode, pw)
		r.rec, r.rep = rec, rep
		pw.CloseWithError(err) // nil: io.EOF
	}()
	return r, nil
}

// Read reads verified object bytes.
func (r *ObjectReader) Read(p []byte) (int, error) { return r.pr.Read(p) }

// Close stops the read (when not finished) and waits for it.
func (r *ObjectReader) Close() error {
	r.cancel()
	r.pr.CloseWithError(errReaderClosed)
	<-r.done
	return nil
}

var errReaderClosed = errors.New("client: object reader closed")

// Record is the version read and Report what the read verified and
// repaired; both are set once Read returned io.EOF or an error (Report may
// be nil when the read failed before it started).
func (r *ObjectReader) Record() *objectpb.ObjectRecord {
	<-r.done
	return r.rec
}

// Report: see Record.
func (r *ObjectReader) Report() *ReadReport {
	<-r.done
	return r.rep
}
