package model

import (
	"math"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/testseed"
)

// drawFlips returns the positions, among n bits, that flip at rate e
// (geometric gaps, as the fault store draws them).
func drawFlips(rng *rand.Rand, n int64, e float64) map[int64]bool {
	out := map[int64]bool{}
	pos := int64(-1)
	for {
		gap := int64(math.Floor(math.Log(1-rng.Float64())/math.Log1p(-e))) + 1
		if gap <= 0 || pos+gap >= n {
			return out
		}
		pos += gap
		out[pos] = true
	}
}

// simReplicaChunk simulates one node's read of one chunk under persistent
// flip-on-read injection: the first read, and when it fails verification the
// re-read, whose flips land on top of the first's.
type simReplicaChunk struct {
	corrupt    bool           // failed verification on the first read
	flips      map[int64]bool // data flips of the copy returned (after the re-read)
	sumsIntact bool           // the returned sums record verifies
}

func simulateReplicaChunk(rng *rand.Rand, p DirectInjectionParams) simReplicaChunk {
	d1 := drawFlips(rng, p.ChunkBits, p.UBER)
	k1 := drawFlips(rng, p.SumsBits, p.UBER)
	if len(d1) == 0 && len(k1) == 0 {
		return simReplicaChunk{sumsIntact: true}
	}
	xor := func(a, b map[int64]bool) map[int64]bool {
		out := map[int64]bool{}
		for k := range a {
			if !b[k] {
				out[k] = true
			}
		}
		for k := range b {
			if !a[k] {
				out[k] = true
			}
		}
		return out
	}
	d2 := drawFlips(rng, p.ChunkBits, p.UBER)
	k2 := drawFlips(rng, p.SumsBits, p.UBER)
	return simReplicaChunk{corrupt: true, flips: xor(d1, d2), sumsIntact: len(xor(k1, k2)) == 0}
}

// simulateRead runs one object read of every scheme over the same
// simulated replicas: hdfs (fail over at the offset, never go back), chunk
// recovery, and chunk recovery with a vote.
func simulateRead(rng *rand.Rand, p DirectInjectionParams) (hdfsFail, chunkFail, voteFail bool) {
	reps := make([][]simReplicaChunk, p.Replicas)
	for r := range reps {
		reps[r] = make([]simReplicaChunk, p.Chunks)
		for c := range reps[r] {
			reps[r][c] = simulateReplicaChunk(rng, p)
		}
	}
	// hdfs.
	offset := 0
	hdfsFail = true
	for r := 0; r < p.Replicas && hdfsFail; r++ {
		for offset < p.Chunks && !reps[r][offset].corrupt {
			offset++
		}
		if offset == p.Chunks {
			hdfsFail = false
		}
	}
	// DIRECT.
	for c := 0; c < p.Chunks; c++ {
		all := true
		for r := range reps {
			all = all && reps[r][c].corrupt
		}
		if !all {
			continue
		}
		chunkFail = true
		intact := false
		for r := range reps {
			intact = intact || reps[r][c].sumsIntact
		}
		// Sector-wise merge: a sector is lost when every copy has a flip in
		// it and some bit of it is flipped in two or more copies.
		badIn := map[int64]int{} // sector -> copies with a flip there
		count := map[int64]int{} // bit -> copies with it flipped
		for r := range reps {
			seen := map[int64]bool{}
			for bit := range reps[r][c].flips {
				count[bit]++
				if sec := bit / p.SectorBits; !seen[sec] {
					seen[sec] = true
					badIn[sec]++
				}
			}
		}
		lost := false
		for bit, n := range count {
			lost = lost || (n >= 2 && badIn[bit/p.SectorBits] == p.Replicas)
		}
		if lost || !intact {
			voteFail = true
		}
	}
	return hdfsFail, chunkFail, voteFail
}

// TestInjectionModelMonteCarlo checks the three injection-path formulas
// against a bit-level simulation of the read path at sizes where every
// scheme fails often enough to measure.
func TestInjectionModelMonteCarlo(t *testing.T) {
	rng := testseed.Rand(t, "MODEL_SEED")
	for _, p := range []DirectInjectionParams{
		{UBER: 2e-3, Chunks: 4, ChunkBits: 400, SectorBits: 400, SumsBits: 40, Replicas: 3},
		{UBER: 8e-3, Chunks: 3, ChunkBits: 200, SectorBits: 50, SumsBits: 60, Replicas: 3},
		{UBER: 2e-2, Chunks: 2, ChunkBits: 256, SectorBits: 32, SumsBits: 16, Replicas: 3},
		{UBER: 3e-4, Chunks: 8, ChunkBits: 1000, SectorBits: 1000, SumsBits: 0, Replicas: 3},
	} {
		const trials = 20000
		var fails [3]int
		for i := 0; i < trials; i++ {
			h, c, v := simulateRead(rng, p)
			for k, f := range []bool{h, c, v} {
				if f {
					fails[k]++
				}
			}
		}
		h, err := DirectInjectedHDFSFailure(p)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := DirectInjectedChunkFailure(p)
		v, _ := DirectInjectedVoteFailure(p)
		for k, want := range []float64{h, c, v} {
			got := float64(fails[k]) / trials
			sigma := math.Sqrt(want * (1 - want) / trials)
			t.Logf("%s scheme %d: simulated %.4f model %.4f", p, k, got, want)
			if math.Abs(got-want) > 5*sigma+1e-4 {
				t.Errorf("%s scheme %d: simulated %.4f, model %.4f (sigma %.4f)", p, k, got, want, sigma)
			}
		}
	}
}

// TestInjectionModelLimits checks the injection model against the paper's
// closed forms where the two must agree: no sums record and one chunk
// (hdfs is then the block formula), no sums record (chunk recovery is then
// the paper's chunk formula), and the vote at small E, where it must sit
// between the paper's vote (rate E per copy) and the paper's vote at twice
// the rate (the re-read's doubled damage), and below chunk recovery.
func TestInjectionModelLimits(t *testing.T) {
	const chunkBytes = 64 << 10
	for _, e := range []float64{1e-9, 1e-7, 1e-5} {
		one := DirectInjectionParams{UBER: e, Chunks: 1, ChunkBits: 8 * chunkBytes, SectorBits: 8 * chunkBytes, Replicas: 3}
		h, err := DirectInjectedHDFSFailure(one)
		if err != nil {
			t.Fatal(err)
		}
		want := DirectBlockRecovery(DirectParams{UBER: e, BlockBytes: chunkBytes, ChunkBytes: chunkBytes, Replicas: 3})
		if math.Abs(h-want) > 1e-9*want {
			t.Errorf("E=%g one chunk: hdfs %g, block formula %g", e, h, want)
		}
		obj := DirectInjectionParams{UBER: e, Chunks: 16, ChunkBits: 8 * chunkBytes, SectorBits: 8 * chunkBytes, Replicas: 3}
		mp := DirectParams{UBER: e, BlockBytes: 16 * chunkBytes, ChunkBytes: chunkBytes, Replicas: 3}
		c, _ := DirectInjectedChunkFailure(obj)
		if want := DirectChunkRecovery(mp); math.Abs(c-want) > 1e-9*want {
			t.Errorf("E=%g: chunk %g, paper %g", e, c, want)
		}
		if hb := DirectBlockRecovery(mp); !(h <= hb) {
			t.Errorf("E=%g: offset failover %g above the block formula %g", e, h, hb)
		}
		v, _ := DirectInjectedVoteFailure(obj)
		lo := DirectMajorityVote(mp)
		mp2 := mp
		mp2.UBER = 2 * e
		hi := DirectMajorityVote(mp2)
		if !(v >= lo*0.999 && v <= hi && v < c) {
			t.Errorf("E=%g: vote %g outside [paper %g, paper at 2E %g] or above chunk %g", e, v, lo, hi, c)
		}
		// Merging 512 B sectors before voting can only help.
		sectors := obj
		sectors.SectorBits = 8 * 512
		vs, err := DirectInjectedVoteFailure(sectors)
		if err != nil || !(vs <= v) {
			t.Errorf("E=%g: sector-wise %g above chunk-wise vote %g (%v)", e, vs, v, err)
		}
		t.Logf("E=%g: hdfs %.3g chunk %.3g vote %.3g sector-wise %.3g (paper vote %.3g, at 2E %.3g)", e, h, c, v, vs, lo, hi)
	}
	if _, err := DirectInjectedVoteFailure(DirectInjectionParams{UBER: 1e-6, Chunks: 1, ChunkBits: 8, SectorBits: 8, Replicas: 2}); err == nil {
		t.Error("two replicas accepted")
	}
	if _, err := DirectInjectedHDFSFailure(DirectInjectionParams{UBER: -1, Chunks: 1, ChunkBits: 8, SectorBits: 8, Replicas: 3}); err == nil {
		t.Error("negative UBER accepted")
	}
	if v, err := DirectInjectedVoteFailure(DirectInjectionParams{UBER: 0, Chunks: 1, ChunkBits: 8, SectorBits: 8, Replicas: 3}); err != nil || v != 0 {
		t.Errorf("UBER 0: %g, %v", v, err)
	}
}
