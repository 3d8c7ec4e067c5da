package sdf

import (
	"errors"
	"sync"

	"github.com/flashmend/flashmend/internal/flash"
)

// uncorrectableRunToFail is the number of consecutive uncorrectable reads on
// one die, with no good read between them, after which the detector declares
// the die failed before the device itself reports it (Reparo's Detector
// watches for die-failure symptoms so that recovery starts early).
const uncorrectableRunToFail = 16

// detector is Reparo's die-failure Detector on the host side: it watches
// every read's outcome per die.
type detector struct {
	mu  sync.Mutex
	g   flash.Geometry
	run []int   // consecutive uncorrectable reads per die
	bad []int64 // uncorrectable reads per die over the FS's life
	fix []int64 // corrected bits per die
}

func (d *detector) init(g flash.Geometry) {
	d.g = g
	d.run = make([]int, g.Dies())
	d.bad = make([]int64, g.Dies())
	d.fix = make([]int64, g.Dies())
}

// observe records one read's outcome and reports a die failure to fs.
func (d *detector) observe(fs *FS, a flash.PageAddr, st flash.ReadStatus, err error) {
	i := a.DieAddr().Index(d.g)
	failed := false
	d.mu.Lock()
	d.fix[i] += int64(st.CorrectedBits)
	switch {
	case errors.Is(err, flash.ErrDieFailed):
		failed = true
	case errors.Is(err, flash.ErrUncorrectable):
		d.bad[i]++
		d.run[i]++
		failed = d.run[i] >= uncorrectableRunToFail
	case err == nil:
		d.run[i] = 0
	}
	d.mu.Unlock()
	if failed {
		fs.mu.Lock()
		fs.noteDieFailedLocked(a.DieAddr())
		fs.mu.Unlock()
	}
}

// FailedDies lists the dies the layer knows to have failed (reported by
// the device or declared by the detector), in die order.
func (fs *FS) FailedDies() []flash.DieAddr {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.failedDieList()
}

// MarkDieFailed tells the layer that a die failed (for example from the
// device's own health report): zones on it stop taking writes and the
// failure is journaled.
func (fs *FS) MarkDieFailed(d flash.DieAddr) error {
	g := fs.l.g
	if d.Channel < 0 || d.Channel >= g.Channels || d.Die < 0 || d.Die >= g.DiesPerChannel {
		return errOutOfRange(d)
	}
	fs.mu.Lock()
	fs.noteDieFailedLocked(d)
	fs.mu.Unlock()
	return fs.flushJournal()
}
