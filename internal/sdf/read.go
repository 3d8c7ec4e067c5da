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
		return f.fs.readAt(f.ino, p, off, false, nil)
	}
	next := off + int64(len(p))
	if pf := f.ra.claim(off, len(p)); pf != nil {
		// The next range is queued on the channel before this one is
		// waited for and copied out, so the channel's worker finds it
		// there when it finishes this one and never idles between them.
		f.ra.start(f.fs, f.ino, next, len(p))
		if n, ok := f.ra.use(f.fs, f.ino, pf, p); ok {
			if n < len(p) {
				return n, io.EOF
			}
			return n, nil
		}
	} else if f.ra.sequential(off) {
		f.ra.start(f.fs, f.ino, next, len(p))
	}
	n, err := f.fs.readAt(f.ino, p, off, false, nil)
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
// worker always has the next request of a sequential reader in hand. The
// next ReadAt of exactly that range copies it out. A read-ahead is used
// only when it read its whole range without error and the file did not
// change meanwhile (inode.ver; and the size, for a range cut at the end);
// any other outcome is dropped and the caller's read goes to the device,
// so errors are always reported by the caller's own read.
type readAhead struct {
	mu sync.Mutex
	// own is the File's own limit (SetReadAhead) when set.
	own     int
	set     bool
	next    int64     // where the last ReadAt ended
	pending *prefetch // the range being read ahead, if any
	spare   []byte    // a buffer to reuse
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
	done chan struct{}
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

// claim takes the read-ahead of a request of n bytes at off if that is
// the one in flight, and nil otherwise (a read-ahead of another range is
// dropped without waiting: it finishes on its own).
func (ra *readAhead) claim(off int64, n int) *prefetch {
	ra.mu.Lock()
	pf := ra.pending
	ra.pending = nil
	ra.mu.Unlock()
	if pf == nil || pf.off != off || pf.req != n {
		return nil
	}
	return pf
}

// use waits for pf and fills p from it if it is still valid; ok is false
// otherwise. n is len(p), or less when pf was cut at the file's end.
func (ra *readAhead) use(fs *FS, ino *inode, pf *prefetch, p []byte) (int, bool) {
	<-pf.done
	defer ra.recycle(pf.buf)
	if pf.err != nil || pf.n != len(pf.buf) {
		return 0, false
	}
	fs.mu.Lock()
	valid := ino.ver == pf.ver && !fs.closed && (len(pf.buf) == pf.req || ino.size == pf.size)
	fs.mu.Unlock()
	if !valid {
		return 0, false
	}
	n := copy(p, pf.buf)
	fs.ctr.readAheads.Add(1)
	ra.ended(pf.off + int64(n))
	return n, true
}

func (ra *readAhead) recycle(b []byte) {
	ra.mu.Lock()
	if cap(b) > cap(ra.spare) {
		ra.spare = b
	}
	ra.mu.Unlock()
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
	buf := ra.spare
	ra.spare = nil
	if cap(buf) < length {
		buf = make([]byte, n)
	}
	pf := &prefetch{off: off, req: n, buf: buf[:length], ver: ver, size: size, done: make(chan struct{})}
	ra.pending = pf
	ra.mu.Unlock()
	go func() {
		defer close(pf.done)
		pf.n, pf.err = fs.readAt(ino, pf.buf, off, false, nil)
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

// pageRead is one page of a read: from a buffer or from flash.
type pageRead struct {
	page     uint64
	dst      []byte // where its bytes go in the caller's buffer
	skip     int    // offset of dst's first byte within the page
	buffered bool
	e        extmap.Extent // mapping when not buffered
	op       *channels.Op
}

// readAt reads into p at off. With raw, pages that fail verification are
// returned as read (corrupt content) and listed in *bad instead of ending
// the read.
func (fs *FS) readAt(ino *inode, p []byte, off int64, raw bool, bad *[]*CorruptionError) (int, error) {
	ps := int64(fs.l.Geometry.PageSize)
	for retry := 0; ; retry++ {
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
					data := r.dst
					if skip != 0 || n != ps {
						data = make([]byte, ps)
					}
					o := fs.l.Geometry.OOBSize
					r.op = &opSlab[i]
					*r.op = channels.Op{Kind: channels.Read, Addr: fs.l.DataPageAddr(z.ID, z.Dies, e.ZonePage+d),
						Data: data, OOB: oobSlab[i*o : (i+1)*o : (i+1)*o], Decode: true, RereadOnCheck: true}
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
			if len(r.op.Data) != len(r.dst) || &r.op.Data[0] != &r.dst[0] {
				copy(r.dst, r.op.Data[r.skip:])
			}
			if cerr != nil {
				fs.ctr.corruptions.Add(1)
				if !raw {
					done := 0
					for _, q := range reads[:i] {
						done += len(q.dst)
					}
					return done, cerr
				}
				if bad != nil {
					*bad = append(*bad, cerr)
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
