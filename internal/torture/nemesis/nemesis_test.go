package nemesis

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/flashmend/flashmend/internal/testseed"
)

// buildBinary builds flashmend for the test's processes.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "flashmend")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/flashmend/flashmend/cmd/flashmend")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestNemesisRound is make test's slice of the nemesis: a short seeded run
// on four nodes on emulated flash (objects and KV replicas both on the
// device) with every kind of fault, which must find nothing wrong.
func TestNemesisRound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	seed := testseed.Seed(t, "NEMESIS_SEED")
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	res, err := Run(ctx, Options{Argv: []string{bin}, Dir: dir, Seed: seed, Nodes: 4, Store: "sdf", DeviceSize: "256MiB",
		Duration: 40 * time.Second, Hold: 4 * time.Second, KVClients: 3, Keys: 4, ObjClients: 1, ObjSize: 128 << 10,
		Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Markdown())
	if !res.Passed() {
		for _, f := range []string{"coordinator.log", "node-1.log", "node-2.log", "node-3.log", "node-4.log"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && len(b) > 0 {
				if len(b) > 8000 {
					b = b[len(b)-8000:]
				}
				t.Logf("--- %s (tail)\n%s", f, b)
			}
		}
		t.Fatalf("the nemesis found something wrong (seed %d)", seed)
	}
	for i := 1; i <= 4; i++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("node-%d", i), "sdf")); err != nil {
			t.Fatalf("node %d did not run on emulated flash: %v", i, err)
		}
	}
	if res.KVOK == 0 || res.ObjPuts == 0 || len(res.Faults) == 0 {
		t.Fatalf("nothing was exercised: %d KV operations, %d objects, %d faults", res.KVOK, res.ObjPuts, len(res.Faults))
	}
}

func TestOptionsRejected(t *testing.T) {
	for _, o := range []Options{
		{},
		{Argv: []string{"x"}, Dir: "d", Nodes: 3, Duration: time.Second, Hold: time.Second},
		{Argv: []string{"x"}, Dir: "d", Duration: time.Second, Hold: time.Second, Faults: []string{"meteor"}},
		{Argv: []string{"x"}, Dir: "d", Duration: 0, Hold: time.Second},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Fatalf("options %+v accepted", o)
		}
	}
}

// TestModelCatchesStaleRead: the checker the run relies on rejects a read
// of a value overwritten before the read began, and accepts a read of a
// put whose outcome was unknown.
func TestModelCatchesStaleRead(t *testing.T) {
	op := func(client int, in kvInput, out kvOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	stale := []porcupine.Operation{
		op(0, kvInput{op: "put", key: "k", value: "a"}, kvOutput{}, 0, 1),
		op(0, kvInput{op: "put", key: "k", value: "b"}, kvOutput{}, 2, 3),
		op(1, kvInput{op: "get", key: "k"}, kvOutput{value: "a"}, 4, 5),
	}
	if porcupine.CheckOperations(registerModel, stale) {
		t.Fatal("a stale read passed")
	}
	unknown := []porcupine.Operation{
		op(0, kvInput{op: "put", key: "k", value: "a"}, kvOutput{unknown: true}, 0, math.MaxInt64),
		op(1, kvInput{op: "get", key: "k"}, kvOutput{value: ""}, 1, 2),
		op(1, kvInput{op: "get", key: "k"}, kvOutput{value: "a"}, 3, 4),
		op(2, kvInput{op: "cas", key: "k", old: "a", value: "c"}, kvOutput{ok: true}, 5, 6),
		op(1, kvInput{op: "cas", key: "k", old: "a", value: "d"}, kvOutput{ok: false}, 7, 8),
	}
	if !porcupine.CheckOperations(registerModel, unknown) {
		t.Fatal("a legal history with an unknown put failed")
	}
	lostCAS := append(unknown[:4:4], op(1, kvInput{op: "get", key: "k"}, kvOutput{value: "a"}, 9, 10))
	if porcupine.CheckOperations(registerModel, lostCAS) {
		t.Fatal("a read that lost an acknowledged compare-and-set passed")
	}
}
