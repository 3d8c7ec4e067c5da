package model

import (
	"math"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

func TestPopularity(t *testing.T) {
	// p_3 = 8/8 + 0/4 + 4/2 + 2 = 5.
	p, err := Popularity([]float64{8, 0, 4, 2})
	if err != nil || p != 5 {
		t.Fatalf("Popularity = %g, %v; want 5", p, err)
	}
	seed := int64(5)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 100; i++ {
		w := make([]float64, rng.Intn(40))
		for j := range w {
			w[j] = float64(rng.Intn(100))
		}
		got, err := Popularity(w)
		if err != nil {
			t.Fatal(err)
		}
		var want float64 // eq. 1 term by term
		for j := range w {
			want += w[j] / math.Pow(2, float64(len(w)-1-j))
		}
		if math.Abs(got-want) > 1e-12*math.Max(1, want) {
			t.Fatalf("%v: recursive %g, eq. 1 %g", w, got, want)
		}
	}
	if _, err := Popularity([]float64{1, -1}); !base.IsInvalidArgument(err) {
		t.Fatalf("negative writes: %v", err)
	}
}

func TestEraseEstimate(t *testing.T) {
	e, err := EraseEstimate(6400, 64, 0.5)
	if err != nil || e != 200 {
		t.Fatalf("EraseEstimate = %g, %v; want 200", e, err)
	}
	wa, err := WriteAmplification(0.75)
	if err != nil || wa != 4 {
		t.Fatalf("WriteAmplification(0.75) = %g, %v", wa, err)
	}
	for name, err := range map[string]error{
		"mu 1":       second(EraseEstimate(1, 64, 1)),
		"mu NaN":     second(WriteAmplification(math.NaN())),
		"pages":      second(EraseEstimate(1, 0, 0.5)),
		"writes":     second(EraseEstimate(-1, 64, 0.5)),
		"writes inf": second(EraseEstimate(math.Inf(1), 64, 0.5)),
	} {
		if !base.IsInvalidArgument(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// gcSim is a log-structured flash device with greedy garbage collection,
// the setting of paper 004 eq. 2.
type gcSim struct {
	pagesPerBlock int
	owner         [][]int // owner[block][page] = logical page or -1
	valid         []int
	l2p           map[int][2]int
	free          []int
	active, next  int

	userWrites, gcCopies, erases int
	victimValid                  int // sum of valid pages over GC victims
}

func newGCSim(blocks, pagesPerBlock int) *gcSim {
	s := &gcSim{pagesPerBlock: pagesPerBlock, l2p: map[int][2]int{}, valid: make([]int, blocks)}
	for b := 0; b < blocks; b++ {
		s.owner = append(s.owner, make([]int, pagesPerBlock))
		for i := range s.owner[b] {
			s.owner[b][i] = -1
		}
		if b > 0 {
			s.free = append(s.free, b)
		}
	}
	return s
}

func (s *gcSim) place(lpn int) {
	if s.next == s.pagesPerBlock {
		s.active, s.free = s.free[0], s.free[1:]
		s.next = 0
	}
	if old, ok := s.l2p[lpn]; ok {
		s.owner[old[0]][old[1]] = -1
		s.valid[old[0]]--
	}
	s.owner[s.active][s.next] = lpn
	s.valid[s.active]++
	s.l2p[lpn] = [2]int{s.active, s.next}
	s.next++
}

func (s *gcSim) write(lpn int) {
	s.userWrites++
	s.place(lpn)
	for len(s.free) < 2 {
		s.collect()
	}
}

func (s *gcSim) collect() {
	victim := -1
	for b := range s.owner {
		if b == s.active || contains(s.free, b) {
			continue
		}
		if victim < 0 || s.valid[b] < s.valid[victim] {
			victim = b
		}
	}
	s.victimValid += s.valid[victim]
	for i, lpn := range s.owner[victim] {
		if lpn >= 0 && s.l2p[lpn] == [2]int{victim, i} {
			s.gcCopies++
			s.place(lpn)
		}
	}
	s.erases++
	s.free = append(s.free, victim)
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// TestEraseEstimateSimulation runs random overwrites on a simulated
// log-structured device and checks eq. 2 and the write amplification against
// the erases and copies it counts, with mu the measured mean utilization of
// the victims, after garbage collection has started (as the paper states).
func TestEraseEstimateSimulation(t *testing.T) {
	seed := int64(9)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	const blocks, pagesPerBlock = 64, 32
	for _, fill := range []float64{0.5, 0.75, 0.9} {
		s := newGCSim(blocks, pagesPerBlock)
		logical := int(fill * float64((blocks-2)*pagesPerBlock))
		for lpn := 0; lpn < logical; lpn++ {
			s.write(lpn)
		}
		for i := 0; i < 20*logical; i++ { // warm up until GC is in steady state
			s.write(rng.Intn(logical))
		}
		s.userWrites, s.gcCopies, s.erases, s.victimValid = 0, 0, 0, 0
		for i := 0; i < 50*logical; i++ {
			s.write(rng.Intn(logical))
		}
		mu := float64(s.victimValid) / float64(s.erases*pagesPerBlock)
		est, err := EraseEstimate(float64(s.userWrites), pagesPerBlock, mu)
		if err != nil {
			t.Fatal(err)
		}
		wa, _ := WriteAmplification(mu)
		measuredWA := float64(s.userWrites+s.gcCopies) / float64(s.userWrites)
		t.Logf("fill %.2f: mu %.3f, erases %d (eq. 2: %.1f), WA %.3f (1/(1-mu): %.3f)", fill, mu, s.erases, est, measuredWA, wa)
		if math.Abs(est-float64(s.erases)) > 0.01*float64(s.erases)+2 {
			t.Errorf("fill %.2f: eq. 2 estimates %.1f erases, simulation counted %d", fill, est, s.erases)
		}
		if math.Abs(wa-measuredWA) > 0.01*measuredWA {
			t.Errorf("fill %.2f: WA model %.3f, simulated %.3f", fill, wa, measuredWA)
		}
	}
}
