package detect

import (
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

// prober answers probes from a set of bad blocks (ErrBadBlock) and failed
// dies (ErrDieFailed), counting what it was asked, and advances the clock
// by a millisecond per probe.
type prober struct {
	clock  *base.ManualClock
	bad    map[flash.BlockAddr]bool
	failed map[flash.DieAddr]bool
	asked  []flash.PageAddr
}

func (p *prober) probe(a flash.PageAddr) error {
	p.asked = append(p.asked, a)
	p.clock.Advance(time.Millisecond)
	switch {
	case p.failed[a.DieAddr()]:
		return flash.ErrDieFailed
	case p.bad[a.BlockAddr()]:
		return flash.ErrBadBlock
	}
	return nil
}

func newDetector(t *testing.T, maxBad int) (*Detector, *prober) {
	t.Helper()
	clock := base.NewManualClock(time.Unix(1e9, 0))
	p := &prober{clock: clock, bad: map[flash.BlockAddr]bool{}, failed: map[flash.DieAddr]bool{}}
	return New(flash.SmallGeometry(), maxBad, clock, p.probe), p
}

func TestCleanOperationsDeclareNothing(t *testing.T) {
	d, p := newDetector(t, 2)
	a := flash.PageAddr{Channel: 1, Die: 0, Block: 5, Page: 3}
	if f := d.Observe(a, flash.ReadStatus{}, nil); f != nil {
		t.Fatalf("clean read declared %v", f)
	}
	if f := d.Observe(a, flash.ReadStatus{CorrectedBits: 7}, nil); f != nil {
		t.Fatalf("corrected read declared %v", f)
	}
	// One uncorrectable page in a healthy block: its block is probed,
	// the probe reads well, nothing is declared.
	if f := d.Observe(a, flash.ReadStatus{Uncorrectable: true}, flash.ErrUncorrectable); f != nil {
		t.Fatalf("one uncorrectable page declared %v", f)
	}
	if len(p.asked) != 1 || p.asked[0] != (flash.PageAddr{Channel: 1, Die: 0, Block: 5}) {
		t.Fatalf("probes %v, want the block's first page", p.asked)
	}
	if ev := d.Events(); len(ev) != 0 {
		t.Fatalf("events %v", ev)
	}
}

// TestProbeWalkDeclaresDie: an uncorrectable read in a run of bad blocks
// walks the run outward and declares the die past maxBad bad blocks, with
// the first failure's time and the declaration's.
func TestProbeWalkDeclaresDie(t *testing.T) {
	d, p := newDetector(t, 2)
	die := flash.DieAddr{Channel: 0, Die: 1}
	for b := 3; b <= 7; b++ {
		p.bad[flash.BlockAddr{Channel: 0, Die: 1, Block: b}] = true
	}
	start := p.clock.Now()
	f := d.Observe(flash.PageAddr{Channel: 0, Die: 1, Block: 5, Page: 2}, flash.ReadStatus{Uncorrectable: true}, flash.ErrUncorrectable)
	if f == nil {
		t.Fatalf("not declared after probes %v", p.asked)
	}
	if f.Die != die || f.BadBlocks != 3 || f.Reported || !f.First.Equal(start) || f.Latency() != time.Duration(len(p.asked))*time.Millisecond {
		t.Fatalf("failure %+v (latency %v) after %d probes", f, f.Latency(), len(p.asked))
	}
	for _, a := range p.asked {
		if a.DieAddr() != die || a.Page != 0 {
			t.Fatalf("probe %v off the suspect die or not a first page", a)
		}
	}
	// Declared once: later failures on the die declare nothing.
	if again := d.Observe(flash.PageAddr{Channel: 0, Die: 1, Block: 9}, flash.ReadStatus{}, flash.ErrBadBlock); again != nil {
		t.Fatalf("declared twice: %v", again)
	}
	if again := d.Reported(die); again != nil {
		t.Fatalf("reported after declaration: %v", again)
	}
}

func TestReportedDie(t *testing.T) {
	d, p := newDetector(t, 4)
	die := flash.DieAddr{Channel: 1, Die: 1}
	f := d.Observe(flash.PageAddr{Channel: 1, Die: 1, Block: 2}, flash.ReadStatus{}, flash.ErrDieFailed)
	if f == nil || f.Die != die || !f.Reported || len(p.asked) != 0 {
		t.Fatalf("device-reported failure: %+v, probes %v", f, p.asked)
	}
	d.Record(*f)
	if f2 := d.Reported(die); f2 != nil {
		t.Fatalf("reported twice: %v", f2)
	}
	other := flash.DieAddr{Channel: 0, Die: 0}
	f3 := d.Reported(other)
	if f3 == nil || f3.Die != other || !f3.Reported {
		t.Fatalf("operator report: %+v", f3)
	}
	d.Record(*f3)
	if ev := d.Events(); len(ev) != 2 || ev[0].Die != die || ev[1].Die != other {
		t.Fatalf("events %v", ev)
	}
	// A probe that finds the die failed declares it as reported.
	p.failed[flash.DieAddr{Channel: 0, Die: 1}] = true
	f4 := d.Observe(flash.PageAddr{Channel: 0, Die: 1, Block: 0}, flash.ReadStatus{}, flash.ErrUncorrectable)
	if f4 == nil || !f4.Reported || len(p.asked) != 1 {
		t.Fatalf("probe on a failed die: %+v, probes %v", f4, p.asked)
	}
}
