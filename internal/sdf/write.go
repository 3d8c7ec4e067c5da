package sdf

import (
	"errors"
	"fmt"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/invariants"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// Write appends p to the file. Data is buffered and programmed in whole
// pages; Sync makes it durable.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	if !f.writable {
		return 0, ErrReadOnly
	}
	fs := f.fs
	fs.mu.Lock()
	if fs.closed {
		fs.mu.Unlock()
		return 0, ErrClosed
	}
	ino := f.ino
	ino.buf = append(ino.buf, p...)
	ino.size += int64(len(p))
	ino.mtime = fs.opts.Clock.Now().UnixNano()
	full := len(ino.buf) >= int(fs.opts.WriteBufferBytes)
	fs.mu.Unlock()
	fs.ctr.userBytes.Add(int64(len(p)))
	if full {
		if err := fs.flushFile(ino, false); err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// Sync programs every buffered byte (padding a partial last page with
// zeros) and makes the file's data and size durable.
func (f *File) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if !f.writable {
		return f.fs.Sync()
	}
	if err := f.fs.flushFile(f.ino, true); err != nil {
		return err
	}
	// The pages are durable now. Their extents are found again on open by
	// scanning the unsealed zones' OOB (readUnsealed, metalog.Tables.Recover), so the journal
	// is flushed only if a zone was opened since its last flush.
	f.fs.mu.Lock()
	urgent := f.fs.jr.UrgentLocked()
	f.fs.mu.Unlock()
	if urgent {
		if err := f.fs.flushJournal(); err != nil {
			return err
		}
	} else if err := f.fs.syncPrograms(); err != nil {
		return err
	}
	return f.fs.reclaim()
}

// Close syncs a writable handle and releases the handle.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.closed = true
	f.ra.wait()
	fs := f.fs
	var err error
	if f.writable {
		err = fs.flushFile(f.ino, true)
		err = errors.Join(err, fs.flushJournal())
	}
	fs.mu.Lock()
	if f.writable {
		f.ino.writing = false
		f.ino.buf = nil
	}
	f.ino.opens--
	freed := f.ino.unlinked && f.ino.opens == 0
	if freed {
		fs.freeLocked(f.ino)
	}
	fs.mu.Unlock()
	if freed {
		err = errors.Join(err, fs.reclaim())
	}
	return err
}

// flushFile programs the whole pages of ino's buffer, and with pad also the
// partial last page padded with zeros (which stays buffered: the next flush
// programs it again, out of place, with the bytes appended since).
func (fs *FS) flushFile(ino *inode, pad bool) error {
	ino.flushMu.Lock()
	defer ino.flushMu.Unlock()
	ps := fs.l.Geometry.PageSize
	fs.mu.Lock()
	full := len(ino.buf) / ps
	partial := len(ino.buf) % ps
	n := full
	if pad && partial > 0 {
		n++
	}
	if n == 0 || ino.unlinked && ino.opens == 0 {
		fs.mu.Unlock()
		return nil
	}
	data := make([]byte, n*ps)
	copy(data, ino.buf)
	start := ino.bufPage
	lastValid := ps
	if n > full {
		lastValid = partial
	}
	hint := ino.hint
	fs.mu.Unlock()
	if n > full {
		fs.ctr.padBytes.Add(int64(ps - partial))
	}
	err := fs.writePages(ino, hint, start, data, lastValid, writeNormal, nil)
	if err != nil {
		return err
	}
	fs.mu.Lock()
	if len(ino.buf) < full*ps {
		// A handle's Close dropped the buffer meanwhile (after its own
		// flush, which left at most a partial page): nothing is left.
		ino.buf = nil
	} else {
		ino.buf = append([]byte(nil), ino.buf[full*ps:]...)
	}
	ino.bufPage += uint64(full)
	if n > full {
		// The padded page will be programmed again with more bytes.
		fs.ctr.tailRewrites.Add(1)
	}
	fs.mu.Unlock()
	return nil
}

// writeKind says how writePages installs what it programmed.
type writeKind uint8

const (
	writeNormal  writeKind = iota // append or rewrite: replaces the mapping
	writeGC                       // relocation: only where the mapping is unchanged
	writeRewrite                  // repair rewrite: like normal, counted apart
)

// writePages programs data (whole pages) as the file pages from startPage on,
// over as many zones as needed, and installs the mapping piece by piece.
// lastValid is the valid bytes of the last page. For writeGC, expect[i] is
// the sequence number the mapping of page startPage+i must still have for
// the relocated copy to be installed.
func (fs *FS) writePages(ino *inode, hint Lifetime, startPage uint64, data []byte, lastValid int, kind writeKind, expect []uint64) error {
	ps := fs.l.Geometry.PageSize
	total := len(data) / ps
	done := 0
	failures := 0
	for done < total {
		z, err := fs.acquireZone(hint, ino, kind == writeGC)
		if err != nil {
			return err
		}
		fs.mu.Lock()
		n := min(total-done, z.Capacity(fs.l)-z.WP)
		first := z.WP
		z.WP += n
		seq := fs.nextSeq
		fs.nextSeq += uint64(n)
		fs.mu.Unlock()
		ops := make([]*channels.Op, n)
		opSlab := make([]channels.Op, n)
		o := fs.l.Geometry.OOBSize
		oobSlab := make([]byte, n*o)
		for k := 0; k < n; k++ {
			i := done + k
			pd := data[i*ps : (i+1)*ps]
			valid := ps
			if i == total-1 {
				valid = lastValid
			}
			oob := oobSlab[k*o : (k+1)*o : (k+1)*o]
			onflash.EncodeOOB(oob, pd, onflash.PageID{Valid: uint32(valid), FileID: ino.id, Page: startPage + uint64(i), Seq: seq + uint64(k)})
			opSlab[k] = channels.Op{Kind: channels.Program, Addr: fs.l.DataPageAddr(z.ID, z.Dies, first+k), Data: pd, OOB: oob}
			ops[k] = &opSlab[k]
		}
		fs.chans[z.Channel].Do(ops...)
		fs.ctr.dataPages.Add(int64(n))
		var perr error
		for _, op := range ops {
			if op.Err != nil {
				perr = op.Err
				break
			}
		}
		if perr != nil {
			// A failed program retires the block: stop writing the zone
			// and program these pages again elsewhere.
			fs.ctr.programErrs.Add(1)
			fs.mu.Lock()
			if errors.Is(perr, flash.ErrDieFailed) {
				for _, op := range ops {
					if errors.Is(op.Err, flash.ErrDieFailed) {
						fs.noteDieFailedLocked(op.Addr.DieAddr())
					}
				}
			}
			if z.State == ZoneOpen || z.State == ZoneEmpty {
				z.State = ZoneReadOnly
				fs.logLocked(zoneStateRecord(z.ID, ZoneReadOnly))
			}
			fs.mu.Unlock()
			for _, op := range ops {
				if op.Err != nil {
					fs.observe(op.Addr, flash.ReadStatus{}, op.Err)
				}
			}
			fs.releaseZone(z)
			failures++
			if failures > 8 || !isMediaError(perr) {
				return fmt.Errorf("sdf: programming %q: %w", ino.name, perr)
			}
			continue
		}
		fs.mu.Lock()
		now := fs.opts.Clock.Now()
		z.LastWrite = now
		if z.Owners == nil {
			z.Owners = make([]onflash.Owner, z.Capacity(fs.l))
			z.OwnersKnown = make([]bool, z.Capacity(fs.l))
		}
		for k := 0; k < n; k++ {
			z.Owners[first+k] = onflash.Owner{FileID: ino.id, Page: uint32(startPage + uint64(done+k))}
			z.OwnersKnown[first+k] = true
		}
		e := extmap.Extent{FilePage: startPage + uint64(done), Zone: z.ID, ZonePage: first, N: n, Seq: seq}
		fs.installLocked(ino, e, kind, expect[min(done, len(expect)):])
		ino.last = z
		full := z.WP == z.Capacity(fs.l)
		fs.mu.Unlock()
		if full {
			fs.finishZone(z)
		}
		fs.releaseZone(z)
		done += n
	}
	return nil
}

// installLocked maps e into ino and logs it. For GC only the pages whose
// mapping still has the expected sequence number are installed.
func (fs *FS) installLocked(ino *inode, e extmap.Extent, kind writeKind, expect []uint64) {
	if ino.unlinked && ino.opens == 0 || fs.byID[ino.id] != ino {
		return // deleted meanwhile: the pages are dead
	}
	var pieces []extmap.Extent
	if kind == writeGC {
		start := -1
		for k := 0; k <= e.N; k++ {
			ok := false
			if k < e.N && k < len(expect) {
				cur, found := ino.m.Find(e.FilePage + uint64(k))
				ok = found && cur.Seq+(e.FilePage+uint64(k)-cur.FilePage) == expect[k]
			}
			if ok && start < 0 {
				start = k
			}
			if !ok && start >= 0 {
				pieces = append(pieces, e.Slice(e.FilePage+uint64(start), e.FilePage+uint64(k)))
				start = -1
			}
		}
	} else {
		pieces = []extmap.Extent{e}
	}
	if len(pieces) > 0 {
		ino.ver++
	}
	for _, p := range pieces {
		ino.m.Put(p, fs.dropLocked)
		z := fs.zones.All[p.Zone]
		z.Live += p.N
		_ = invariants.Check(z.Live <= z.WP, "sdf: zone %d has %d live pages above its write pointer %d", z.ID, z.Live, z.WP)
	}
	if len(pieces) > 0 && !ino.unlinked {
		fs.logLocked(extentsRecord(ino, pieces))
	}
}
