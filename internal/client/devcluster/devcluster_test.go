package devcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/testseed"
)

// sdfNodes opens every node's store on a small emulated flash device.
func sdfNodes(dir string, i int) (objstore.Store, error) {
	g := flash.SmallGeometry()
	g.BlocksPerDie = 32
	return objstore.OpenSDFStore(filepath.Join(dir, "sdf"), objstore.SDFStoreOptions{Geometry: g, Seed: int64(i + 1)})
}

// TestNodeThatCannotOpenIsOneDeadNode: a node whose device state is damaged
// beyond repair does not stop the cluster: the other nodes start, the dead
// one is reported with its directory and what failed, and every object is
// read from the others.
func TestNodeThatCannotOpenIsOneDeadNode(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	opts := devcluster.Options{Dir: t.TempDir(), Nodes: 4, NodeStore: sdfNodes, UnsafeNoFsync: true}
	cl, err := devcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string][]byte{}
	for i := 0; i < 6; i++ {
		data := make([]byte, 1+rng.Intn(3*direct.ChunkSize))
		rng.Read(data)
		key := fmt.Sprintf("obj-%d", i)
		if _, err := c.Put(ctx, key, data, objectpb.Redundancy_REP); err != nil {
			t.Fatal(err)
		}
		objects[key] = data
	}
	c.Close()
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}

	// Damage the same byte of every copy of node 2's device state: no
	// copy and no vote can give it back.
	devDir := filepath.Join(opts.Dir, "node-2", "sdf", "flash")
	for i := 0; i < 3; i++ {
		path := filepath.Join(devDir, fmt.Sprintf("state.%d", i))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[30] ^= 0xFF
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs strings.Builder
	opts.Logf = func(format string, args ...any) { fmt.Fprintf(&logs, format+"\n", args...) }
	cl, err = devcluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("one node cannot open: the cluster did not start: %v", err)
	}
	defer cl.Close()
	dead := cl.Dead()
	if len(dead) != 1 || dead[0].ID != 2 || !base.IsCorruption(dead[0].Err) ||
		!strings.Contains(dead[0].Err.Error(), devDir) || !strings.Contains(dead[0].Err.Error(), "state.0") {
		t.Fatalf("dead nodes %v, want node 2 naming %s and its state files", dead, devDir)
	}
	if !strings.Contains(logs.String(), "node 2 (") {
		t.Fatalf("the dead node was not logged:\n%s", logs.String())
	}
	for i := range cl.Nodes {
		if (cl.Node(i) == nil) != (i == 1) {
			t.Fatalf("node %d running=%t", i+1, cl.Node(i) != nil)
		}
	}
	c, err = client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for key, data := range objects {
		got, err := c.Get(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s with node 2 dead: %v", key, err)
		}
	}
}
