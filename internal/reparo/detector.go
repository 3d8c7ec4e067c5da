package reparo

import (
	"fmt"
	"time"
)

// Die names one die: Die is its index within its channel.
type Die struct {
	Channel, Die int
}

func (d Die) String() string { return fmt.Sprintf("ch%d/die%d", d.Channel, d.Die) }

// Failure is one die-failure event.
type Failure struct {
	Die Die
	// First is the time of the first failing operation the detector saw on
	// the die; At is when the die was declared failed.
	First, At time.Time
	// BadBlocks is how many bad blocks the die had when it was declared.
	BadBlocks int
	// Reported is true when the device itself reported the die failed.
	Reported bool
}

// Latency is the detection latency: first failing operation to event.
func (f Failure) Latency() time.Duration { return f.At.Sub(f.First) }

func (f Failure) String() string {
	how := fmt.Sprintf("%d bad blocks", f.BadBlocks)
	if f.Reported {
		how = "reported by the device"
	}
	return fmt.Sprintf("die %s failed (%s), detected %v after its first failure", f.Die, how, f.Latency())
}

// DetectorConfig configures the Detector.
type DetectorConfig struct {
	// MaxBadBlocks is N_bad^die: a die with more bad blocks than this is
	// declared failed. Default 4.
	MaxBadBlocks int
	// BlocksPerDie bounds the probe walk.
	BlocksPerDie int
}

// Probe asks the caller to read the first page of a block and report the
// outcome with Detector.ProbeResult.
type Probe struct {
	Die   Die
	Block int
}

// Detector is Reparo's die-failure detector (section 4.2.1). It is not safe
// for concurrent use; the caller serializes calls.
type Detector struct {
	cfg   DetectorConfig
	dies  map[Die]*dieState
	count int
}

type dieState struct {
	bad    map[int]bool
	probed map[int]bool
	first  time.Time
	failed bool
}

// NewDetector returns a detector.
func NewDetector(cfg DetectorConfig) *Detector {
	if cfg.MaxBadBlocks <= 0 {
		cfg.MaxBadBlocks = 4
	}
	return &Detector{cfg: cfg, dies: map[Die]*dieState{}}
}

func (d *Detector) state(die Die) *dieState {
	s := d.dies[die]
	if s == nil {
		s = &dieState{bad: map[int]bool{}, probed: map[int]bool{}}
		d.dies[die] = s
	}
	return s
}

// Failed reports whether the detector has declared the die failed.
func (d *Detector) Failed(die Die) bool {
	s := d.dies[die]
	return s != nil && s.failed
}

// BadBlocks is the number of bad blocks the detector counts on the die.
func (d *Detector) BadBlocks(die Die) int {
	if s := d.dies[die]; s != nil {
		return len(s.bad)
	}
	return 0
}

// Reported records that the device reported the die failed. It returns the
// event, or nil if the die was already declared.
func (d *Detector) Reported(die Die, now time.Time) *Failure {
	s := d.state(die)
	if s.failed {
		return nil
	}
	if s.first.IsZero() {
		s.first = now
	}
	s.failed = true
	return &Failure{Die: die, First: s.first, At: now, BadBlocks: len(s.bad), Reported: true}
}

// BadBlock records a grown bad block (a program or erase failure, or an
// uncorrectable read) on the die. It returns the probes to run (the
// adjacent blocks' first pages, not probed before) and, when the bad block
// count passes the threshold, the failure event.
func (d *Detector) BadBlock(die Die, block int, now time.Time) ([]Probe, *Failure) {
	s := d.state(die)
	if s.failed {
		return nil, nil
	}
	if s.first.IsZero() {
		s.first = now
	}
	if !s.bad[block] {
		s.bad[block] = true
	}
	if f := d.check(die, s, now); f != nil {
		return nil, f
	}
	return d.neighbours(die, s, block), nil
}

// Suspect records an uncorrectable read in the block. One bad page is not a
// bad block (at high error rates random pages fail their ECC on healthy
// dies), so the block's own first page is probed: the block counts as bad,
// and the walk to its neighbours starts, only if that probe fails too.
func (d *Detector) Suspect(die Die, block int, now time.Time) []Probe {
	s := d.state(die)
	if s.failed || s.bad[block] || s.probed[block] {
		return nil
	}
	if s.first.IsZero() {
		s.first = now
	}
	s.probed[block] = true
	return []Probe{{Die: die, Block: block}}
}

// ProbeResult records a probe's outcome. A failed probe is one more bad
// block, and the walk continues past it; a good probe ends the walk in that
// direction.
func (d *Detector) ProbeResult(p Probe, failed bool, now time.Time) ([]Probe, *Failure) {
	s := d.state(p.Die)
	if !failed {
		// A good block may be probed again by a later walk.
		delete(s.probed, p.Block)
		if len(s.bad) == 0 && len(s.probed) == 0 {
			s.first = time.Time{} // a false alarm: the die has shown nothing
		}
		return nil, nil
	}
	if s.failed {
		return nil, nil
	}
	s.bad[p.Block] = true
	if f := d.check(p.Die, s, now); f != nil {
		return nil, f
	}
	return d.neighbours(p.Die, s, p.Block), nil
}

func (d *Detector) check(die Die, s *dieState, now time.Time) *Failure {
	if len(s.bad) <= d.cfg.MaxBadBlocks {
		return nil
	}
	s.failed = true
	d.count++
	return &Failure{Die: die, First: s.first, At: now, BadBlocks: len(s.bad)}
}

func (d *Detector) neighbours(die Die, s *dieState, block int) []Probe {
	var out []Probe
	for _, b := range []int{block - 1, block + 1} {
		if b < 0 || (d.cfg.BlocksPerDie > 0 && b >= d.cfg.BlocksPerDie) || s.probed[b] || s.bad[b] {
			continue
		}
		s.probed[b] = true
		out = append(out, Probe{Die: die, Block: b})
	}
	return out
}
