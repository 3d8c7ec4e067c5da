package wear

import (
	"math"

	"github.com/flashmend/flashmend/internal/base"
)

// Options configures a Balancer. The zero value of a field means its
// default; Validate bounds every field.
type Options struct {
	// Mode is the policy (default ModeChameleon).
	Mode Mode
	// Initial is the redundancy of new objects under ModeEDM and
	// ModeChameleon (default EC, as in the paper's wear and endurance
	// figures; its latency and write-amplification figures start from REP).
	// ModeREP and ModeREPEC always start from REP, ModeEC from EC.
	Initial Redundancy

	// SigmaARPT is sigma_ARPT of paper 004 (Table I, Algorithm 1), in
	// block erases: ARPT runs while the standard deviation of the servers'
	// erase counts (reported, then as estimated after each remap) exceeds
	// it. Zero: the trigger is SigmaARPTRatio instead. Giving both is an
	// error.
	SigmaARPT float64
	// SigmaHCDS is sigma_HCDS (Table I, Algorithm 2), in block erases:
	// HCDS, and EDM's migration, run while the standard deviation exceeds
	// it. Zero: SigmaHCDSRatio instead.
	//
	// NB: where the paper's words and its formulas disagree on these
	// thresholds, the formulas are followed:
	//   - Table I names sigma_ARPT and sigma_HCDS "wear variance
	//     threshold", and section III-B1 calls sigma the wear variance,
	//     but both define sigma as the standard deviation of the erase
	//     counts (Table I's row for sigma; "we define the wear variance
	//     sigma as the standard deviation"). The thresholds are therefore
	//     compared with the standard deviation, in erases, never with its
	//     square (TestWearTrigger: sigma 89.4 against 150 erases does not
	//     fire, although 89.4 squared would).
	//   - Algorithm 1 ensures sigma <= sigma_ARPT and Algorithm 2's
	//     header and text say it stops when sigma << sigma_HCDS, but both
	//     loops run "while sigma > threshold": a loop stops as soon as the
	//     estimate is at or below its threshold (wearTrigger.exceeded is
	//     strict), not at some margin below it.
	SigmaHCDS float64
	// SigmaARPTRatio is the ARPT trigger as a coefficient of variation (the
	// standard deviation over the mean erase count), used when SigmaARPT is
	// zero (default 0.03: three fifths of SigmaHCDSRatio, Figure 8's order).
	// NB: the paper states its thresholds in erase counts and gives no
	// values; a count that suits one workload, device size and run length
	// fires at once or never on another (erase counts grow with time, so a
	// fixed sigma is a tighter and tighter balance), where a fraction of
	// the mean carries across them. The defaults therefore stay ratios;
	// SigmaARPT and SigmaHCDS give the paper's form.
	// NB: the order and the ratio are Figure 8's (section IV-C5): replaying
	// YCSB-zipf from EC, ARPT starts converting after three hours and HCDS
	// during the fifth, so sigma_ARPT < sigma_HCDS; the standard deviation
	// of an unbalanced fleet grows about linearly with time at a steady
	// mean (its sigma over mean is steady), so it passes sigma_ARPT and
	// sigma_HCDS in the ratio of their start times, 3 to 5, and a ratio
	// form keeps that proportion: 0.6 x 0.05. Until 2026-11-25 the default
	// was 0.1, above HCDS's (ARPT the coarse step); measured with ARPT's
	// upper-tail test (lowersUpperTail), 50 servers, Table III workloads:
	// at 0.1 Chameleon ends at sigma/mean 0.05 like EDM, its sigma +8% to
	// +20% over EDM's and its erases +7% to +21% over EC's; at 0.03 ARPT
	// keeps converting, through upgrades that pay, below EDM's trigger:
	// sigma -21% to -34% against EDM on four workloads (hm-0 +0.6%), at
	// +17% to +31% erases over EC (chameleon-wear, chameleon-endurance).
	SigmaARPTRatio float64
	// SigmaHCDSRatio is the HCDS (and EDM) trigger as a coefficient of
	// variation, used when SigmaHCDS is zero (default 0.05).
	SigmaHCDSRatio float64

	// HotFraction sets the popularity threshold l_hot (paper Table I) each
	// epoch at the popularity of the object ranked HotFraction from the top
	// (default 0.05: the paper converts under 5% of the data per hour).
	HotFraction float64
	// HotPopularityMin is the least popularity (eq. 1, in writes) that
	// counts as hot whatever the ranking (default 2: eq. 1's steady state
	// of one write per epoch).
	HotPopularityMin float64
	// ColdFactor: a REP or late-REP object is cold (a downgrade candidate)
	// only below ColdFactor * l_hot (default 0.5). NB: the paper calls
	// everything under l_hot cold; objects near l_hot then flip between
	// late-REP and late-EC from one epoch to the next, and every flip that
	// meets a write converts the whole object.
	ColdFactor float64

	// MinResidenceEpochs: an object that a late conversion (or a move)
	// put in a redundancy state is not a candidate for the opposite
	// conversion before this many epochs (default 8). NB: not in the
	// paper. A conversion rewrites the whole object (three copies, or six
	// shards) on the object's next write; with eq. 1's halving each epoch
	// an object written about once an epoch crosses l_hot both ways by
	// chance alone, and each crossing that meets a write pays that
	// rewrite again (the simulator measured most of a web-1 run's
	// conversion pages in such round trips).
	MinResidenceEpochs int

	// HorizonEpochs is how many epochs of an object's current write rate
	// the balancer charges to the server that will hold it when it
	// estimates the wear variance after a remap (eq. 2; default 8).
	// NB: the paper's eq. 2 counts one epoch (W_t, "the number of page
	// writes during a certain epoch t", section III-B1): 1 is its form. The
	// longer default charges a conversion's or an offload's one-time
	// rewrite of a whole part against more of the wear it moves; with it a
	// hot part's estimated erases are larger, and HCDS and EDM pass over a
	// part whose estimate exceeds the gap between the two servers.
	// chameleon-wear's paper-form table runs 1.
	HorizonEpochs float64
	// MaxRemapsPerEpoch bounds the objects whose destination an epoch
	// changes (ARPT remaps, HCDS swaps count two, EDM moves; default 256).
	MaxRemapsPerEpoch int
	// MaxMoveBytesPerEpoch bounds the bytes an epoch asks to copy now
	// (EDM migrations, the migration fallback, REP+EC conversions; counted
	// as bytes written at the destinations; default 256 MiB).
	MaxMoveBytesPerEpoch int64
	// MigrateAfterEpochs: an object left in an EWO state without a write
	// for this many epochs is migrated (default 6).
	MigrateAfterEpochs int
	// ColdAfterEpochs: under ModeREPEC, an object not written for this many
	// epochs is converted to EC (default 6).
	ColdAfterEpochs int
	// MaxUtilization: no part is placed on a server whose utilization (live
	// fraction of its capacity) is at or above this (default 0.9).
	MaxUtilization float64

	// PageBytes and PagesPerBlock are the flash geometry of eq. 2 (defaults
	// 4096 and 64: paper 004 Table II, 4 KB pages in 256 KB blocks).
	PageBytes     int
	PagesPerBlock int
}

// Defaults of Options.
const (
	DefaultSigmaARPTRatio       = 0.03
	DefaultSigmaHCDSRatio       = 0.05
	DefaultHotFraction          = 0.05
	DefaultHotPopularityMin     = 2
	DefaultColdFactor           = 0.5
	DefaultHorizonEpochs        = 8
	DefaultMinResidenceEpochs   = 8
	DefaultMaxRemapsPerEpoch    = 256
	DefaultMaxMoveBytesPerEpoch = 256 << 20
	DefaultMigrateAfterEpochs   = 6
	DefaultColdAfterEpochs      = 6
	DefaultMaxUtilization       = 0.9
	DefaultPageBytes            = 4096
	DefaultPagesPerBlock        = 64
)

// WithDefaults returns o with zero fields set to their defaults and checks
// every field.
func (o Options) WithDefaults() (Options, error) {
	base.SetDefault(&o.Mode, ModeChameleon)
	switch o.Mode {
	case ModeREP, ModeREPEC:
		if o.Initial == EC {
			return o, base.InvalidArgumentf("wear: policy %v starts every object as REP (initial redundancy EC given)", o.Mode)
		}
		o.Initial = REP
	case ModeEC:
		if o.Initial == REP {
			return o, base.InvalidArgumentf("wear: policy ec starts every object as EC (initial redundancy REP given)")
		}
		o.Initial = EC
	case ModeEDM, ModeChameleon:
		base.SetDefault(&o.Initial, EC)
	default:
		return o, base.InvalidArgumentf("wear: unknown policy %v", o.Mode)
	}
	if o.Initial != REP && o.Initial != EC {
		return o, base.InvalidArgumentf("wear: initial redundancy %v", o.Initial)
	}
	for _, t := range []struct {
		name          string
		erases, ratio *float64
		def           float64
	}{
		{"SigmaARPT", &o.SigmaARPT, &o.SigmaARPTRatio, DefaultSigmaARPTRatio},
		{"SigmaHCDS", &o.SigmaHCDS, &o.SigmaHCDSRatio, DefaultSigmaHCDSRatio},
	} {
		if *t.erases != 0 && *t.ratio != 0 {
			return o, base.InvalidArgumentf("wear: %s given both in erases (%g) and as a ratio (%g)", t.name, *t.erases, *t.ratio)
		}
		if !(*t.erases >= 0 && *t.erases <= 1e12) {
			return o, base.InvalidArgumentf("wear: %s %g erases outside [0, 1e12]", t.name, *t.erases)
		}
		if *t.erases == 0 {
			base.SetDefault(t.ratio, t.def)
			if !(*t.ratio >= 1e-6 && *t.ratio <= 100) {
				return o, base.InvalidArgumentf("wear: %sRatio %g outside [1e-6, 100]", t.name, *t.ratio)
			}
		}
	}
	base.SetDefault(&o.ColdFactor, DefaultColdFactor)
	base.SetDefault(&o.HotFraction, DefaultHotFraction)
	base.SetDefault(&o.HotPopularityMin, DefaultHotPopularityMin)
	base.SetDefault(&o.HorizonEpochs, DefaultHorizonEpochs)
	base.SetDefault(&o.MinResidenceEpochs, DefaultMinResidenceEpochs)
	base.SetDefault(&o.MaxUtilization, DefaultMaxUtilization)
	base.SetDefault(&o.MaxRemapsPerEpoch, DefaultMaxRemapsPerEpoch)
	base.SetDefault(&o.MaxMoveBytesPerEpoch, DefaultMaxMoveBytesPerEpoch)
	base.SetDefault(&o.MigrateAfterEpochs, DefaultMigrateAfterEpochs)
	base.SetDefault(&o.ColdAfterEpochs, DefaultColdAfterEpochs)
	base.SetDefault(&o.PageBytes, DefaultPageBytes)
	base.SetDefault(&o.PagesPerBlock, DefaultPagesPerBlock)
	inRange := func(name string, v, lo, hi float64) error {
		if !(v >= lo && v <= hi) || math.IsNaN(v) {
			return base.InvalidArgumentf("wear: %s %g outside [%g, %g]", name, v, lo, hi)
		}
		return nil
	}
	for _, c := range []struct {
		name      string
		v, lo, hi float64
	}{
		{"HotFraction", o.HotFraction, 1e-6, 1},
		{"HotPopularityMin", o.HotPopularityMin, 1e-9, 1e12},
		{"ColdFactor", o.ColdFactor, 1e-6, 1},
		{"HorizonEpochs", o.HorizonEpochs, 1e-3, 1e6},
		{"MaxUtilization", o.MaxUtilization, 0.01, 1},
		{"MaxRemapsPerEpoch", float64(o.MaxRemapsPerEpoch), 1, 1 << 30},
		{"MaxMoveBytesPerEpoch", float64(o.MaxMoveBytesPerEpoch), 1, 1 << 62},
		{"MigrateAfterEpochs", float64(o.MigrateAfterEpochs), 1, 1 << 20},
		{"MinResidenceEpochs", float64(o.MinResidenceEpochs), 1, 1 << 20},
		{"ColdAfterEpochs", float64(o.ColdAfterEpochs), 1, 1 << 20},
		{"PageBytes", float64(o.PageBytes), 512, 1 << 20},
		{"PagesPerBlock", float64(o.PagesPerBlock), 1, 1 << 16},
	} {
		if err := inRange(c.name, c.v, c.lo, c.hi); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Balancing reports whether the mode changes placements by itself (EDM and
// Chameleon) or only follows its redundancy rule.
func (m Mode) Balancing() bool { return m == ModeEDM || m == ModeChameleon }

// wearTrigger is a wear variance threshold: the paper's, in erases, or a
// coefficient of variation.
type wearTrigger struct{ erases, ratio float64 }

// exceeded reports whether a standard deviation of erase counts sigma
// around a mean passes the threshold.
func (t wearTrigger) exceeded(mean, sigma float64) bool {
	if t.erases > 0 {
		return sigma > t.erases
	}
	return mean > 0 && sigma/mean > t.ratio
}

func (o Options) arptTrigger() wearTrigger {
	return wearTrigger{erases: o.SigmaARPT, ratio: o.SigmaARPTRatio}
}

func (o Options) hcdsTrigger() wearTrigger {
	return wearTrigger{erases: o.SigmaHCDS, ratio: o.SigmaHCDSRatio}
}
