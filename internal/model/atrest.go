package model

import (
	"math"

	"github.com/flashmend/flashmend/internal/base"
)

// Failure probabilities at rest: every stored bit flipped independently
// with probability UBER (the bit errors a device leaves behind while it is
// powered off, and what `flashmend experiments run uber-restart-objects`
// injects), for the structures a storage node keeps, metadata next to data.
//
// A structure kept in copies and merged unit by unit (the device state, the
// SDF journal, metadata files) is lost when some unit is damaged in every
// copy and, where three copies vote bit by bit, the vote does not give it
// back. The vote fails only when some bit position is flipped in at least
// two copies; a unit of B bits is then lost when, besides, the remaining
// copy is damaged too, so to leading order in B*u (below 0.02 for the units
// and rates of interest here: 4096-bit units, u <= 3e-6)
//
//	P(unit lost with a vote) = 3 B u^2 q + B u^3,   q = 1 - (1-u)^B
//
// (a pair of copies sharing a flipped bit, 3 B u^2, times the third copy
// damaged; or all three sharing one), against q^3 without a vote.

// UnitDamage is the probability that a unit of `bytes` stored bytes holds
// at least one flipped bit at UBER u.
func UnitDamage(u float64, bytes int) float64 {
	if u <= 0 {
		return 0
	}
	return -math.Expm1(8 * float64(bytes) * math.Log1p(-u))
}

// MergedCopies is a structure kept in Copies copies, each cut into Units
// units of UnitBytes stored bytes with their own checksum, merged unit by
// unit; Vote: a unit damaged in every copy is voted bit by bit over three
// copies.
type MergedCopies struct {
	Name      string
	UnitBytes int
	Units     int
	Copies    int
	Vote      bool
}

// Validate checks the parameters.
func (m MergedCopies) Validate() error {
	switch {
	case m.UnitBytes <= 0 || m.Units < 0 || m.Copies < 1:
		return base.InvalidArgumentf("model: merged copies %+v: sizes must be positive", m)
	case m.Vote && m.Copies < 3:
		return base.InvalidArgumentf("model: merged copies %+v: a vote needs three copies", m)
	}
	return nil
}

// UnitLoss is the probability that one unit is damaged in every copy and
// not voted back.
func (m MergedCopies) UnitLoss(u float64) float64 {
	if m.Validate() != nil || u < 0 || u >= 1 {
		return math.NaN()
	}
	q := UnitDamage(u, m.UnitBytes)
	all := math.Pow(q, float64(m.Copies))
	if !m.Vote {
		return all
	}
	bits := 8 * float64(m.UnitBytes)
	lost := 3*bits*u*u*q + bits*u*u*u
	if m.Copies > 3 {
		lost *= math.Pow(q, float64(m.Copies-3)) // copies beyond the voting three must be damaged too
	}
	return math.Min(lost, all)
}

// Loss is the probability that the structure cannot be assembled.
func (m MergedCopies) Loss(u float64) float64 {
	p := m.UnitLoss(u)
	if math.IsNaN(p) {
		return p
	}
	return -math.Expm1(float64(m.Units) * math.Log1p(-p))
}

// DamagedUnits is the expected number of units damaged in at least one
// copy (what the merge repairs; measured by the layers' open reports).
func (m MergedCopies) DamagedUnits(u float64) float64 {
	q := UnitDamage(u, m.UnitBytes)
	return float64(m.Units) * -math.Expm1(float64(m.Copies)*math.Log1p(-q))
}

// WholeCopiesLoss is the loss probability of a structure under one
// checksum per copy (no merge, no vote): every copy damaged.
func WholeCopiesLoss(u float64, bytes, copies int) float64 {
	return math.Pow(UnitDamage(u, bytes), float64(copies))
}

// ObjectAtRest describes an object version's chunks on the nodes: Rows rows
// (EC) or chunks (REP) of SectorsPerChunk sectors of SectorBytes, each chunk
// with a sums record of SumsBytes stored apart.
type ObjectAtRest struct {
	Rows            int
	SectorsPerChunk int
	SectorBytes     int
	SumsBytes       int
}

// REPLoss is the probability that a REP-3 object is lost at rest: some
// chunk's three sums records all damaged (nothing to verify against), or
// some sector damaged in all three copies where the bit-by-bit vote fails
// (a bit flipped in two copies).
func (o ObjectAtRest) REPLoss(u float64) float64 {
	r := UnitDamage(u, o.SumsBytes)
	sector := MergedCopies{UnitBytes: o.SectorBytes, Units: o.SectorsPerChunk, Copies: 3, Vote: true}
	chunkOK := (1 - r*r*r) * (1 - sector.Loss(u))
	return -math.Expm1(float64(o.Rows) * math.Log(chunkOK))
}

// ECLoss is the probability that an EC 4+2 object is lost at rest, with
// DIRECT's per-sector decode: a row is read when, at every sector, four of
// the six shards verify there. A shard's sector verifies unless its bytes
// or its 4-byte entry in the shard's sums record are damaged (a sums record
// that fails its own CRC still serves its other entries).
func (o ObjectAtRest) ECLoss(u float64) float64 {
	d := UnitDamage(u, o.SectorBytes+4)
	sectorOK := 0.0
	for k := 4; k <= 6; k++ {
		sectorOK += binomPMF(6, k, 1-d)
	}
	return -math.Expm1(float64(o.Rows*o.SectorsPerChunk) * math.Log(sectorOK))
}

// ECLossWholeSums is ECLoss when a shard whose sums record fails its own CRC
// verifies nowhere in its chunk (the decode before damaged records' entries
// were used): the comparison the uber-restart-objects report prints.
func (o ObjectAtRest) ECLossWholeSums(u float64) float64 {
	r := UnitDamage(u, o.SumsBytes)
	d := UnitDamage(u, o.SectorBytes)
	rowOK := 0.0
	for s := 4; s <= 6; s++ {
		sectorOK := 0.0
		for k := 4; k <= s; k++ {
			sectorOK += binomPMF(s, k, 1-d)
		}
		rowOK += binomPMF(6, s, 1-r) * math.Exp(float64(o.SectorsPerChunk)*math.Log(sectorOK))
	}
	return -math.Expm1(float64(o.Rows) * math.Log(rowOK))
}

// binomPMF is C(n, k) p^k (1-p)^(n-k).
func binomPMF(n, k int, p float64) float64 {
	if k < 0 || k > n {
		return 0
	}
	l := lgammaInt(n+1) - lgammaInt(k+1) - lgammaInt(n-k+1)
	if k > 0 {
		l += float64(k) * math.Log(p)
	}
	if n-k > 0 {
		l += float64(n-k) * math.Log1p(-p)
	}
	return math.Exp(l)
}

func lgammaInt(n int) float64 {
	v, _ := math.Lgamma(float64(n))
	return v
}
