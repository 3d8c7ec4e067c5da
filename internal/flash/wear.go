package flash

import "math"

// wearFailureProbability is p(pe) = pAtRated * (pe/endurance)^k, capped at 1.
func wearFailureProbability(pAtRated float64, pe int32, w WearOptions) float64 {
	if w.RatedEndurance <= 0 || pAtRated <= 0 {
		return 0
	}
	p := pAtRated * math.Pow(float64(pe)/float64(w.RatedEndurance), w.FailureExponent)
	return math.Min(p, 1)
}

// programFails decides whether this program fails in the cells. It draws
// from the die's random source only when the probability is positive, so a
// device without a wear model consumes no randomness here.
func (e *Emulator) programFails(d *die, b *blockState, a PageAddr) bool {
	if e.inject != nil && e.inject.programFails(a) {
		return true
	}
	p := wearFailureProbability(e.opts.Wear.ProgramFailureAtRated, b.eraseCount, e.opts.Wear)
	return p > 0 && d.rng.Float64() < p
}

// eraseFails decides whether this erase fails in the cells.
func (e *Emulator) eraseFails(d *die, b *blockState, a BlockAddr) bool {
	if e.inject != nil && e.inject.eraseFails(a) {
		return true
	}
	w := e.opts.Wear
	if w.RatedEndurance > 0 && w.EraseLimitFactor > 0 &&
		float64(b.eraseCount) >= w.EraseLimitFactor*float64(w.RatedEndurance) {
		return true
	}
	p := wearFailureProbability(w.EraseFailureAtRated, b.eraseCount, w)
	return p > 0 && d.rng.Float64() < p
}
