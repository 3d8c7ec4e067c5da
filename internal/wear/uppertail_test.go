package wear

import (
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

// TestLowersUpperTail: ARPT's upgrade test. Erases added below the mean
// lower the standard deviation whatever they cost; the upper tail (mean
// plus sigma) falls only when the wear taken off the worn servers exceeds
// the erases added.
func TestLowersUpperTail(t *testing.T) {
	vals := []float64{100, 100, 100, 400} // mean 175, sigma 129.9
	for _, c := range []struct {
		name       string
		ds         []serverDelta
		sigmaLower bool
		want       bool
	}{
		{"waste below the mean", []serverDelta{{0, 50}}, true, false},
		{"wear moved off the worn server", []serverDelta{{3, -50}, {0, 50}}, true, true},
		{"wear moved off the worn server at a cost", []serverDelta{{3, -20}, {0, 60}}, true, true},
		{"too costly", []serverDelta{{3, -10}, {0, 60}, {1, 60}}, true, false},
		{"onto the worn server", []serverDelta{{3, 10}}, false, false},
	} {
		e := &estimate{nodes: make([]base.NodeID, len(vals)), est: append([]float64(nil), vals...)}
		for _, v := range vals {
			e.sum += v
			e.sumSq += v * v
		}
		_, s0 := e.meanSigma()
		_, s1 := e.meanSigmaAfter(c.ds)
		if got := s1 < s0; got != c.sigmaLower {
			t.Errorf("%s: sigma %.1f -> %.1f, lower %v, want %v", c.name, s0, s1, got, c.sigmaLower)
		}
		if got := e.lowersUpperTail(c.ds); got != c.want {
			t.Errorf("%s: lowersUpperTail %v, want %v", c.name, got, c.want)
		}
	}
}
