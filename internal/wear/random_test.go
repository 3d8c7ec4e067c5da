package wear

import (
	"flag"
	"fmt"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/testseed"
)

var seedFlag = flag.Int64("seed", 0, "seed of TestNeverUnderRedundant (0: from the clock)")

// blob is one stored part: object, version, redundancy, part index.
type blob struct {
	obj  ObjectID
	ver  int
	red  Redundancy
	part int
}

// cluster is what the servers hold, driven by the balancer's decisions the
// way the coordinator and the simulator carry them out: write the new
// version's parts, commit, then release the old parts the new layout does
// not keep; copy a move's changed parts, confirm, then release.
type cluster struct {
	held    map[base.NodeID]map[blob]bool
	version map[ObjectID]int
	nextVer int // versions are unique across objects and re-creations
}

func (c *cluster) put(n base.NodeID, b blob) {
	if c.held[n] == nil {
		c.held[n] = map[blob]bool{}
	}
	c.held[n][b] = true
}

func (c *cluster) has(n base.NodeID, b blob) bool { return c.held[n][b] }

// release drops the parts of version ver in layout old that layout keep
// does not hold (as the same version).
func (c *cluster) release(id ObjectID, ver int, old, keep Layout, keepVer int) {
	for p := 0; p < old.Width(); p++ {
		n := old.Node(p)
		if keepVer == ver && keep.Redundancy == old.Redundancy && keep.Node(p) == n {
			continue
		}
		delete(c.held[n], blob{id, ver, old.Redundancy, p})
	}
}

// TestNeverUnderRedundant runs every mode over random writes, epochs with
// random (skewed) wear, servers going down and filling up, moves that
// finish, fail or go stale, and writes that crash before their commit.
// After every step each object's readable layout must hold its latest
// version on every part: no decision ever leaves an object with fewer
// copies or shards than its redundancy requires.
func TestNeverUnderRedundant(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = testseed.Seed(t, "WEAR_SEED")
	}
	rng := rand.New(rand.NewSource(seed))
	for run := 0; run < 40; run++ {
		mode := Modes()[run%len(Modes())]
		t.Run(fmt.Sprintf("%d-%v", run, mode), func(t *testing.T) { randomRun(t, rng.Int63(), mode) })
	}
}

func randomRun(t *testing.T, seed int64, mode Mode) {
	rng := rand.New(rand.NewSource(seed))
	servers := 7 + rng.Intn(10)
	opts := Options{
		Mode:                 mode,
		HotFraction:          0.05 + rng.Float64()*0.3,
		HotPopularityMin:     0.5 + rng.Float64()*2,
		MaxRemapsPerEpoch:    1 + rng.Intn(12),
		MaxMoveBytesPerEpoch: int64(1+rng.Intn(8)) << 20,
		MigrateAfterEpochs:   1 + rng.Intn(3),
		ColdAfterEpochs:      1 + rng.Intn(3),
	}
	// The thresholds in erases (the paper's form) or as ratios.
	if rng.Intn(2) == 0 {
		opts.SigmaARPT, opts.SigmaHCDS = 1+rng.Float64()*200, 1+rng.Float64()*100
	} else {
		opts.SigmaARPTRatio, opts.SigmaHCDSRatio = 0.01+rng.Float64()*0.2, 0.01+rng.Float64()*0.2
	}
	if mode.Balancing() && rng.Intn(2) == 0 {
		opts.Initial = REP
	}
	b, err := New(opts, linePlacer{n: servers})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{held: map[base.NodeID]map[blob]bool{}, version: map[ObjectID]int{}}
	erases := make([]float64, servers)
	weight := make([]float64, servers)
	for i := range weight {
		weight[i] = 1 + 5*rng.Float64()*rng.Float64()
	}
	down := map[int]bool{}
	var pending []Move
	objects := 10 + rng.Intn(60)

	check := func(step string) {
		t.Helper()
		if err := b.CheckAll(); err != nil {
			t.Fatalf("seed %d, %s: %v", seed, step, err)
		}
		for _, e := range b.Entries() {
			l := e.Readable()
			ver := c.version[e.Object]
			for p := 0; p < l.Width(); p++ {
				if !c.has(l.Node(p), blob{e.Object, ver, l.Redundancy, p}) {
					t.Fatalf("seed %d, %s: %v lost part %d (v%d) on %v", seed, step, e, p, ver, l.Node(p))
				}
			}
		}
	}
	write := func(id ObjectID, crash bool) {
		p, err := b.PlanWrite(id)
		if err != nil {
			return // not enough usable servers: nothing written
		}
		for i := 0; i < p.New.Width(); i++ {
			if down[int(p.New.Node(i))-1] {
				t.Fatalf("seed %d: plan %v writes to down server %v", seed, p, p.New.Node(i))
			}
		}
		c.nextVer++
		ver := c.nextVer
		for i := 0; i < p.New.Width(); i++ {
			if crash && rng.Intn(2) == 0 {
				continue
			}
			c.put(p.New.Node(i), blob{id, ver, p.New.Redundancy, i})
		}
		if crash {
			return // the writer died before the commit: the old version stays
		}
		if err := b.Commit(p, 1<<20, 1<<20); err != nil {
			t.Fatalf("seed %d: commit %v: %v", seed, p, err)
		}
		if !p.Old.IsZero() {
			c.release(id, c.version[id], p.Old, p.New, ver)
		}
		c.version[id] = ver
	}
	finish := func(m Move, outcome int) {
		ver := c.version[m.Object]
		// Copy the parts that change.
		var copied []int
		for p := 0; p < m.To.Width(); p++ {
			if m.From.Redundancy == m.To.Redundancy && m.From.Node(p) == m.To.Node(p) {
				continue
			}
			if outcome == 1 && rng.Intn(2) == 0 {
				continue // failed half way
			}
			c.put(m.To.Node(p), blob{m.Object, ver, m.To.Redundancy, p})
			copied = append(copied, p)
		}
		// A mover copies the version current when it runs; a failed or
		// stale move's copies are dropped unless one is a readable part of
		// that same version now.
		drop := func() {
			for _, p := range copied {
				if c.version[m.Object] == ver && b.Keeps(m.Object, m.To, p) {
					continue
				}
				delete(c.held[m.To.Node(p)], blob{m.Object, ver, m.To.Redundancy, p})
			}
		}
		if outcome == 1 {
			b.MoveFailed(m)
			drop()
			return
		}
		switch err := b.MoveDone(m); err {
		case nil:
			c.release(m.Object, ver, m.From, m.To, ver)
		case ErrStaleMove:
			drop()
		default:
			t.Fatalf("seed %d: MoveDone: %v", seed, err)
		}
	}

	for step := 0; step < 400; step++ {
		switch r := rng.Intn(100); {
		case r < 70:
			// Skewed writes: a few objects take most of them.
			id := ObjectID(1 + int(float64(objects)*rng.Float64()*rng.Float64()*rng.Float64()))
			write(id, rng.Intn(20) == 0)
			check(fmt.Sprintf("step %d write %v", step, id))
		case r < 85:
			var stats []ServerStats
			for i := 0; i < servers; i++ {
				erases[i] += weight[i] * float64(rng.Intn(100))
				if rng.Intn(30) == 0 {
					down[i] = !down[i]
				}
				stats = append(stats, ServerStats{
					Node: base.NodeID(i + 1), Up: !down[i], Erases: erases[i],
					Utilization: rng.Float64(), VictimUtilization: rng.Float64() * 0.9,
					CapacityBytes: int64(rng.Intn(3)) << 30,
				})
			}
			d, err := b.Epoch(stats)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			for _, e := range d.Changed {
				if e.State.Intermediate() {
					for p := 0; p < e.Dst.Width(); p++ {
						n := e.Dst.Node(p)
						if down[int(n)-1] && !(e.Src.Redundancy == e.Dst.Redundancy && e.Src.Node(p) == n) {
							t.Fatalf("seed %d: %v targets down server %v", seed, e, n)
						}
					}
				}
			}
			pending = append(pending, d.Moves...)
			check(fmt.Sprintf("step %d epoch %d", step, d.Epoch))
		case r < 95 && len(pending) > 0:
			i := rng.Intn(len(pending))
			m := pending[i]
			pending = append(pending[:i], pending[i+1:]...)
			finish(m, rng.Intn(3))
			check(fmt.Sprintf("step %d move %v", step, m))
		default:
			if rng.Intn(4) == 0 {
				id := ObjectID(1 + rng.Intn(objects))
				if e, ok := b.Entry(id); ok {
					b.Remove(id)
					c.release(id, c.version[id], e.Readable(), Layout{}, -1)
					delete(c.version, id)
					check(fmt.Sprintf("step %d remove %v", step, id))
				}
			}
		}
	}
}
