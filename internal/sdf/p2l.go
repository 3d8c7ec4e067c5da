package sdf

import (
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/dieloss"
	"github.com/flashmend/flashmend/internal/sdf/identify"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// FileRange is a byte range of a file (dieloss.FileRange).
type FileRange = dieloss.FileRange

// IdentifyStats reports the work of one identification of lost data
// (identify.Stats).
type IdentifyStats = identify.Stats

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
	return fs.ident.Scan(d, fs.opts.ScanWorkers, reparo.IdentifyCDR, reparo.All)
}

// Identify lists the live file ranges stored on die d whose files are in
// window w (Reparo's Identifier answering get_lba_status for one bounded
// range of the logical space, section 4.2.2), with method m: IDR (one
// worker scans the file table), CDR (one worker per channel, over file-ID
// regions) or CDR* (block-level P2L entrustment), as internal/sdf/identify
// describes. All three return the same ranges, sorted by file ID and
// offset, adjacent pages merged. The die need not have failed (the ranges
// are what its loss would lose).
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
		return fs.ident.Scan(d, 1, m, w)
	case reparo.IdentifyCDR:
		return fs.ident.Scan(d, min(g.Channels, 256), m, w)
	case reparo.IdentifyCDRStar:
		return fs.ident.Entrusted(d, w)
	}
	return nil, IdentifyStats{}, base.InvalidArgumentf("sdf: unknown identifier %v", m)
}

// identifyHost is the FS as its Identifier sees it.
type identifyHost struct{ fs *FS }

func (h identifyHost) Lock()                                     { h.fs.mu.Lock() }
func (h identifyHost) Unlock()                                   { h.fs.mu.Unlock() }
func (h identifyHost) ZonesLocked() *zones.Table                 { return h.fs.zones }
func (h identifyHost) FilesLocked() []dieloss.File               { return h.fs.lossFilesLocked() }
func (h identifyHost) FileLocked(id uint64) (dieloss.File, bool) { return h.fs.lossFileLocked(id) }
func (h identifyHost) Run(ops []*channels.Op)                    { h.fs.doParallel(ops) }

var _ identify.Host = identifyHost{}

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
