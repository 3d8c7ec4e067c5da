package sdf

import (
	"fmt"
	"sort"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/dieloss"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// FileRange is a byte range of a file (dieloss.FileRange).
type FileRange = dieloss.FileRange

// IdentifyStats reports the work of one identification of lost data.
type IdentifyStats struct {
	Method      string // "entrustment" (CDR*), "scan" (IDR or CDR)
	Identifier  reparo.Method
	Window      reparo.Window
	Workers     int
	PagesRead   int // flash pages read (P2L pages)
	ZonesByScan int // zones that fell back to the file-table scan
	Entries     int // mapping entries examined
	Elapsed     time.Duration
}

func (s IdentifyStats) String() string {
	return fmt.Sprintf("%s (%s, %d workers): pages read %d, entries %d, zones by scan %d, %v",
		s.Identifier, s.Method, s.Workers, s.PagesRead, s.Entries, s.ZonesByScan, s.Elapsed)
}

func errOutOfRange(d flash.DieAddr) error {
	return base.InvalidArgumentf("sdf: die %s out of range", d)
}

// LostRanges lists the live file ranges stored on die d with CDR* (block-level
// P2L entrustment), over the whole logical space.
func (fs *FS) LostRanges(d flash.DieAddr) ([]FileRange, IdentifyStats, error) {
	return fs.Identify(d, reparo.IdentifyCDRStar, reparo.All)
}

// LostRangesScan lists the live file ranges on die d with the CDR scan (the
// file table split among Options.ScanWorkers workers). It is the reference
// for LostRanges.
func (fs *FS) LostRangesScan(d flash.DieAddr) ([]FileRange, IdentifyStats, error) {
	return fs.identifyScan(d, fs.opts.ScanWorkers, reparo.IdentifyCDR, reparo.All)
}

// Identify lists the live file ranges stored on die d whose files are in
// window w (Reparo's Identifier answering get_lba_status for one bounded
// range of the logical space, section 4.2.2), with method m:
//
//   - reparo.IdentifyIDR: one worker scans the file table's extents.
//   - reparo.IdentifyCDR: the file table is split by file ID into one
//     region per channel, scanned in parallel (section 5.1).
//   - reparo.IdentifyCDRStar: block-level P2L entrustment (section 6.2): for
//     every zone with a block on d, one page is read, the last page of the
//     neighbouring die's block, which lists the owners of d's block. The
//     owners are read once per die and kept (the paper marks the failed
//     entries in its map, section 6.3), so later windows read no flash;
//     every candidate is checked against the file table at query time.
//     Zones not yet full use the owner list kept in memory; a zone whose
//     P2L page cannot be read falls back to the scan.
//
// All three return the same ranges, sorted by file ID and offset, adjacent
// pages merged. The die need not have failed (the ranges are what its loss
// would lose).
func (fs *FS) Identify(d flash.DieAddr, m reparo.Method, w reparo.Window) ([]FileRange, IdentifyStats, error) {
	g := fs.l.Geometry
	if d.Channel < 0 || d.Channel >= g.Channels || d.Die < 0 || d.Die >= g.DiesPerChannel {
		return nil, IdentifyStats{}, errOutOfRange(d)
	}
	if w.To != 0 && w.To <= w.From {
		return nil, IdentifyStats{}, base.InvalidArgumentf("sdf: empty identifier window [%d, %d)", w.From, w.To)
	}
	switch m {
	case reparo.IdentifyIDR:
		return fs.identifyScan(d, 1, m, w)
	case reparo.IdentifyCDR:
		return fs.identifyScan(d, min(g.Channels, 256), m, w)
	case reparo.IdentifyCDRStar:
		return fs.identifyP2L(d, w)
	}
	return nil, IdentifyStats{}, base.InvalidArgumentf("sdf: unknown identifier %v", m)
}

func (fs *FS) identifyScan(d flash.DieAddr, workers int, m reparo.Method, w reparo.Window) ([]FileRange, IdentifyStats, error) {
	start := fs.opts.Clock.Now()
	st := IdentifyStats{Method: "scan", Identifier: m, Window: w, Workers: workers}
	fs.mu.Lock()
	pages := fs.scanWindowLocked(d, nil, workers, w, &st)
	out := dieloss.Ranges(pages, fs.lossFileLocked, int64(fs.l.Geometry.PageSize))
	fs.mu.Unlock()
	st.Elapsed = fs.opts.Clock.Now().Sub(start)
	return out, st, nil
}

// p2lOwners is what CDR* learned about one die: every owner entrusted to
// its neighbours, and the zones that need the scan.
type p2lOwners struct {
	cands     []dieloss.Candidate
	scanZones map[int]bool
	pagesRead int
}

func (fs *FS) identifyP2L(d flash.DieAddr, w reparo.Window) ([]FileRange, IdentifyStats, error) {
	start := fs.opts.Clock.Now()
	st := IdentifyStats{Method: "entrustment", Identifier: reparo.IdentifyCDRStar, Window: w, Workers: fs.l.Geometry.Channels}
	fs.p2lMu.Lock()
	po := fs.p2l[d]
	if po == nil {
		po = fs.readP2L(d)
		st.PagesRead = po.pagesRead
		if fs.p2l == nil {
			fs.p2l = map[flash.DieAddr]*p2lOwners{}
		}
		// Only a failed die's owners are kept: on a live die they change
		// with every write.
		fs.mu.Lock()
		if fs.zones.Failed[d] {
			fs.p2l[d] = po
		}
		fs.mu.Unlock()
	}
	fs.p2lMu.Unlock()
	fs.mu.Lock()
	pages, entries := dieloss.Confirm(fs.zones, po.cands, fs.lossFileLocked, d, w)
	st.Entries += entries
	st.ZonesByScan = len(po.scanZones)
	if len(po.scanZones) > 0 {
		for id, ps := range fs.scanWindowLocked(d, po.scanZones, 1, w, &st) {
			pages[id] = append(pages[id], ps...)
		}
	}
	out := dieloss.Ranges(pages, fs.lossFileLocked, int64(fs.l.Geometry.PageSize))
	fs.mu.Unlock()
	st.Elapsed = fs.opts.Clock.Now().Sub(start)
	return out, st, nil
}

// readP2L reads the owners of every block of die d (dieloss.PlanP2L): one
// P2L page per full zone, read in parallel on the channels holding them,
// and the in-memory lists of zones not yet full.
func (fs *FS) readP2L(d flash.DieAddr) *p2lOwners {
	g := fs.l.Geometry
	fs.mu.Lock()
	reads, cands, scan := dieloss.PlanP2L(fs.zones, d)
	fs.mu.Unlock()
	po := &p2lOwners{cands: cands, scanZones: scan}
	ops := make([]*channels.Op, len(reads))
	for i, r := range reads {
		ops[i] = &channels.Op{Kind: channels.Read,
			Addr: flash.PageAddr{Channel: r.Zone.Channel, Die: r.Host, Block: r.Zone.Block, Page: fs.l.P2LPage()},
			Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)}
	}
	fs.doParallel(ops)
	po.pagesRead = len(ops)
	for i, r := range reads {
		owners, ok := []onflash.Owner(nil), ops[i].Err == nil
		if ok {
			owners, ok = onflash.DecodeP2L(ops[i].Data, r.Zone.ID, d.Die)
		}
		if !ok {
			po.scanZones[r.Zone.ID] = true
			continue
		}
		po.cands = append(po.cands, r.Candidates(owners)...)
	}
	return po
}

// scanWindowLocked returns the mapped file pages on die d of the files in
// window w, restricted to zones in only (nil: all): the files, sorted by ID,
// are cut into `workers` contiguous regions (reparo.Partition)
// scanned in parallel (dieloss.Scan).
func (fs *FS) scanWindowLocked(d flash.DieAddr, only map[int]bool, workers int, w reparo.Window, st *IdentifyStats) map[uint64][]uint64 {
	files := make([]dieloss.File, 0, len(fs.byID))
	for id, ino := range fs.byID {
		if w.Contains(id) {
			files = append(files, dieloss.File{ID: ino.id, Map: &ino.m})
		}
	}
	sort.Slice(files, func(a, b int) bool { return files[a].ID < files[b].ID })
	pages, entries := dieloss.ScanParallel(fs.zones, files, d, only, workers)
	st.Entries += entries
	return pages
}

// lossFileLocked is file id as dieloss sees it.
func (fs *FS) lossFileLocked(id uint64) (dieloss.File, bool) {
	ino := fs.byID[id]
	if ino == nil {
		return dieloss.File{}, false
	}
	return dieloss.File{ID: ino.id, Name: ino.name, Size: ino.size, Map: &ino.m}, true
}

// lossFilesLocked is every file as dieloss sees it.
func (fs *FS) lossFilesLocked() []dieloss.File {
	out := make([]dieloss.File, 0, len(fs.byID))
	for _, ino := range fs.byID {
		out = append(out, dieloss.File{ID: ino.id, Name: ino.name, Size: ino.size, Map: &ino.m})
	}
	return out
}
