package sdf

import (
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/detect"
)

// DieFailure is one die the layer declared failed (Reparo's Detector event,
// section 4.2.1; detect.Failure): which die, the time of the first failing
// operation the layer saw on it, when it was declared, how many bad blocks
// it had, and whether the device itself reported it.
type DieFailure = detect.Failure

// newDetector is the layer's die-failure Detector (internal/sdf/detect):
// its probes read a block's first page on the block's channel worker.
func (fs *FS) newDetector() *detect.Detector {
	g := fs.l.Geometry
	return detect.New(g, fs.opts.DieBadBlocks, fs.opts.Clock, func(a flash.PageAddr) error {
		op := &channels.Op{Kind: channels.Read, Addr: a, Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)}
		fs.chans[a.Channel].Do(op)
		fs.ctr.probes.Add(1)
		return op.Err
	})
}

// observe hands one operation's outcome (a read's status, or a program or
// erase error) to the detector and declares the die failed when it says
// so. Called outside every FS lock.
func (fs *FS) observe(a flash.PageAddr, st flash.ReadStatus, err error) {
	if f := fs.det.Observe(a, st, err); f != nil {
		fs.declareDieFailed(*f)
	}
}

// declareDieFailed records the event, stops writes to the die, journals it
// and tells the layer above.
func (fs *FS) declareDieFailed(ev DieFailure) {
	fs.det.Record(ev)
	fs.mu.Lock()
	fs.noteDieFailedLocked(ev.Die)
	fs.mu.Unlock()
	// The record is in the pending journal stream. Flush it now unless a
	// flush or checkpoint is under way (this may be called from one, whose
	// erase failed): that one, or the next, writes it (a checkpoint lists
	// the failed dies). Best effort: were it lost, the detector finds the
	// die again after a restart.
	_ = fs.jr.FlushIfIdle()
	if cb := fs.opts.OnDieFailure; cb != nil {
		go cb(ev)
	}
}

// DieFailures lists the die-failure events of this open, in order.
func (fs *FS) DieFailures() []DieFailure { return fs.det.Events() }

// FailedDies lists the dies the layer knows to have failed (reported by
// the device, declared by the detector, or journaled before this open), in
// die order.
func (fs *FS) FailedDies() []flash.DieAddr {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.zones.FailedList()
}

// MarkDieFailed tells the layer that a die failed (for example from the
// device's own health report or an operator): zones on it stop taking
// writes, the failure is journaled and, if the die was not known failed,
// reported as an event.
func (fs *FS) MarkDieFailed(d flash.DieAddr) error {
	g := fs.l.Geometry
	if d.Channel < 0 || d.Channel >= g.Channels || d.Die < 0 || d.Die >= g.DiesPerChannel {
		return errOutOfRange(d)
	}
	if f := fs.det.Reported(d); f != nil {
		fs.declareDieFailed(*f)
	}
	fs.mu.Lock()
	fs.noteDieFailedLocked(d)
	fs.mu.Unlock()
	return fs.flushJournal()
}
