package flash

import (
	"bytes"
	"errors"
	"math"
	"math/bits"
	"math/rand"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/model"
)

// z999 is the two-sided 99.9% normal quantile: every statistical check below
// accepts a count within z999 standard deviations of its closed-form mean.
// The runs are seeded (the seed is logged), so they are deterministic; the
// interval says how unlucky a new seed would have to be to fail.
const z999 = 3.29

func withinCI(t *testing.T, what string, observed, mean, variance float64) {
	t.Helper()
	sd := math.Sqrt(variance)
	t.Logf("%s: observed %.0f, model %.1f +- %.1f (99.9%% CI)", what, observed, mean, z999*sd)
	if math.Abs(observed-mean) > z999*sd {
		t.Fatalf("%s: observed %.0f outside model %.1f +- %.1f", what, observed, mean, z999*sd)
	}
}

func diffBits(a, b []byte) int {
	n := 0
	for i := range a {
		n += bits.OnesCount8(a[i] ^ b[i])
	}
	return n
}

// fillDevice programs every page of every block with pageData.
func fillDevice(t testing.TB, e *Emulator) {
	g := e.Geometry()
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			for b := 0; b < g.BlocksPerDie; b++ {
				for p := 0; p < g.PagesPerBlock; p++ {
					pa := PageAddr{c, d, b, p}
					if err := e.Program(pa, pageData(g, pa, 0), oobData(g, pa)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
}

func oobData(g Geometry, a PageAddr) []byte {
	o := make([]byte, g.OOBSize)
	for i := range o {
		o[i] = byte(a.Page + i)
	}
	return o
}

func allPages(g Geometry) []PageAddr {
	var out []PageAddr
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			for b := 0; b < g.BlocksPerDie; b++ {
				for p := 0; p < g.PagesPerBlock; p++ {
					out = append(out, PageAddr{c, d, b, p})
				}
			}
		}
	}
	return out
}

func TestUBERModelRate(t *testing.T) {
	const seed, uber = 42, 2e-4
	t.Logf("seed %d", seed)
	g := testGeometry()
	e := mustMemory(t, g, Options{Seed: seed, ErrorModel: UBERModel{UBER: uber}})
	fillDevice(t, e)
	pageBits := (g.PageSize + g.OOBSize) * 8
	data, oob := make([]byte, g.PageSize), make([]byte, g.OOBSize)
	var flips, reads, cleanReads int
	for round := 0; round < 40; round++ {
		for _, pa := range allPages(g) {
			st, err := e.Read(pa, data, oob)
			if err != nil || st != (ReadStatus{}) {
				t.Fatalf("uber read reports %v %v: the UBER model must be silent", st, err)
			}
			n := diffBits(data, pageData(g, pa, 0)) + diffBits(oob, oobData(g, pa))
			flips += n
			reads++
			if n == 0 {
				cleanReads++
			}
		}
	}
	nBits := float64(reads * pageBits)
	withinCI(t, "flipped bits", float64(flips), nBits*uber, nBits*uber*(1-uber))
	// The flips are independent per bit: the share of clean pages is
	// (1-UBER)^pageBits.
	p0 := math.Pow(1-uber, float64(pageBits))
	withinCI(t, "clean page reads", float64(cleanReads), float64(reads)*p0, float64(reads)*p0*(1-p0))
	s := e.Stats().Total
	if s.FlippedBits != int64(flips) || s.InjectedFlips != int64(flips) || s.BitsRead != int64(nBits) || s.RawBitErrors != int64(flips) {
		t.Fatalf("stats %v disagree with the observed flips %d over %d bits", s, flips, int64(nBits))
	}
	if got := s.ObservedUBER(); math.Abs(got-uber)/uber > 0.1 {
		t.Fatalf("observed UBER %g, want about %g", got, uber)
	}
	// Transient: the stored pages are intact.
	e.opts.ErrorModel = nil
	for _, d := range e.dies {
		d.model = nil
	}
	for _, pa := range allPages(g) {
		if _, err := e.Read(pa, data, oob); err != nil || !bytes.Equal(data, pageData(g, pa, 0)) {
			t.Fatalf("transient flips reached the stored page %s", pa)
		}
	}
}

func TestUBERModelPersistent(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	g := testGeometry()
	e := mustMemory(t, g, Options{Seed: seed, ErrorModel: UBERModel{UBER: 1e-4, Persistent: true}})
	fillDevice(t, e)
	data := make([]byte, g.PageSize)
	prev := map[PageAddr][]byte{}
	grew := 0
	for round := 0; round < 20; round++ {
		for _, pa := range allPages(g) {
			if _, err := e.Read(pa, data, nil); err != nil {
				t.Fatal(err)
			}
			if p := prev[pa]; p != nil {
				// Every earlier flip is still there (bar a new flip of the
				// same bit, which would show as a difference of one).
				if old, now := diffBits(p, pageData(g, pa, 0)), diffBits(data, pageData(g, pa, 0)); now < old-1 {
					t.Fatalf("page %s lost persistent flips: %d then %d", pa, old, now)
				} else if now > old {
					grew++
				}
			}
			prev[pa] = append([]byte(nil), data...)
		}
	}
	if grew == 0 {
		t.Fatal("persistent flips never accumulated")
	}
	// Reads without OOB: UBER acts on (and counts) the returned bits only.
	reads := int64(20 * len(allPages(g)))
	if s := e.Stats().Total; s.BitsRead != reads*int64(g.PageSize)*8 || s.BitsSensed != reads*int64(g.PageSize+g.OOBSize)*8 {
		t.Fatalf("bits read %d sensed %d after %d data-only reads", s.BitsRead, s.BitsSensed, reads)
	}
}

func TestUBERModelDeterministic(t *testing.T) {
	g := testGeometry()
	run := func() OpStats {
		e := mustMemory(t, g, Options{Seed: 99, ErrorModel: UBERModel{UBER: 1e-3}})
		fillDevice(t, e)
		data := make([]byte, g.PageSize)
		for _, pa := range allPages(g) {
			if _, err := e.Read(pa, data, nil); err != nil {
				t.Fatal(err)
			}
		}
		return e.Stats().Total
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("same seed, different runs: %v vs %v", a, b)
	}
}

func TestPhysicalModelUncorrectableRate(t *testing.T) {
	const seed = 2026
	t.Logf("seed %d", seed)
	g := testGeometry()
	// 528-byte pages = 4 codewords of 132 bytes (1056 bits), t = 3.
	const rber, cwBytes, tBits = 1e-3, 132, 3
	m := PhysicalModel{Fit: ConstantRBER(rber), CodewordBytes: cwBytes, CorrectableBits: tBits}
	e := mustMemory(t, g, Options{Seed: seed, ErrorModel: m})
	fillDevice(t, e)
	n := cwBytes * 8
	cws := (g.PageSize + g.OOBSize) / cwBytes
	pcw := model.CodewordFailureProbability(rber, n, tBits) // P[X > t]
	ppage := 1 - math.Pow(1-pcw, float64(cws))
	if got := m.UncorrectablePageProbability(g.PageSize+g.OOBSize, rber); math.Abs(got-ppage) > 1e-12 {
		t.Fatalf("UncorrectablePageProbability %g, want %g", got, ppage)
	}

	data, oob := make([]byte, g.PageSize), make([]byte, g.OOBSize)
	var uncorr, reads int
	var corrected int64
	for round := 0; round < 120; round++ {
		for _, pa := range allPages(g) {
			st, err := e.Read(pa, data, oob)
			reads++
			wrong := diffBits(data, pageData(g, pa, 0)) + diffBits(oob, oobData(g, pa))
			corrected += int64(st.CorrectedBits)
			if st.Uncorrectable {
				uncorr++
				if !errors.Is(err, ErrUncorrectable) || !base.IsCorruption(err) {
					t.Fatalf("uncorrectable read error %v", err)
				}
				if wrong <= tBits {
					t.Fatalf("uncorrectable page returned with only %d wrong bits", wrong)
				}
				continue
			}
			if err != nil || wrong != 0 {
				t.Fatalf("correctable read returned %d wrong bits, err %v", wrong, err)
			}
		}
	}
	withinCI(t, "uncorrectable pages", float64(uncorr), float64(reads)*ppage, float64(reads)*ppage*(1-ppage))
	s := e.Stats().Total
	if s.UncorrectableReads != int64(uncorr) || s.CorrectedBits != corrected || s.InjectedFlips != 0 || s.FailedOps != int64(uncorr) {
		t.Fatalf("stats %v", s)
	}
	// Raw errors are Binomial(bits read, RBER).
	nb := float64(s.BitsSensed)
	withinCI(t, "raw bit errors", float64(s.RawBitErrors), nb*rber, nb*rber*(1-rber))
}

func TestPhysicalModelHidesContent(t *testing.T) {
	g := testGeometry()
	m := PhysicalModel{Fit: ConstantRBER(0.05), CodewordBytes: 132, CorrectableBits: 1}
	e := mustMemory(t, g, Options{Seed: 3, ErrorModel: m, HideUncorrectableContent: true})
	pa := PageAddr{0, 0, 0, 0}
	if err := e.Program(pa, pageData(g, pa, 0), nil); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, g.PageSize)
	st, err := e.Read(pa, data, nil)
	if !st.Uncorrectable || !errors.Is(err, ErrUncorrectable) || !bytes.Equal(data, make([]byte, g.PageSize)) {
		t.Fatalf("hidden uncorrectable read: %v %v", st, err)
	}
}

func TestPageFactor(t *testing.T) {
	m := PhysicalModel{PageSigma: 0.5, Seed: 11}
	var sum, sumLog, sumLog2 float64
	const n = 20000
	for i := 0; i < n; i++ {
		c := PageCondition{Addr: PageAddr{i % 7, i % 3, i / 64, i % 64}, EraseCount: i % 5}
		f := m.pageFactor(c)
		if f != m.pageFactor(c) {
			t.Fatal("page factor is not a function of the page")
		}
		sum += f
		sumLog += math.Log(f)
		sumLog2 += math.Log(f) * math.Log(f)
	}
	mean := sum / n
	sd := math.Sqrt(sumLog2/n - (sumLog/n)*(sumLog/n))
	// Mean of a log-normal with sigma 0.5 sampled n times: sd of the mean is
	// sqrt(e^0.25-1)/sqrt(n) = 0.0038.
	if math.Abs(mean-1) > z999*0.0038 || math.Abs(sd-0.5) > 0.02 {
		t.Fatalf("page factors: mean %g (want 1), sd of log %g (want 0.5)", mean, sd)
	}
}

func TestGeometricGap(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	const p, n = 0.01, 100000
	var sum float64
	for i := 0; i < n; i++ {
		sum += float64(geometricGap(rng, p))
	}
	// Failures before the first success: mean (1-p)/p, variance (1-p)/p^2.
	mean, variance := (1-p)/p, (1-p)/(p*p)
	withinCI(t, "sum of gaps", sum, n*mean, n*variance)
}

// TestPhysicalModelConditions checks that the device feeds the page's wear,
// retention and reads into the model: the observed raw bit error rate of
// each phase agrees with the fit's RBER for that condition.
func TestPhysicalModelConditions(t *testing.T) {
	const seed = 31
	t.Logf("seed %d", seed)
	g := testGeometry()
	fit := RBERFit{Fresh: 1e-5, AtRated: 1e-3, RatedEndurance: 100, WearExponent: 1, RetentionPerDecade: 1}
	clock := base.NewManualClock(time.Unix(1e9, 0))
	m := PhysicalModel{Fit: fit, CodewordBytes: 528, CorrectableBits: 400}
	e := mustMemory(t, g, Options{Seed: seed, Clock: clock, ErrorModel: m})
	worn := BlockAddr{1, 1, 3}
	for i := 0; i < 50; i++ {
		if err := e.Erase(worn); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, g.PageSize)
	for _, b := range []BlockAddr{{0, 0, 0}, worn} {
		for p := 0; p < g.PagesPerBlock; p++ {
			if err := e.Program(PageAddr{b.Channel, b.Die, b.Block, p}, data, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	phase := func(name string, b BlockAddr, pe int, age time.Duration) {
		before := e.Stats().Total
		const rounds = 300
		for r := 0; r < rounds; r++ {
			for p := 0; p < g.PagesPerBlock; p++ {
				if _, err := e.Read(PageAddr{b.Channel, b.Die, b.Block, p}, data, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		after := e.Stats().Total
		rber := fit.RBER(pe, age, 0)
		n := float64(after.BitsSensed - before.BitsSensed)
		withinCI(t, name, float64(after.RawBitErrors-before.RawBitErrors), n*rber, n*rber*(1-rber))
	}
	phase("fresh block, just programmed", BlockAddr{0, 0, 0}, 0, 0)
	phase("block at 50 P/E, just programmed", worn, 50, 0)
	clock.Advance(999 * time.Hour) // log10(1 + 999) = 3 decades
	phase("block at 50 P/E, 999 h retention", worn, 50, 999*time.Hour)
}
