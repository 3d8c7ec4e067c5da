package model

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

// sigDigits rounds v to one significant digit, as the paper prints it.
func oneDigit(v float64) string { return fmt.Sprintf("%.0e", v) }

// TestDirectTable1 reproduces the printed digits of paper 000 Table 1 and the
// examples of section 3.1 where the paper's formula gives them, and pins the
// one entry where the table disagrees with the formula.
func TestDirectTable1(t *testing.T) {
	p := DirectPaperParams()
	at := func(e float64) DirectParams { q := p; q.UBER = e; return q }
	for _, tc := range []struct {
		name string
		got  float64
		want string
	}{
		{"block 1e-10", DirectBlockRecovery(at(1e-10)), "1e-03"},
		{"block 1e-15", DirectBlockRecovery(at(1e-15)), "1e-18"},
		{"chunk 1e-10", DirectChunkRecovery(at(1e-10)), "3e-10"},
		{"chunk taylor 1e-10", DirectChunkRecoveryTaylor(at(1e-10)), "3e-10"},
		// Section 3.1: "the expected number of errors in a single block will
		// be B*E = 0.1" at 1e-10 (B in bits).
		{"B*E", 1e-10 * float64(p.BlockBytes*8), "1e-01"},
	} {
		if s := oneDigit(tc.got); s != tc.want {
			t.Errorf("%s = %g prints %s; paper prints %s", tc.name, tc.got, s, tc.want)
		}
	}
	// The paper prints 1e-28 for chunk recovery at 1e-15; the formula gives
	// 3e-25. The printed value is (E*C)^R, the formula without B/C.
	chunk := DirectChunkRecovery(at(1e-15))
	if s := oneDigit(chunk); s != "3e-25" {
		t.Errorf("chunk 1e-15 = %g; want 3e-25 from the formula", chunk)
	}
	if s := oneDigit(chunk / float64(p.BlockBytes/p.ChunkBytes)); s != "1e-28" {
		t.Errorf("chunk 1e-15 without B/C = %s; want the paper's 1e-28", s)
	}
	tbl := DirectTable1()
	if len(tbl.Rows) != 2 || len(tbl.Notes) < 3 {
		t.Fatalf("Table 1 has %d rows and %d notes", len(tbl.Rows), len(tbl.Notes))
	}
}

// TestDirectExactSmallValues checks the tiny-probability regime against
// leading-order expansions: nothing may round to 0 or to 1-1.
func TestDirectExactSmallValues(t *testing.T) {
	p := DirectPaperParams()
	bBits, cBits := float64(p.BlockBytes*8), float64(p.ChunkBytes*8)
	chunks := bBits / cBits
	for _, e := range []float64{1e-16, 1e-20, 1e-25} {
		p.UBER = e
		for _, tc := range []struct {
			name      string
			got, want float64
		}{
			{"block", DirectBlockRecovery(p), math.Pow(e*bBits, 3)},
			{"chunk", DirectChunkRecovery(p), math.Pow(e*cBits, 3) * chunks},
			{"taylor", DirectChunkRecoveryTaylor(p), math.Pow(e*cBits, 3) * chunks},
			{"vote", DirectMajorityVote(p), 3 * cBits * cBits * e * e * e * chunks},
			{"vote any bit", DirectMajorityVoteAnyBit(p), 3 * e * e * bBits},
		} {
			// Leading-order terms are exact to a relative O(E*B).
			if rel := math.Abs(tc.got-tc.want) / tc.want; !(rel < 1e-5) {
				t.Errorf("E=%g %s = %g; leading order %g (rel %g)", e, tc.name, tc.got, tc.want, rel)
			}
		}
	}
}

// TestDirectOrdering checks the relations that hold for every parameter set:
// finer recovery never fails more often, and the vote never fails more often
// than chunk recovery or the any-bit bound.
func TestDirectOrdering(t *testing.T) {
	seed := int64(20261122)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 300; i++ {
		c := int64(1 + rng.Intn(4096))
		p := DirectParams{
			UBER:       math.Pow(10, -1-15*rng.Float64()),
			ChunkBytes: c,
			BlockBytes: c * int64(1+rng.Intn(64)),
			Replicas:   1 + rng.Intn(5),
		}
		if rng.Intn(4) == 0 {
			p.BlockBytes += int64(rng.Intn(int(c)))
		}
		r := DirectAt(p)
		for _, v := range []float64{r.Block, r.Chunk, r.MajorityVote} {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("%v: not a probability: %v", p, r)
			}
		}
		const slack = 1 + 1e-9
		if r.Chunk > r.Block*slack || r.MajorityVote > r.Chunk*slack || r.MajorityVote > DirectMajorityVoteAnyBit(p)*slack {
			t.Fatalf("%v: ordering broken: %v anybit=%g", p, r, DirectMajorityVoteAnyBit(p))
		}
		if p.Replicas <= 2 && math.Abs(r.MajorityVote-r.Chunk) > 1e-9*r.Chunk {
			t.Fatalf("%v: with R<=2 the vote cannot help: %v", p, r)
		}
	}
}

// simulateDirect reads one block trials times: every replica flips each bit
// with probability E (positions drawn with geometric gaps), then the block
// read is judged under block recovery, chunk recovery, chunk recovery plus
// majority vote, and a vote over every bit.
func simulateDirect(rng *rand.Rand, p DirectParams, trials int) (block, chunk, vote, anyBit int) {
	bBits := p.BlockBytes * 8
	cBits := p.ChunkBytes * 8
	nChunks := (bBits + cBits - 1) / cBits
	logQ := math.Log1p(-p.UBER)
	k := voteThreshold(p.Replicas)
	flips := make([]map[int64]bool, p.Replicas)
	for i := 0; i < trials; i++ {
		for r := range flips {
			flips[r] = map[int64]bool{}
			for pos := int64(-1); ; {
				pos += 1 + int64(math.Floor(math.Log(1-rng.Float64())/logQ))
				if pos >= bBits || pos < 0 {
					break
				}
				flips[r][pos] = true
			}
		}
		allCorrupt := true
		for r := range flips {
			allCorrupt = allCorrupt && len(flips[r]) > 0
		}
		// counts[pos] = number of replicas with pos flipped.
		counts := map[int64]int{}
		for r := range flips {
			for pos := range flips[r] {
				counts[pos]++
			}
		}
		badBit := map[int64]bool{} // chunks with a bit flipped on >= k copies
		for pos, n := range counts {
			if n >= k {
				badBit[pos/cBits] = true
			}
		}
		chunkLost, voteLost := false, false
		for c := int64(0); c < nChunks; c++ {
			corruptEverywhere := true
			for r := range flips {
				has := false
				for pos := range flips[r] {
					if pos/cBits == c {
						has = true
						break
					}
				}
				corruptEverywhere = corruptEverywhere && has
			}
			if corruptEverywhere {
				chunkLost = true
				if badBit[c] {
					voteLost = true
				}
			}
		}
		if allCorrupt {
			block++
		}
		if chunkLost {
			chunk++
		}
		if voteLost {
			vote++
		}
		if len(badBit) > 0 {
			anyBit++
		}
	}
	return block, chunk, vote, anyBit
}

// TestDirectMonteCarlo cross-checks every closed form against a seeded
// simulation at error rates high enough to measure.
func TestDirectMonteCarlo(t *testing.T) {
	seed := int64(1)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	const trials = 40000
	for _, p := range []DirectParams{
		{UBER: 0.004, BlockBytes: 64, ChunkBytes: 8, Replicas: 3},
		{UBER: 0.01, BlockBytes: 36, ChunkBytes: 8, Replicas: 3}, // shorter last chunk
		{UBER: 0.02, BlockBytes: 32, ChunkBytes: 4, Replicas: 5},
		{UBER: 0.002, BlockBytes: 128, ChunkBytes: 16, Replicas: 2},
	} {
		block, chunk, vote, anyBit := simulateDirect(rng, p, trials)
		for _, tc := range []struct {
			name  string
			count int
			model float64
		}{
			{"block", block, DirectBlockRecovery(p)},
			{"chunk", chunk, DirectChunkRecovery(p)},
			{"vote", vote, DirectMajorityVote(p)},
			{"vote any bit", anyBit, DirectMajorityVoteAnyBit(p)},
		} {
			want := tc.model * trials
			sd := math.Sqrt(trials * tc.model * (1 - tc.model))
			if math.Abs(float64(tc.count)-want) > 5*sd+3 {
				t.Errorf("%v %s: simulated %d of %d, model %.1f (sd %.1f)", p, tc.name, tc.count, trials, want, sd)
			} else {
				t.Logf("%v %s: simulated %d, model %.1f", p, tc.name, tc.count, want)
			}
		}
	}
}

func TestDirectValidate(t *testing.T) {
	good := DirectPaperParams()
	for _, bad := range []DirectParams{
		{UBER: -1, BlockBytes: 1, ChunkBytes: 1, Replicas: 1},
		{UBER: math.NaN(), BlockBytes: 1, ChunkBytes: 1, Replicas: 1},
		{UBER: 2, BlockBytes: 1, ChunkBytes: 1, Replicas: 1},
		{UBER: 0.1, BlockBytes: 0, ChunkBytes: 1, Replicas: 1},
		{UBER: 0.1, BlockBytes: 8, ChunkBytes: 16, Replicas: 1},
		{UBER: 0.1, BlockBytes: 8, ChunkBytes: 0, Replicas: 1},
		{UBER: 0.1, BlockBytes: 8, ChunkBytes: 8, Replicas: 0},
		{UBER: 0.1, BlockBytes: 8, ChunkBytes: 8, Replicas: 99},
		{UBER: 0.1, BlockBytes: 1 << 60, ChunkBytes: 8, Replicas: 3},
	} {
		if err := bad.Validate(); !base.IsInvalidArgument(err) {
			t.Errorf("%v: Validate = %v; want invalid argument", bad, err)
		}
		if v := DirectChunkRecovery(bad); !math.IsNaN(v) {
			t.Errorf("%v: chunk = %v; want NaN", bad, v)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, u := range []float64{0, 1} {
		good.UBER = u
		r := DirectAt(good)
		if r.Block != u || r.Chunk != u || r.MajorityVote != u {
			t.Errorf("UBER %g: %v", u, r)
		}
	}
}

func TestDirectSweep(t *testing.T) {
	p := DirectPaperParams()
	rows := DirectSweep(p, 1e-16, 1e-3, 10)
	if len(rows) != 131 {
		t.Fatalf("%d rows; want 131", len(rows))
	}
	if rows[0].UBER != 1e-16 || rows[60].UBER != 1e-10 || rows[130].UBER != 1e-3 {
		t.Fatalf("sweep points %g %g %g", rows[0].UBER, rows[60].UBER, rows[130].UBER)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].Block < rows[i-1].Block || rows[i].Chunk < rows[i-1].Chunk || rows[i].MajorityVote < rows[i-1].MajorityVote {
			t.Fatalf("not monotone at %v after %v", rows[i], rows[i-1])
		}
	}
	if r := DirectSweep(p, 1e-3, 1e-16, 1); r != nil {
		t.Fatal("reversed range accepted")
	}
	if r := DirectSweep(p, 1e-10, 1e-9, 3); len(r) != 4 || r[3].UBER != 1e-9 {
		t.Fatalf("short sweep %v", r)
	}
	if err := ValidateSweep(p, 0, 1, 1); !base.IsInvalidArgument(err) {
		t.Fatalf("zero start: %v", err)
	}
}

// TestVoteChunkFailureEnumeration checks the inclusion-exclusion formula of
// DirectMajorityVote against brute force: every flip pattern of R copies of
// a chunk of c bits, weighted by its probability, judged by the read path
// (lost when every copy is corrupt and some bit is flipped on >= ceil(R/2)
// copies).
func TestVoteChunkFailureEnumeration(t *testing.T) {
	for replicas := 1; replicas <= 4; replicas++ {
		for c := 1; c*replicas <= 16; c++ {
			for _, e := range []float64{0.3, 0.01, 1e-6} {
				n := c * replicas
				var want float64
				for pattern := 0; pattern < 1<<n; pattern++ {
					flips := 0
					allCorrupt, voteFails := true, false
					for r := 0; r < replicas; r++ {
						copyFlipped := (pattern>>(r*c))&(1<<c-1) != 0
						allCorrupt = allCorrupt && copyFlipped
					}
					for b := 0; b < c; b++ {
						count := 0
						for r := 0; r < replicas; r++ {
							if pattern>>(r*c+b)&1 == 1 {
								count++
							}
						}
						voteFails = voteFails || count >= voteThreshold(replicas)
					}
					for x := pattern; x > 0; x &= x - 1 {
						flips++
					}
					if allCorrupt && voteFails {
						want += math.Pow(e, float64(flips)) * math.Pow(1-e, float64(n-flips))
					}
				}
				got := voteChunkFailure(e, int64(c), replicas)
				if math.Abs(got-want) > 1e-12*want+1e-300 {
					t.Errorf("R=%d c=%d E=%g: formula %.15g, enumeration %.15g", replicas, c, e, got, want)
				}
			}
		}
	}
}

func BenchmarkDirectSweep(b *testing.B) {
	p := DirectPaperParams()
	for i := 0; i < b.N; i++ {
		DirectSweep(p, 1e-16, 1e-3, 10)
	}
}

func BenchmarkCodewordFailure(b *testing.B) {
	for i := 0; i < b.N; i++ {
		CodewordFailureProbability(1e-4, 8752, 40)
	}
}
