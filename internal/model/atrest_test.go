package model

import (
	"math"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/testseed"
)

// flipsIn draws whether each of n bits flips at rate u.
func damaged(rng *rand.Rand, bits int, u float64) []bool {
	out := make([]bool, bits)
	for i := range out {
		out[i] = rng.Float64() < u
	}
	return out
}

func anyTrue(b []bool) bool {
	for _, x := range b {
		if x {
			return true
		}
	}
	return false
}

// TestMergedCopiesMonteCarlo checks UnitLoss (with and without a vote) and
// DamagedUnits against a simulation of bit flips in three copies.
func TestMergedCopiesMonteCarlo(t *testing.T) {
	rng := testseed.Rand(t, "MODEL_SEED")
	const trials = 400000
	m := MergedCopies{UnitBytes: 8, Units: 1, Copies: 3, Vote: true}
	u := 0.002
	bits := 8 * m.UnitBytes
	var lostVote, lostNoVote, damagedAny int
	for i := 0; i < trials; i++ {
		c := [3][]bool{damaged(rng, bits, u), damaged(rng, bits, u), damaged(rng, bits, u)}
		all := anyTrue(c[0]) && anyTrue(c[1]) && anyTrue(c[2])
		if anyTrue(c[0]) || anyTrue(c[1]) || anyTrue(c[2]) {
			damagedAny++
		}
		if !all {
			continue
		}
		lostNoVote++
		for b := 0; b < bits; b++ {
			n := 0
			for k := range c {
				if c[k][b] {
					n++
				}
			}
			if n >= 2 {
				lostVote++
				break
			}
		}
	}
	check := func(name string, got int, want float64, tol float64) {
		t.Helper()
		p := float64(got) / trials
		sigma := math.Sqrt(want * (1 - want) / trials)
		if math.Abs(p-want) > tol*want+4*sigma {
			t.Errorf("%s: simulated %.3g, model %.3g", name, p, want)
		}
		t.Logf("%s: simulated %.3g, model %.3g", name, p, want)
	}
	check("unit lost with a vote", lostVote, m.UnitLoss(u), 0.25) // leading order in B*u = 0.128
	noVote := m
	noVote.Vote = false
	check("unit lost without a vote", lostNoVote, noVote.UnitLoss(u), 0)
	check("units damaged in some copy", damagedAny, m.DamagedUnits(u), 0)
}

// TestObjectAtRestMonteCarlo checks ECLoss and REPLoss against a simulation
// of the decode rules on a small object.
func TestObjectAtRestMonteCarlo(t *testing.T) {
	rng := testseed.Rand(t, "MODEL_SEED")
	// Sums records as the store lays them out: length, one entry per
	// sector, the record's CRC.
	o := ObjectAtRest{Rows: 2, SectorsPerChunk: 4, SectorBytes: 4, SumsBytes: 4 + 4*4 + 4}
	u := 0.003
	const trials = 100000
	ecLost, ecWholeLost, repLost := 0, 0, 0
	for i := 0; i < trials; i++ {
		// EC: per row, six shards: sums record damaged (and where: the
		// length field, sector k's entry, or the record's own CRC)?
		// sectors damaged?
		lost, wholeLost := false, false
		for r := 0; r < o.Rows; r++ {
			var sums [6][]bool // per bit of the record
			var sec [6][]bool
			for s := 0; s < 6; s++ {
				sums[s] = damaged(rng, 8*o.SumsBytes, u)
				for k := 0; k < o.SectorsPerChunk; k++ {
					sec[s] = append(sec[s], anyTrue(damaged(rng, 8*o.SectorBytes, u)))
				}
			}
			for k := 0; k < o.SectorsPerChunk; k++ {
				good, goodWhole := 0, 0
				for s := 0; s < 6; s++ {
					entry := sums[s][8*(4+4*k) : 8*(8+4*k)]
					if !sec[s][k] && !anyTrue(entry) {
						good++
					}
					if !sec[s][k] && !anyTrue(sums[s]) {
						goodWhole++
					}
				}
				lost = lost || good < 4
				wholeLost = wholeLost || goodWhole < 4
			}
		}
		if lost {
			ecLost++
		}
		if wholeLost {
			ecWholeLost++
		}
		// REP: per chunk, three replicas; a sector is lost when damaged in
		// all three and some bit flipped in two of them.
		lost = false
		for r := 0; r < o.Rows && !lost; r++ {
			sumsAll := true
			for c := 0; c < 3; c++ {
				sumsAll = sumsAll && anyTrue(damaged(rng, 8*o.SumsBytes, u))
			}
			if sumsAll {
				lost = true
			}
			for k := 0; k < o.SectorsPerChunk && !lost; k++ {
				c := [3][]bool{damaged(rng, 8*o.SectorBytes, u), damaged(rng, 8*o.SectorBytes, u), damaged(rng, 8*o.SectorBytes, u)}
				if !(anyTrue(c[0]) && anyTrue(c[1]) && anyTrue(c[2])) {
					continue
				}
				for b := 0; b < 8*o.SectorBytes; b++ {
					n := 0
					for x := range c {
						if c[x][b] {
							n++
						}
					}
					if n >= 2 {
						lost = true
						break
					}
				}
			}
		}
		if lost {
			repLost++
		}
	}
	for _, c := range []struct {
		name string
		got  int
		want float64
		tol  float64
	}{{"EC", ecLost, o.ECLoss(u), 0.05}, {"EC, whole sums record", ecWholeLost, o.ECLossWholeSums(u), 0.05}, {"REP", repLost, o.REPLoss(u), 0.3}} {
		p := float64(c.got) / trials
		sigma := math.Sqrt(c.want * (1 - c.want) / trials)
		t.Logf("%s: simulated %.4g, model %.4g", c.name, p, c.want)
		if math.Abs(p-c.want) > c.tol*c.want+4*sigma {
			t.Errorf("%s: simulated %.4g, model %.4g", c.name, p, c.want)
		}
	}
}

func TestAtRestEdges(t *testing.T) {
	o := ObjectAtRest{Rows: 32, SectorsPerChunk: 128, SectorBytes: 512, SumsBytes: 520}
	if o.ECLoss(0) != 0 || o.REPLoss(0) != 0 {
		t.Fatalf("no flips, yet loss %g %g", o.ECLoss(0), o.REPLoss(0))
	}
	if !math.IsNaN((MergedCopies{UnitBytes: 512, Units: 1, Copies: 2, Vote: true}).Loss(1e-6)) {
		t.Fatal("a vote over two copies accepted")
	}
	m := MergedCopies{UnitBytes: 512, Units: 70, Copies: 3, Vote: true}
	if l := m.Loss(1e-6); !(l > 0 && l < 1e-8) {
		t.Fatalf("device state loss at 1e-6: %g", l)
	}
}
