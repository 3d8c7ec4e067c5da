package model

import (
	"math"
	"math/big"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

// exactTail is the reference for CodewordFailureProbability: the sum
// P(X > t) = sum_{j>t} C(n,j) p^j (1-p)^(n-j) of positive terms in 512-bit
// math/big arithmetic, every term included.
func exactTail(p float64, n, t int) float64 {
	const prec = 512
	bp := new(big.Float).SetPrec(prec).SetFloat64(p)
	bq := new(big.Float).SetPrec(prec).Sub(new(big.Float).SetPrec(prec).SetInt64(1), bp)
	j := t + 1
	term := new(big.Float).SetPrec(prec).SetInt(new(big.Int).Binomial(int64(n), int64(j)))
	term.Mul(term, powBig(bp, int64(j), prec))
	term.Mul(term, powBig(bq, int64(n-j), prec))
	odds := new(big.Float).SetPrec(prec).Quo(bp, bq)
	sum := new(big.Float).SetPrec(prec)
	negligible := new(big.Float).SetPrec(prec)
	for ; j <= n; j++ {
		sum.Add(sum, term)
		// Past the mode the terms fall geometrically: stop once they are
		// 2^-200 of the sum, far below float64 resolution.
		if float64(j) > float64(n)*p+1 && term.Cmp(negligible.SetMantExp(sum, -200)) < 0 {
			break
		}
		// term(j+1) = term(j) * (n-j)/(j+1) * p/q
		term.Mul(term, new(big.Float).SetPrec(prec).SetInt64(int64(n-j)))
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(int64(j+1)))
		term.Mul(term, odds)
	}
	f, _ := sum.Float64()
	return f
}

func TestCodewordFailureExact(t *testing.T) {
	for _, tc := range []struct {
		n, t int
		rber float64
	}{
		{n: 64, t: 2, rber: 0.02},
		{n: 1000, t: 0, rber: 1e-9},
		{n: 4096*8 + 512, t: 8, rber: 1e-5},  // about 1e-30
		{n: 4096*8 + 512, t: 8, rber: 1e-7},  // about 1e-28
		{n: 4096*8 + 512, t: 8, rber: 6e-8},  // about 1e-30
		{n: 4096*8 + 512, t: 40, rber: 1e-3}, // tail near its bulk
		{n: 4096*8 + 512, t: 40, rber: 2e-3}, // mean above t: tail near 1
		{n: 9216, t: 72, rber: 1e-4},
		{n: 9216, t: 72, rber: 5e-3},
		{n: 100, t: 99, rber: 0.3},
		{n: 20000, t: 3, rber: 1e-12},
	} {
		got := CodewordFailureProbability(tc.rber, tc.n, tc.t)
		want := exactTail(tc.rber, tc.n, tc.t)
		if rel := math.Abs(got-want) / want; !(rel < 1e-11) {
			t.Errorf("n=%d t=%d rber=%g: got %.15e, exact %.15e (rel %g)", tc.n, tc.t, tc.rber, got, want, rel)
		} else {
			t.Logf("n=%d t=%d rber=%g: %.6e (rel err %.1e)", tc.n, tc.t, tc.rber, got, rel)
		}
	}
}

func TestBinomialTailEdges(t *testing.T) {
	for _, tc := range []struct {
		n, k int
		p    float64
		want float64
	}{
		{10, 0, 0.3, 1}, {10, 11, 0.3, 0}, {10, 1, 0, 0}, {10, 10, 1, 1},
		{10, 1, 0.5, 1 - math.Pow(0.5, 10)}, {3, 2, 0.1, 3*0.01*0.9 + 0.001},
	} {
		if got := BinomialTail(tc.n, tc.k, tc.p); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("P(Bin(%d,%g) >= %d) = %g; want %g", tc.n, tc.p, tc.k, got, tc.want)
		}
	}
	if !math.IsNaN(BinomialTail(-1, 1, 0.5)) || !math.IsNaN(BinomialTail(3, 1, 1.5)) {
		t.Error("invalid input not NaN")
	}
}

// TestCodewordFailureMonteCarlo draws codewords at an RBER high enough to
// measure and counts those with more than t errors.
func TestCodewordFailureMonteCarlo(t *testing.T) {
	seed := int64(7)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	const trials = 100000
	for _, tc := range []struct {
		n, t int
		rber float64
	}{{64, 2, 0.02}, {512, 4, 0.004}, {256, 0, 0.001}} {
		failed := 0
		for i := 0; i < trials; i++ {
			errs := 0
			for b := 0; b < tc.n; b++ {
				if rng.Float64() < tc.rber {
					errs++
				}
			}
			if errs > tc.t {
				failed++
			}
		}
		p := CodewordFailureProbability(tc.rber, tc.n, tc.t)
		sd := math.Sqrt(trials * p * (1 - p))
		if math.Abs(float64(failed)-p*trials) > 5*sd+3 {
			t.Errorf("n=%d t=%d rber=%g: simulated %d of %d, model %.1f", tc.n, tc.t, tc.rber, failed, trials, p*trials)
		}
	}
}

func TestUBERAndInverse(t *testing.T) {
	const n, tb = 4096*8 + 512, 8
	for _, r := range []float64{1e-7, 1e-5, 1e-4, 1e-3} {
		u := UBERFromRBER(r, n, tb)
		if want := CodewordFailureProbability(r, n, tb) / n; math.Abs(u-want) > 1e-14*want {
			t.Errorf("UBER(%g) = %g; want P/n = %g", r, u, want)
		}
		back := RBERForUBER(u, n, tb)
		if math.Abs(back-r) > 1e-9*r {
			t.Errorf("RBERForUBER(UBER(%g) = %g) = %.15g", r, u, back)
		}
	}
	for _, target := range []float64{1e-15, 1e-30, 1e-100, 1e-6} {
		r := RBERForUBER(target, n, tb)
		if u := UBERFromRBER(r, n, tb); u > target {
			t.Errorf("target %g: RBER %g gives UBER %g above target", target, r, u)
		}
		if u := UBERFromRBER(r*(1+1e-9), n, tb); u <= target {
			t.Errorf("target %g: RBER %g is not the largest (UBER just above: %g)", target, r, u)
		}
	}
	if r := RBERForUBER(1, 64, 2); r != 0.5 {
		t.Errorf("target 1: %g; want 0.5", r)
	}
	if r := RBERForUBER(0, 64, 2); r != 0 {
		t.Errorf("target 0: %g", r)
	}
	for _, bad := range []struct {
		x    float64
		n, t int
	}{{-1, 64, 2}, {math.NaN(), 64, 2}, {0.1, 0, 0}, {0.1, 64, 64}, {0.1, 64, -1}} {
		if !math.IsNaN(CodewordFailureProbability(bad.x, bad.n, bad.t)) || !math.IsNaN(UBERFromRBER(bad.x, bad.n, bad.t)) || !math.IsNaN(RBERForUBER(bad.x, bad.n, bad.t)) {
			t.Errorf("%v: invalid input not NaN", bad)
		}
	}
	if err := ValidateCodeword(64, 64); !base.IsInvalidArgument(err) {
		t.Errorf("ValidateCodeword(64, 64) = %v", err)
	}
}
