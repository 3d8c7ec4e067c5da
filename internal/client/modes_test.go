package client_test

import (
	"bytes"
	"context"
	"math/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/testseed"
)

func TestHDFSBaselineFailsOverAndRereplicates(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	cl, c := startCluster(t, 4, devcluster.Options{})
	ctx := context.Background()
	data := randomBytes(rng, 4*direct.ChunkSize)
	cs := int64(direct.ChunkSize)

	// Replica 0 bad at chunk 0, replica 1 bad at chunk 2: the read moves
	// 0 -> 1 -> 2 and never returns; both bad replicas are re-replicated
	// whole.
	rec, err := c.Put(ctx, "hdfs/a", data, rep)
	if err != nil {
		t.Fatal(err)
	}
	c.Corrupt(ctx, "hdfs/a", 0, 5, 1)
	c.Corrupt(ctx, "hdfs/a", 1, 2*cs+9, 1)
	got, report, err := c.GetWithReport(ctx, "hdfs/a", client.ModeHDFS)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("hdfs read: %v", err)
	}
	if report.Failovers != 2 || !slices.Equal(report.Rereplicated, sortedIDs(rec.Placement[0], rec.Placement[1])) || report.Repaired != 0 {
		t.Fatalf("report %s", report)
	}
	c.WaitBackground()
	for i := 0; i < 4; i++ {
		storeIsClean(t, cl, rec, i)
	}

	// Every replica bad somewhere (each chunk has a good copy): hdfs fails,
	// DIRECT serves the data and repairs only the three chunks.
	if _, err := c.Put(ctx, "hdfs/b", data, rep); err != nil {
		t.Fatal(err)
	}
	c.Corrupt(ctx, "hdfs/b", 0, 0*cs+1, 1)
	c.Corrupt(ctx, "hdfs/b", 1, 1*cs+2, 1)
	c.Corrupt(ctx, "hdfs/b", 2, 3*cs+3, 1)
	if got, _, err := c.GetWithReport(ctx, "hdfs/b", client.ModeHDFS); !base.IsDataLoss(err) || got != nil {
		t.Fatalf("hdfs read of a block bad on every replica: %d bytes, %v", len(got), err)
	}
	got, report, err = c.GetWithReport(ctx, "hdfs/b", client.ModeDirect)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("direct read: %v", err)
	}
	// Reads start at replica i%3 for chunk i: chunk 0 at r0 (bad), chunk 1
	// at r1 (bad), chunk 3 at r0 (good; r2's damage waits for the scrub).
	if report.Repaired != 2 {
		t.Fatalf("direct report %s", report)
	}
	if _, _, err := c.GetWithReport(ctx, "hdfs/b", "raid"); !base.IsInvalidArgument(err) {
		t.Fatalf("bad mode: %v", err)
	}
}

func sortedIDs(ids ...uint64) []uint64 {
	slices.Sort(ids)
	return ids
}

// fakeSleeper records the waits a scrubber asks for and advances a manual
// clock instead of sleeping.
type fakeSleeper struct {
	mu    sync.Mutex
	clock *base.ManualClock
	total time.Duration
}

func (f *fakeSleeper) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.total += d
	f.clock.Advance(d)
	return ctx.Err()
}

func TestScrubberRepairsWithinBudget(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	cl, c := startCluster(t, 6, devcluster.Options{})
	ctx := context.Background()
	var keys []string
	var stored int64
	for i := 0; i < 6; i++ {
		key := "s/" + string(rune('a'+i))
		red := rep
		if i%2 == 1 {
			red = ec
		}
		data := randomBytes(rng, 2*4*direct.ChunkSize)
		if _, err := c.Put(ctx, key, data, red); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
		if red == ec {
			stored += int64(len(data)) * direct.TotalShards / direct.DataShards
		} else {
			stored += int64(len(data)) * 3
		}
	}
	// Damage a replica of every REP object (not the one reads start at) and
	// a parity shard of every EC object: only a scrub sees these.
	for i, key := range keys {
		if i%2 == 0 {
			c.Corrupt(ctx, key, 2, 100, 2)
		} else {
			c.Corrupt(ctx, key, 5, direct.ChunkSize+7, 2)
		}
	}
	clock := base.NewManualClock(time.Unix(0, 0))
	sl := &fakeSleeper{clock: clock}
	const rate = 4 * base.MiB
	s, err := client.NewScrubber(c, client.ScrubberOptions{
		ScrubBytesPerSecond: rate, RepairBytesPerSecond: 64 * base.KiB, Clock: clock, Sleep: sl.sleep,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Objects != 6 || st.BytesVerified == 0 || st.RepairsQueued != 6 || st.Repaired != 0 {
		t.Fatalf("after pass: %s", st)
	}
	// Reads were paced: verifying `stored` bytes at `rate` took at least
	// stored/rate (less the initial burst).
	minScan := time.Duration(float64(stored-6*direct.ChunkSize) / float64(rate) * float64(time.Second))
	if sl.total < minScan {
		t.Fatalf("scan waited %v for %d bytes at %s/s; want at least %v", sl.total, stored, rate, minScan)
	}
	before := sl.total
	s.Drain(ctx)
	st = s.Stats()
	if st.Repaired != 6 || st.RepairFailed != 0 {
		t.Fatalf("after drain: %s", st)
	}
	// Six 64 KiB repairs at 64 KiB/s with a 256 KiB burst: at least 2 s.
	if waited := sl.total - before; waited < 2*time.Second {
		t.Fatalf("repairs waited only %v", waited)
	}
	for _, key := range keys {
		rec, _ := c.Stat(ctx, key)
		for i := 0; i < 2; i++ {
			storeIsClean(t, cl, rec, i)
		}
	}
	if _, err := client.NewScrubber(c, client.ScrubberOptions{RepairQueue: -1}); !base.IsInvalidArgument(err) {
		t.Fatal(err)
	}
}

func TestTransientFlipsAreCountedAndMasked(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	_, c := startCluster(t, 6, devcluster.Options{})
	ctx := context.Background()
	data := randomBytes(rng, 8*direct.ChunkSize)
	for _, red := range []string{"rep", "ec"} {
		r, _ := client.ParseRedundancy(red)
		if _, err := c.Put(ctx, "u/"+red, data, r); err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(1); id <= 6; id++ {
		if err := c.InjectUBER(ctx, id, 3e-7, false); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		for _, key := range []string{"u/rep", "u/ec"} {
			got, err := c.Get(ctx, key)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read %d of %s under UBER: %v", i, key, err)
			}
		}
	}
	stats, err := c.NodeStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var transient, flips int64
	for _, s := range stats {
		transient += s.Devices[0].Transient
		flips += s.Devices[0].InjectedFlips
	}
	if transient == 0 || flips == 0 {
		t.Fatalf("transient %d flips %d", transient, flips)
	}
	t.Logf("%d injected flips, %d transient detections", flips, transient)
}

func TestSDFStoreClusterSurvivesDieFailure(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	_, c := startCluster(t, 6, devcluster.Options{NodeStore: func(dir string, i int) (objstore.Store, error) {
		return objstore.OpenSDFStore(dir+"/sdf", objstore.SDFStoreOptions{Seed: int64(i)})
	}})
	ctx := context.Background()
	objs := map[string][]byte{}
	for i := 0; i < 12; i++ {
		key := "d/" + string(rune('a'+i))
		objs[key] = randomBytes(rng, rng.Intn(6*direct.ChunkSize)+1)
		red := rep
		if i%2 == 1 {
			red = ec
		}
		if _, err := c.Put(ctx, key, objs[key], red); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.FailDie(ctx, 2, 3); err != nil {
		t.Fatal(err)
	}
	repaired := 0
	for key, want := range objs {
		got, rep, err := c.GetWithReport(ctx, key, client.ModeDirect)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after die failure: %v", key, err)
		}
		repaired += rep.Repaired
	}
	t.Logf("%d chunks repaired after the die failure", repaired)
	stats, err := c.NodeStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stats {
		if d := st.Devices[0]; d.WearBlocks == 0 {
			t.Fatalf("node %d reports no device wear: %v", st.NodeId, d)
		}
	}
	for key, want := range objs {
		got, rep, err := c.GetWithReport(ctx, key, client.ModeDirect)
		if err != nil || !bytes.Equal(got, want) || rep.Repaired != 0 {
			t.Fatalf("%s second read: %v %s", key, err, rep)
		}
	}
}
