package model

import (
	"fmt"
	"math"

	"github.com/flashmend/flashmend/internal/base"
)

// maxCodewordBits bounds the codeword length the ECC functions accept (a
// 1 MiB codeword; real NAND codewords are 1-4 KiB of data plus parity).
const maxCodewordBits = 8 << 20

// ValidateCodeword reports whether a codeword of nBits bits that corrects up
// to tBits bit errors is one the ECC functions accept: 1 <= nBits <= 8 Mi
// and 0 <= tBits < nBits.
func ValidateCodeword(nBits, tBits int) error {
	switch {
	case nBits < 1 || nBits > maxCodewordBits:
		return base.InvalidArgumentf("model: codeword of %d bits is outside [1, %d]", nBits, maxCodewordBits)
	case tBits < 0 || tBits >= nBits:
		return base.InvalidArgumentf("model: %d correctable bits is outside [0, codeword bits %d)", tBits, nBits)
	}
	return nil
}

// validRBER reports whether rber is a probability.
func validRBER(rber float64) bool { return rber >= 0 && rber <= 1 }

// logCodewordFailure is log P(more than tBits of nBits bits flipped).
func logCodewordFailure(rber float64, nBits, tBits int) float64 {
	return logBinomialTail(nBits, tBits+1, rber)
}

// CodewordFailureProbability is the probability that more than tBits of the
// nBits bits of a codeword are in error when each bit is independently in
// error with probability rber (the raw bit error rate): the binomial tail
// P(X > t), X ~ Binomial(n, RBER), which is the probability that an ECC able
// to correct t bits cannot decode the codeword. It is summed in log space
// from its largest term (see BinomialTail), so it keeps its relative
// precision down to about 1e-300 (for example 1.374e-28 at RBER 1e-7 for a
// codeword of 4 KiB of data and 512 parity bits correcting 8 bits). It returns NaN when rber is not in
// [0, 1] or ValidateCodeword rejects (nBits, tBits).
func CodewordFailureProbability(rber float64, nBits, tBits int) float64 {
	if !validRBER(rber) || ValidateCodeword(nBits, tBits) != nil {
		return math.NaN()
	}
	return math.Exp(logCodewordFailure(rber, nBits, tBits))
}

// UBERFromRBER is the uncorrectable bit error rate of a codeword of nBits
// bits correcting tBits bits, at raw bit error rate rber.
//
// Definition: UBER is the number of uncorrectable error events per bit read
// (JEDEC JESD218 counts "data errors per bits read"), where one codeword
// that fails to decode is one event, whatever the number of its bits in
// error:
//
//	UBER = CodewordFailureProbability(rber, n, t) / n.
//
// This is the rate at which a reader that reads bits sequentially meets an
// uncorrectable codeword, and it is how DIRECT's UBER injection (one flip
// per 1/UBER bits read) and the flash emulator use it. Counting every bit of
// a failed codeword instead would multiply it by E[X | X > t] (about t+1).
// NaN for invalid input, as CodewordFailureProbability.
func UBERFromRBER(rber float64, nBits, tBits int) float64 {
	if !validRBER(rber) || ValidateCodeword(nBits, tBits) != nil {
		return math.NaN()
	}
	return math.Exp(logCodewordFailure(rber, nBits, tBits) - math.Log(float64(nBits)))
}

// maxRBER is the largest raw bit error rate RBERForUBER returns: beyond 1/2
// a bit carries no information.
const maxRBER = 0.5

// rberBisectionSteps halves the log10 search interval [-320, log10(0.5)]
// down to below one float64 ulp of the answer.
const rberBisectionSteps = 200

// RBERForUBER is the inverse of UBERFromRBER: the largest raw bit error rate
// in [0, 1/2] whose UBER does not exceed target, found by bisection on
// log(RBER) comparing log(UBER) (UBER increases with RBER on that range, so
// the answer is unique). It returns 1/2 when even RBER 1/2 meets the target,
// 0 when target is 0 (or below the UBER of the smallest positive float64
// RBER), and NaN when target is not in [0, 1] or ValidateCodeword rejects
// (nBits, tBits).
func RBERForUBER(target float64, nBits, tBits int) float64 {
	if !(target >= 0 && target <= 1) || ValidateCodeword(nBits, tBits) != nil {
		return math.NaN()
	}
	if target == 0 {
		return 0
	}
	// NB: meets uses UBERFromRBER itself, not a log-space equivalent, so
	// that UBERFromRBER(RBERForUBER(x)) <= x holds to the last bit.
	meets := func(rber float64) bool { return UBERFromRBER(rber, nBits, tBits) <= target }
	if meets(maxRBER) {
		return maxRBER
	}
	lo, hi := -320.0, math.Log10(maxRBER) // log10(RBER): lo meets, hi does not
	if !meets(math.Pow(10, lo)) {
		return 0
	}
	for i := 0; i < rberBisectionSteps && hi-lo > 0; i++ {
		mid := lo + (hi-lo)/2
		if mid == lo || mid == hi {
			break
		}
		if meets(math.Pow(10, mid)) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Pow(10, lo)
}

// ECCRow is one line of the ECC table.
type ECCRow struct {
	RBER, CodewordFailure, UBER float64
}

// String prints the row.
func (r ECCRow) String() string {
	return fmt.Sprintf("RBER=%.3g P(codeword fails)=%.3e UBER=%.3e", r.RBER, r.CodewordFailure, r.UBER)
}

// ECCSweep evaluates the codeword failure probability and UBER at RBERs
// spaced pointsPerDecade per decade from fromRBER to toRBER.
func ECCSweep(nBits, tBits int, fromRBER, toRBER float64, pointsPerDecade int) ([]ECCRow, error) {
	if err := ValidateCodeword(nBits, tBits); err != nil {
		return nil, err
	}
	switch {
	case !(fromRBER > 0 && fromRBER <= toRBER && toRBER <= maxRBER):
		return nil, base.InvalidArgumentf("model: RBER range [%g, %g] is not inside (0, %g]", fromRBER, toRBER, maxRBER)
	case pointsPerDecade < 1 || pointsPerDecade > maxSweepPointsPerDecade:
		return nil, base.InvalidArgumentf("model: %d points per decade is outside [1, %d]", pointsPerDecade, maxSweepPointsPerDecade)
	}
	var rows []ECCRow
	for _, r := range logSpace(fromRBER, toRBER, pointsPerDecade) {
		rows = append(rows, ECCRow{RBER: r, CodewordFailure: CodewordFailureProbability(r, nBits, tBits), UBER: UBERFromRBER(r, nBits, tBits)})
	}
	return rows, nil
}

// ECCTables prints the ECC model for a codeword: UBER against RBER, and the
// largest RBER that meets each target UBER.
func ECCTables(nBits, tBits int, fromRBER, toRBER float64, pointsPerDecade int, targets []float64) ([]Table, error) {
	rows, err := ECCSweep(nBits, tBits, fromRBER, toRBER, pointsPerDecade)
	if err != nil {
		return nil, err
	}
	sweep := Table{
		Title: fmt.Sprintf("ECC: codeword of n=%d bits correcting t=%d bits; P(codeword fails) = P(Binomial(n, RBER) > t), UBER = P/n", nBits, tBits),
		Columns: []Column{
			{Name: "rber", Format: "%.3g"},
			{Name: "codeword_failure"},
			{Name: "uber"},
		},
		Notes: []string{"UBER counts one uncorrectable event per failed codeword per bit read (internal/model UBERFromRBER)"},
	}
	for _, r := range rows {
		sweep.Rows = append(sweep.Rows, []Cell{Num(r.RBER), Num(r.CodewordFailure), Num(r.UBER)})
	}
	inverse := Table{
		Title: fmt.Sprintf("ECC inverse: largest RBER whose UBER meets the target, n=%d t=%d", nBits, tBits),
		Columns: []Column{
			{Name: "target_uber", Format: "%.3g"},
			{Name: "max_rber", Format: "%.4e"},
			{Name: "uber_at_max_rber"},
		},
	}
	for _, target := range targets {
		if !(target >= 0 && target <= 1) {
			return nil, base.InvalidArgumentf("model: target UBER %g is not in [0, 1]", target)
		}
		r := RBERForUBER(target, nBits, tBits)
		inverse.Rows = append(inverse.Rows, []Cell{Num(target), Num(r), Num(UBERFromRBER(r, nBits, tBits))})
	}
	return []Table{sweep, inverse}, nil
}
