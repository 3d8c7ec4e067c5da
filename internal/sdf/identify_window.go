package sdf

import (
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/dieloss"
)

// MaxFileID is the highest file ID handed out so far: identifier windows
// (reparo.Windows) cover [0, MaxFileID].
func (fs *FS) MaxFileID() uint64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.nextFileID == 0 {
		return 0
	}
	return fs.nextFileID - 1
}

// IdentifyScan is the scan identifier with the given number of workers
// (IDR is 1, CDR one per channel): for measuring how the scan scales.
func (fs *FS) IdentifyScan(d flash.DieAddr, workers int, w reparo.Window) ([]FileRange, IdentifyStats, error) {
	g := fs.l.Geometry
	if d.Channel < 0 || d.Channel >= g.Channels || d.Die < 0 || d.Die >= g.DiesPerChannel {
		return nil, IdentifyStats{}, errOutOfRange(d)
	}
	if workers < 1 || workers > 256 {
		return nil, IdentifyStats{}, base.InvalidArgumentf("sdf: %d scan workers not in [1, 256]", workers)
	}
	m := reparo.IdentifyCDR
	if workers == 1 {
		m = reparo.IdentifyIDR
	}
	return fs.ident.Scan(d, workers, m, w)
}

// DiePagesWritten counts the programmed data pages of die d's blocks in
// data zones: what a page-level P2L entrustment (Reparo 6.1) would read,
// one spare area per page, against one page per block for the block-level
// scheme.
func (fs *FS) DiePagesWritten(d flash.DieAddr) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return dieloss.PagesWritten(fs.zones, d)
}
