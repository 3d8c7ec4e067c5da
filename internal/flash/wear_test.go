package flash

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

func TestEraseLimitRetiresWornBlocks(t *testing.T) {
	g := testGeometry()
	e := mustMemory(t, g, Options{Wear: WearOptions{RatedEndurance: 10, EraseLimitFactor: 2}})
	a := BlockAddr{1, 0, 2}
	for i := 0; i < 20; i++ {
		if err := e.Erase(a); err != nil {
			t.Fatalf("erase %d: %v", i, err)
		}
	}
	wantErr(t, e.Erase(a), ErrEraseFailed, "erase at the limit")
	if info := e.mustBlock(t, a); !info.Bad || info.EraseCount != 20 {
		t.Fatalf("worn block %v", info)
	}
}

// TestWearFailuresGrowWithWear cycles every block of a device and checks
// that grown bad blocks appear, and only once blocks are worn: with
// p(pe) = 0.5*(pe/100)^3 the chance of any failure in the first 20 cycles of
// 128 blocks is about 128*sum(0.5*(i/100)^3, i<20) = 0.0026.
func TestWearFailuresGrowWithWear(t *testing.T) {
	const seed = 8
	t.Logf("seed %d", seed)
	g := testGeometry()
	e := mustMemory(t, g, Options{Seed: seed, Wear: WearOptions{RatedEndurance: 100, EraseFailureAtRated: 0.5, ProgramFailureAtRated: 0.05}})
	buf := make([]byte, g.PageSize)
	retiredAt := map[BlockAddr]int{}
	for cycle := 0; cycle < 100; cycle++ {
		for _, pa := range allPages(g) {
			if pa.Page != 0 {
				continue
			}
			ba := pa.BlockAddr()
			if _, dead := retiredAt[ba]; dead {
				continue
			}
			err := e.Program(pa, buf, nil)
			if err == nil {
				err = e.Erase(ba)
			}
			if errors.Is(err, ErrBadBlock) {
				retiredAt[ba] = cycle
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	early := 0
	for _, c := range retiredAt {
		if c < 20 {
			early++
		}
	}
	if len(retiredAt) < 16 || early > 0 {
		t.Fatalf("%d blocks retired (%d in the first 20 cycles)", len(retiredAt), early)
	}
	if s := e.Stats(); s.BadBlocks != len(retiredAt) || s.Total.EraseFailures+s.Total.ProgramFailures != int64(len(retiredAt)) {
		t.Fatalf("stats %v, retired %d", s, len(retiredAt))
	}
}

func TestRandomDieFailures(t *testing.T) {
	g := testGeometry()
	t0 := time.Unix(0, 0)
	open := func() (*Emulator, *base.ManualClock) {
		c := base.NewManualClock(t0)
		return mustMemory(t, g, Options{Seed: 5, Clock: c, DieFailure: DieFailureOptions{MeanTimeToFailure: 1000 * time.Hour}}), c
	}
	e, clock := open()
	e2, _ := open()
	for i, d := range e.dies {
		if d.failAt.IsZero() || !d.failAt.Equal(e2.dies[i].failAt) {
			t.Fatal("die lifetimes are not seeded")
		}
	}
	buf := make([]byte, g.PageSize)
	if err := e.Program(PageAddr{0, 0, 0, 0}, buf, nil); err != nil {
		t.Fatal(err)
	}
	// After 20 MTTFs every die has failed (each survives with e^-20).
	clock.Advance(20 * 1000 * time.Hour)
	for _, d := range []DieAddr{{0, 0}, {0, 1}, {1, 0}, {1, 1}} {
		_, err := e.Read(PageAddr{d.Channel, d.Die, 0, 0}, buf, nil)
		wantErr(t, err, ErrDieFailed, "read of an expired die")
		if failed, _ := e.DieFailed(d); !failed {
			t.Fatalf("die %s not failed", d)
		}
	}
	if s := e.Stats(); s.FailedDies != 4 {
		t.Fatalf("stats %v", s)
	}
}

// TestDieFailureCountIsBinomial checks the random die-failure process
// against Reparo's model (003, footnote 2): on a device of 512 dies (a 32 TB
// SSD of 512-Gib dies), the number of dies failed by time T is
// Binomial(512, 1 - exp(-T/MTTF)).
func TestDieFailureCountIsBinomial(t *testing.T) {
	g := Geometry{Channels: 64, DiesPerChannel: 8, BlocksPerDie: 1, PagesPerBlock: 1, PageSize: 512}
	const mttf = 1000 * time.Hour
	var failed, n int
	var p float64
	for seed := int64(1); seed <= 10; seed++ {
		clock := base.NewManualClock(time.Unix(0, 0))
		e, err := NewDiscard(g, Options{Seed: seed, Clock: clock, DieFailure: DieFailureOptions{MeanTimeToFailure: mttf}})
		if err != nil {
			t.Fatal(err)
		}
		T := 100 * time.Hour
		clock.Advance(T)
		p = -math.Expm1(-float64(T) / float64(mttf))
		for c := 0; c < g.Channels; c++ {
			for d := 0; d < g.DiesPerChannel; d++ {
				f, err := e.DieFailed(DieAddr{c, d})
				if err != nil {
					t.Fatal(err)
				}
				if f {
					failed++
				}
				n++
			}
		}
	}
	t.Logf("seeds 1-10")
	withinCI(t, "failed dies", float64(failed), float64(n)*p, float64(n)*p*(1-p))
}

// TestEraseFailuresMatchWearModel cycles 1024 blocks by erasing them 100
// times and compares the number retired with the closed form of the wear
// model: a block survives cycle k with 1 - p(k), p(k) = pAtRated *
// (k/RatedEndurance)^FailureExponent.
func TestEraseFailuresMatchWearModel(t *testing.T) {
	const seed = 12
	t.Logf("seed %d", seed)
	w := WearOptions{RatedEndurance: 100, EraseFailureAtRated: 0.05, FailureExponent: 2}
	g := Geometry{Channels: 2, DiesPerChannel: 2, BlocksPerDie: 256, PagesPerBlock: 1, PageSize: 512}
	e, err := NewDiscard(g, Options{Seed: seed, Wear: w})
	if err != nil {
		t.Fatal(err)
	}
	const cycles = 100
	retired := 0
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			for b := 0; b < g.BlocksPerDie; b++ {
				for k := 0; k < cycles; k++ {
					err := e.Erase(BlockAddr{c, d, b})
					if errors.Is(err, ErrEraseFailed) {
						retired++
						break
					} else if err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	survive := 1.0
	for k := 0; k < cycles; k++ {
		survive *= 1 - 0.05*math.Pow(float64(k)/100, 2)
	}
	n, p := float64(g.Dies()*g.BlocksPerDie), 1-survive
	withinCI(t, "blocks retired", float64(retired), n*p, n*p*(1-p))
	if s := e.Stats(); s.BadBlocks != retired || s.Total.EraseFailures != int64(retired) {
		t.Fatalf("stats %v", s)
	}
}
