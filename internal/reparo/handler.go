package reparo

import (
	"fmt"
	"math"
)

// Policy is the Handler's choice of where a die's loss is absorbed.
type Policy int

const (
	// CDR spreads the loss over every channel (section 5.2): shares
	// proportional to the surviving dies, so every channel's utilization
	// stays equal; the victim's excess moves off it as fake failures.
	HandlerCDR Policy = iota
	// IDR confines the loss to the victim channel (section 4.2.3): every
	// channel keeps an equal share of the data, so the victim's utilization
	// rises by 1/(x-1) for x dies per channel (Table 1).
	HandlerIDR
)

func (p Policy) String() string {
	switch p {
	case HandlerCDR:
		return "cdr"
	case HandlerIDR:
		return "idr"
	}
	return fmt.Sprintf("policy(%d)", int(p))
}

// ParsePolicy parses "cdr" or "idr".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "cdr", "":
		return HandlerCDR, nil
	case "idr":
		return HandlerIDR, nil
	}
	return 0, fmt.Errorf("reparo: unknown handler policy %q (want cdr or idr)", s)
}

// Shares returns each channel's target share of the device's live data,
// given the surviving dies per channel. Channels with no surviving die get
// 0; the rest sum to 1.
func Shares(p Policy, liveDies []int) []float64 {
	out := make([]float64, len(liveDies))
	total, alive := 0, 0
	for _, n := range liveDies {
		if n > 0 {
			total += n
			alive++
		}
	}
	if alive == 0 {
		return out
	}
	for c, n := range liveDies {
		if n <= 0 {
			continue
		}
		if p == HandlerIDR {
			out[c] = 1 / float64(alive)
		} else {
			out[c] = float64(n) / float64(total)
		}
	}
	return out
}

// Alpha is equation (4): the logical space each helper core gains when one
// of dSSD dies fails, lsHelper being a helper core's logical space before
// the failure. It solves equation (3) for N cores of dSSD/N dies each:
// (|LS_h|+alpha)/(D/N) = (|LS_v|-(N-1)alpha)/(D/N-1) with |LS_v| = |LS_h|.
func Alpha(lsHelper float64, dSSD int) float64 {
	if dSSD <= 1 {
		return math.Inf(1)
	}
	return lsHelper / float64(dSSD-1)
}

// Utilization is live/capacity per channel (0 for a channel with no
// capacity left).
func Utilization(live, capacity []int64) []float64 {
	out := make([]float64, len(live))
	for c := range live {
		if capacity[c] > 0 {
			out[c] = float64(live[c]) / float64(capacity[c])
		}
	}
	return out
}

// Excess returns, per channel, the live bytes it holds above its share of
// the total (0 where it holds less). Under CDR these are the fake failures
// (section 5.2.3): data still readable that moves off the channel through
// the repair path so utilizations stay equal. lost is the bytes lost with
// the failed dies, which the repair rewrites anyway and which the victim no
// longer holds.
func Excess(shares []float64, live []int64) []int64 {
	var total int64
	for _, l := range live {
		total += l
	}
	out := make([]int64, len(live))
	for c, l := range live {
		want := int64(math.Ceil(shares[c] * float64(total)))
		if l > want {
			out[c] = l - want
		}
	}
	return out
}

// Degraded reports why a device can no longer hold its live data after its
// dies failed, or "" if it can: the live data must fit the surviving
// capacity with reserve bytes left for repairs and GC.
func Degraded(live, capacity, reserve int64) string {
	if capacity <= 0 {
		return "no surviving die"
	}
	if live+reserve > capacity {
		return fmt.Sprintf("live data %d B plus the %d B reserve exceed the %d B the surviving dies hold", live, reserve, capacity)
	}
	return ""
}

// Allocator chooses the channel of each new zone so that the zones handed
// out per channel follow weights (smooth weighted round-robin). With equal
// weights it is plain round-robin in channel order.
type Allocator struct {
	weights []float64
	current []float64
}

// NewAllocator returns an allocator over len(weights) channels.
func NewAllocator(weights []float64) *Allocator {
	a := &Allocator{}
	a.SetWeights(weights)
	return a
}

// SetWeights changes the weights, keeping the round-robin position.
func (a *Allocator) SetWeights(weights []float64) {
	a.weights = append(a.weights[:0], weights...)
	if len(a.current) != len(weights) {
		a.current = make([]float64, len(weights))
	}
}

// Weights returns the current weights.
func (a *Allocator) Weights() []float64 { return append([]float64(nil), a.weights...) }

// Next returns the channel for the next zone among those eligible reports
// true for, or -1 if none is eligible (or every eligible weight is 0).
func (a *Allocator) Next(eligible func(c int) bool) int {
	total := 0.0
	best := -1
	for c, w := range a.weights {
		if w <= 0 || !eligible(c) {
			continue
		}
		a.current[c] += w
		total += w
		if best < 0 || a.current[c] > a.current[best]+1e-12 {
			best = c
		}
	}
	if best >= 0 {
		a.current[best] -= total
	}
	return best
}

// ZoneWeights turns target shares of bytes into zone weights, a zone on
// channel c holding zonePages[c] pages: the weight is share/zonePages, so
// a channel with narrower zones (fewer live dies) gets proportionally more
// of them when it must hold the same bytes (IDR), and the same number when
// its share shrank with its dies (CDR).
func ZoneWeights(shares []float64, zonePages []int) []float64 {
	out := make([]float64, len(shares))
	maxW := 0.0
	for c := range shares {
		if zonePages[c] > 0 {
			out[c] = shares[c] / float64(zonePages[c])
			maxW = math.Max(maxW, out[c])
		}
	}
	if maxW > 0 {
		for c := range out {
			out[c] /= maxW
		}
	}
	return out
}
