package helix

import (
	"context"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestHelix runs a small seeded helix: one REP and one EC object of 200
// KiB with two of every sector's copies damaged, and 600 keys with half of
// every replica's blocks damaged. Nothing may be lost, wrong, left to
// repair or rebuilt.
func TestHelix(t *testing.T) {
	seed := testseed.Seed(t, "HELIX_SEED")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Seed: seed, Dir: t.TempDir(), Objects: 1, ObjectBytes: 200 << 10, Keys: 600, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	checkObjects(t, res, true)
	t.Logf("%+v", *res.KV)
	if p := res.Problems(); len(p) > 0 {
		t.Fatalf("seed %d: %s", seed, strings.Join(p, "\n"))
	}
	rep, err := res.Report()
	if err != nil {
		t.Fatal(err)
	}
	if md := string(rep.Markdown(report.Env{})); rep.Name() != "helix" || !strings.Contains(md, "target met") {
		t.Fatalf("report %q:\n%s", rep.Name(), md)
	}
}

// TestHelixObjectsOnFlash is TestHelix's object half with every node on
// its own emulated flash device (the SDF layer under the chunks).
func TestHelixObjectsOnFlash(t *testing.T) {
	seed := testseed.Seed(t, "HELIX_SEED")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Seed: seed, Dir: t.TempDir(), Store: StoreSDF, Objects: 1, ObjectBytes: 200 << 10, SkipKV: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	checkObjects(t, res, false)
	if p := res.Problems(); len(p) > 0 {
		t.Fatalf("seed %d: %s", seed, strings.Join(p, "\n"))
	}
}

// TestBadOptions: every out-of-range option is refused with an invalid
// argument error before anything starts.
func TestBadOptions(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]Options{
		"no dir":          {Seed: 1},
		"negative count":  {Dir: dir, Objects: -1},
		"too many":        {Dir: dir, Objects: MaxObjects + 1},
		"tiny objects":    {Dir: dir, ObjectBytes: MinObjectBytes - 1},
		"huge objects":    {Dir: dir, ObjectBytes: MaxObjectBytes + 1},
		"few keys":        {Dir: dir, Keys: MinKeys - 1},
		"many keys":       {Dir: dir, Keys: MaxKeys + 1},
		"fraction > 1":    {Dir: dir, Fraction: 1.5},
		"negative frac":   {Dir: dir, Fraction: -0.1},
		"NaN fraction":    {Dir: dir, Fraction: math.NaN()},
		"negative wait":   {Dir: dir, ReadTimeout: -time.Second},
		"nothing to run":  {Dir: dir, SkipObjects: true, SkipKV: true},
		"infinite frac":   {Dir: dir, Fraction: math.Inf(1)},
		"negative keys":   {Dir: dir, Keys: -5},
		"negative object": {Dir: dir, ObjectBytes: -1},
		"unknown store":   {Dir: dir, Store: "tape"},
	} {
		if _, err := Run(context.Background(), o); !base.IsInvalidArgument(err) {
			t.Errorf("%s: %v, want an invalid argument", name, err)
		}
	}
	var r Result
	if err := r.Section(nil, 0); !base.IsInvalidArgument(err) {
		t.Errorf("heading level 0: %v", err)
	}
}

// TestSectorVictims: REP damages two of three copies and never keeps the
// previous sector's survivor; EC damages two shards disjoint from the
// previous sector row's.
func TestSectorVictims(t *testing.T) {
	rng := rand.New(rand.NewSource(testseed.Seed(t, "HELIX_SEED")))
	for _, copies := range []int{3, direct.TotalShards} {
		var prev []int
		for s := 0; s < 1000; s++ {
			v := sectorVictims(rng, copies, prev)
			if len(v) != 2 || v[0] == v[1] {
				t.Fatalf("copies %d: victims %v", copies, v)
			}
			if copies == 3 && prev != nil && 3-v[0]-v[1] == 3-prev[0]-prev[1] {
				t.Fatalf("same survivor twice: %v then %v", prev, v)
			}
			if copies == direct.TotalShards && prev != nil {
				for _, a := range v {
					for _, b := range prev {
						if a == b {
							t.Fatalf("shard %d damaged at two sector rows in a row: %v then %v", a, prev, v)
						}
					}
				}
			}
			prev = v
		}
	}
}

// TestPlanKVDamage: the plan stays under the fraction on every replica and
// leaves every key intact somewhere, against a brute-force recount, and
// keeps one of each replica's applied-record blocks whole, over 50 plans
// (the record's two blocks are often both drawn).
func TestPlanKVDamage(t *testing.T) {
	rng := rand.New(rand.NewSource(testseed.Seed(t, "HELIX_SEED")))
	const keys = 500
	for trial := 0; trial < 50; trial++ {
		var replicas []replicaBlocks
		for r := 0; r < 3; r++ {
			var rb replicaBlocks
			for k := 0; k < keys; {
				n := 1 + rng.Intn(30)
				var b []int
				for ; n > 0 && k < keys; n-- {
					b = append(b, k)
					k++
				}
				rb.keys = append(rb.keys, b)
			}
			rb.meta = []int{0, len(rb.keys) - 1}
			replicas = append(replicas, rb)
		}
		chosen, intact := planKVDamage(rng, replicas, keys, 0.5)
		count := make([]int, keys)
		for i := range count {
			count[i] = 3
		}
		for r, bs := range chosen {
			if len(bs) > len(replicas[r].keys)/2 {
				t.Fatalf("replica %d: %d of %d blocks", r, len(bs), len(replicas[r].keys))
			}
			if len(bs) == 0 {
				t.Fatalf("replica %d: nothing damaged", r)
			}
			if slices.Contains(bs, 0) && slices.Contains(bs, len(replicas[r].keys)-1) {
				t.Fatalf("replica %d: both blocks holding its applied record damaged", r)
			}
			for _, b := range bs {
				for _, k := range replicas[r].keys[b] {
					count[k]--
				}
			}
		}
		for k := range count {
			if count[k] < 1 || count[k] != intact[k] {
				t.Fatalf("key %d: %d intact copies, plan says %d", k, count[k], intact[k])
			}
		}
	}
}

// checkObjects: no chunk or row of any object had a whole copy left (else
// the run was no helix), and with repaired, the first read repaired some.
func checkObjects(t *testing.T, res Result, repaired bool) {
	t.Helper()
	for _, o := range res.Objects {
		t.Logf("%+v", o)
		if o.ChunksNoCopyWhole != o.Chunks {
			t.Errorf("%s: %d of %d chunks had a whole copy left: not a helix", o.Redundancy, o.Chunks-o.ChunksNoCopyWhole, o.Chunks)
		}
		if repaired && o.Repaired == 0 {
			t.Errorf("%s: the first read repaired nothing", o.Redundancy)
		}
	}
}
