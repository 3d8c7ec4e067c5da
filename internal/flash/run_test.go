package flash

import (
	"errors"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/testseed"
)

func discardVirtual(t *testing.T, host int64) (*Emulator, time.Time) {
	t.Helper()
	t0 := time.Unix(1e9, 0)
	e, err := NewDiscard(testGeometry(), Options{Clock: base.NewManualClock(t0),
		Timing: Timing{Mode: TimingVirtual, ReadLatency: 50 * time.Microsecond, ProgramLatency: 500 * time.Microsecond,
			EraseLatency: 3 * time.Millisecond, ChannelBytesPerSecond: 52_800_000, HostBytesPerSecond: host}})
	if err != nil {
		t.Fatal(err)
	}
	return e, t0
}

// TestRunsTimeLikePages checks that content-free runs take exactly the time
// of the same pages programmed and read one by one, on random workloads, with
// and without a host link.
func TestRunsTimeLikePages(t *testing.T) {
	rng := testseed.Rand(t, "FLASH_SEED")
	for _, host := range []int64{0, 20_000_000} {
		for round := 0; round < 20; round++ {
			runs, _ := discardVirtual(t, host)
			pages, t0 := discardVirtual(t, host)
			g := runs.Geometry()
			buf := make([]byte, g.PageSize)
			written := map[BlockAddr]int{}
			for op := 0; op < 60; op++ {
				b := BlockAddr{rng.Intn(g.Channels), rng.Intn(g.DiesPerChannel), rng.Intn(g.BlocksPerDie)}
				issue := t0.Add(time.Duration(rng.Intn(5000)) * time.Microsecond)
				w := written[b]
				if rng.Intn(2) == 0 && w < g.PagesPerBlock {
					n := 1 + rng.Intn(g.PagesPerBlock-w)
					first := PageAddr{b.Channel, b.Die, b.Block, w}
					got, err := runs.ProgramRunAt(issue, first, n)
					if err != nil {
						t.Fatal(err)
					}
					var want time.Time
					for i := 0; i < n; i++ {
						first.Page = w + i
						if want, err = pages.ProgramAt(issue, first, buf, nil); err != nil {
							t.Fatal(err)
						}
					}
					if !got.Equal(want) {
						t.Fatalf("host %d: program run of %d at %s: %v, pages %v", host, n, first, got.Sub(t0), want.Sub(t0))
					}
					written[b] = w + n
					continue
				}
				from := rng.Intn(g.PagesPerBlock)
				n := 1 + rng.Intn(g.PagesPerBlock-from)
				first := PageAddr{b.Channel, b.Die, b.Block, from}
				got, err := runs.ReadRunAt(issue, first, n)
				if err != nil {
					t.Fatal(err)
				}
				var want time.Time
				for i := 0; i < n; i++ {
					first.Page = from + i
					if _, want, err = pages.ReadAt(issue, first, buf, nil); err != nil {
						t.Fatal(err)
					}
				}
				if !got.Equal(want) {
					t.Fatalf("host %d: read run of %d at %s: %v, pages %v", host, n, first, got.Sub(t0), want.Sub(t0))
				}
			}
			for c := 0; c < g.Channels; c++ {
				for d := 0; d < g.DiesPerChannel; d++ {
					for b := 0; b < g.BlocksPerDie; b++ {
						a := BlockAddr{c, d, b}
						x, _ := runs.Block(a)
						y, _ := pages.Block(a)
						if x.WrittenPage != y.WrittenPage || x.Reads != y.Reads {
							t.Fatalf("%s: run %s, pages %s", a, x, y)
						}
					}
				}
			}
		}
	}
}

// TestHostLinkBoundsDevice checks that reads of every die, issued at once,
// finish when the host link has moved every page, when it is the bottleneck.
func TestHostLinkBoundsDevice(t *testing.T) {
	const host = 1_000_000 // 528 B pages (data 512 B): 512 us each on the host link
	e, t0 := discardVirtual(t, host)
	g := e.Geometry()
	var last time.Time
	n := 0
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			done, err := e.ReadRunAt(t0, PageAddr{c, d, 0, 0}, g.PagesPerBlock)
			if err != nil {
				t.Fatal(err)
			}
			last = later(last, done)
			n += g.PagesPerBlock
		}
	}
	want := time.Duration(n) * e.Options().Timing.HostTransferTime(g.PageSize)
	// The first page waits for its sense and bus transfer before the link.
	first := 50*time.Microsecond + e.Options().Timing.TransferTime(g.PageSize+g.OOBSize)
	if got := last.Sub(t0); got != want+first {
		t.Fatalf("%d pages over a %d B/s link: %v, want %v", n, host, got, want+first)
	}
}

func TestRunsRules(t *testing.T) {
	e, t0 := discardVirtual(t, 0)
	g := e.Geometry()
	if _, err := e.ProgramRunAt(t0, PageAddr{0, 0, 0, 1}, 1); !errors.Is(err, ErrProgramOrder) {
		t.Fatalf("out of order: %v", err)
	}
	if _, err := e.ProgramRunAt(t0, PageAddr{0, 0, 0, 0}, g.PagesPerBlock+1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("past the block: %v", err)
	}
	if _, err := e.ProgramRunAt(t0, PageAddr{0, 0, 0, 0}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ProgramRunAt(t0, PageAddr{0, 0, 0, 1}, 1); !errors.Is(err, ErrNotErased) {
		t.Fatalf("programmed page: %v", err)
	}
	if err := e.FailDie(DieAddr{0, 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ReadRunAt(t0, PageAddr{0, 0, 0, 0}, 1); !errors.Is(err, ErrDieFailed) {
		t.Fatalf("failed die: %v", err)
	}
	m := mustMemory(t, g, Options{})
	if _, err := m.ReadRunAt(t0, PageAddr{0, 0, 0, 0}, 1); !errors.Is(err, ErrContent) {
		t.Fatalf("memory device: %v", err)
	}
}
