package nemesis

import (
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/testseed"
)

// reliablePoints are reached within a few seconds of any workload on a
// 4-node cluster on emulated flash (the full run's report shows which
// others are).
var reliablePoints = []string{"raftlog-append", "raftlog-synced", "chunk-data", "chunk-sums", "index-update", "meta-copy", "kv-apply", "sdf-meta-page"}

// TestCrashPointRound is make test's slice of the crash-point harness:
// raftlog-copy (reached by every raft append) and one point drawn from
// the seed among reliablePoints, on four nodes on emulated flash; both
// must be reached and every check must hold.
func TestCrashPointRound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	seed := testseed.Seed(t, "CRASHPOINT_SEED")
	points := []string{"raftlog-copy", reliablePoints[rand.New(rand.NewSource(seed)).Intn(len(reliablePoints))]}
	if s := os.Getenv("CRASHPOINT_POINTS"); s != "" {
		points = strings.Split(s, ",")
	}
	t.Logf("seed %d, points %v (repeat with CRASHPOINT_SEED=%d)", seed, points, seed)
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	res, err := RunCrashPoints(ctx, CrashOptions{Argv: []string{bin}, Dir: dir, Seed: seed, Nodes: 4, Store: "sdf",
		DeviceSize: "256MiB", Points: points, Warmup: 3 * time.Second, Bound: 45 * time.Second, MaxAt: 3,
		KVClients: 2, Keys: 3, ObjClients: 1, ObjKeys: 4, ObjSize: 128 << 10, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Summary() + "\n" + res.Markdown())
	if !res.Passed() {
		for _, f := range []string{"coordinator.log", "node-1.log", "node-2.log", "node-3.log", "node-4.log"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && len(b) > 0 {
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("--- %s (tail)\n%s", f, b)
			}
		}
		t.Fatalf("a crash point found something wrong (seed %d)", seed)
	}
	for _, p := range res.Points {
		if !p.Reached {
			t.Fatalf("point %s was not reached (seed %d)", p.Point, seed)
		}
	}
	if res.KVOps == 0 || res.ObjPuts == 0 {
		t.Fatalf("nothing was exercised: %d KV operations, %d objects", res.KVOps, res.ObjPuts)
	}
}

func TestCrashOptionsRejected(t *testing.T) {
	for _, o := range []CrashOptions{
		{},
		{Argv: []string{"x"}, Dir: "d", Nodes: 3},
		{Argv: []string{"x"}, Dir: "d", Points: []string{"meteor"}},
		{Argv: []string{"x"}, Dir: "d", Store: "tape"},
		{Argv: []string{"x"}, Dir: "d", Bound: -time.Second},
	} {
		if _, err := RunCrashPoints(context.Background(), o); err == nil {
			t.Fatalf("options %+v accepted", o)
		}
	}
	for _, p := range reliablePoints {
		if _, ok := crashpoint.Lookup(p); !ok {
			t.Fatalf("reliable point %q is not registered", p)
		}
	}
}
