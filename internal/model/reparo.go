package model

import (
	"fmt"
	"math"

	"github.com/flashmend/flashmend/internal/base"
)

// Die failure and RAID rebuild risk, Reparo (paper 003) section 3.

// ProbAtLeastFailures is the probability that at least k of n independent
// components fail when each fails with probability p: P(X >= k),
// X ~ Binomial(n, p). Paper 003 section 3, footnote 4 models the number of
// failed SSDs of a RAID group (and we the number of failed dies of a device)
// this way; with k = 1 it is the probability that a rebuild is needed,
// 1 - (1-p)^n.
func ProbAtLeastFailures(n, k int, p float64) (float64, error) {
	if n < 1 || k < 0 || !(p >= 0 && p <= 1) {
		return 0, base.InvalidArgumentf("model: binomial with n=%d k=%d p=%g (want n >= 1, k >= 0, p in [0, 1])", n, k, p)
	}
	return BinomialTail(n, k, p), nil
}

// DoubleFailureProbability is paper 003 eq. 1, the probability that a second
// of the n SSDs of a RAID-5 group fails while the first is being rebuilt:
//
//	P2 = MTTR * (n - 1) / MTTF.
//
// It is the first-order term of DoubleFailureProbabilityExponential and
// exceeds it (it can exceed 1 when MTTR*(n-1) > MTTF). Times are in hours.
func DoubleFailureProbability(mttrHours, mttfHours float64, n int) (float64, error) {
	if err := validateDoubleFailure(mttrHours, mttfHours, n); err != nil {
		return 0, err
	}
	return mttrHours * float64(n-1) / mttfHours, nil
}

// DoubleFailureProbabilityExponential is the exact probability behind eq. 1
// when SSD lifetimes are exponential with mean MTTF: at least one of the
// other n-1 SSDs fails during a repair of length MTTR,
// 1 - exp(-(n-1) * MTTR / MTTF).
func DoubleFailureProbabilityExponential(mttrHours, mttfHours float64, n int) (float64, error) {
	if err := validateDoubleFailure(mttrHours, mttfHours, n); err != nil {
		return 0, err
	}
	return -math.Expm1(-float64(n-1) * mttrHours / mttfHours), nil
}

func validateDoubleFailure(mttrHours, mttfHours float64, n int) error {
	switch {
	case !(mttrHours >= 0) || math.IsInf(mttrHours, 1):
		return base.InvalidArgumentf("model: MTTR %g hours is not a finite time >= 0", mttrHours)
	case !(mttfHours > 0) || math.IsInf(mttfHours, 1):
		return base.InvalidArgumentf("model: MTTF %g hours is not a finite time > 0", mttfHours)
	case n < 2:
		return base.InvalidArgumentf("model: a RAID group of %d SSDs cannot have a double failure (want n >= 2)", n)
	}
	return nil
}

// ReadFailureProbability is paper 003 eq. 2, the probability that a rebuild
// that reads readBits bits hits at least one uncorrectable bit error:
//
//	P_rf = 1 - (1 - UBER)^S_read,
//
// computed as -expm1(S_read * log1p(-UBER)) so that it stays accurate when
// UBER * S_read is tiny. UBER is per bit, so S_read is in bits.
func ReadFailureProbability(uber, readBits float64) (float64, error) {
	if !(uber >= 0 && uber <= 1) || !(readBits >= 0) || math.IsInf(readBits, 1) {
		return 0, base.InvalidArgumentf("model: read failure with UBER %g over %g bits (want UBER in [0, 1], bits >= 0)", uber, readBits)
	}
	return probAnyOf(readBits, uber), nil
}

// Reparo space utilization, paper 003 sections 4.2.3 and 5.2.

// IDRUtilizationIncrease is the relative increase of the victim core's space
// utilization (logical space over physical space) after reparo_IDR rebuilds
// a failed die inside the victim core, which had diesPerCore dies: the same
// logical space on one die fewer, x/(x-1) - 1 = 1/(x-1) (section 5.2,
// Table 1). Helper cores do not change.
func IDRUtilizationIncrease(diesPerCore int) (float64, error) {
	if diesPerCore < 2 {
		return 0, base.InvalidArgumentf("model: a core with %d dies cannot lose one and keep data (want >= 2)", diesPerCore)
	}
	return 1 / float64(diesPerCore-1), nil
}

// CDRAlpha is paper 003 eq. 4, the logical space added to each helper core
// (and taken (cores-1) times from the victim core) so that every core has the
// same utilization after a die failure: alpha = |LS_h| / (D_ssd - 1), where
// helperLogical is |LS_h| (any unit) and totalDies is D_ssd. It solves eq. 3
// (see SpaceLayout.Adjust).
func CDRAlpha(helperLogical float64, totalDies int) (float64, error) {
	if !(helperLogical >= 0) || math.IsInf(helperLogical, 1) || totalDies < 2 {
		return 0, base.InvalidArgumentf("model: alpha for |LS_h|=%g and %d dies (want |LS_h| >= 0, dies >= 2)", helperLogical, totalDies)
	}
	return helperLogical / float64(totalDies-1), nil
}

// CDRUtilizationIncrease is the relative increase of every core's
// utilization after reparo_CDR's logical space adjustment (Table 2): the
// device keeps its logical space on D_ssd - 1 dies, 1/(D_ssd - 1), with
// D_ssd = cores * diesPerCore.
func CDRUtilizationIncrease(cores, diesPerCore int) (float64, error) {
	if cores < 1 || diesPerCore < 1 || cores*diesPerCore < 2 {
		return 0, base.InvalidArgumentf("model: %d cores of %d dies cannot lose a die and keep data", cores, diesPerCore)
	}
	return 1 / float64(cores*diesPerCore-1), nil
}

// SpaceLayout is an SSD of Cores flash cores with DiesPerCore dies each,
// LogicalSpace logical units spread evenly over the cores, and DieCapacity
// physical units per die (the assumptions of section 5.2.1: all cores equal
// before the failure).
type SpaceLayout struct {
	Cores        int
	DiesPerCore  int
	LogicalSpace float64
	DieCapacity  float64
}

// Figure8Layout is the worked example of paper 003 Figure 8: 4 cores of 4
// dies, 60 logical units, 6 physical units per die.
func Figure8Layout() SpaceLayout {
	return SpaceLayout{Cores: 4, DiesPerCore: 4, LogicalSpace: 60, DieCapacity: 6}
}

// String prints the layout.
func (l SpaceLayout) String() string {
	return fmt.Sprintf("N=%d cores x %d dies, |LS|=%g, die=%g", l.Cores, l.DiesPerCore, l.LogicalSpace, l.DieCapacity)
}

// Validate checks the layout: at least 2 cores (a victim and a helper), at
// least 2 dies per core, positive sizes, and logical space that fits on the
// dies that remain after one fails.
func (l SpaceLayout) Validate() error {
	switch {
	case l.Cores < 2 || l.Cores > 1<<16:
		return base.InvalidArgumentf("model: %d flash cores is outside [2, 65536]", l.Cores)
	case l.DiesPerCore < 2 || l.DiesPerCore > 1<<16:
		return base.InvalidArgumentf("model: %d dies per core is outside [2, 65536]", l.DiesPerCore)
	case !(l.LogicalSpace > 0) || math.IsInf(l.LogicalSpace, 1):
		return base.InvalidArgumentf("model: logical space %g is not positive", l.LogicalSpace)
	case !(l.DieCapacity > 0) || math.IsInf(l.DieCapacity, 1):
		return base.InvalidArgumentf("model: die capacity %g is not positive", l.DieCapacity)
	case l.LogicalSpace > l.DieCapacity*float64(l.Cores*l.DiesPerCore-1):
		return base.InvalidArgumentf("model: logical space %g does not fit on %d dies of %g", l.LogicalSpace, l.Cores*l.DiesPerCore-1, l.DieCapacity)
	}
	return nil
}

// SpaceAdjustment is the state of a layout after one die of the victim core
// fails, with and without reparo_CDR's logical space adjustment.
type SpaceAdjustment struct {
	Alpha                 float64 // eq. 4, logical space moved to each helper core
	UtilizationBefore     float64 // every core, before the failure
	HelperUtilization     float64 // after adjustment
	VictimUtilization     float64 // after adjustment (equals HelperUtilization: eq. 3)
	VictimUtilizationIDR  float64 // without adjustment (reparo_IDR)
	HelperLogicalAfter    float64 // |LS_h| + alpha
	VictimLogicalAfter    float64 // |LS_v| - (N-1) alpha
	RedirectedPerUnit     int     // N-1 LBAs of every D_ssd-1 of the victim are redirected (5.2.2)
	RedirectionUnitBlocks int     // D_ssd - 1
}

// Adjust applies eq. 3-4 to the layout for a single die failure.
func (l SpaceLayout) Adjust() (SpaceAdjustment, error) {
	if err := l.Validate(); err != nil {
		return SpaceAdjustment{}, err
	}
	n := float64(l.Cores)
	x := float64(l.DiesPerCore)
	dies := l.Cores * l.DiesPerCore
	perCore := l.LogicalSpace / n
	alpha, err := CDRAlpha(perCore, dies)
	if err != nil {
		return SpaceAdjustment{}, err
	}
	a := SpaceAdjustment{
		Alpha:                 alpha,
		UtilizationBefore:     perCore / (x * l.DieCapacity),
		HelperLogicalAfter:    perCore + alpha,
		VictimLogicalAfter:    perCore - (n-1)*alpha,
		VictimUtilizationIDR:  perCore / ((x - 1) * l.DieCapacity),
		RedirectedPerUnit:     l.Cores - 1,
		RedirectionUnitBlocks: dies - 1,
	}
	a.HelperUtilization = a.HelperLogicalAfter / (x * l.DieCapacity)
	a.VictimUtilization = a.VictimLogicalAfter / ((x - 1) * l.DieCapacity)
	return a, nil
}

// Redirect is one LBA of the victim core that reparo_CDR moves to a helper
// core (section 5.2.2): it is served there from the helper's hidden
// LS_redirect space at RedirectLBA, and reported as a fake failure so that
// the host rewrites it.
type Redirect struct {
	LBA         int64
	ToCore      int
	RedirectLBA int64
}

// String prints the redirect as in Figure 8 ("3->core0 as _60").
func (r Redirect) String() string {
	return fmt.Sprintf("%d->core%d as _%d", r.LBA, r.ToCore, r.RedirectLBA)
}

// RedirectUnit returns the LBAs of redirection unit `unit` of victim core
// `victim` that move to helper cores. LBAs are striped over the N cores
// (LBA = j*N + v belongs to core v); a unit is the D_ssd - 1 consecutive
// LBAs of the victim with (D_ssd-1)*unit <= j < (D_ssd-1)*(unit+1), and the
// LBA with i = j mod (D_ssd - 1) goes to core i when i < N and i != v. The
// redirected LBAs are numbered after the host-visible space (logicalLBAs),
// N-1 per unit, in order: Figure 8 redirects 3, 7, 11 to cores 0, 1, 2 as
// _60, _61, _62.
func RedirectUnit(l SpaceLayout, victim int, unit int64, logicalLBAs int64) ([]Redirect, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if victim < 0 || victim >= l.Cores || unit < 0 || logicalLBAs < 0 {
		return nil, base.InvalidArgumentf("model: redirect unit %d of victim core %d of %d (logical LBAs %d)", unit, victim, l.Cores, logicalLBAs)
	}
	span := int64(l.Cores*l.DiesPerCore - 1)
	n := int64(l.Cores)
	var out []Redirect
	for j := span * unit; j < span*(unit+1); j++ {
		i := j % span
		if i >= n || i == int64(victim) {
			continue
		}
		out = append(out, Redirect{
			LBA:         j*n + int64(victim),
			ToCore:      int(i),
			RedirectLBA: logicalLBAs + unit*(n-1) + int64(len(out)),
		})
	}
	return out, nil
}

// String prints the adjustment.
func (a SpaceAdjustment) String() string {
	return fmt.Sprintf("alpha=%.4g U: %.4g -> helper %.4g victim %.4g (IDR victim %.4g)",
		a.Alpha, a.UtilizationBefore, a.HelperUtilization, a.VictimUtilization, a.VictimUtilizationIDR)
}
