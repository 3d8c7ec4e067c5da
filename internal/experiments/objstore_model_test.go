package experiments

import (
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/testseed"
)

func TestWilsonInterval(t *testing.T) {
	for _, tc := range []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 10, 0, 0.27753},
		{5, 10, 0.23659, 0.76341},
		{10, 10, 0.72247, 1},
		{1, 100, 0.0017674, 0.054497},
	} {
		lo, hi, err := wilsonInterval(tc.k, tc.n, wilsonZ95)
		if err != nil || math.Abs(lo-tc.lo) > 1e-4 || math.Abs(hi-tc.hi) > 1e-4 {
			t.Errorf("wilson(%d/%d) = [%.5f, %.5f] %v; want [%.5f, %.5f]", tc.k, tc.n, lo, hi, err, tc.lo, tc.hi)
		}
	}
	for _, bad := range [][2]int{{1, 0}, {-1, 5}, {6, 5}} {
		if _, _, err := wilsonInterval(bad[0], bad[1], wilsonZ95); err == nil {
			t.Errorf("wilson(%d/%d) accepted", bad[0], bad[1])
		}
	}
	// Coverage: the interval holds the true rate in about 95% of seeded
	// binomial samples.
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	const p, n, samples = 0.03, 200, 4000
	covered := 0
	for i := 0; i < samples; i++ {
		k := 0
		for j := 0; j < n; j++ {
			if rng.Float64() < p {
				k++
			}
		}
		est, err := newRateEstimate(k, n)
		if err != nil {
			t.Fatal(err)
		}
		if est.Contains(p) {
			covered++
		}
	}
	if frac := float64(covered) / samples; frac < 0.92 || frac > 0.99 {
		t.Errorf("coverage %.3f, want about 0.95", frac)
	}
}

func TestBinomialTailBeyond(t *testing.T) {
	for _, tc := range []struct {
		k, n int
		p    float64
		want float64
	}{
		{1, 200, 7.28e-5, 1 - math.Pow(1-7.28e-5, 200)}, // P(X >= 1)
		{0, 10, 0.5, math.Pow(0.5, 10)},                 // P(X <= 0)
		{10, 10, 0.5, math.Pow(0.5, 10)},                // P(X >= 10)
		{3, 6, 0.5, 42.0 / 64},                          // P(X <= 3): k at the mean counts as the lower side
	} {
		est, err := newRateEstimate(tc.k, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		if got := binomialTailBeyond(est, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("tail(%d/%d, %g) = %.10g, want %.10g", tc.k, tc.n, tc.p, got, tc.want)
		}
	}
}

func TestLatencySummary(t *testing.T) {
	var xs []time.Duration
	for i := 100; i >= 1; i-- {
		xs = append(xs, time.Duration(i)*time.Millisecond)
	}
	s, err := summarizeLatencies(xs)
	if err != nil {
		t.Fatal(err)
	}
	want := latencySummary{N: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if s != want {
		t.Fatalf("got %s, want %s", s, want)
	}
	if _, err := summarizeLatencies(nil); err == nil {
		t.Fatal("empty summary accepted")
	}
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Fatalf("median %g", m)
	}
	if !math.IsNaN(median(nil)) {
		t.Fatal("median of nothing is not NaN")
	}
}
