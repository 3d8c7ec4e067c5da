package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/coord"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

// put writes key=value, sending it again when its outcome is unknown (the
// proposal timed out on a slow machine): writing the same value twice is
// harmless.
func put(ctx context.Context, t *testing.T, cl *kvclient.Client, key, value string) {
	t.Helper()
	for {
		_, err := cl.Put(ctx, []byte(key), []byte(value))
		if err == nil {
			return
		}
		if ctx.Err() != nil || status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("put %s: %v", key, err)
		}
		t.Logf("put %s: %v: again", key, err)
	}
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNodesHostKV: storage nodes host the KV store on their own port with
// the coordinator's placement; a node that restarts on another port is
// found again by its peers (they look its address up) and catches up.
func TestNodesHostKV(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	co, err := coord.Start(ctx, coord.Config{Dir: t.TempDir(), LeaseTTLSeconds: 2, UnsafeNoFsync: true, SweepInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	kvOpts := &kv.Options{CacheBytes: -1}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	start := func(i int) *Node {
		n, err := Start(ctx, Config{Dir: dirs[i], CoordinatorAddr: co.Addr(), NodeID: base.NodeID(i + 1),
			HeartbeatInterval: 100 * time.Millisecond, KV: kvOpts})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	nodes := []*Node{start(0), start(1), start(2)}
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	if _, err := Start(ctx, Config{Dir: t.TempDir(), NodeID: 9, KV: kvOpts}); !base.IsInvalidArgument(err) {
		t.Fatalf("standalone node with KV: %v", err)
	}
	resp, err := co.KVLayout(ctx, &coordpb.KVLayoutRequest{Create: true, Splits: [][]byte{[]byte("m")}})
	if err != nil {
		t.Fatal(err)
	}
	layout, err := kvapi.LayoutFromProto(resp.Layout)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitUntil(t, fmt.Sprintf("%s opens its replicas", n.ID()), 30*time.Second, func() bool { return n.KV() != nil })
	}
	client := func() *kvclient.Client {
		addrs := map[base.NodeID]string{}
		for _, n := range nodes {
			addrs[n.ID()] = n.Addr()
		}
		c, err := kvclient.New(layout, addrs, kvclient.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	cl := client()
	for i := 0; i < 50; i++ {
		put(ctx, t, cl, fmt.Sprintf("%c-%02d", 'a'+i%26, i), "v1")
	}

	// Node 2 stops; writes go on; it comes back on another port.
	old := nodes[1].Addr()
	if err := nodes[1].Kill(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		put(ctx, t, cl, fmt.Sprintf("%c-%02d", 'a'+i%26, i), "v2")
	}
	nodes[1] = start(1)
	t.Logf("node 2 moved from %s to %s", old, nodes[1].Addr())
	waitUntil(t, "node 2 reopens its replicas", 30*time.Second, func() bool { return nodes[1].KV() != nil })
	cl = client()
	put(ctx, t, cl, "z-last", "v3")
	for _, s := range layout.Shards {
		if _, ok := s.ReplicaOn(2); !ok {
			continue
		}
		waitUntil(t, fmt.Sprintf("node 2's replica of %s catches up", s.ID), 60*time.Second, func() bool {
			want := uint64(0)
			for _, n := range nodes {
				if r := n.KV().Replica(s.ID); r != nil && r.IsLeader() {
					want = r.AppliedIndex()
				}
			}
			return want > 0 && nodes[1].KV().Replica(s.ID).AppliedIndex() >= want
		})
	}
	rows, err := cl.Scan(ctx, nil, nil, 0, kvclient.Strong())
	if err != nil || len(rows) != 51 {
		t.Fatalf("scan: %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		if want := "v2"; r.Key[0] != 'z' && string(r.Value) != want {
			t.Fatalf("%s = %q, want %q", r.Key, r.Value, want)
		}
	}
	// Node 2 kept the layout its replicas were opened with.
	if m, err := nodes[1].loadKVLayout(); err != nil || m == nil || len(m.Shards) != 2 {
		t.Fatalf("node 2's copy of the layout: %v %v", m, err)
	}
}
