package model

import "math"

// logChooseExactLimit is the largest min(k, n-k) for which logChoose sums
// logarithms term by term (absolute error about 1e-13); above it logChoose
// uses math.Lgamma, whose absolute error grows with n (about 1e-9 at n=1e6).
const logChooseExactLimit = 5000

// logChoose returns log(n choose k) for 0 <= k <= n.
func logChoose(n, k int) float64 {
	if k < 0 || k > n {
		return math.Inf(-1)
	}
	if n-k < k {
		k = n - k
	}
	if k <= logChooseExactLimit {
		// log C(n,k) = sum_{i=1..k} log((n-k+i)/i); every factor is >= 1,
		// so the sum has no cancellation.
		var s float64
		for i := 1; i <= k; i++ {
			s += math.Log(float64(n-k+i)) - math.Log(float64(i))
		}
		return s
	}
	a, _ := math.Lgamma(float64(n) + 1)
	b, _ := math.Lgamma(float64(k) + 1)
	c, _ := math.Lgamma(float64(n-k) + 1)
	return a - b - c
}

// logBinomialPMF returns log P(X = j) for X ~ Binomial(n, p), 0 < p < 1.
func logBinomialPMF(n, j int, p float64) float64 {
	return logChoose(n, j) + float64(j)*math.Log(p) + float64(n-j)*math.Log1p(-p)
}

// tailSumCutoff stops a tail sum when the next term is this small relative
// to the running sum: below the float64 resolution of the sum.
const tailSumCutoff = 1e-18

// logBinomialTail returns log P(X >= k) for X ~ Binomial(n, p). It never
// adds numbers of opposite sign when the tail is small, so it keeps full
// relative precision down to the smallest normal float64 (and beyond, since
// the answer is a logarithm):
//
//   - when k lies above the mean n*p, the terms P(X=j), j >= k, decrease, and
//     the tail is P(X=k) * sum_j prod ratio, each ratio
//     P(X=j+1)/P(X=j) = (n-j)/(j+1) * p/(1-p) < 1;
//   - otherwise the tail is large (>= about 1/2) and is computed as
//     1 - P(X <= k-1), the lower tail summed downwards from k-1 the same way,
//     with expm1 so that a lower tail near 0 or near 1 loses nothing.
//
// Invalid arguments (n < 0, p outside [0,1] or NaN) return NaN.
func logBinomialTail(n, k int, p float64) float64 {
	switch {
	case n < 0 || !(p >= 0 && p <= 1):
		return math.NaN()
	case k <= 0:
		return 0
	case k > n || p == 0:
		return math.Inf(-1)
	case p == 1:
		return 0
	}
	odds := p / (1 - p)
	if float64(k) > float64(n)*p {
		sum, term := 1.0, 1.0
		for j := k; j < n; j++ {
			term *= float64(n-j) / float64(j+1) * odds
			sum += term
			if term < sum*tailSumCutoff {
				break
			}
		}
		return logBinomialPMF(n, k, p) + math.Log(sum)
	}
	// Lower tail P(X <= k-1), summed from j = k-1 downwards.
	sum, term := 1.0, 1.0
	for j := k - 1; j > 0; j-- {
		term *= float64(j) / float64(n-j+1) / odds
		sum += term
		if term < sum*tailSumCutoff {
			break
		}
	}
	logLower := logBinomialPMF(n, k-1, p) + math.Log(sum)
	if logLower >= 0 {
		return math.Inf(-1)
	}
	// log(1 - exp(logLower)), accurate both when exp(logLower) is tiny and
	// when it is close to 1.
	if logLower > -math.Ln2 {
		return math.Log(-math.Expm1(logLower))
	}
	return math.Log1p(-math.Exp(logLower))
}

// BinomialTail returns P(X >= k) for X ~ Binomial(n, p), computed in log
// space (see logBinomialTail). It returns NaN for n < 0 or p outside [0, 1].
// Results below the smallest float64 (about 1e-308) underflow to 0; callers
// that need them use the logarithm through the functions of this package.
func BinomialTail(n, k int, p float64) float64 {
	return math.Exp(logBinomialTail(n, k, p))
}

// probAnyOf returns 1 - (1-p)^n, the probability that at least one of n
// independent trials with probability p succeeds, without rounding p or the
// result to 0 or 1 when they are tiny: -expm1(n * log1p(-p)).
func probAnyOf(n float64, p float64) float64 {
	if p <= 0 || n <= 0 {
		return 0
	}
	if p >= 1 {
		return 1
	}
	return -math.Expm1(n * math.Log1p(-p))
}
