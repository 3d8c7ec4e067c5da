package reparo

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// probeDie runs the detector's probe walk against a die whose failing
// blocks are bad, and returns the event (if any) and the probes read.
func probeDie(d *Detector, ps []Probe, bad func(int) bool, now time.Time) (*Failure, int) {
	n := 0
	for len(ps) > 0 {
		p := ps[0]
		ps = ps[1:]
		n++
		more, f := d.ProbeResult(p, bad(p.Block), now)
		if f != nil {
			return f, n
		}
		ps = append(ps, more...)
	}
	return nil, n
}

func TestDetectorFailsADieThatFailsEverywhere(t *testing.T) {
	d := NewDetector(DetectorConfig{MaxBadBlocks: 4, BlocksPerDie: 64})
	die := Die{1, 2}
	ps, f := d.BadBlock(die, 10, t0)
	if f != nil || len(ps) != 2 {
		t.Fatalf("first bad block: probes %v, failure %v", ps, f)
	}
	f, n := probeDie(d, ps, func(int) bool { return true }, t0.Add(3*time.Millisecond))
	if f == nil {
		t.Fatal("a die failing everywhere was not declared failed")
	}
	if f.BadBlocks != 5 || f.Latency() != 3*time.Millisecond || f.Reported || f.Die != die {
		t.Fatalf("event %+v", f)
	}
	if n > 4 {
		t.Fatalf("%d probes to find 5 bad blocks", n)
	}
	if !d.Failed(die) {
		t.Fatal("not marked failed")
	}
	if ps, f := d.BadBlock(die, 40, t0); ps != nil || f != nil {
		t.Fatal("a failed die raised a second event")
	}
	if f := d.Reported(die, t0); f != nil {
		t.Fatal("a failed die raised a second event when reported")
	}
}

func TestDetectorToleratesIsolatedBadBlocks(t *testing.T) {
	d := NewDetector(DetectorConfig{MaxBadBlocks: 4, BlocksPerDie: 64})
	die := Die{0, 0}
	// Bad blocks far apart with good neighbours: grown bad blocks, not a
	// failed die, until there are more than MaxBadBlocks of them.
	for i, b := range []int{3, 20, 40, 60} {
		ps, f := d.BadBlock(die, b, t0)
		if f != nil {
			t.Fatalf("bad block %d declared the die failed", i)
		}
		if f, _ := probeDie(d, ps, func(int) bool { return false }, t0); f != nil {
			t.Fatal("good neighbours failed the die")
		}
	}
	if got := d.BadBlocks(die); got != 4 {
		t.Fatalf("bad blocks %d", got)
	}
	if _, f := d.BadBlock(die, 50, t0); f == nil || f.BadBlocks != 5 {
		t.Fatalf("fifth bad block: %v", f)
	}
}

func TestDetectorSuspectNeedsAFailedProbe(t *testing.T) {
	d := NewDetector(DetectorConfig{MaxBadBlocks: 2, BlocksPerDie: 16})
	die := Die{0, 1}
	rng := rand.New(rand.NewSource(1))
	// Random uncorrectable reads on a healthy die: the block's own probe
	// reads, nothing is counted.
	for i := 0; i < 1000; i++ {
		ps := d.Suspect(die, rng.Intn(16), t0)
		if f, _ := probeDie(d, ps, func(int) bool { return false }, t0); f != nil {
			t.Fatal("healthy die failed")
		}
	}
	if d.BadBlocks(die) != 0 {
		t.Fatalf("healthy die has %d bad blocks", d.BadBlocks(die))
	}
	ps := d.Suspect(die, 7, t0.Add(time.Second))
	f, _ := probeDie(d, ps, func(int) bool { return true }, t0.Add(time.Second+time.Millisecond))
	if f == nil || f.BadBlocks != 3 || f.Latency() != time.Millisecond {
		t.Fatalf("dead die: %+v", f)
	}
}

func TestDetectorReported(t *testing.T) {
	d := NewDetector(DetectorConfig{})
	f := d.Reported(Die{2, 3}, t0)
	if f == nil || !f.Reported || f.Latency() != 0 {
		t.Fatalf("%+v", f)
	}
}

// TestSharesReproduceTables1And2: the utilization increase of the victim
// (IDR) and of every core (CDR) after one die failure, N = 4 cores, for
// the paper's dies-per-core columns.
func TestSharesReproduceTables1And2(t *testing.T) {
	table1 := map[int]float64{4: 33.33, 8: 14.29, 16: 6.67, 32: 3.23, 64: 1.59, 128: 0.79}
	table2 := map[int]float64{4: 6.67, 8: 3.23, 16: 1.59, 32: 0.79, 64: 0.39, 128: 0.20}
	const N = 4
	for x, want1 := range table1 {
		live := []int{x, x, x, x - 1}
		for _, p := range []Policy{HandlerIDR, HandlerCDR} {
			sh := Shares(p, live)
			// utilization of channel c relative to before: share*N * x/live
			victim := sh[N-1] * N * float64(x) / float64(x-1)
			helper := sh[0] * N
			want := table2[x]
			if p == HandlerIDR {
				want = want1
				if math.Abs((helper-1)*100) > 1e-9 {
					t.Errorf("IDR x=%d: helper utilization changed by %.2f%%", x, (helper-1)*100)
				}
			} else if math.Abs((helper-victim)*100) > 1e-9 {
				t.Errorf("CDR x=%d: victim %.4f helper %.4f", x, victim, helper)
			}
			if got := (victim - 1) * 100; math.Abs(got-want) > 0.006 {
				t.Errorf("%v x=%d: victim utilization +%.3f%%, paper %.2f%%", p, x, got, want)
			}
		}
	}
}

func TestAlphaMatchesFigure8(t *testing.T) {
	// N = 4 cores of 4 dies, |LS| = 60: each helper gains 1, the victim
	// loses 3 (section 5.2.1).
	if a := Alpha(15, 16); a != 1 {
		t.Fatalf("alpha %v", a)
	}
	// Alpha agrees with the CDR shares for one failure.
	sh := Shares(HandlerCDR, []int{4, 4, 4, 3})
	if got := sh[0]*60 - 15; math.Abs(got-1) > 1e-9 {
		t.Fatalf("helper gains %v", got)
	}
}

func TestExcessAndDegraded(t *testing.T) {
	sh := Shares(HandlerCDR, []int{4, 4, 4, 3})
	ex := Excess(sh, []int64{15, 15, 15, 15})
	if ex[3] != 3 || ex[0] != 0 {
		t.Fatalf("excess %v", ex)
	}
	if Degraded(90, 100, 5) != "" || Degraded(96, 100, 5) == "" || Degraded(0, 0, 0) == "" {
		t.Fatal("degraded")
	}
}

func TestAllocatorRoundRobinAndWeights(t *testing.T) {
	all := func(int) bool { return true }
	a := NewAllocator([]float64{1, 1, 1, 1})
	for i := 0; i < 12; i++ {
		if c := a.Next(all); c != i%4 {
			t.Fatalf("zone %d on channel %d, want round-robin", i, c)
		}
	}
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 50; trial++ {
		n := 2 + rng.Intn(6)
		w := make([]float64, n)
		for c := range w {
			w[c] = rng.Float64()
		}
		a := NewAllocator(w)
		got := make([]int, n)
		const zones = 3000
		for i := 0; i < zones; i++ {
			got[a.Next(all)]++
		}
		sum := 0.0
		for _, x := range w {
			sum += x
		}
		for c := range w {
			if want := w[c] / sum * zones; math.Abs(float64(got[c])-want) > 1.01 {
				t.Fatalf("trial %d: channel %d got %d zones, want %.1f (weights %v)", trial, c, got[c], want, w)
			}
		}
	}
	a = NewAllocator([]float64{1, 0, 1})
	for i := 0; i < 10; i++ {
		if c := a.Next(func(c int) bool { return c != 2 }); c != 0 {
			t.Fatalf("picked %d", c)
		}
	}
	if c := a.Next(func(int) bool { return false }); c != -1 {
		t.Fatalf("picked %d with nothing eligible", c)
	}
}

func TestZoneWeights(t *testing.T) {
	// IDR: equal bytes, the victim's zones are 3/4 as wide: 4/3 the zones.
	w := ZoneWeights(Shares(HandlerIDR, []int{4, 4, 3}), []int{4, 4, 3})
	if math.Abs(w[2]/w[0]-4.0/3) > 1e-9 {
		t.Fatalf("IDR weights %v", w)
	}
	// CDR: shares follow the zone width: equal zone counts.
	w = ZoneWeights(Shares(HandlerCDR, []int{4, 4, 3}), []int{4, 4, 3})
	if math.Abs(w[2]-w[0]) > 1e-9 {
		t.Fatalf("CDR weights %v", w)
	}
}

func TestThrottle(t *testing.T) {
	th := &Throttle{Rate: 1000}
	if w := th.Reserve(1000, t0); w != 0 {
		t.Fatalf("first burst waits %v", w)
	}
	if w := th.Reserve(500, t0); w != 500*time.Millisecond {
		t.Fatalf("wait %v", w)
	}
	if w := th.Reserve(100, t0.Add(time.Second)); w != 0 {
		t.Fatalf("after refill waits %v", w)
	}
	if w := (&Throttle{}).Reserve(1<<40, t0); w != 0 {
		t.Fatal("unlimited throttle waits")
	}
}

func TestPartitionAndWindows(t *testing.T) {
	for n := 0; n < 50; n++ {
		for w := 1; w < 9; w++ {
			b := Partition(n, w)
			if b[0] != 0 || b[w] != n {
				t.Fatalf("n=%d w=%d bounds %v", n, w, b)
			}
			for i := 0; i < w; i++ {
				if sz := b[i+1] - b[i]; sz < n/w || sz > n/w+1 {
					t.Fatalf("n=%d w=%d part %d size %d", n, w, i, sz)
				}
			}
		}
	}
	ws := Windows(10, 4)
	if len(ws) != 3 || !ws[2].Contains(10) || ws[0].Contains(4) || !All.Contains(1<<60) {
		t.Fatalf("windows %v", ws)
	}
	for _, m := range Methods {
		if got, err := ParseMethod(m.String()); err != nil || got != m {
			t.Fatalf("%v: %v %v", m, got, err)
		}
	}
	if _, err := ParseMethod("x"); err == nil {
		t.Fatal("bad method parsed")
	}
}
