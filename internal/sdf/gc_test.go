package sdf

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

// TestGCRandomWorkload runs a seeded random create/overwrite/append/delete
// workload that keeps the device about 60% full of live data, so host GC
// must relocate live extents, and checks every file against an in-memory
// reference model after every step and across reopens.
func TestGCRandomWorkload(t *testing.T) {
	for _, policy := range []GCPolicy{GCGreedy, GCCostBenefit} {
		t.Run(policy.String(), func(t *testing.T) {
			seed := testSeed(t)
			runGCWorkload(t, seed, policy, 600)
		})
	}
}

func runGCWorkload(t *testing.T, seed int64, policy GCPolicy, steps int) {
	rng := rand.New(rand.NewSource(seed))
	clock := base.NewManualClock(time.Unix(1_700_000_000, 0))
	dev, err := flash.NewMemory(small(), flash.Options{Seed: seed, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Clock: clock, GCPolicy: policy, MaxOpenZones: 4}
	fs, err := Format(dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	model := map[string][]byte{}
	var gcRuns, gcPages int64
	usable := int(fs.Stats().Usable)
	total := func() int {
		n := 0
		for _, d := range model {
			n += len(d)
		}
		return n
	}
	names := func() []string {
		var out []string
		for n := range model {
			out = append(out, n)
		}
		sort.Strings(out)
		return out
	}
	// Run at least `steps` steps, and on until GC has run a few times (the
	// need for it depends on the seed), up to 5x as many.
	for step := 0; step < steps || (gcRuns+fs.Stats().GCRuns < 3 && step < 5*steps); step++ {
		clock.Advance(time.Second)
		op := rng.Intn(10)
		switch {
		case op < 5 || len(model) < 3: // create or overwrite
			name := fmt.Sprintf("f%02d", rng.Intn(40))
			size := 1 + rng.Intn(120_000)
			if total()-len(model[name])+size > usable*7/10 {
				continue
			}
			data := randBytes(rng, size)
			f, err := fs.Create(name, Lifetime(rng.Intn(int(numLifetimes))))
			if err != nil {
				t.Fatalf("step %d create: %v", step, err)
			}
			for off := 0; off < len(data); {
				n := min(len(data)-off, 1+rng.Intn(40_000))
				if _, err := f.Write(data[off : off+n]); err != nil {
					t.Fatalf("step %d write: %v (%s)", step, err, fs.Stats())
				}
				off += n
				if rng.Intn(4) == 0 {
					if err := f.Sync(); err != nil {
						t.Fatalf("step %d sync: %v", step, err)
					}
				}
			}
			if err := f.Close(); err != nil {
				t.Fatalf("step %d close: %v", step, err)
			}
			model[name] = data
		case op < 7: // delete
			ns := names()
			name := ns[rng.Intn(len(ns))]
			if err := fs.Remove(name); err != nil {
				t.Fatal(err)
			}
			delete(model, name)
		case op < 9 || rng.Intn(4) > 0: // verify one file at random offsets
			ns := names()
			name := ns[rng.Intn(len(ns))]
			f, err := fs.OpenFile(name)
			if err != nil {
				t.Fatal(err)
			}
			want := model[name]
			if len(want) > 0 {
				off := rng.Intn(len(want))
				n := min(len(want)-off, 1+rng.Intn(20_000))
				got := make([]byte, n)
				if _, err := f.ReadAt(got, int64(off)); err != nil {
					t.Fatalf("step %d read %s: %v", step, name, err)
				}
				mustEqual(t, fmt.Sprintf("step %d %s[%d:+%d]", step, name, off, n), got, want[off:off+n])
			}
			f.Close()
		default: // reopen
			st := fs.Stats()
			gcRuns += st.GCRuns
			gcPages += st.GCPages
			if err := fs.Close(); err != nil {
				t.Fatal(err)
			}
			if fs, err = Open(dev, opts); err != nil {
				t.Fatalf("step %d reopen: %v", step, err)
			}
			checkFiles(t, fs, model)
		}
	}
	checkFiles(t, fs, model)
	st := fs.Stats()
	t.Logf("%s", st)
	gcRuns += st.GCRuns
	gcPages += st.GCPages
	t.Logf("GC runs %d, pages copied %d over the run", gcRuns, gcPages)
	if gcRuns == 0 || gcPages == 0 {
		t.Fatalf("the workload never needed GC: %s", st)
	}
	if st.Live > st.Used {
		t.Fatalf("live %s > used %s", st.Live, st.Used)
	}
	// Live pages account exactly for the files' pages.
	pages := 0
	ps := fs.l.Geometry.PageSize
	for _, d := range model {
		pages += (len(d) + ps - 1) / ps
	}
	if int(st.Live)/ps != pages {
		t.Fatalf("live pages %d, files hold %d pages", int(st.Live)/ps, pages)
	}
	fs.Close()
}
