package model

import (
	"fmt"
	"math"
	"math/big"

	"github.com/flashmend/flashmend/internal/base"
)

// This file models what the object store's UBER injection path actually
// does, so that the direct-read-errors experiment (internal/experiments) can
// compare its
// measurements with a prediction of the same process. The paper's closed
// forms (internal/model, DIRECT 000 section 3.1) assume that each replica of
// a block holds independent flips at rate E per data bit and that a read
// sees exactly those. The node's fault store (objstore.FaultStore, persistent
// mode) differs in three ways, each modelled here:
//
//  1. Flips are drawn per bit *read* and written back into the stored file,
//     for every file a node reads: the chunk's data (Cb bits) and its sums
//     record (Sb bits, stored apart). A sums record that fails its own CRC
//     makes the chunk count as corrupt, so a replica's chunk is corrupt on
//     the first read with probability q = 1 - (1-E)^(Cb+Sb).
//  2. A node re-reads a chunk that fails verification (to tell a transient
//     flip from damage). With persistent injection the re-read draws fresh
//     flips on top of the first ones, so the corrupt copy a node returns for
//     a majority vote carries about 2E flips per bit (exactly 2E(1-E): two
//     flips of one bit cancel), and its sums record is valid only when both
//     reads left it intact (per bit (1-E)^2 + E^2).
//  3. The hdfs baseline fails over at the offset of the first bad chunk and
//     never goes back (DIRECT 000 section 4.2.1): the next replica only has
//     to be clean from that offset on. A read fails when the first failure
//     offsets of the R replicas are non-decreasing, which is less likely than
//     the paper's "every replica has an error somewhere in the block".
//
// Chunk recovery alone fails when some chunk is corrupt on all R replicas;
// DIRECT then merges the copies sector by sector and votes on the sectors
// corrupt in every copy, and fails when such a sector has a bit flipped in
// two or more copies, or when none of the three returned sums records is
// valid (nothing to verify against).

// DirectInjectionParams describe one object read under the node's persistent
// flip-on-read injection: Chunks chunks of ChunkBits data bits, each with a
// sums record of SumsBits bits, on Replicas replicas.
type DirectInjectionParams struct {
	UBER      float64
	Chunks    int
	ChunkBits int64
	// SectorBits is the checksum granularity (512 B in objstore): a chunk
	// corrupt on every replica is merged sector by sector, and only a
	// sector corrupt in every copy is voted. It must divide ChunkBits.
	SectorBits int64
	SumsBits   int64
	Replicas   int
}

func (p DirectInjectionParams) String() string {
	return fmt.Sprintf("UBER=%g chunks=%d chunk=%db sector=%db sums=%db R=%d",
		p.UBER, p.Chunks, p.ChunkBits, p.SectorBits, p.SumsBits, p.Replicas)
}

// Bounds of DirectInjectionParams.
const (
	maxInjectionChunks = 1 << 20
	maxInjectionBits   = 1 << 30
)

func (p DirectInjectionParams) validate() error {
	switch {
	case !(p.UBER >= 0 && p.UBER < 1):
		return base.InvalidArgumentf("injection model: UBER %g outside [0, 1)", p.UBER)
	case p.Chunks < 1 || p.Chunks > maxInjectionChunks:
		return base.InvalidArgumentf("injection model: %d chunks outside [1, %d]", p.Chunks, maxInjectionChunks)
	case p.ChunkBits < 1 || p.ChunkBits > maxInjectionBits:
		return base.InvalidArgumentf("injection model: chunk of %d bits outside [1, %d]", p.ChunkBits, maxInjectionBits)
	case p.SectorBits < 1 || p.ChunkBits%p.SectorBits != 0:
		return base.InvalidArgumentf("injection model: sector of %d bits does not divide the chunk's %d", p.SectorBits, p.ChunkBits)
	case p.SumsBits < 0 || p.SumsBits > maxInjectionBits:
		return base.InvalidArgumentf("injection model: sums record of %d bits outside [0, %d]", p.SumsBits, maxInjectionBits)
	case p.Replicas != 3:
		// The vote below is derived for three copies (two flips of one bit
		// defeat it); REP is 3-way.
		return base.InvalidArgumentf("injection model: %d replicas (only 3 is modelled)", p.Replicas)
	}
	return nil
}

// replicaChunkCorrupt is q: the probability that one replica's chunk fails
// verification on its first read.
func (p DirectInjectionParams) replicaChunkCorrupt() float64 {
	return -math.Expm1(float64(p.ChunkBits+p.SumsBits) * math.Log1p(-p.UBER))
}

// DirectInjectedHDFSFailure is the probability that an hdfs-mode object read
// fails: replica 1 fails first at chunk f1, replica 2 fails at some chunk
// f2 >= f1, ..., replica R at fR >= f(R-1). Computed by a forward pass over
// the distribution of the current failure offset (sums of positive terms,
// so tiny probabilities keep their digits).
func DirectInjectedHDFSFailure(p DirectInjectionParams) (float64, error) {
	if err := p.validate(); err != nil {
		return math.NaN(), err
	}
	q := p.replicaChunkCorrupt()
	switch {
	case q == 0:
		return 0, nil
	case q >= 1:
		return 1, nil // every chunk of every replica fails (0 * log(0) is NaN below)
	}
	n := p.Chunks
	// dist[j] = P(the current replica is the k-th to fail and fails first at j).
	dist := make([]float64, n)
	for j := range dist {
		dist[j] = math.Exp(float64(j)*math.Log1p(-q)) * q
	}
	for k := 1; k < p.Replicas; k++ {
		next := make([]float64, n)
		// next[j] = sum_{i<=j} dist[i] (1-q)^(j-i) q, accumulated as a running
		// sum: acc(j) = acc(j-1)(1-q) + dist[j].
		acc := 0.0
		for j := 0; j < n; j++ {
			acc = acc*(1-q) + dist[j]
			next[j] = acc * q
		}
		dist = next
	}
	total := 0.0
	for _, v := range dist {
		total += v
	}
	return math.Min(total, 1), nil
}

// DirectInjectedChunkFailure is the probability that an object read fails under
// chunk recovery alone: some chunk is corrupt on every replica.
func DirectInjectedChunkFailure(p DirectInjectionParams) (float64, error) {
	if err := p.validate(); err != nil {
		return math.NaN(), err
	}
	perChunk := math.Pow(p.replicaChunkCorrupt(), float64(p.Replicas))
	return objectFailure(p.Chunks, perChunk), nil
}

// objectFailure is 1 - (1 - perChunk)^chunks, accurate for tiny perChunk.
func objectFailure(chunks int, perChunk float64) float64 {
	if perChunk >= 1 {
		return 1
	}
	return -math.Expm1(float64(chunks) * math.Log1p(-perChunk))
}

// DirectInjectedVoteFailure is the probability that an object read fails under
// DIRECT's full path: chunk recovery; when every replica of a chunk is
// corrupt, a sector-wise merge (each 512 B sector from a copy where it
// verifies) and a bit-by-bit vote over the three copies of each sector that
// is corrupt in all of them (direct.DecideREP), on the copies the nodes
// return after their re-read.
//
// Per chunk, with X_i "replica i corrupt on the first read", F_i the flips
// of the copy replica i returns (the XOR of both reads' flips), W "no
// returned sums record is valid" and L "some sector has flips in all three
// F_i and some bit of it flipped in two or more":
//
//	P(lost) = P(all X) - P(all X, not W, not L)
//	P(all X, not W, not L) = sum_S (-1)^|S| C(R,|S|) sums(S) data(S)
//	sums(S) = (1-E)^(|S| Sb) - a^|S| b^(R-|S|)
//	data(S) = [ (1-E)^(|S| s) (1 - P(L_sector | S)) ]^m
//
// by inclusion-exclusion over the set S of replicas that are clean on the
// first read (their F_i is the second read's flips, rate E; the others'
// have rate e2 = 2E(1-E)); m sectors of s bits; a = (1-E)^Sb (1 -
// (1-E)^Sb) is "clean sums on read 1, invalid after read 2" and b = 1 -
// ((1-E)^2 + E^2)^Sb "invalid after two reads". Within a sector, with
// per-copy rates p_i, D "some bit flipped in two or more copies" and C_T
// "the copies in T are clean in this sector":
//
//	P(L_sector) = P(D) - P(D, some copy clean)
//	P(D) = 1 - f^s, f = P(fewer than two of the F_i flip a bit)
//	P(D, some copy clean) = P(some copy clean) - P(some copy clean, not D)
//	P(some copy clean, not D) = sum_{T nonempty} (-1)^(|T|+1) [prod_{i in T} (1-p_i) f_T]^s
//
// where f_T is the probability that fewer than two of the copies outside T
// flip a bit. The alternating sums cancel almost completely at small E, so
// everything is evaluated in math/big at a precision raised until the
// result keeps 64 significant bits.
func DirectInjectedVoteFailure(p DirectInjectionParams) (float64, error) {
	if err := p.validate(); err != nil {
		return math.NaN(), err
	}
	if p.UBER == 0 {
		return 0, nil
	}
	var perChunk float64
	for prec := uint(256); prec <= 1<<14; prec *= 2 {
		v := injectedVoteChunkBig(p, prec)
		perChunk, _ = v.Float64()
		// Every term is at most 1 in magnitude with a relative error of
		// about (8 log2(bits) + 64) 2^-prec; the result is trustworthy when
		// it stands well above 2^-(prec-16).
		if v.Sign() > 0 && v.MantExp(nil) > -int(prec)+16+64 {
			break
		}
	}
	if perChunk < 0 {
		perChunk = 0 // below 2^-16000: zero in float64
	}
	return objectFailure(p.Chunks, perChunk), nil
}

func injectedVoteChunkBig(p DirectInjectionParams, prec uint) *big.Float {
	nf := func() *big.Float { return new(big.Float).SetPrec(prec) }
	f := func(x float64) *big.Float { return nf().SetFloat64(x) }
	one := f(1)
	e := f(p.UBER)
	u := nf().Sub(one, e) // 1-E
	e2 := nf().Mul(f(2), e)
	e2.Mul(e2, u) // 2E(1-E)
	uSb := powBig(u, p.SumsBits, prec)
	a := nf().Sub(one, uSb)
	a.Mul(a, uSb)
	same := nf().Mul(u, u)
	same.Add(same, nf().Mul(e, e))
	b := nf().Sub(one, powBig(same, p.SumsBits, prec))
	r := p.Replicas
	sectors := p.ChunkBits / p.SectorBits

	allX := nf()
	kept := nf() // P(all X, not W, not L)
	uAll := powBig(u, p.ChunkBits+p.SumsBits, prec)
	for s := 0; s <= r; s++ {
		choose := f(float64(new(big.Int).Binomial(int64(r), int64(s)).Int64()))
		rates := make([]*big.Float, r)
		for i := range rates {
			rates[i] = e2
			if i < s {
				rates[i] = e
			}
		}
		sums := nf().Sub(powBig(uSb, int64(s), prec), nf().Mul(powBig(a, int64(s), prec), powBig(b, int64(r-s), prec)))
		sector := nf().Sub(one, sectorLost(rates, p.SectorBits, prec))
		sector.Mul(sector, powBig(u, int64(s)*p.SectorBits, prec))
		term := nf().Mul(choose, sums)
		term.Mul(term, powBig(sector, sectors, prec))
		termX := nf().Mul(choose, powBig(uAll, int64(s), prec))
		if s%2 == 0 {
			allX.Add(allX, termX)
			kept.Add(kept, term)
		} else {
			allX.Sub(allX, termX)
			kept.Sub(kept, term)
		}
	}
	return nf().Sub(allX, kept)
}

// sectorLost is P(L_sector): every copy has a flip in the sector of
// sectorBits bits and some bit is flipped in two or more copies, for
// copies whose bits flip independently at the given rates.
func sectorLost(rates []*big.Float, sectorBits int64, prec uint) *big.Float {
	nf := func() *big.Float { return new(big.Float).SetPrec(prec) }
	one := nf().SetInt64(1)
	double := nf().Sub(one, powBig(fewerThanTwo(rates, prec), sectorBits, prec))
	someClean, someCleanNoDouble := nf(), nf()
	n := len(rates)
	for mask := 1; mask < 1<<n; mask++ {
		clean := nf().SetInt64(1)
		var others []*big.Float
		size := 0
		for i, p := range rates {
			if mask&(1<<i) != 0 {
				clean.Mul(clean, nf().Sub(one, p))
				size++
			} else {
				others = append(others, p)
			}
		}
		c := powBig(clean, sectorBits, prec)
		cn := powBig(nf().Mul(clean, fewerThanTwo(others, prec)), sectorBits, prec)
		if size%2 == 1 {
			someClean.Add(someClean, c)
			someCleanNoDouble.Add(someCleanNoDouble, cn)
		} else {
			someClean.Sub(someClean, c)
			someCleanNoDouble.Sub(someCleanNoDouble, cn)
		}
	}
	// P(D and some clean) = P(some clean) - P(some clean, not D)
	doubleAndClean := nf().Sub(someClean, someCleanNoDouble)
	return nf().Sub(double, doubleAndClean)
}

// fewerThanTwo is the probability that fewer than two of independent
// Bernoulli variables with the given rates are 1.
func fewerThanTwo(rates []*big.Float, prec uint) *big.Float {
	one := new(big.Float).SetPrec(prec).SetInt64(1)
	none := new(big.Float).SetPrec(prec).SetInt64(1)
	for _, r := range rates {
		none.Mul(none, new(big.Float).SetPrec(prec).Sub(one, r))
	}
	sum := new(big.Float).SetPrec(prec).Set(none)
	for j, rj := range rates {
		t := new(big.Float).SetPrec(prec).Set(rj)
		for i, ri := range rates {
			if i != j {
				t.Mul(t, new(big.Float).SetPrec(prec).Sub(one, ri))
			}
		}
		sum.Add(sum, t)
	}
	return sum
}
