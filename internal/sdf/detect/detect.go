package detect

import (
	"errors"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
)

// Failure is one die declared failed (Reparo's Detector event): which die,
// the time of the first failing operation seen on it, when it was
// declared, how many bad blocks it had, and whether the device itself
// reported it.
type Failure struct {
	Die       flash.DieAddr
	First, At time.Time
	BadBlocks int
	Reported  bool
}

// Latency is the detection latency: first failing operation to the event.
func (f Failure) Latency() time.Duration { return f.At.Sub(f.First) }

// Prober reads the page at a (a probe: the first page of a block) and
// returns the device's error.
type Prober func(a flash.PageAddr) error

// Detector watches one device's operations.
type Detector struct {
	clock base.Clock
	probe Prober

	mu     sync.Mutex // guards core and events; a leaf
	core   *reparo.Detector
	events []Failure
}

// New returns the Detector of a device of geometry g: a die is declared
// failed past maxBadBlocks bad blocks; probe reads the probes.
func New(g flash.Geometry, maxBadBlocks int, clock base.Clock, probe Prober) *Detector {
	return &Detector{
		clock: clock, probe: probe,
		core: reparo.NewDetector(reparo.DetectorConfig{MaxBadBlocks: maxBadBlocks, BlocksPerDie: g.BlocksPerDie}),
	}
}

func rdie(a flash.DieAddr) reparo.Die { return reparo.Die{Channel: a.Channel, Die: a.Die} }

// Observe takes one operation's outcome at a (a read's status, or a
// program or erase error), probes what the policy asks for, and returns the
// die's failure if it is to be declared now (nil otherwise).
func (d *Detector) Observe(a flash.PageAddr, st flash.ReadStatus, err error) *Failure {
	if err == nil && st.CorrectedBits == 0 {
		return nil
	}
	now := d.clock.Now()
	die := rdie(a.DieAddr())
	var probes []reparo.Probe
	var f *reparo.Failure
	d.mu.Lock()
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
		perr := d.probe(flash.PageAddr{Channel: p.Die.Channel, Die: p.Die.Die, Block: p.Block})
		now = d.clock.Now()
		d.mu.Lock()
		if errors.Is(perr, flash.ErrDieFailed) {
			f = d.core.Reported(die, now)
		} else {
			var more []reparo.Probe
			failed := errors.Is(perr, flash.ErrBadBlock) || errors.Is(perr, flash.ErrUncorrectable)
			more, f = d.core.ProbeResult(p, failed, now)
			probes = append(probes, more...)
		}
		d.mu.Unlock()
	}
	if f == nil {
		return nil
	}
	return &Failure{Die: a.DieAddr(), First: f.First, At: f.At, BadBlocks: f.BadBlocks, Reported: f.Reported}
}

// Reported takes a failure of die reported from outside the operations
// (the device's health report, an operator, the journal at open): the
// Failure if the die was not known failed, nil if it was.
func (d *Detector) Reported(die flash.DieAddr) *Failure {
	now := d.clock.Now()
	d.mu.Lock()
	f := d.core.Reported(rdie(die), now)
	d.mu.Unlock()
	if f == nil {
		return nil
	}
	return &Failure{Die: die, First: f.First, At: f.At, BadBlocks: f.BadBlocks, Reported: true}
}

// Record appends a declared failure to the events.
func (d *Detector) Record(ev Failure) {
	d.mu.Lock()
	d.events = append(d.events, ev)
	d.mu.Unlock()
}

// Events lists the recorded failures, in order.
func (d *Detector) Events() []Failure {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Failure(nil), d.events...)
}
