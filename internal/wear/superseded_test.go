package wear

import (
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

// TestSuperseded: an outstanding move is superseded once its object is
// written or removed, not before, and not once it is reported.
func TestSuperseded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event func(t *testing.T, b *Balancer, id ObjectID)
		want  bool
	}{
		{"nothing", func(*testing.T, *Balancer, ObjectID) {}, false},
		{"write", func(t *testing.T, b *Balancer, id ObjectID) {
			p, err := b.PlanWrite(id)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(p, 1<<20, 1<<20); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"remove", func(_ *testing.T, b *Balancer, id ObjectID) { b.Remove(id) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Options{Mode: ModeEDM, Initial: REP, MaxRemapsPerEpoch: 1}, linePlacer{n: 6})
			if err != nil {
				t.Fatal(err)
			}
			id := ObjectID(1)
			for i := 0; i < 10; i++ {
				p, err := b.PlanWrite(id)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Commit(p, 1<<20, 1<<20); err != nil {
					t.Fatal(err)
				}
			}
			var stats []ServerStats
			for n := 1; n <= 6; n++ {
				e := 300.0
				switch n {
				case 1:
					e = 3000
				case 6:
					e = 10
				}
				stats = append(stats, ServerStats{Node: base.NodeID(n), Up: true, Erases: e, VictimUtilization: 0.5})
			}
			d, err := b.Epoch(stats)
			if err != nil || len(d.Moves) != 1 {
				t.Fatalf("epoch: %v moves, %v", d.Moves, err)
			}
			m := d.Moves[0]
			tc.event(t, b, id)
			if got := b.Superseded(m); got != tc.want {
				t.Fatalf("Superseded after %s = %v, want %v", tc.name, got, tc.want)
			}
			if err := b.MoveDone(m); (err == nil) == tc.want {
				t.Fatalf("MoveDone after %s: %v", tc.name, err)
			}
			if b.Superseded(m) {
				t.Fatal("a reported move is still superseded")
			}
		})
	}
}

// TestWearTrigger: sigma_ARPT and sigma_HCDS in erases compare the
// standard deviation itself; the ratio form compares it over the mean.
func TestWearTrigger(t *testing.T) {
	for _, tc := range []struct {
		trig        wearTrigger
		mean, sigma float64
		want        bool
	}{
		// The threshold is on the standard deviation (Table I's sigma),
		// not on its square: 89.4^2 = 7992 would pass 150.
		{wearTrigger{erases: 150}, 1040, 89.4, false},
		// The loops run while sigma > threshold (Algorithms 1 and 2): at
		// the threshold they stop.
		{wearTrigger{erases: 150}, 1000, 150, false},
		{wearTrigger{erases: 150}, 1000, 150.001, true},
		{wearTrigger{erases: 150}, 166.7, 149.1, false},
		{wearTrigger{erases: 150}, 1133.3, 298.1, true},
		{wearTrigger{erases: 150}, 0, 150, false},
		{wearTrigger{ratio: 0.05}, 1040, 89.4, true},
		{wearTrigger{ratio: 0.05}, 1000, 50, false},
		{wearTrigger{ratio: 0.05}, 0, 0, false},
		// The erase form wins when set (Options never sets both).
		{wearTrigger{erases: 100, ratio: 0.05}, 1040, 89.4, false},
	} {
		if got := tc.trig.exceeded(tc.mean, tc.sigma); got != tc.want {
			t.Errorf("%+v.exceeded(mean %g, sigma %g) = %v, want %v", tc.trig, tc.mean, tc.sigma, got, tc.want)
		}
	}
}
