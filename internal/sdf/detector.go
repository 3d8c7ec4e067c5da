package sdf

import (
	"errors"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/channels"
)

// DieFailure is one die the layer declared failed (Reparo's Detector event,
// section 4.2.1): which die, the time of the first failing operation the
// layer saw on it, when it was declared, how many bad blocks it had, and
// whether the device itself reported it.
type DieFailure struct {
	Die       flash.DieAddr
	First, At time.Time
	BadBlocks int
	Reported  bool
}

// Latency is the detection latency: first failing operation to the event.
func (f DieFailure) Latency() time.Duration { return f.At.Sub(f.First) }

// detector is Reparo's die-failure Detector on the host side. Every failing
// operation reaches it: a die the device reports failed is declared at once;
// a program or erase failure is a grown bad block; an uncorrectable read is a
// suspect whose block is probed. Probes (the first page of a block) walk to
// the neighbouring blocks while they fail, and the die is declared failed
// past Options.DieBadBlocks bad blocks (the policy is reparo.Detector).
// Probes run on the caller's goroutine after its own operation completed,
// outside every FS lock.
type detector struct {
	mu     sync.Mutex
	core   *reparo.Detector
	fix    []int64 // corrected bits per die
	events []DieFailure
}

func (d *detector) init(g flash.Geometry, opts Options) {
	d.core = reparo.NewDetector(reparo.DetectorConfig{MaxBadBlocks: opts.DieBadBlocks, BlocksPerDie: g.BlocksPerDie})
	d.fix = make([]int64, g.Dies())
}

func rdie(a flash.DieAddr) reparo.Die { return reparo.Die{Channel: a.Channel, Die: a.Die} }

// observe records one operation's outcome (a read's status, or a program or
// erase error) and declares the die failed when the detector says so.
func (d *detector) observe(fs *FS, a flash.PageAddr, st flash.ReadStatus, err error) {
	if err == nil && st.CorrectedBits == 0 {
		return
	}
	now := fs.opts.Clock.Now()
	die := rdie(a.DieAddr())
	var probes []reparo.Probe
	var f *reparo.Failure
	d.mu.Lock()
	d.fix[a.DieAddr().Index(fs.l.Geometry)] += int64(st.CorrectedBits)
	switch {
	case err == nil:
	case errors.Is(err, flash.ErrDieFailed):
		f = d.core.Reported(die, now)
	case errors.Is(err, flash.ErrBadBlock): // program, erase failure or a retired block
		probes, f = d.core.BadBlock(die, a.Block, now)
	case errors.Is(err, flash.ErrUncorrectable):
		probes = d.core.Suspect(die, a.Block, now)
	}
	d.mu.Unlock()
	for len(probes) > 0 && f == nil {
		p := probes[0]
		probes = probes[1:]
		op := &channels.Op{Kind: channels.Read, Addr: flash.PageAddr{Channel: p.Die.Channel, Die: p.Die.Die, Block: p.Block},
			Data: make([]byte, fs.l.Geometry.PageSize), OOB: make([]byte, fs.l.Geometry.OOBSize)}
		fs.chans[p.Die.Channel].Do(op)
		fs.ctr.probes.Add(1)
		now = fs.opts.Clock.Now()
		d.mu.Lock()
		if errors.Is(op.Err, flash.ErrDieFailed) {
			f = d.core.Reported(die, now)
		} else {
			var more []reparo.Probe
			failed := errors.Is(op.Err, flash.ErrBadBlock) || errors.Is(op.Err, flash.ErrUncorrectable)
			more, f = d.core.ProbeResult(p, failed, now)
			probes = append(probes, more...)
		}
		d.mu.Unlock()
	}
	if f != nil {
		fs.declareDieFailed(DieFailure{Die: a.DieAddr(), First: f.First, At: f.At, BadBlocks: f.BadBlocks, Reported: f.Reported})
	}
}

// declareDieFailed records the event, stops writes to the die, journals it
// and tells the layer above.
func (fs *FS) declareDieFailed(ev DieFailure) {
	fs.det.mu.Lock()
	fs.det.events = append(fs.det.events, ev)
	fs.det.mu.Unlock()
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
func (fs *FS) DieFailures() []DieFailure {
	fs.det.mu.Lock()
	defer fs.det.mu.Unlock()
	return append([]DieFailure(nil), fs.det.events...)
}

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
	now := fs.opts.Clock.Now()
	fs.det.mu.Lock()
	f := fs.det.core.Reported(rdie(d), now)
	fs.det.mu.Unlock()
	if f != nil {
		fs.declareDieFailed(DieFailure{Die: d, First: f.First, At: f.At, BadBlocks: f.BadBlocks, Reported: true})
	}
	fs.mu.Lock()
	fs.noteDieFailedLocked(d)
	fs.mu.Unlock()
	return fs.flushJournal()
}
