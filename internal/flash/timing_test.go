package flash

import (
	"fmt"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

func virtualDevice(t *testing.T, seed int64) (*Emulator, time.Time) {
	g := testGeometry() // 528-byte pages
	t0 := time.Unix(1e9, 0)
	e := mustMemory(t, g, Options{
		Seed:  seed,
		Clock: base.NewManualClock(t0),
		Timing: Timing{Mode: TimingVirtual, ReadLatency: 50 * time.Microsecond, ProgramLatency: 500 * time.Microsecond,
			EraseLatency: 3 * time.Millisecond, ChannelBytesPerSecond: 52_800_000}, // 10 us per page
		ErrorModel: UBERModel{UBER: 1e-3},
	})
	return e, t0
}

func TestVirtualTiming(t *testing.T) {
	e, t0 := virtualDevice(t, 1)
	g := e.Geometry()
	us := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }
	buf := make([]byte, g.PageSize)
	type step struct {
		name string
		run  func() (time.Time, error)
		want time.Time
	}
	prog := func(c, d, b, p int) func() (time.Time, error) {
		return func() (time.Time, error) { return e.ProgramAt(t0, PageAddr{c, d, b, p}, buf, nil) }
	}
	for _, s := range []step{
		// Bus 0..10, program 10..510.
		{"program ch0/d0", prog(0, 0, 0, 0), us(510)},
		// Same channel: waits for the bus (10..20), programs 20..520.
		{"program ch0/d1", prog(0, 1, 0, 0), us(520)},
		// Other channel: in parallel.
		{"program ch1/d0", prog(1, 0, 0, 0), us(510)},
		// Die busy until 510: sense 510..560, bus 560..570.
		{"read ch0/d0", func() (time.Time, error) {
			_, done, err := e.ReadAt(t0, PageAddr{0, 0, 0, 0}, buf, nil)
			return done, err
		}, us(570)},
		// Erase after the read: 570..3570.
		{"erase ch0/d0 b1", func() (time.Time, error) { return e.EraseAt(t0, BlockAddr{0, 0, 1}) }, us(3570)},
		// Issued later than the die is busy: starts at its issue time.
		{"program ch1/d1 at 5ms", func() (time.Time, error) {
			return e.ProgramAt(us(5000), PageAddr{1, 1, 0, 0}, buf, nil)
		}, us(5510)},
	} {
		got, err := s.run()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !got.Equal(s.want) {
			t.Fatalf("%s: done at +%v, want +%v", s.name, got.Sub(t0), s.want.Sub(t0))
		}
	}
	if bu, err := e.DieBusyUntil(DieAddr{0, 0}); err != nil || !bu.Equal(us(3570)) {
		t.Fatalf("die busy until %v, %v", bu, err)
	}
	st := e.Stats()
	if st.Channels[0].Busy != 30*time.Microsecond || st.Dies[0].Busy != (510+60+3000)*time.Microsecond {
		t.Fatalf("busy: channel0 %v die0 %v", st.Channels[0].Busy, st.Dies[0].Busy)
	}
}

// TestVirtualTimingDeterministic replays one seeded mixed workload twice and
// compares every completion time and the final statistics.
func TestVirtualTimingDeterministic(t *testing.T) {
	run := func() (string, Stats) {
		e, t0 := virtualDevice(t, 77)
		g := e.Geometry()
		buf := make([]byte, g.PageSize)
		var trace string
		issue := t0
		for i, pa := range allPages(g) {
			done, err := e.ProgramAt(issue, pa, pageData(g, pa, 0), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, rdone, err := e.ReadAt(issue, pa, buf, nil)
			if err != nil {
				t.Fatal(err)
			}
			trace += fmt.Sprintf("%d:%d,%d ", i, done.Sub(t0), rdone.Sub(t0))
			issue = issue.Add(37 * time.Microsecond)
		}
		return trace, e.Stats()
	}
	tr1, s1 := run()
	tr2, s2 := run()
	if tr1 != tr2 || s1.String() != s2.String() || s1.Total != s2.Total {
		t.Fatal("virtual timing is not deterministic")
	}
}

// TestRealTimingTakesModelledTime checks only a lower bound, which sleeping
// guarantees: an operation never completes before its modelled time.
func TestRealTimingTakesModelledTime(t *testing.T) {
	g := testGeometry()
	e := mustMemory(t, g, Options{Timing: Timing{Mode: TimingReal, ProgramLatency: 2 * time.Millisecond, ChannelBytesPerSecond: 528_000}})
	buf := make([]byte, g.PageSize)
	start := time.Now()
	if err := e.Program(PageAddr{0, 0, 0, 0}, buf, nil); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 3*time.Millisecond { // 1 ms transfer + 2 ms program
		t.Fatalf("real-timed program took %v, modelled 3ms", el)
	}
}

func TestTimingModeParse(t *testing.T) {
	for _, m := range []TimingMode{TimingNone, TimingReal, TimingVirtual} {
		got, err := ParseTimingMode(m.String())
		if err != nil || got != m {
			t.Fatalf("parse %s: %v %v", m, got, err)
		}
	}
	if _, err := ParseTimingMode("fast"); !base.IsInvalidArgument(err) {
		t.Fatal(err)
	}
}
