package flash

import (
	"fmt"
	"math"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash/pagefile"
	"github.com/flashmend/flashmend/internal/fsys"
)

// Options configure an Emulator. The zero value is a perfect device: no bit
// errors, no wear failures, no timing, wall-clock time, seed 0.
type Options struct {
	// Clock is the source of time for retention and for the random
	// die-failure process (nil: base.SystemClock). With TimingReal it must
	// be the wall clock.
	Clock base.Clock
	// Seed seeds the device's random sources (one per die, derived from
	// Seed in die order), so a run is reproducible for a given seed and
	// per-die operation order.
	Seed int64

	// ErrorModel decides the bit errors of every read of a programmed page
	// (nil: none). See UBERModel and PhysicalModel.
	ErrorModel ErrorModel
	// HideUncorrectableContent makes an uncorrectable read return zeros
	// instead of the corrupt content (real controllers differ; the default
	// returns the corrupt bytes so upper layers can majority-vote on them).
	HideUncorrectableContent bool

	// Wear configures grown bad blocks.
	Wear WearOptions
	// DieFailure configures the random die-failure process.
	DieFailure DieFailureOptions
	// Timing configures latencies and the timing mode.
	Timing Timing

	// SaveStateEveryErases makes a file-backed device save its state record
	// after this many erases (0: only when a block is retired, a die fails,
	// and on Sync and Close). Write pointers survive a crash regardless
	// (they are rebuilt from the page file); erase and read counters since
	// the last save do not.
	SaveStateEveryErases int
	// StateIO, if set, is what a file-backed device reads and writes its
	// state copies through (nil: the os): a fault injector's hook.
	StateIO pagefile.StateIO
	// FS, if set, is the file system a file-backed device's directory is
	// on (nil: the os's; an fsys.Mem to cut the device's power in tests).
	FS fsys.FS
	// PowerSafe makes a file-backed device's programs survive a power loss
	// of the host, as a real device's completed programs do: an erase
	// first makes every earlier program durable (fsync of the page file),
	// and SyncPrograms (which internal/sdf calls before a sync or journal
	// flush returns) does. Without it, programs survive a process crash
	// (the kernel keeps them) but only Sync and Close make them durable;
	// with it, every sync of the host costs an fsync. Off in the zero
	// value (tests and experiments that model the device, e.g. the SDF
	// benchmarks, run without it); objstore.OpenSDFStore, the store of
	// every node on emulated flash, turns it on unless
	// SDFStoreOptions.PowerUnsafe.
	PowerSafe bool
}

// WearOptions is the grown-bad-block model: a program or erase fails (and the
// block is retired) with a probability that grows with the block's P/E count
// as a power law, and blocks far past their rated endurance fail their next
// erase. The shape follows field data that bad blocks grow with wear
// (Schroeder, Lagisetty, Merchant, "Flash Reliability in Production", FAST
// 2016, section 4); the constants are configuration, not measurements.
type WearOptions struct {
	// RatedEndurance is the P/E cycles the flash is rated for (0: no
	// wear-driven failures at all).
	RatedEndurance int
	// ProgramFailureAtRated is the probability that one page program fails
	// when the block is at its rated endurance.
	ProgramFailureAtRated float64
	// EraseFailureAtRated is the probability that one erase fails when the
	// block is at its rated endurance.
	EraseFailureAtRated float64
	// FailureExponent is k in p(pe) = pAtRated * (pe/RatedEndurance)^k
	// (0: 3, a steep growth near end of life).
	FailureExponent float64
	// EraseLimitFactor retires a block whose erase count reaches
	// EraseLimitFactor*RatedEndurance at its next erase (0: never).
	EraseLimitFactor float64
}

// DieFailureOptions configure the random die-failure process: every die
// fails after an exponentially distributed lifetime drawn at open from the
// die's seeded random source and measured on the Clock. Dies fail
// independently, each by time T with probability p = 1 - exp(-T/MTTF), so
// the number of failed dies of an n-die device is Binomial(n, p): the model
// of Reparo 003 (section 1, footnote 2; section 2.2 on sudden die failures).
type DieFailureOptions struct {
	// MeanTimeToFailure of one die (0: dies fail only through FailDie).
	MeanTimeToFailure time.Duration
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = base.SystemClock{}
	}
	if o.Wear.FailureExponent == 0 {
		o.Wear.FailureExponent = 3
	}
	return o
}

func (o Options) validate(g Geometry) error {
	w := o.Wear
	if w.RatedEndurance < 0 || !isProb(w.ProgramFailureAtRated) || !isProb(w.EraseFailureAtRated) ||
		w.FailureExponent < 0 || w.EraseLimitFactor < 0 || math.IsNaN(w.FailureExponent) || math.IsNaN(w.EraseLimitFactor) {
		return base.InvalidArgumentf("flash: bad wear options %+v", w)
	}
	if o.SaveStateEveryErases < 0 {
		return base.InvalidArgumentf("flash: negative SaveStateEveryErases %d", o.SaveStateEveryErases)
	}
	if o.DieFailure.MeanTimeToFailure < 0 {
		return base.InvalidArgumentf("flash: negative die MTTF %v", o.DieFailure.MeanTimeToFailure)
	}
	if err := o.Timing.validate(); err != nil {
		return err
	}
	if o.Timing.Mode == TimingReal {
		if _, manual := o.Clock.(*base.ManualClock); manual {
			return base.InvalidArgumentf("flash: real timing needs the wall clock, not a manual clock")
		}
	}
	if v, ok := o.ErrorModel.(interface{ validate(Geometry) error }); ok {
		if err := v.validate(g); err != nil {
			return err
		}
	}
	return nil
}

func isProb(p float64) bool { return p >= 0 && p <= 1 }

func (w WearOptions) String() string {
	return fmt.Sprintf("endurance=%d pfail=%g efail=%g k=%g limit=%gx",
		w.RatedEndurance, w.ProgramFailureAtRated, w.EraseFailureAtRated, w.FailureExponent, w.EraseLimitFactor)
}
