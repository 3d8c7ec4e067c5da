package devcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/node"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/testseed"
)

// tinySDFNodes opens every node's store on an 8 MiB emulated flash device,
// small enough to fill in a test.
func tinySDFNodes(dir string, i int) (objstore.Store, error) {
	g := flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 16, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
	return objstore.OpenSDFStore(filepath.Join(dir, "sdf"), objstore.SDFStoreOptions{Geometry: g, Seed: int64(i + 1)})
}

// fillCluster puts REP objects until the cluster refuses one, and returns
// them with the refusal.
func fillCluster(ctx context.Context, t *testing.T, c *client.Client, rng *rand.Rand, prefix string) (map[string][]byte, error) {
	t.Helper()
	objects := map[string][]byte{}
	for i := 0; i < 10000; i++ {
		data := make([]byte, 2*direct.ChunkSize+rng.Intn(2*direct.ChunkSize))
		rng.Read(data)
		key := fmt.Sprintf("%s-%04d", prefix, i)
		if _, err := c.Put(ctx, key, data, objectpb.Redundancy_REP); err != nil {
			return objects, err
		}
		objects[key] = data
	}
	t.Fatal("the cluster never filled")
	return nil, nil
}

// corruptSome flips a bit in chunk 1 of n objects' replica on node 1 and
// returns the damaged chunks.
func corruptSome(ctx context.Context, t *testing.T, c *client.Client, objects map[string][]byte, n int) map[direct.ChunkID]bool {
	t.Helper()
	damaged := map[direct.ChunkID]bool{}
	for key := range objects {
		if len(damaged) == n {
			break
		}
		rec, err := c.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		replica := -1
		for r, id := range rec.Placement {
			if id == 1 {
				replica = r
			}
		}
		d, err := c.CorruptAt(ctx, key, replica, direct.ChunkSize+100, 1)
		if err != nil {
			t.Fatal(err)
		}
		damaged[d.Chunk] = true
	}
	return damaged
}

// readAll checks every object reads back as written.
func readAll(ctx context.Context, t *testing.T, c *client.Client, objects map[string][]byte) {
	t.Helper()
	for key, want := range objects {
		got, err := c.Get(ctx, key)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read back %d bytes (want %d): %v", key, len(got), len(want), err)
		}
	}
}

// scrubAll scrubs every object (repairs written at once) and sums the
// reports.
func scrubAll(ctx context.Context, t *testing.T, c *client.Client) client.ReadReport {
	t.Helper()
	recs, err := c.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var sum client.ReadReport
	for _, rec := range recs {
		rep, err := c.ScrubObject(ctx, rec, nil, nil)
		if err != nil {
			t.Fatalf("scrub %s: %v", rec.Key, err)
		}
		sum.Repaired += rep.Repaired
		sum.RepairFailed += rep.RepairFailed
		sum.RepairFailures = append(sum.RepairFailures, rep.RepairFailures...)
	}
	return sum
}

// nodeCounts returns node id's durable repair history totals.
func nodeCounts(ctx context.Context, t *testing.T, c *client.Client, id uint64) map[string]int64 {
	t.Helper()
	reports, err := c.NodeReports(ctx, true, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		if r.Info.Id == id && r.Stats != nil {
			return r.Stats.History.Counts
		}
	}
	t.Fatalf("no report from node %d", id)
	return nil
}

// TestRepairsOnFullDevicesNeverFailSilently fills the nodes' emulated flash
// devices to their limit, injects corruption and checks that every repair
// is either done or reported. With the repair reserve (the default) new
// puts are refused with a clear error while there is still room, and every
// repair is written. Without it a node's device fills up completely: each
// repair that cannot be written is reported with its reason by the read
// report, the node's history and the scrubber, and the scrubber writes it
// once room is made.
func TestRepairsOnFullDevicesNeverFailSilently(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := func(reserve float64) (*devcluster.Cluster, *client.Client) {
		cl, err := devcluster.Start(ctx, devcluster.Options{Dir: t.TempDir(), Nodes: 3, NodeStore: tinySDFNodes,
			UnsafeNoFsync: true, RepairReserve: reserve, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		c, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return cl, c
	}

	t.Run("reserve", func(t *testing.T) {
		_, c := start(0) // the default reserve
		objects, err := fillCluster(ctx, t, c, rng, "r")
		if !base.IsNoSpace(err) || !strings.Contains(err.Error(), "kept for repairs") {
			t.Fatalf("after %d objects the put failed with %v, want a refusal that keeps the repair reserve", len(objects), err)
		}
		t.Logf("%d objects put; refusal: %v", len(objects), err)
		damaged := corruptSome(ctx, t, c, objects, 8)
		sum := scrubAll(ctx, t, c)
		if sum.Repaired != len(damaged) || sum.RepairFailed != 0 {
			t.Fatalf("repaired %d, failed %d (%v) of %d damaged chunks: the reserve should hold every repair",
				sum.Repaired, sum.RepairFailed, sum.RepairFailures, len(damaged))
		}
		if again := scrubAll(ctx, t, c); again.Repaired+again.RepairFailed != 0 {
			t.Fatalf("a second scrub found damage: %+v", again)
		}
		readAll(ctx, t, c, objects)
		var refused int64
		for id := uint64(1); id <= 3; id++ {
			refused += nodeCounts(ctx, t, c, id)[node.CountRefusedFull]
		}
		if refused == 0 {
			t.Fatal("no node counted a refused write")
		}
	})

	t.Run("full", func(t *testing.T) {
		cl, c := start(-1) // no reserve
		// Corrupt first (the corruption is rewritten on the device, which
		// needs room), then fill.
		objects := map[string][]byte{}
		for i := 0; i < 6; i++ {
			data := make([]byte, 2*direct.ChunkSize+rng.Intn(2*direct.ChunkSize))
			rng.Read(data)
			key := fmt.Sprintf("damaged-%d", i)
			if _, err := c.Put(ctx, key, data, objectpb.Redundancy_REP); err != nil {
				t.Fatal(err)
			}
			objects[key] = data
		}
		damaged := corruptSome(ctx, t, c, objects, 6)
		more, err := fillCluster(ctx, t, c, rng, "f")
		if !base.IsNoSpace(err) {
			t.Fatalf("after %d objects the put failed with %v, want a full device", len(more), err)
		}
		for k, v := range more {
			objects[k] = v
		}
		// Fill what room node 1 has left (the room the corruption's
		// rewrites freed included) with files of its own.
		st := cl.Node(0).Store()
		var fillers []string
		for i := 0; ; i++ {
			name := fmt.Sprintf("filler/%d", i)
			if err := st.Put(name, make([]byte, 4096)); err != nil {
				if !base.IsNoSpace(err) {
					t.Fatal(err)
				}
				break
			}
			fillers = append(fillers, name)
		}
		t.Logf("%d objects put; node 1 took %d more pages", len(objects), len(fillers))

		// Every repair is done or reported: a repair that fails leaves
		// garbage that GC may reclaim, so which ones fail varies.
		sum := scrubAll(ctx, t, c)
		t.Logf("first scrub: %d repaired, %d failed", sum.Repaired, sum.RepairFailed)
		if sum.Repaired+sum.RepairFailed != len(damaged) || len(sum.RepairFailures) != sum.RepairFailed {
			t.Fatalf("repaired %d, failed %d (%d listed) of %d damaged chunks on a full device",
				sum.Repaired, sum.RepairFailed, len(sum.RepairFailures), len(damaged))
		}
		for _, f := range sum.RepairFailures {
			if f.Node != 1 || !damaged[f.Chunk] || !f.NoSpace || !strings.Contains(f.Reason, "no space") {
				t.Fatalf("failure %v: not a no-space failure of a damaged chunk on node 1", f)
			}
		}
		if got := nodeCounts(ctx, t, c, 1)[node.KindRepairFailed]; got != int64(sum.RepairFailed) {
			t.Fatalf("node 1's history counts %d failed repairs, the scrub %d", got, sum.RepairFailed)
		}
		// Make room: the fillers go, and a few objects are deleted (the
		// coordinator collects their chunks).
		for _, name := range fillers {
			if err := st.Delete(name); err != nil {
				t.Fatal(err)
			}
		}
		deleted := 0
		for key := range more {
			if deleted == 6 {
				break
			}
			if err := c.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			delete(objects, key)
			deleted++
		}
		scrubUntilClean(ctx, t, c)
		readAll(ctx, t, c, objects)
	})

	// On a store without GC the failure and the retry are deterministic:
	// a missing chunk cannot be re-created on a full device, the scrubber
	// reports it and keeps it, and writes it once room is made.
	t.Run("retry", func(t *testing.T) {
		const capacity = 4 * base.MiB
		cl, err := devcluster.Start(ctx, devcluster.Options{Dir: t.TempDir(), Nodes: 3, UnsafeNoFsync: true, RepairReserve: -1,
			NodeStore: func(string, int) (objstore.Store, error) {
				m := objstore.NewMemStore()
				m.SetCapacity(capacity)
				return m, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		c, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		objects := map[string][]byte{}
		for i := 0; i < 4; i++ {
			data := make([]byte, 3*direct.ChunkSize)
			rng.Read(data)
			key := fmt.Sprintf("m-%d", i)
			if _, err := c.Put(ctx, key, data, objectpb.Redundancy_REP); err != nil {
				t.Fatal(err)
			}
			objects[key] = data
		}
		rec, err := c.Stat(ctx, "m-0")
		if err != nil {
			t.Fatal(err)
		}
		id := direct.ChunkID{Object: rec.Object, Version: rec.Version, Index: 1}
		st := cl.Node(0).Store()
		if err := st.Delete(objstore.DataName(id)); err != nil {
			t.Fatal(err)
		}
		u, err := st.Usage()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put("filler", make([]byte, u.CapacityBytes-u.UsedBytes)); err != nil {
			t.Fatal(err)
		}
		s, err := client.NewScrubber(c, client.ScrubberOptions{ScrubBytesPerSecond: 1 << 40, RepairBytesPerSecond: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		s.Drain(ctx)
		stats := s.Stats()
		if stats.RepairFailed != 1 || stats.RepairFailedNoSpace != 1 || stats.RepairsPending != 1 ||
			!strings.Contains(stats.LastRepairFailure, "no space") || !strings.Contains(stats.String(), "no space") {
			t.Fatalf("scrubber stats on a full device: %+v", stats)
		}
		counts := nodeCounts(ctx, t, c, 1)
		if counts[node.KindRepairFailed] != 1 {
			t.Fatalf("node 1's history: %v", counts)
		}
		if err := st.Delete("filler"); err != nil {
			t.Fatal(err)
		}
		if err := s.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		s.Drain(ctx)
		stats = s.Stats()
		if stats.RepairRetried != 1 || stats.RepairsPending != 0 || stats.RepairedMissing < 1 {
			t.Fatalf("scrubber stats once room was made: %+v", stats)
		}
		if again := scrubAll(ctx, t, c); again.Repaired+again.RepairFailed != 0 {
			t.Fatalf("a scrub after the retry found damage: %+v", again)
		}
		readAll(ctx, t, c, objects)
	})
}

// scrubUntilClean scrubs until a scrub finds nothing to repair: once room
// is made (the coordinator collects deleted objects in the background),
// every failed repair is written.
func scrubUntilClean(ctx context.Context, t *testing.T, c *client.Client) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		sum := scrubAll(ctx, t, c)
		if sum.Repaired+sum.RepairFailed == 0 {
			return
		}
		for _, f := range sum.RepairFailures {
			if !f.NoSpace {
				t.Fatalf("repair failed for another reason than room: %v", f)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("damage left two minutes after room was made: %d repairs failed (%v)", sum.RepairFailed, sum.RepairFailures)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
