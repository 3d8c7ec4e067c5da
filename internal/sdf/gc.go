package sdf

import (
	"errors"

	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// gcChunkPages bounds the pages one relocation step reads and programs.
const gcChunkPages = 64

// GC runs host garbage collection until the empty zones exceed
// GCFreeZonesMin or no victim is left, and returns the zones it reclaimed.
func (fs *FS) GC() (int, error) {
	n := 0
	for {
		fs.mu.Lock()
		enough := fs.zones.CountState(ZoneEmpty) > fs.opts.GCFreeZonesMin
		fs.mu.Unlock()
		if enough {
			return n, nil
		}
		ok, err := fs.gcOnce()
		if err != nil || !ok {
			return n, err
		}
		n++
	}
}

// gcOnce relocates the live pages of one victim zone and resets it. It
// reports whether it made progress.
func (fs *FS) gcOnce() (bool, error) {
	if fs.opts.ReadOnly {
		return false, ErrReadOnly
	}
	if !fs.gcMu.TryLock() {
		// Another GC is running: wait for it, then let the caller retry.
		fs.gcMu.Lock()
		fs.gcMu.Unlock() //nolint:staticcheck // SA2001: the empty section is the wait
		return true, nil
	}
	defer fs.gcMu.Unlock()
	fs.mu.Lock()
	if fs.closed {
		fs.mu.Unlock()
		return false, ErrClosed
	}
	victim := fs.zones.Victim(fs.opts.GCPolicy == GCCostBenefit, fs.opts.Clock.Now())
	if victim == nil {
		fs.mu.Unlock()
		return false, nil
	}
	victim.Writers++ // keeps reclaim from resetting it under us
	type piece struct {
		ino *inode
		e   extmap.Extent
	}
	var pieces []piece
	for _, ino := range fs.byID {
		for _, e := range ino.m.Exts {
			if e.Zone == victim.ID {
				pieces = append(pieces, piece{ino, e})
			}
		}
	}
	fs.mu.Unlock()
	fs.ctr.gcRuns.Add(1)
	stuck := false
	var errs []error
	for _, p := range pieces {
		for from := 0; from < p.e.N; from += gcChunkPages {
			sub := p.e.Slice(p.e.FilePage+uint64(from), p.e.FilePage+uint64(min(from+gcChunkPages, p.e.N)))
			ok, err := fs.relocate(p.ino, sub, Lifetime(victim.Hint))
			if err != nil {
				errs = append(errs, err)
			}
			stuck = stuck || !ok
		}
	}
	fs.mu.Lock()
	victim.Writers--
	if stuck {
		victim.GCStuck = true
	}
	fs.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	return !stuck, fs.reclaim()
}

// relocate copies the pages of e (all in the victim zone) to another zone.
// ok is false if some page could not be read intact (it stays where it is
// and the victim cannot be reset).
func (fs *FS) relocate(ino *inode, e extmap.Extent, hint Lifetime) (bool, error) {
	ps := fs.l.Geometry.PageSize
	fs.mu.Lock()
	z := fs.zones.All[e.Zone]
	ops := make([]*channels.Op, e.N)
	data := make([]byte, e.N*ps)
	for k := 0; k < e.N; k++ {
		ops[k] = &channels.Op{Kind: channels.Read, Addr: fs.l.DataPageAddr(z.ID, z.Dies, e.ZonePage+k),
			Data: data[k*ps : (k+1)*ps], OOB: make([]byte, fs.l.Geometry.OOBSize)}
	}
	fs.mu.Unlock()
	fs.chans[z.Channel].Do(ops...)
	// Relocate the longest runs of pages that verify.
	ok := true
	expect := make([]uint64, e.N)
	lastValid := ps
	good := make([]bool, e.N)
	for k, op := range ops {
		expect[k] = e.Seq + uint64(k)
		if op.Err != nil {
			fs.observe(op.Addr, op.Status, op.Err)
			ok = false
			continue
		}
		id, verified := onflash.DecodeOOB(op.OOB, op.Data)
		if !verified || id.FileID != ino.id || id.Page != e.FilePage+uint64(k) || id.Seq != expect[k] {
			ok = false
			continue
		}
		good[k] = true
		if k == e.N-1 {
			lastValid = int(id.Valid)
		}
	}
	for k := 0; k < e.N; {
		if !good[k] {
			k++
			continue
		}
		j := k
		for j < e.N && good[j] {
			j++
		}
		lv := ps
		if j == e.N {
			lv = lastValid
		}
		if err := fs.writePages(ino, hint, e.FilePage+uint64(k), data[k*ps:j*ps], lv, writeGC, expect[k:j]); err != nil {
			return false, err
		}
		crashpoint.Hit("sdf-gc-move")
		fs.ctr.gcPages.Add(int64(j - k))
		k = j
	}
	return ok, nil
}
