package flash

import (
	"fmt"
	"sync/atomic"
	"time"
)

// dieCounters are a die's running totals. They are atomics so that Stats
// never waits for a die that is busy (in real timing an operation holds its
// die's lock while it sleeps).
type dieCounters struct {
	reads, programs, erases        atomic.Int64
	bytesRead, bytesProgrammed     atomic.Int64
	bitsRead                       atomic.Int64 // bits of programmed pages returned to the host
	bitsSensed                     atomic.Int64 // bits of programmed pages sensed (whole pages)
	rawBitErrors                   atomic.Int64
	correctedBits                  atomic.Int64
	flippedBits                    atomic.Int64 // bits returned wrong to the host
	injectedFlips                  atomic.Int64 // of which injected (UBER model, Faults)
	uncorrectable                  atomic.Int64 // uncorrectable page reads
	failedOps                      atomic.Int64
	programFailures, eraseFailures atomic.Int64
	busyNanos                      atomic.Int64
}

// OpStats are operation and error totals of a die, a channel or the device.
type OpStats struct {
	Reads, Programs, Erases    int64
	BytesRead, BytesProgrammed int64
	// BitsRead counts the bits of programmed pages returned to the host
	// (data, and OOB when asked for): the denominator of ObservedUBER.
	BitsRead int64
	// BitsSensed counts the bits of programmed pages the cells delivered
	// to ECC (whole pages): the denominator of ObservedRBER.
	BitsSensed int64
	// RawBitErrors are bit errors sampled in the cells before ECC (or the
	// flips of the UBER model, which has no ECC).
	RawBitErrors int64
	// CorrectedBits were corrected by ECC (data returned clean).
	CorrectedBits int64
	// FlippedBits were returned wrong to the host: UBER-mode flips,
	// injected flips, and the raw errors of uncorrectable codewords.
	FlippedBits int64
	// InjectedFlips is the part of FlippedBits injected by the UBER model
	// or by Faults.FlipBit.
	InjectedFlips int64
	// UncorrectableReads counts reads that reported an uncorrectable page.
	UncorrectableReads int64
	// FailedOps counts operations that returned an error.
	FailedOps int64
	// ProgramFailures and EraseFailures are the grown-bad-block events.
	ProgramFailures, EraseFailures int64
	// Busy is the summed modelled busy time (dies: array time plus their
	// transfers; channels: bus transfer time). Zero with TimingNone.
	Busy time.Duration
}

// ObservedUBER is FlippedBits / BitsRead: the rate of bits returned wrong.
func (s OpStats) ObservedUBER() float64 {
	if s.BitsRead == 0 {
		return 0
	}
	return float64(s.FlippedBits) / float64(s.BitsRead)
}

// ObservedRBER is RawBitErrors / BitsSensed.
func (s OpStats) ObservedRBER() float64 {
	if s.BitsSensed == 0 {
		return 0
	}
	return float64(s.RawBitErrors) / float64(s.BitsSensed)
}

func (s OpStats) String() string {
	return fmt.Sprintf("r=%d p=%d e=%d raw=%d corrected=%d flipped=%d uncorr=%d failed=%d",
		s.Reads, s.Programs, s.Erases, s.RawBitErrors, s.CorrectedBits, s.FlippedBits, s.UncorrectableReads, s.FailedOps)
}

func (s *OpStats) add(o OpStats) {
	s.Reads += o.Reads
	s.Programs += o.Programs
	s.Erases += o.Erases
	s.BytesRead += o.BytesRead
	s.BytesProgrammed += o.BytesProgrammed
	s.BitsRead += o.BitsRead
	s.BitsSensed += o.BitsSensed
	s.RawBitErrors += o.RawBitErrors
	s.CorrectedBits += o.CorrectedBits
	s.FlippedBits += o.FlippedBits
	s.InjectedFlips += o.InjectedFlips
	s.UncorrectableReads += o.UncorrectableReads
	s.FailedOps += o.FailedOps
	s.ProgramFailures += o.ProgramFailures
	s.EraseFailures += o.EraseFailures
	s.Busy += o.Busy
}

func (c *dieCounters) snapshot() OpStats {
	return OpStats{
		Reads:              c.reads.Load(),
		Programs:           c.programs.Load(),
		Erases:             c.erases.Load(),
		BytesRead:          c.bytesRead.Load(),
		BytesProgrammed:    c.bytesProgrammed.Load(),
		BitsRead:           c.bitsRead.Load(),
		BitsSensed:         c.bitsSensed.Load(),
		RawBitErrors:       c.rawBitErrors.Load(),
		CorrectedBits:      c.correctedBits.Load(),
		FlippedBits:        c.flippedBits.Load(),
		InjectedFlips:      c.injectedFlips.Load(),
		UncorrectableReads: c.uncorrectable.Load(),
		FailedOps:          c.failedOps.Load(),
		ProgramFailures:    c.programFailures.Load(),
		EraseFailures:      c.eraseFailures.Load(),
		Busy:               time.Duration(c.busyNanos.Load()),
	}
}

// Stats is a snapshot of the device's counters. Per-block counts are in
// BlockInfo (Block) and EraseCounts.
type Stats struct {
	Total    OpStats
	Dies     []OpStats // indexed by DieAddr.Index
	Channels []OpStats // sums of their dies, Busy is the bus time
	// FailedDies and BadBlocks count the current failures.
	FailedDies, BadBlocks int
}

func (s Stats) String() string {
	return fmt.Sprintf("%s failedDies=%d badBlocks=%d", s.Total, s.FailedDies, s.BadBlocks)
}

// Stats returns a snapshot of the counters without taking any die's lock.
// A die failed by the random process counts once an operation saw it.
func (e *Emulator) Stats() Stats {
	s := Stats{Dies: make([]OpStats, len(e.dies)), Channels: make([]OpStats, e.geo.Channels)}
	for i, d := range e.dies {
		ds := d.ctr.snapshot()
		s.Dies[i] = ds
		s.Total.add(ds)
		cs := &s.Channels[d.addr.Channel]
		busy := cs.Busy
		cs.add(ds)
		cs.Busy = busy
	}
	for c, ch := range e.channels {
		s.Channels[c].Busy = time.Duration(ch.busy.Load())
	}
	for _, d := range e.dies {
		if d.failedNow.Load() {
			s.FailedDies++
		}
		s.BadBlocks += int(d.badBlocks.Load())
	}
	return s
}

// EraseCounts returns every block's P/E count, indexed die-major
// (die index * BlocksPerDie + block): the wear distribution the balancers
// read.
func (e *Emulator) EraseCounts() []int {
	out := make([]int, 0, len(e.dies)*e.geo.BlocksPerDie)
	for _, d := range e.dies {
		d.mu.Lock()
		for i := range d.blocks {
			out = append(out, int(d.blocks[i].eraseCount))
		}
		d.mu.Unlock()
	}
	return out
}

func (s ReadStatus) String() string {
	if s.Uncorrectable {
		return fmt.Sprintf("uncorrectable(corrected=%d)", s.CorrectedBits)
	}
	return fmt.Sprintf("ok(corrected=%d)", s.CorrectedBits)
}

// Blocks returns every block's BlockInfo (erase and read counts, write
// pointer, bad flag, program time), indexed die-major like EraseCounts.
func (e *Emulator) Blocks() []BlockInfo {
	out := make([]BlockInfo, 0, len(e.dies)*e.geo.BlocksPerDie)
	for _, d := range e.dies {
		d.mu.Lock()
		for i := range d.blocks {
			out = append(out, d.blocks[i].info())
		}
		d.mu.Unlock()
	}
	return out
}
