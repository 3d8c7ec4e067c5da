package sim

import (
	"context"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/wear"
)

// TestECRMWReads is the read half of an EC update of part of a stripe row:
// the delta update (old data of the overwritten units and both old parity
// units) or the reconstruct write (the row's other data units), whichever
// reads fewer.
func TestECRMWReads(t *testing.T) {
	full := uint64(0xFF) // two rows of four units
	for _, c := range []struct {
		name            string
		existing, pages uint64
		want            [wear.MaxWidth]int
	}{
		{"one unit of a full row: a tie of three reads, delta", full, 1 << 0, [wear.MaxWidth]int{1, 0, 0, 0, 1, 1}},
		{"one unit of each row", full, 1<<1 | 1<<6, [wear.MaxWidth]int{0, 1, 1, 0, 2, 2}},
		{"three units: reconstruct from the fourth", full, 0b0111, [wear.MaxWidth]int{0, 0, 0, 1, 0, 0}},
		{"two units: reconstruct reads two, delta four", full, 0b0011, [wear.MaxWidth]int{0, 0, 1, 1, 0, 0}},
		{"one unit of a half-written row: the other old unit", 0b0011, 1 << 0, [wear.MaxWidth]int{0, 1, 0, 0, 0, 0}},
		{"whole row", full, 0x0F, [wear.MaxWidth]int{}},
		{"row never written", 0x0F, 1 << 5, [wear.MaxWidth]int{}},
		{"new unit beside one old unit: read it", 1 << 0, 1 << 1, [wear.MaxWidth]int{1, 0, 0, 0, 0, 0}},
	} {
		if got := ecRMWReads(c.existing, c.pages); got != c.want {
			t.Errorf("%s: reads %v, want %v", c.name, got, c.want)
		}
	}
}

// listSource replays fixed requests.
type listSource struct{ reqs []Request }

func (l *listSource) Next() (Request, bool, error) {
	if len(l.reqs) == 0 {
		return Request{}, false, nil
	}
	r := l.reqs[0]
	l.reqs = l.reqs[1:]
	return r, true, nil
}

// TestSmallUpdateCost: one 4 KiB update of a preloaded 16 KiB object on
// idle devices. REP programs three pages, one per copy, and answers after
// one program. EC programs as many (the data unit and its row's two parity
// units) but first reads the old data and parity: three reads more, and a
// client latency of a read and a program.
func TestSmallUpdateCost(t *testing.T) {
	for _, c := range []struct {
		mode                wear.Mode
		programs, reads     int64
		clientUs, lastSSDUs float64
	}{
		{wear.ModeREP, 3, 0, 200, 200},
		{wear.ModeEC, 3, 3, 225, 200},
	} {
		w := Workload{
			Name: "one-update", Dataset: 16 << 10, ObjectBytes: 16 << 10, Requests: 1, Duration: time.Hour, Preload: true,
			Open: func(int64) (Source, error) {
				return &listSource{reqs: []Request{{At: time.Minute, Offset: 4096, Length: 4096, Write: true}}}, nil
			},
		}
		r, err := Run(context.Background(), Config{Servers: 6, Workload: w, Policy: wear.Options{Mode: c.mode}})
		if err != nil {
			t.Fatalf("%v: %v", c.mode, err)
		}
		if r.HostPages != c.programs || r.RMWReadPages != c.reads || r.ClientLatUs != c.clientUs || r.LatencyUs != c.lastSSDUs {
			t.Errorf("%v: %d programs, %d RMW reads, client %g us, SSD %g us; want %d, %d, %g, %g", c.mode,
				r.HostPages, r.RMWReadPages, r.ClientLatUs, r.LatencyUs, c.programs, c.reads, c.clientUs, c.lastSSDUs)
		}
	}
}
