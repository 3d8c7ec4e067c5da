package kv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
)

func startCluster(t *testing.T, opts kv.Options, splits ...string) (*kvcluster.Cluster, *kvclient.Client) {
	t.Helper()
	if opts.CacheBytes == 0 {
		opts.CacheBytes = -1 // no block cache: injected damage is always seen
	}
	c, err := kvcluster.Start(kvcluster.Config{Splits: splits, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cl, err := c.NewClient(kvclient.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range c.Layout.Shards {
		if _, err := c.WaitLeader(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	return c, cl
}

// checksums returns each running replica's content checksum once all have
// applied the same index.
func checksums(t *testing.T, c *kvcluster.Cluster, shard base.ShardID) map[base.NodeID]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := map[base.NodeID]string{}
		indexes := map[uint64]bool{}
		for _, id := range c.NodeIDs() {
			n := c.Node(id)
			if n == nil {
				continue
			}
			crc, rows, applied, err := n.Replica(shard).ContentChecksum()
			if err != nil {
				out[id] = "error: " + err.Error()
				continue
			}
			out[id] = fmt.Sprintf("crc=%08x rows=%d", crc, rows)
			indexes[applied] = true
		}
		same := len(indexes) == 1
		for _, v := range out {
			for _, w := range out {
				same = same && v == w
			}
		}
		if same || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func assertSame(t *testing.T, sums map[base.NodeID]string) {
	t.Helper()
	var first string
	for _, v := range sums {
		if first == "" {
			first = v
		}
		if v != first {
			t.Fatalf("replicas differ: %v", sums)
		}
	}
}

func TestClusterBasicOps(t *testing.T) {
	c, cl := startCluster(t, kv.Options{}, "m")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 50; i++ {
		if _, err := cl.Put(ctx, []byte(fmt.Sprintf("k%02d", i)), []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := cl.Put(ctx, []byte("zz"), []byte("last"))
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range []kvclient.ReadOption{kvclient.Strong(), kvclient.AfterIndex(idx)} {
		v, found, err := cl.Get(ctx, []byte("zz"), opt)
		if err != nil || !found || string(v) != "last" {
			t.Fatalf("get zz: %q %v %v", v, found, err)
		}
	}
	if _, err := cl.Delete(ctx, []byte("k03")); err != nil {
		t.Fatal(err)
	}
	if _, found, err := cl.Get(ctx, []byte("k03")); err != nil || found {
		t.Fatalf("deleted key: %v %v", found, err)
	}
	rows, err := cl.Scan(ctx, []byte("k00"), []byte("k10"), 0)
	if err != nil || len(rows) != 9 {
		t.Fatalf("scan: %v %v", rows, err)
	}
	rows, err = cl.Scan(ctx, []byte("k"), nil, 5)
	if err != nil || len(rows) != 5 || string(rows[0].Key) != "k00" {
		t.Fatalf("limited scan: %v %v", rows, err)
	}
	// Compare-and-set.
	ok, err := cl.CompareAndSet(ctx, []byte("k01"), []byte("v1"), []byte("v1b"))
	if err != nil || !ok {
		t.Fatalf("cas: %v %v", ok, err)
	}
	ok, err = cl.CompareAndSet(ctx, []byte("k01"), []byte("v1"), []byte("v1c"))
	if err != nil || ok {
		t.Fatalf("stale cas: %v %v", ok, err)
	}
	ok, err = cl.CompareAndSet(ctx, []byte("new"), nil, []byte("x"))
	if err != nil || !ok {
		t.Fatalf("cas absent: %v %v", ok, err)
	}
	// Atomic batch with a failing condition applies nothing.
	_, err = cl.Batch(ctx, []kvclient.Op{{Key: []byte("b1"), Value: []byte("1")}, {Key: []byte("b2"), Value: []byte("2")}},
		[]kvclient.Condition{{Key: []byte("b1"), Exists: true, Value: []byte("nope")}})
	if err != kvapi.ErrConditionFailed && !isReason(err, kvapi.ErrConditionFailed) {
		t.Fatalf("batch condition: %v", err)
	}
	if _, found, _ := cl.Get(ctx, []byte("b2")); found {
		t.Fatal("failed batch applied")
	}
	// Bad input.
	for name, err := range map[string]error{
		"empty key": func() error { _, err := cl.Put(ctx, nil, []byte("x")); return err }(),
		"big key":   func() error { _, err := cl.Put(ctx, make([]byte, kvapi.MaxKeyBytes+1), nil); return err }(),
		"big value": func() error { _, err := cl.Put(ctx, []byte("a"), make([]byte, kvapi.MaxValueBytes+1)); return err }(),
		"cross shard": func() error {
			_, err := cl.Batch(ctx, []kvclient.Op{{Key: []byte("a")}, {Key: []byte("z")}}, nil)
			return err
		}(),
		"bad range": func() error { _, err := cl.Scan(ctx, []byte("z"), []byte("a"), 0); return err }(),
	} {
		if !base.IsInvalidArgument(err) {
			t.Errorf("%s: err = %v; want invalid argument", name, err)
		}
	}
	// Malformed requests straight to the gRPC service.
	kc, err := cl.KVClient(1)
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"unknown shard": func() error {
			_, err := kc.Get(ctx, &kvpb.GetRequest{Shard: 99, Key: []byte("a")})
			return err
		},
		"key outside shard": func() error {
			_, err := kc.Get(ctx, &kvpb.GetRequest{Shard: 1, Key: []byte("z")})
			return err
		},
		"nil batch": func() error {
			_, err := kc.Write(ctx, &kvpb.WriteRequest{Shard: 1})
			return err
		},
		"bad op kind": func() error {
			_, err := kc.Write(ctx, &kvpb.WriteRequest{Shard: 1, Batch: &kvpb.WriteBatch{Ops: []*kvpb.Op{{Kind: 7, Key: []byte("a")}}}})
			return err
		},
		"scan limit": func() error {
			_, err := kc.Scan(ctx, &kvpb.ScanRequest{Shard: 1, Limit: kvapi.MaxScanRows + 1})
			return err
		},
		"unknown txn": func() error {
			_, err := kc.Get(ctx, &kvpb.GetRequest{Shard: 1, Key: []byte("a"), TxnId: 12345})
			return err
		},
		"bad consistency": func() error {
			_, err := kc.Get(ctx, &kvpb.GetRequest{Shard: 1, Key: []byte("a"), Read: &kvpb.ReadOptions{Consistency: 9}})
			return err
		},
	} {
		if err := kvapi.FromStatus(call()); !base.IsInvalidArgument(err) {
			t.Errorf("%s: err = %v; want invalid argument", name, err)
		}
	}
	for _, s := range c.Layout.Shards {
		assertSame(t, checksums(t, c, s.ID))
	}
}

func isReason(err error, target *kvapi.Error) bool {
	e, ok := err.(*kvapi.Error)
	return ok && e.Reason == target.Reason
}

// waitAllCaughtUp waits until every running replica of shard has applied
// what the furthest one had when called, so that an eventual read from any
// of them sees every write acknowledged before (a write needs only a
// quorum: one replica may still be behind, and answer "not found").
func waitAllCaughtUp(t *testing.T, c *kvcluster.Cluster, shard base.ShardID) {
	t.Helper()
	var target uint64
	for _, id := range c.NodeIDs() {
		if n := c.Node(id); n != nil {
			if r := n.Replica(shard); r != nil {
				target = max(target, r.AppliedIndex())
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitApplied(ctx, shard, target); err != nil {
		t.Fatal(err)
	}
}
