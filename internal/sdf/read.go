package sdf

import (
	"errors"
	"io"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// ReadAt reads len(p) bytes at off (io.ReaderAt). Every page is verified
// against its checksum and identity; a page that fails is reported as a
// *CorruptionError naming the file range, and n counts the bytes before it.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, base.InvalidArgumentf("sdf: negative offset %d", off)
	}
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	limit := f.ra.limit(f.fs)
	if limit == 0 || len(p) == 0 || len(p) > limit {
		return f.fs.readAt(f.ino, p, off, readMode{})
	}
	next := off + int64(len(p))
	if pf := f.ra.claim(off, len(p)); pf != nil {
		// The pages of the read-ahead not read yet go straight into p from
		// now on (prefetch.bind). The next range is queued on the channel
		// before this one is waited for and completed, so the channel's
		// worker finds it there when it finishes this one and never idles
		// between them.
		pf.redirect(p)
		f.ra.start(f.fs, f.ino, next, len(p))
		if n, err, ok := f.ra.use(f.fs, f.ino, pf, p); ok {
			return n, err
		}
	} else if f.ra.sequential(off) {
		f.ra.start(f.fs, f.ino, next, len(p))
	}
	n, err := f.fs.readAt(f.ino, p, off, readMode{})
	if err == nil || err == io.EOF {
		f.ra.ended(off + int64(n))
	}
	return n, err
}

// readAhead is a File's read-ahead (Options.ReadAheadBytes). A caller that
// reads a file in order, one request at a time, leaves the channel idle
// from the end of one request to the start of the next: the time its
// goroutines take to wake up, check the pages and ask again, which on a
// loaded machine is milliseconds per hop (on 2 shared cores, tens). When a
// ReadAt starts where the previous one ended (the first at offset 0
// included), the next range of the same length (cut at the end of the
// file) is read in the background, through readAt, so verified, re-read
// and retried on stale mappings like any read; it is queued on the
// channel before the caller waits for its own range, so the channel's
// worker always has the next request of a sequential reader in hand.
//
// The next ReadAt of that range (or of what is left of the file, for a
// range cut at its end) claims it, and from then on the pages not yet
// read go straight into the caller's buffer; only those read before the
// caller came are copied from the read-ahead's own buffer (none when the
// device is the bottleneck and the caller is waiting for it). Pages that
// failed verification in the read-ahead (after the channel worker's
// re-read) are read again by the caller, one page each, and reported if
// they fail again: a transient flip never costs the caller the whole
// range. A read-ahead is used only when it read its whole range (device
// errors other than corruption end it) and the file did not change
// meanwhile (inode.ver; and the size, for a range cut at the end); any
// other outcome is dropped and the caller's read goes to the device, so
// errors are always reported by the caller's own read.
type readAhead struct {
	mu sync.Mutex
	// own is the File's own limit (SetReadAhead) when set.
	own     int
	set     bool
	next    int64     // where the last ReadAt ended
	pending *prefetch // the range being read ahead, if any
}

// prefetch is one range read ahead: [off, off+len(buf)), for a request of
// req bytes at off (len(buf) < req when cut at the file's end, size).
type prefetch struct {
	off  int64
	req  int
	buf  []byte
	ver  uint64
	size int64
	n    int
	err  error
	// bad lists the pages that failed verification (the range is read
	// raw: they do not end it).
	bad  []*CorruptionError
	done chan struct{}

	mu sync.Mutex
	// dest is the claiming caller's buffer (nil until claimed); moved[i]
	// reports that the last read of the range's i-th page went to dest
	// instead of buf. Guarded by mu.
	dest  []byte
	moved []bool
}

// redirect sends the pages of pf not read yet to p (the caller that
// claimed it).
func (pf *prefetch) redirect(p []byte) {
	pf.mu.Lock()
	pf.dest = p
	pf.mu.Unlock()
}

// bind returns where the i-th page of the range, at byte at of it and
// read ahead into dst (a part of buf), is to be read now: into the
// caller's buffer once one claimed the range.
func (pf *prefetch) bind(i, at int, dst []byte) []byte {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.dest == nil {
		pf.moved[i] = false
		return dst
	}
	pf.moved[i] = true
	return pf.dest[at : at+len(dst)]
}

// copyRest copies into p the pages of the range (pieces of at most a page
// of ps bytes, the first cut at a page boundary) that were read into buf.
// The read is done.
func (pf *prefetch) copyRest(p []byte, ps int64) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	lo := int64(0)
	for i := range pf.moved {
		hi := min(int64(len(pf.buf)), lo+ps-(pf.off+lo)%ps)
		if !pf.moved[i] {
			copy(p[lo:hi], pf.buf[lo:hi])
		}
		lo = hi
	}
}

// SetReadAhead sets this File's read-ahead limit in place of the FS's
// Options.ReadAheadBytes: requests of at most n bytes made in order are
// read ahead; 0 turns read-ahead off for the File (like posix_fadvise's
// SEQUENTIAL and RANDOM).
func (f *File) SetReadAhead(n base.Bytes) error {
	if n < 0 || n > 64*base.MiB {
		return base.InvalidArgumentf("sdf: read-ahead %s not in [0B, 64MiB]", n)
	}
	f.ra.mu.Lock()
	f.ra.own, f.ra.set = int(n), true
	f.ra.mu.Unlock()
	return nil
}

func (ra *readAhead) limit(fs *FS) int {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.set {
		return ra.own
	}
	return int(fs.opts.ReadAheadBytes)
}

// sequential reports whether a read at off starts where the previous one
// ended (a File's first read at offset 0 does).
func (ra *readAhead) sequential(off int64) bool {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return off == ra.next
}

// ended records where a read ended.
func (ra *readAhead) ended(end int64) {
	ra.mu.Lock()
	ra.next = end
	ra.mu.Unlock()
}

// claim takes the read-ahead in flight if it serves a request of n bytes
// at off (one of its length, or, for a range cut at the file's end, of at
// least what is left), and nil otherwise (a read-ahead of another range is
// dropped without waiting: it finishes on its own).
func (ra *readAhead) claim(off int64, n int) *prefetch {
	ra.mu.Lock()
	pf := ra.pending
	ra.pending = nil
	ra.mu.Unlock()
	if pf == nil || pf.off != off || n < len(pf.buf) || n > pf.req {
		return nil
	}
	return pf
}

// use waits for pf, claimed by the caller and redirected to p, and
// completes p from it: the pages read before the caller came are copied,
// and those that failed verification are read again, each on its own, by
// the caller's read (which reports one that fails again, with n the bytes
// before it). ok is false when pf is of no use (it ended early, or the
// file changed meanwhile): the caller reads the whole range.
func (ra *readAhead) use(fs *FS, ino *inode, pf *prefetch, p []byte) (n int, err error, ok bool) {
	<-pf.done
	defer fs.putAheadBuf(pf.buf)
	if pf.err != nil || pf.n != len(pf.buf) {
		return 0, nil, false
	}
	fs.mu.Lock()
	valid := ino.ver == pf.ver && !fs.closed && (len(pf.buf) == len(p) || ino.size == pf.size)
	fs.mu.Unlock()
	if !valid {
		return 0, nil, false
	}
	ps := int64(fs.l.Geometry.PageSize)
	pf.copyRest(p, ps)
	for _, bad := range pf.bad {
		lo := max(bad.Off, pf.off) - pf.off
		hi := min(bad.Off+ps, pf.off+int64(len(pf.buf))) - pf.off
		if got, err := fs.readAt(ino, p[lo:hi], pf.off+lo, readMode{}); err != nil {
			return int(lo) + got, err, true
		}
	}
	n = len(pf.buf)
	fs.ctr.readAheads.Add(1)
	ra.ended(pf.off + int64(n))
	if n < len(p) {
		return n, io.EOF, true
	}
	return n, nil, true
}

// start reads the request of n bytes at off ahead, cut at the end of the
// file, unless it starts at or past the end or one is in flight.
func (ra *readAhead) start(fs *FS, ino *inode, off int64, n int) {
	fs.mu.Lock()
	ver, size, closed := ino.ver, ino.size, fs.closed
	fs.mu.Unlock()
	if closed || off >= size {
		return
	}
	length := int(min(int64(n), size-off))
	ra.mu.Lock()
	if ra.pending != nil {
		ra.mu.Unlock()
		return
	}
	ps := int64(fs.l.Geometry.PageSize)
	pages := (off+int64(length)-1)/ps - off/ps + 1
	pf := &prefetch{off: off, req: n, buf: fs.getAheadBuf(length), ver: ver, size: size, done: make(chan struct{}),
		moved: make([]bool, pages)}
	ra.pending = pf
	ra.mu.Unlock()
	go func() {
		defer close(pf.done)
		pf.n, pf.err = fs.readAt(ino, pf.buf, off, readMode{raw: true, bad: &pf.bad, ahead: pf})
	}()
}

// wait lets a read-ahead in flight finish (File.Close).
func (ra *readAhead) wait() {
	ra.mu.Lock()
	pf := ra.pending
	ra.pending = nil
	ra.mu.Unlock()
	if pf != nil {
		<-pf.done
	}
}

// getAheadBuf returns a buffer of n bytes for a read-ahead (the reads
// overwrite it, so it needs no clearing); putAheadBuf recycles it once
// its read is done and nothing refers to it. Pooled for the FS, not kept
// per File: a File that reads a few requests and closes (as most do)
// would otherwise allocate, clear and drop a buffer per request.
func (fs *FS) getAheadBuf(n int) []byte {
	if b, ok := fs.aheadPool.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]byte, n)
}

func (fs *FS) putAheadBuf(b []byte) {
	fs.aheadPool.Put(&b)
}

// pageRead is one page of a read: from a buffer or from flash.
type pageRead struct {
	page     uint64
	dst      []byte // where its bytes go in the caller's buffer
	skip     int    // offset of dst's first byte within the page
	buffered bool
	// whole is a read of the whole page straight into dst; otherwise the
	// page is read into a buffer of its own and its part copied to dst.
	whole bool
	e     extmap.Extent // mapping when not buffered
	op    *channels.Op
	// ahead, for a page of a read-ahead, is it: the page is the idx-th of
	// its range, at byte at of it (the worker binds its destination).
	ahead   *prefetch
	idx, at int
}

// Bind implements channels.Binder for a page of a read-ahead.
func (r *pageRead) Bind(op *channels.Op) {
	op.Data = r.ahead.bind(r.idx, r.at, r.dst)
}

// readMode says how readAt treats what it reads.
type readMode struct {
	// raw returns pages that fail verification as read (corrupt content)
	// and lists them in *bad instead of ending the read.
	raw bool
	bad *[]*CorruptionError
	// ahead is the read-ahead the read is for (raw): its whole pages go
	// where prefetch.bind says when the worker gets to them, and the
	// pages that fail are not counted as corruptions returned (its reader
	// reads them again).
	ahead *prefetch
}

// readAt reads into p at off, as m says.
func (fs *FS) readAt(ino *inode, p []byte, off int64, m readMode) (int, error) {
	ps := int64(fs.l.Geometry.PageSize)
	badBefore := 0
	if m.bad != nil {
		badBefore = len(*m.bad)
	}
	for retry := 0; ; retry++ {
		if m.bad != nil {
			// A retry lists the pages again.
			*m.bad = (*m.bad)[:badBefore]
		}
		fs.mu.Lock()
		if fs.closed {
			fs.mu.Unlock()
			return 0, ErrClosed
		}
		size := ino.size
		if off >= size {
			fs.mu.Unlock()
			if len(p) == 0 {
				return 0, nil
			}
			return 0, io.EOF
		}
		want := min(int64(len(p)), size-off)
		npages := int((off+want-1)/ps - off/ps + 1)
		// One allocation each for the page records, ops and OOB buffers.
		slab := make([]pageRead, npages)
		opSlab := make([]channels.Op, npages)
		oobSlab := fs.getOOB(npages * fs.l.Geometry.OOBSize)
		reads := make([]*pageRead, 0, npages)
		ops := make([]*channels.Op, 0, npages)
		for pos := off; pos < off+want; {
			pg := uint64(pos / ps)
			skip := int(pos % ps)
			n := min(ps-int64(skip), off+want-pos)
			i := len(reads)
			r := &slab[i]
			*r = pageRead{page: pg, dst: p[pos-off : pos-off+n], skip: skip}
			if pg >= ino.bufPage && len(ino.buf) > 0 {
				bo := int64(pg-ino.bufPage)*ps + int64(skip)
				copy(r.dst, ino.buf[bo:])
				r.buffered = true
			} else {
				e, ok := ino.m.Find(pg)
				if !ok {
					// A hole (never programmed): reads as zeros.
					clear(r.dst)
					r.buffered = true
				} else {
					r.e = e
					z := fs.zones.All[e.Zone]
					d := int(pg - e.FilePage)
					r.whole = skip == 0 && n == ps
					data := r.dst
					if !r.whole {
						data = make([]byte, ps)
					}
					o := fs.l.Geometry.OOBSize
					r.op = &opSlab[i]
					*r.op = channels.Op{Kind: channels.Read, Addr: fs.l.DataPageAddr(z.ID, z.Dies, e.ZonePage+d),
						Data: data, OOB: oobSlab[i*o : (i+1)*o : (i+1)*o], Decode: true, RereadOnCheck: true}
					if m.ahead != nil && r.whole {
						r.ahead, r.idx, r.at = m.ahead, i, int(pos-off)
						r.op.Bind = r
					}
					ops = append(ops, r.op)
				}
			}
			reads = append(reads, r)
			pos += n
		}
		name := ino.name
		fs.mu.Unlock()
		fs.doParallel(ops)
		defer fs.putOOB(oobSlab)
		stale := false
		for i, r := range reads {
			if r.buffered {
				continue
			}
			cerr := fs.verify(ino, name, r, ps)
			if cerr != nil && retry < 2 && fs.mappingChanged(ino, r) {
				stale = true
				break
			}
			switch {
			case r.op.Reread:
				// The worker read the page again right after it failed its
				// checksum with a clean device status (a transient flip on
				// the way out; DIRECT: tell transient flips from damage).
				fs.ctr.rereads.Add(1)
				if cerr == nil {
					fs.ctr.transients.Add(1)
				}
			case cerr != nil && r.op.Err == nil:
				// A clean device status but the wrong identity: read once
				// more before reporting.
				fs.ctr.rereads.Add(1)
				fs.chans[r.op.Addr.Channel].Do(r.op)
				if cerr = fs.verify(ino, name, r, ps); cerr == nil {
					fs.ctr.transients.Add(1)
				}
			}
			if !r.whole {
				copy(r.dst, r.op.Data[r.skip:])
			}
			if cerr != nil {
				if m.ahead == nil {
					fs.ctr.corruptions.Add(1)
				}
				if !m.raw {
					done := 0
					for _, q := range reads[:i] {
						done += len(q.dst)
					}
					return done, cerr
				}
				if m.bad != nil {
					*m.bad = append(*m.bad, cerr)
				}
			}
		}
		if stale {
			continue
		}
		fs.ctr.readBytes.Add(want)
		if want < int64(len(p)) {
			return int(want), io.EOF
		}
		return int(want), nil
	}
}

// getOOB returns a scratch buffer of n bytes for OOB areas (the device
// overwrites them, so they need no clearing); putOOB recycles it.
func (fs *FS) getOOB(n int) []byte {
	if b, ok := fs.oobPool.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]byte, n)
}

func (fs *FS) putOOB(b []byte) {
	if cap(b) <= 4<<20 {
		fs.oobPool.Put(&b)
	}
}

// mappingChanged reports whether r's page is now mapped elsewhere (a
// concurrent GC, rewrite or reset made the read stale).
func (fs *FS) mappingChanged(ino *inode, r *pageRead) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	e, ok := ino.m.Find(r.page)
	return !ok || e.Zone != r.e.Zone || e.Seq+(r.page-e.FilePage) != r.e.Seq+(r.page-r.e.FilePage)
}

// verify checks a page read from flash and returns the corruption, if any.
func (fs *FS) verify(ino *inode, name string, r *pageRead, ps int64) *CorruptionError {
	op := r.op
	wantSeq := r.e.Seq + (r.page - r.e.FilePage)
	var cause error
	if op.Err != nil {
		cause = op.Err
		fs.observe(op.Addr, op.Status, op.Err)
		switch {
		case errors.Is(op.Err, flash.ErrDieFailed):
			fs.ctr.dieFailedReads.Add(1)
		case errors.Is(op.Err, flash.ErrUncorrectable):
			fs.ctr.uncorrectables.Add(1)
		}
	} else {
		fs.observe(op.Addr, op.Status, nil)
		id, ok := op.ID, op.IDOK
		if !op.Decode {
			id, ok = onflash.DecodeOOB(op.OOB, op.Data)
		}
		switch {
		case !ok:
			cause = errChecksum
			fs.ctr.checksumErrs.Add(1)
		case id.FileID != ino.id || id.Page != r.page || id.Seq != wantSeq:
			cause = errIdentity
			fs.ctr.checksumErrs.Add(1)
		}
	}
	if cause == nil {
		return nil
	}
	off := int64(r.page) * ps
	fs.mu.Lock()
	length := min(ps, ino.size-off)
	fs.mu.Unlock()
	return &CorruptionError{Addr: op.Addr, Zone: r.e.Zone, FileID: ino.id, Name: name, Off: off, Len: max(length, 0), Err: cause}
}
