package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/testseed"
)

const (
	rep = objectpb.Redundancy_REP
	ec  = objectpb.Redundancy_EC
)

func startCluster(t *testing.T, nodes int, opts devcluster.Options) (*devcluster.Cluster, *client.Client) {
	t.Helper()
	ctx := context.Background()
	opts.Dir = t.TempDir()
	opts.Nodes = nodes
	opts.UnsafeNoFsync = true
	if opts.MaxObjectBytes == 0 {
		opts.MaxObjectBytes = 32 * base.MiB
	}
	cl, err := devcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		cl.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if err := cl.Close(); err != nil {
			t.Logf("close: %v", err)
		}
	})
	return cl, c
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}

// TestManyObjects writes and reads 1,000+ objects of sizes from 0 B to
// 16 MiB, mostly small, in REP and EC, concurrently.
func TestManyObjects(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	opts := devcluster.Options{}
	if raceEnabled {
		// Under the race detector the file store's syscalls dominate; the
		// other tests keep real files.
		opts.NodeStore = func(string, int) (objstore.Store, error) { return objstore.NewMemStore(), nil }
	}
	_, c := startCluster(t, 7, opts)
	ctx := context.Background()
	type object struct {
		key  string
		data []byte
		red  objectpb.Redundancy
	}
	var objects []object
	sizes := []int{0, 1, 511, 512, 513, direct.ChunkSize - 1, direct.ChunkSize, direct.ChunkSize + 1,
		4*direct.ChunkSize - 1, 4 * direct.ChunkSize, 4*direct.ChunkSize + 3, 16 << 20, 5<<20 + 17}
	bigEvery := 100
	if raceEnabled {
		// The race detector slows checksums and coding tenfold: keep the
		// object count and the size range, cut the bulk.
		// (the 16 MiB object runs without -race).
		sizes = append(sizes[:len(sizes)-2], 2<<20)
		bigEvery = 1000
	}
	total := 0
	for i := 0; i < 1040; i++ {
		var n int
		switch {
		case i < len(sizes):
			n = sizes[i]
		case i%bigEvery == 0:
			n = rng.Intn(3 << 20)
		default:
			n = rng.Intn(8 << 10)
		}
		total += n
		red := rep
		if i%2 == 1 {
			red = ec
		}
		objects = append(objects, object{fmt.Sprintf("obj/%04d", i), randomBytes(rng, n), red})
	}
	t.Logf("%d objects, %d MiB", len(objects), total>>20)
	work := make(chan object)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if _, err := c.Put(ctx, o.key, o.data, o.red); err != nil {
					errs <- fmt.Errorf("put %s (%d B %v): %w", o.key, len(o.data), o.red, err)
					return
				}
				got, err := c.Get(ctx, o.key)
				if err != nil || !bytes.Equal(got, o.data) {
					errs <- fmt.Errorf("get %s (%d B %v): %d B, %v", o.key, len(o.data), o.red, len(got), err)
					return
				}
			}
		}()
	}
	for _, o := range objects {
		select {
		case work <- o:
		case err := <-errs:
			t.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	recs, err := c.List(ctx, "obj/")
	if err != nil || len(recs) != len(objects) {
		t.Fatalf("list: %d, %v", len(recs), err)
	}
	// Overwrite makes a new version; delete removes.
	rec1, _ := c.Stat(ctx, "obj/0001")
	if _, err := c.Put(ctx, "obj/0001", []byte("v2"), rep); err != nil {
		t.Fatal(err)
	}
	rec2, _ := c.Stat(ctx, "obj/0001")
	if got, _ := c.Get(ctx, "obj/0001"); string(got) != "v2" || rec2.Version <= rec1.Version {
		t.Fatalf("overwrite: %q v%d then v%d", got, rec1.Version, rec2.Version)
	}
	if err := c.Delete(ctx, "obj/0001"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "obj/0001"); !objstore.IsNotFound(err) {
		t.Fatalf("deleted object: %v", err)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	_, c := startCluster(t, 3, devcluster.Options{MaxObjectBytes: base.MiB})
	ctx := context.Background()
	if _, err := c.Put(ctx, "keep", []byte("x"), rep); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"empty key":     func() error { _, err := c.Put(ctx, "", []byte("x"), rep); return err },
		"long key":      func() error { _, err := c.Put(ctx, strings.Repeat("k", 2000), nil, rep); return err },
		"too big":       func() error { _, err := c.Put(ctx, "big", make([]byte, base.MiB+1), rep); return err },
		"redundancy":    func() error { _, err := c.Put(ctx, "r", nil, 9); return err },
		"EC on 3 nodes": func() error { _, err := c.Put(ctx, "ec", nil, ec); return err },
		"unknown node":  func() error { return c.InjectUBER(ctx, 99, 1e-6, false) },
		"bad uber":      func() error { return c.InjectUBER(ctx, 1, -3, false) },
		"replica":       func() error { return c.Corrupt(ctx, "keep", 3, 0, 1) },
		"offset":        func() error { return c.Corrupt(ctx, "keep", 0, 1, 1) },
		"bits":          func() error { return c.Corrupt(ctx, "keep", 0, 0, 0) },
		"fail-die":      func() error { return c.FailDie(ctx, 1, 0) },
		"get empty":     func() error { _, err := c.Get(ctx, ""); return err },
		"rm empty":      func() error { return c.Delete(ctx, "") },
	} {
		err := f()
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		if name != "EC on 3 nodes" && !base.IsInvalidArgument(err) {
			t.Fatalf("%s: not an invalid-argument error: %v", name, err)
		}
	}
	recs, err := c.List(ctx, "")
	if err != nil || len(recs) != 1 || recs[0].Key != "keep" {
		t.Fatalf("bad input changed the index: %v %v", recs, err)
	}
	if got, err := c.Get(ctx, "keep"); err != nil || string(got) != "x" {
		t.Fatalf("keep: %q %v", got, err)
	}
	if _, err := client.ParseRedundancy("raid5"); !base.IsInvalidArgument(err) {
		t.Fatal(err)
	}
}
