package model

import (
	"fmt"
	"math"

	"github.com/flashmend/flashmend/internal/base"
)

// Chameleon (paper 004) section III: object popularity and the erase
// estimate that its wear balancer uses to place objects.

// Popularity is paper 004 eq. 1, the write heat of an object at the end of
// epoch k given its writes per epoch w_0..w_k (oldest first):
//
//	p_k = sum_{j=0..k} w_j / 2^(k-j),
//
// each epoch halving the weight of what came before. Writes must be finite
// and >= 0; an empty history has popularity 0.
func Popularity(writesPerEpoch []float64) (float64, error) {
	var p float64
	for j, w := range writesPerEpoch {
		if !(w >= 0) || math.IsInf(w, 1) {
			return 0, base.InvalidArgumentf("model: epoch %d has %g writes (want a finite count >= 0)", j, w)
		}
		p = DecayPopularity(p, w)
	}
	return p, nil
}

// DecayPopularity advances eq. 1 by one epoch: p_k = p_{k-1}/2 + w_k. This is
// how the wear balancer keeps popularity per object in O(1) space; it equals
// Popularity of the whole history.
func DecayPopularity(previous, writes float64) float64 { return previous/2 + writes }

// validUtilization reports whether mu is a victim-block utilization the
// erase model accepts: a fraction in [0, 1) (a victim with every page valid
// frees nothing).
func validUtilization(mu float64) error {
	if !(mu >= 0 && mu < 1) {
		return base.InvalidArgumentf("model: victim block utilization %g is outside [0, 1)", mu)
	}
	return nil
}

// EraseEstimate is paper 004 eq. 2, the block erases that pageWrites page
// writes cause once garbage collection runs, when victim blocks of
// pagesPerBlock pages are a fraction mu valid:
//
//	E_t = W_t / (B_p * (1 - mu)),
//
// because each erase frees B_p (1-mu) pages for new writes, the rest being
// taken by the mu B_p valid pages it copies.
func EraseEstimate(pageWrites float64, pagesPerBlock int, victimUtilization float64) (float64, error) {
	if !(pageWrites >= 0) || math.IsInf(pageWrites, 1) {
		return 0, base.InvalidArgumentf("model: %g page writes (want a finite count >= 0)", pageWrites)
	}
	if pagesPerBlock < 1 {
		return 0, base.InvalidArgumentf("model: %d pages per block (want >= 1)", pagesPerBlock)
	}
	if err := validUtilization(victimUtilization); err != nil {
		return 0, err
	}
	return pageWrites / (float64(pagesPerBlock) * (1 - victimUtilization)), nil
}

// WriteAmplification is the write amplification of garbage collection with
// victim utilization mu (paper 004 section IV-B4): to make room for 1-mu new
// pages, mu valid pages are rewritten, so flash writes per user write are
// 1/(1-mu).
func WriteAmplification(victimUtilization float64) (float64, error) {
	if err := validUtilization(victimUtilization); err != nil {
		return 0, err
	}
	return 1 / (1 - victimUtilization), nil
}

// ChameleonParams are the inputs of `flashmend model chameleon`.
type ChameleonParams struct {
	WritesPerEpoch []float64 // one object's writes per epoch, oldest first
	PageWrites     float64   // W_t
	PagesPerBlock  int       // B_p
	Utilizations   []float64 // mu values to tabulate
}

// PaperChameleonParams uses the SSD of paper 004 Table II (4 KB pages,
// 256 KB blocks: 64 pages per block), 1 Mi page writes, and an example write
// history.
func PaperChameleonParams() ChameleonParams {
	return ChameleonParams{
		WritesPerEpoch: []float64{8, 0, 4, 2, 0, 0, 16, 1},
		PageWrites:     1 << 20,
		PagesPerBlock:  64,
		Utilizations:   []float64{0, 0.25, 0.5, 0.75, 0.9},
	}
}

// ChameleonTables prints eq. 1 over the write history and eq. 2 with the
// write amplification for each utilization.
func ChameleonTables(p ChameleonParams) ([]Table, error) {
	pop := Table{
		Title:   "Chameleon eq. 1: popularity p_k = sum_j w_j / 2^(k-j) (exponential decay per epoch)",
		Columns: []Column{{Name: "epoch", Format: "%.0f"}, {Name: "writes", Format: "%g"}, {Name: "popularity", Format: "%.6g"}},
	}
	if _, err := Popularity(p.WritesPerEpoch); err != nil {
		return nil, err
	}
	var running float64
	for k, w := range p.WritesPerEpoch {
		running = DecayPopularity(running, w)
		pop.Rows = append(pop.Rows, []Cell{Num(float64(k)), Num(w), Num(running)})
	}
	erase := Table{
		Title: fmt.Sprintf("Chameleon eq. 2: erases E_t = W_t / (B_p (1 - mu)) for W_t=%g page writes, B_p=%d pages per block; WA = 1/(1 - mu)", p.PageWrites, p.PagesPerBlock),
		Columns: []Column{
			{Name: "victim_utilization", Format: "%.3g"},
			{Name: "write_amplification", Format: "%.4g"},
			{Name: "erases", Format: "%.6g"},
		},
	}
	for _, mu := range p.Utilizations {
		e, err := EraseEstimate(p.PageWrites, p.PagesPerBlock, mu)
		if err != nil {
			return nil, err
		}
		wa, err := WriteAmplification(mu)
		if err != nil {
			return nil, err
		}
		erase.Rows = append(erase.Rows, []Cell{Num(mu), Num(wa), Num(e)})
	}
	return []Table{pop, erase}, nil
}
