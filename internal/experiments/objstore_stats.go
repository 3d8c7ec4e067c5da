package experiments

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// wilsonZ95 is the standard normal quantile of a two-sided 95% interval.
const wilsonZ95 = 1.959963984540054

// wilsonInterval is the Wilson score interval of a binomial proportion:
// failures out of trials at the normal quantile z. Unlike the textbook
// p +- z sqrt(p(1-p)/n) it stays inside [0, 1] and is not empty at zero
// failures (its upper end is then about z^2/n), which matters here: most
// DIRECT points observe no error at all.
func wilsonInterval(failures, trials int, z float64) (lo, hi float64, err error) {
	if trials <= 0 || failures < 0 || failures > trials {
		return 0, 0, base.InvalidArgumentf("wilson: %d failures of %d trials", failures, trials)
	}
	if !(z > 0) || math.IsInf(z, 0) {
		return 0, 0, base.InvalidArgumentf("wilson: quantile %g is not positive", z)
	}
	n := float64(trials)
	p := float64(failures) / n
	z2 := z * z
	center := (p + z2/(2*n)) / (1 + z2/n)
	half := z / (1 + z2/n) * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	lo, hi = math.Max(0, center-half), math.Min(1, center+half)
	// Exact ends at the boundaries (rounding would leave 1e-17 there).
	if failures == 0 {
		lo = 0
	}
	if failures == trials {
		hi = 1
	}
	return lo, hi, nil
}

// rateEstimate is a measured error rate with its 95% Wilson interval.
type rateEstimate struct {
	Failures, Trials int
	Lo, Hi           float64
}

func newRateEstimate(failures, trials int) (rateEstimate, error) {
	lo, hi, err := wilsonInterval(failures, trials, wilsonZ95)
	return rateEstimate{Failures: failures, Trials: trials, Lo: lo, Hi: hi}, err
}

// Rate is the point estimate failures/trials.
func (r rateEstimate) Rate() float64 { return float64(r.Failures) / float64(r.Trials) }

// Contains reports whether p lies inside the interval.
func (r rateEstimate) Contains(p float64) bool { return p >= r.Lo && p <= r.Hi }

func (r rateEstimate) String() string {
	return fmt.Sprintf("%d/%d = %.3g [%.3g, %.3g]", r.Failures, r.Trials, r.Rate(), r.Lo, r.Hi)
}

// latencySummary is a latency distribution's order statistics.
type latencySummary struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

func (s latencySummary) String() string {
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", s.N, s.P50, s.P90, s.P99, s.Max)
}

// summarizeLatencies sorts samples in place and returns their quantiles
// (nearest rank: the smallest sample with at least q of them at or below).
func summarizeLatencies(samples []time.Duration) (latencySummary, error) {
	if len(samples) == 0 {
		return latencySummary{}, base.InvalidArgumentf("latency summary of no samples")
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	return latencySummary{
		N:   len(samples),
		P50: nearestRank(samples, 0.50),
		P90: nearestRank(samples, 0.90),
		P99: nearestRank(samples, 0.99),
		Max: samples[len(samples)-1],
	}, nil
}

// nearestRank is the q-quantile of sorted samples by the nearest-rank rule.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// median of xs (the mean of the middle two for an even count); xs is
// sorted in place. NaN for no values.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sort.Float64s(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}
