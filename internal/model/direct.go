package model

import (
	"fmt"
	"math"
	"math/big"

	"github.com/flashmend/flashmend/internal/base"
)

// bitsPerByte converts the byte sizes of DirectParams to the bits that UBER
// counts. DIRECT 000 section 3.1: "files are measured in bytes, while UBER is
// in bits"; Table 1 only comes out with B and C in bits.
const bitsPerByte = 8

// Bounds of DirectParams. They keep every bit count exact in an int64 and a
// float64 and the majority-vote computation bounded.
const (
	maxDirectBlockBytes = 1 << 50 // 1 PiB
	maxDirectReplicas   = 15
)

// DirectParams are the inputs of the DIRECT error model (paper 000 section
// 3.1): a block of BlockBytes, read as chunks of ChunkBytes, stored on
// Replicas servers whose devices flip each bit read with probability UBER,
// independently.
type DirectParams struct {
	UBER       float64 // per bit
	BlockBytes int64
	ChunkBytes int64
	Replicas   int
}

// String prints the parameters with units.
func (p DirectParams) String() string {
	return fmt.Sprintf("UBER=%g B=%s C=%s R=%d", p.UBER, base.Bytes(p.BlockBytes), base.Bytes(p.ChunkBytes), p.Replicas)
}

// Validate reports whether the parameters describe a model this package can
// evaluate. The functions below return NaN for parameters that do not
// validate.
func (p DirectParams) Validate() error {
	switch {
	case !(p.UBER >= 0 && p.UBER <= 1):
		return base.InvalidArgumentf("model: UBER %g is not a probability in [0, 1]", p.UBER)
	case p.BlockBytes <= 0 || p.BlockBytes > maxDirectBlockBytes:
		return base.InvalidArgumentf("model: block size %d bytes is outside (0, %s]", p.BlockBytes, base.Bytes(maxDirectBlockBytes))
	case p.ChunkBytes <= 0 || p.ChunkBytes > p.BlockBytes:
		return base.InvalidArgumentf("model: chunk size %d bytes is outside (0, block size %d]", p.ChunkBytes, p.BlockBytes)
	case p.Replicas < 1 || p.Replicas > maxDirectReplicas:
		return base.InvalidArgumentf("model: replication factor %d is outside [1, %d]", p.Replicas, maxDirectReplicas)
	}
	return nil
}

// chunkLayout splits the block into whole chunks and a shorter last chunk
// (remBits, zero when the chunk size divides the block size), in bits.
func (p DirectParams) chunkLayout() (chunks float64, chunkBits, remBits int64) {
	return float64(p.BlockBytes / p.ChunkBytes), p.ChunkBytes * bitsPerByte, (p.BlockBytes % p.ChunkBytes) * bitsPerByte
}

// DirectBlockRecovery is the probability that one read of a block is an
// application-visible error when the block is the unit of recovery (HDFS):
// every one of the R replicas has at least one flipped bit in the block.
// Paper 000 section 3.1:
//
//	P = (1 - (1 - E)^B)^R, B in bits.
//
// It returns NaN when p does not validate.
func DirectBlockRecovery(p DirectParams) float64 {
	if p.Validate() != nil {
		return math.NaN()
	}
	return math.Pow(probAnyOf(float64(p.BlockBytes*bitsPerByte), p.UBER), float64(p.Replicas))
}

// DirectChunkRecovery is the exact probability that one read of a block is an
// application-visible error when each chunk is recovered independently from
// any replica whose copy of that chunk is clean (DIRECT): some chunk is
// corrupt on all R replicas. Paper 000 section 3.1:
//
//	P = 1 - (1 - (1 - (1 - E)^C)^R)^(B/C), B and C in bits.
//
// When C does not divide B the last, shorter chunk gets its own factor
// instead of the fractional exponent. Evaluated with log1p/expm1 so that
// probabilities down to 1e-300 keep their digits. NaN when p does not
// validate.
func DirectChunkRecovery(p DirectParams) float64 {
	if p.Validate() != nil {
		return math.NaN()
	}
	chunks, chunkBits, remBits := p.chunkLayout()
	r := float64(p.Replicas)
	perChunk := math.Pow(probAnyOf(float64(chunkBits), p.UBER), r)
	perRem := math.Pow(probAnyOf(float64(remBits), p.UBER), r)
	return failAny(chunks, perChunk, perRem)
}

// failAny is 1 - (1-perChunk)^chunks * (1-perRem), accurate for tiny values.
func failAny(chunks, perChunk, perRem float64) float64 {
	if perChunk >= 1 || perRem >= 1 {
		return 1
	}
	return -math.Expm1(chunks*math.Log1p(-perChunk) + math.Log1p(-perRem))
}

// DirectChunkRecoveryTaylor is the paper's approximation of
// DirectChunkRecovery (000 section 3.1), valid when E*C << 1 and
// (E*C)^R << C/B:
//
//	P ~ (E * C)^R * B/C, C in bits, B/C the number of chunks.
//
// Outside that range it is not a probability and can exceed 1; it is
// returned as is so that plots show where the approximation breaks down.
// NaN when p does not validate.
func DirectChunkRecoveryTaylor(p DirectParams) float64 {
	if p.Validate() != nil {
		return math.NaN()
	}
	if p.UBER == 0 {
		return 0
	}
	chunkBits := float64(p.ChunkBytes * bitsPerByte)
	chunks := float64(p.BlockBytes) / float64(p.ChunkBytes)
	return math.Exp(float64(p.Replicas)*math.Log(p.UBER*chunkBits) + math.Log(chunks))
}

// voteThreshold is the number of replicas that must carry a flipped bit for
// the bit-by-bit majority vote to get that bit wrong: the vote is right only
// when strictly more copies are right than wrong, so it fails when
// flips >= ceil(R/2). A tie (even R) counts as a failure: the vote cannot
// choose, and the checksum check after the vote rejects a wrong guess.
func voteThreshold(replicas int) int { return (replicas + 1) / 2 }

// DirectMajorityVoteAnyBit is the probability that some bit of the block is
// flipped on at least ceil(R/2) replicas, so that a bit-by-bit majority vote
// over the whole block would get it wrong:
//
//	q = P(Binomial(R, E) >= ceil(R/2))   (3E^2 - 2E^3 for R = 3)
//	P = 1 - (1 - q)^B, B in bits.
//
// This is the informal model of paper 001 section 3.1 ("an error occurs in
// the same bit across two chunks or more"). DIRECT only votes when every
// replica of a chunk is corrupt, so DirectMajorityVote is lower; this
// function is its upper bound. NaN when p does not validate.
func DirectMajorityVoteAnyBit(p DirectParams) float64 {
	if p.Validate() != nil {
		return math.NaN()
	}
	q := BinomialTail(p.Replicas, voteThreshold(p.Replicas), p.UBER)
	return probAnyOf(float64(p.BlockBytes*bitsPerByte), q)
}

// DirectMajorityVote is the probability that one read of a block is an
// application-visible error under DIRECT's full read path (paper 000 section
// 4 / Figure 6, 001 section 3.1): each chunk is read from a replica whose
// copy is clean; only when the chunk is corrupt on all R replicas are the R
// copies merged by a bit-by-bit majority vote, and the read fails when the
// voted chunk is still wrong (its checksum, assumed perfect, rejects it).
//
// Derivation. Bits flip independently with probability E on each of the R
// copies of a chunk of C bits. Let A be "every copy has at least one flipped
// bit" (chunk recovery fails) and V be "some bit is flipped on at least
// k = ceil(R/2) copies" (the vote fails). The chunk is lost with probability
// P(A and V) = P(A) - P(A and not V). Given not V, the C bit positions are
// still independent, each with its flips restricted to fewer than k copies,
// so by inclusion-exclusion over the set S of copies that are clean
// (|S| = s):
//
//	P(A and not V) = sum_{s=0..R} (-1)^s C(R,s) [(1-E)^s F(R-s)]^C
//	P(A)           = sum_{s=0..R} (-1)^s C(R,s) (1-E)^(sC)
//	F(m)           = P(Binomial(m, E) <= k-1)
//
// hence
//
//	p_chunk = sum_{s=0..R} (-1)^s C(R,s) [ (1-E)^(sC) - ((1-E)^s F(R-s))^C ]
//	P       = 1 - (1 - p_chunk)^(B/C)       (a shorter last chunk as in
//	                                          DirectChunkRecovery).
//
// For R = 3 and E*C << 1 this is about 3 C^2 E^3 per chunk: two copies share
// a flipped bit (3 C E^2) and the third copy is corrupt elsewhere (C E). The
// alternating sum cancels almost completely for small E (the terms are near
// 1, the result can be 1e-40), so it is evaluated in math/big arithmetic with
// enough bits that the result keeps at least 64 significant bits. For R <= 2
// voting cannot help (k = 1) and the result equals DirectChunkRecovery.
// NaN when p does not validate.
func DirectMajorityVote(p DirectParams) float64 {
	if p.Validate() != nil {
		return math.NaN()
	}
	chunks, chunkBits, remBits := p.chunkLayout()
	perChunk := voteChunkFailure(p.UBER, chunkBits, p.Replicas)
	perRem := voteChunkFailure(p.UBER, remBits, p.Replicas)
	return failAny(chunks, perChunk, perRem)
}

// Precision bounds of voteChunkFailure, in mantissa bits.
const (
	votePrecStartBits = 512
	votePrecMaxBits   = 1 << 15
	voteGuardBits     = 64 // significant bits wanted in the result
)

// voteChunkFailure returns P(A and V) for one chunk of chunkBits bits (see
// DirectMajorityVote), retrying at higher precision until the cancellation
// leaves at least voteGuardBits significant bits.
func voteChunkFailure(uber float64, chunkBits int64, replicas int) float64 {
	if uber == 0 || chunkBits == 0 {
		return 0
	}
	if uber == 1 {
		return 1
	}
	var result float64
	for prec := uint(votePrecStartBits); prec <= votePrecMaxBits; prec *= 2 {
		v := voteChunkFailureBig(uber, chunkBits, replicas, prec)
		result, _ = v.Float64()
		// Each term is at most 1 in magnitude and carries a relative error
		// of about (2 log2(C) + 8) * 2^-prec, so the absolute error of the
		// sum stays below 2^-(prec-16) for any chunk size this package
		// accepts. The result is trustworthy when it is far above that.
		if v.Sign() > 0 && v.MantExp(nil) > -int(prec)+16+voteGuardBits {
			break
		}
	}
	if result < 0 {
		// Only possible if even the largest precision drowned the result in
		// rounding noise, i.e. below 2^-(32768-80): it is zero in float64.
		return 0
	}
	return result
}

// voteChunkFailureBig evaluates the inclusion-exclusion sum of
// DirectMajorityVote at the given precision.
func voteChunkFailureBig(uber float64, chunkBits int64, replicas int, prec uint) *big.Float {
	newF := func() *big.Float { return new(big.Float).SetPrec(prec) }
	e := newF().SetFloat64(uber)
	q := newF().Sub(newF().SetInt64(1), e) // 1 - E
	k := voteThreshold(replicas)
	sum := newF()
	qPowS := newF().SetInt64(1) // (1-E)^s
	for s := 0; s <= replicas; s++ {
		// a = (1-E)^s, b = (1-E)^s F(R-s).
		b := newF().Mul(qPowS, binomialCDFBig(replicas-s, k-1, e, q, prec))
		term := newF().Sub(powBig(qPowS, chunkBits, prec), powBig(b, chunkBits, prec))
		term.Mul(term, newF().SetInt(new(big.Int).Binomial(int64(replicas), int64(s))))
		if s%2 == 0 {
			sum.Add(sum, term)
		} else {
			sum.Sub(sum, term)
		}
		qPowS.Mul(qPowS, q)
	}
	return sum
}

// binomialCDFBig returns P(Binomial(m, E) <= j) given e = E and q = 1-E.
func binomialCDFBig(m, j int, e, q *big.Float, prec uint) *big.Float {
	sum := new(big.Float).SetPrec(prec)
	for i := 0; i <= j && i <= m; i++ {
		t := new(big.Float).SetPrec(prec).SetInt(new(big.Int).Binomial(int64(m), int64(i)))
		t.Mul(t, powBig(e, int64(i), prec))
		t.Mul(t, powBig(q, int64(m-i), prec))
		sum.Add(sum, t)
	}
	return sum
}

// powBig returns x^n for n >= 0 by repeated squaring.
func powBig(x *big.Float, n int64, prec uint) *big.Float {
	result := new(big.Float).SetPrec(prec).SetInt64(1)
	sq := new(big.Float).SetPrec(prec).Set(x)
	for n > 0 {
		if n&1 == 1 {
			result.Mul(result, sq)
		}
		n >>= 1
		if n > 0 {
			sq.Mul(sq, sq)
		}
	}
	return result
}

// DirectRow is one UBER point of the DIRECT model: the probability of an
// application-visible error per block read under each recovery scheme.
type DirectRow struct {
	UBER, Block, Chunk, ChunkTaylor, MajorityVote float64
}

// String prints the row in the units of the paper's Table 1.
func (r DirectRow) String() string {
	return fmt.Sprintf("UBER=%.3g block=%.3e chunk=%.3e chunk~=%.3e vote=%.3e", r.UBER, r.Block, r.Chunk, r.ChunkTaylor, r.MajorityVote)
}

// DirectAt evaluates every scheme for p.
func DirectAt(p DirectParams) DirectRow {
	return DirectRow{
		UBER:         p.UBER,
		Block:        DirectBlockRecovery(p),
		Chunk:        DirectChunkRecovery(p),
		ChunkTaylor:  DirectChunkRecoveryTaylor(p),
		MajorityVote: DirectMajorityVote(p),
	}
}

// Sweep bounds.
const maxSweepPointsPerDecade = 1000

// ValidateSweep reports whether DirectSweep accepts these arguments.
func ValidateSweep(p DirectParams, fromUBER, toUBER float64, pointsPerDecade int) error {
	q := p
	q.UBER = 0
	if err := q.Validate(); err != nil {
		return err
	}
	switch {
	case !(fromUBER > 0 && fromUBER <= 1) || !(toUBER > 0 && toUBER <= 1):
		return base.InvalidArgumentf("model: sweep range [%g, %g] is not inside (0, 1]", fromUBER, toUBER)
	case fromUBER > toUBER:
		return base.InvalidArgumentf("model: sweep starts at %g, above its end %g", fromUBER, toUBER)
	case pointsPerDecade < 1 || pointsPerDecade > maxSweepPointsPerDecade:
		return base.InvalidArgumentf("model: %d points per decade is outside [1, %d]", pointsPerDecade, maxSweepPointsPerDecade)
	case math.Log10(toUBER/fromUBER)*float64(pointsPerDecade) > 100000:
		return base.InvalidArgumentf("model: sweep of more than 100000 points")
	}
	return nil
}

// DirectSweep evaluates the model at UBERs spaced evenly in log10 from
// fromUBER to toUBER (both included, the last point snapped to toUBER),
// pointsPerDecade per factor of ten; p.UBER is ignored. Points that fall on
// a power of ten are exactly that power (1e-10, not 1.0000000000000001e-10).
// It returns nil when ValidateSweep rejects the arguments.
func DirectSweep(p DirectParams, fromUBER, toUBER float64, pointsPerDecade int) []DirectRow {
	if ValidateSweep(p, fromUBER, toUBER, pointsPerDecade) != nil {
		return nil
	}
	ubers := logSpace(fromUBER, toUBER, pointsPerDecade)
	rows := make([]DirectRow, 0, len(ubers))
	for _, u := range ubers {
		q := p
		q.UBER = u
		rows = append(rows, DirectAt(q))
	}
	return rows
}

// logSpace returns from, ..., to spaced pointsPerDecade per decade.
func logSpace(from, to float64, pointsPerDecade int) []float64 {
	lo, hi := math.Log10(from), math.Log10(to)
	steps := int(math.Floor((hi-lo)*float64(pointsPerDecade) + 1e-9))
	out := make([]float64, 0, steps+2)
	for i := 0; i <= steps; i++ {
		x := lo + float64(i)/float64(pointsPerDecade)
		out = append(out, pow10(x))
	}
	if last := out[len(out)-1]; math.Abs(math.Log10(last)-hi) > 1e-9 {
		out = append(out, to)
	} else {
		out[len(out)-1] = to
	}
	return out
}

// pow10 is 10^x, exact when x is (within rounding) an integer.
func pow10(x float64) float64 {
	if r := math.Round(x); math.Abs(x-r) < 1e-9 {
		return math.Pow10(int(r))
	}
	return math.Pow(10, x)
}
