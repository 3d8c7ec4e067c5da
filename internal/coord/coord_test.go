package coord

import (
	"context"
	"github.com/flashmend/flashmend/internal/coord/hashring"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/node"
)

func TestCoordinatorLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := base.NewManualClock(time.Unix(1_700_000_000, 0))
	c, err := Start(ctx, Config{Dir: dir, LeaseTTLSeconds: 2, MaxObjectBytes: base.MiB, UnsafeNoFsync: true,
		SweepInterval: time.Hour, PendingTimeout: time.Minute, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*node.Node
	for i := 0; i < 4; i++ {
		n, err := node.Start(ctx, node.Config{Dir: t.TempDir(), CoordinatorAddr: c.Addr(), HeartbeatInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	conn, _ := grpc.NewClient(c.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	cc := coordpb.NewCoordinatorClient(conn)

	ln, err := cc.ListNodes(ctx, &coordpb.ListNodesRequest{})
	if err != nil || len(ln.Nodes) != 4 {
		t.Fatalf("nodes %v %v", ln, err)
	}
	for i, n := range ln.Nodes {
		if n.Id != uint64(i+1) || !n.Live {
			t.Fatalf("node %v", n)
		}
	}
	// Bad input changes nothing.
	for _, req := range []*coordpb.BeginPutRequest{
		{Key: "", SizeBytes: 1, Redundancy: objectpb.Redundancy_REP},
		{Key: strings.Repeat("k", 1025), SizeBytes: 1, Redundancy: objectpb.Redundancy_REP},
		{Key: "a\x00b", SizeBytes: 1, Redundancy: objectpb.Redundancy_REP},
		{Key: "k", SizeBytes: int64(base.MiB) + 1, Redundancy: objectpb.Redundancy_REP},
		{Key: "k", SizeBytes: -1, Redundancy: objectpb.Redundancy_REP},
		{Key: "k", SizeBytes: 1, Redundancy: 7},
		{Key: "k", SizeBytes: 1},
	} {
		if _, err := cc.BeginPut(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%v: %v", req, err)
		}
	}
	if _, err := cc.BeginPut(ctx, &coordpb.BeginPutRequest{Key: "k", SizeBytes: 1, Redundancy: objectpb.Redundancy_EC}); status.Code(err) != codes.Unavailable {
		t.Fatalf("EC on 4 nodes: %v", err)
	}
	bp, err := cc.BeginPut(ctx, &coordpb.BeginPutRequest{Key: "k", SizeBytes: 5, Redundancy: objectpb.Redundancy_REP})
	if err != nil || len(bp.Placement) != 3 || bp.Object != hashring.KeyHash("k") {
		t.Fatalf("begin %v %v", bp, err)
	}
	var placement []uint64
	for _, p := range bp.Placement {
		placement = append(placement, p.Id)
	}
	if _, err := cc.Lookup(ctx, &coordpb.LookupRequest{Key: "k"}); status.Code(err) != codes.NotFound {
		t.Fatalf("pending write visible: %v", err)
	}
	if _, err := cc.CommitPut(ctx, &coordpb.CommitPutRequest{Key: "k", Version: bp.Version, SizeBytes: 5, Redundancy: objectpb.Redundancy_REP, Placement: placement[:2]}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("commit with other placement: %v", err)
	}
	if _, err := cc.CommitPut(ctx, &coordpb.CommitPutRequest{Key: "k", Version: bp.Version, SizeBytes: 5, Redundancy: objectpb.Redundancy_REP, Placement: placement}); err != nil {
		t.Fatal(err)
	}
	lk, err := cc.Lookup(ctx, &coordpb.LookupRequest{Key: "k"})
	if err != nil || lk.Record.Version != bp.Version || lk.Record.SizeBytes != 5 || lk.Record.KeyVersion != 1 {
		t.Fatalf("lookup %v %v", lk, err)
	}
	if m, _ := c.Mapping().Get(ctx, "k"); m != nil {
		t.Fatalf("default placement in the mapping table: %v", m)
	}
	if _, err := cc.CommitPut(ctx, &coordpb.CommitPutRequest{Key: "k", Version: bp.Version, SizeBytes: 5, Redundancy: objectpb.Redundancy_REP, Placement: placement}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("double commit: %v", err)
	}

	// A chunk of v1 on a node, then v2 replaces v1: v1 becomes garbage and
	// the sweeper deletes it.
	nc := nodeClient(t, bp.Placement[0].Addr)
	id := direct.ChunkID{Object: bp.Object, Version: bp.Version}
	data := []byte("hello")
	if _, err := nc.WriteChunk(ctx, &nodepb.WriteChunkRequest{Chunk: &nodepb.ChunkRef{Object: id.Object, Version: id.Version}, Data: data, Sums: direct.Sums(id, data)}); err != nil {
		t.Fatal(err)
	}
	// Node 1 down: the next write substitutes it and lands in the mapping
	// table.
	down := nodes[placement[0]-1]
	down.Close()
	var bp2 *coordpb.BeginPutResponse
	var p2 []uint64
	for deadline := time.Now().Add(5 * time.Second); ; {
		// The membership view follows the lease within moments.
		bp2, err = cc.BeginPut(ctx, &coordpb.BeginPutRequest{Key: "k", SizeBytes: 0, Redundancy: objectpb.Redundancy_REP})
		if err != nil {
			t.Fatal(err)
		}
		p2 = p2[:0]
		for _, p := range bp2.Placement {
			p2 = append(p2, p.Id)
		}
		if p2[0] != placement[0] || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p2[0] == placement[0] || p2[1] != placement[1] || p2[2] != placement[2] {
		t.Fatalf("substitution: %v then %v", placement, p2)
	}
	if cp, err := cc.CommitPut(ctx, &coordpb.CommitPutRequest{Key: "k", Version: bp2.Version, SizeBytes: 0, Redundancy: objectpb.Redundancy_REP, Placement: p2}); err != nil || cp.Record.KeyVersion != 2 {
		t.Fatalf("overwrite: %v %v (want key version 2)", cp, err)
	}
	if m, err := c.Mapping().Get(ctx, "k"); err != nil || m == nil || m.Placement[0] != p2[0] {
		t.Fatalf("mapping %v %v", m, err)
	}
	// v1 garbage waits for its dead node.
	if err := c.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.cli.Get(ctx, garbagePrefix, clientv3.WithPrefix()); len(g.Kvs) != 1 {
		t.Fatalf("garbage %d", len(g.Kvs))
	}
	// Expired pending writes become garbage.
	bp3, err := cc.BeginPut(ctx, &coordpb.BeginPutRequest{Key: "other", SizeBytes: 0, Redundancy: objectpb.Redundancy_REP})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	if err := c.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.CommitPut(ctx, &coordpb.CommitPutRequest{Key: "other", Version: bp3.Version, Redundancy: objectpb.Redundancy_REP}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("commit after expiry: %v", err)
	}
	ls, err := cc.List(ctx, &coordpb.ListRequest{})
	if err != nil || len(ls.Records) != 1 || ls.Records[0].Key != "k" {
		t.Fatalf("list %v %v", ls, err)
	}
	if del, err := cc.Delete(ctx, &coordpb.DeleteRequest{Key: "k"}); err != nil || del.Record.KeyVersion != 2 || del.Record.Version != bp2.Version {
		t.Fatalf("delete: %v %v", del, err)
	}
	if _, err := cc.Delete(ctx, &coordpb.DeleteRequest{Key: "k"}); status.Code(err) != codes.NotFound {
		t.Fatalf("double delete: %v", err)
	}
	if m, _ := c.Mapping().Get(ctx, "k"); m != nil {
		t.Fatal("mapping survives delete")
	}
	for _, n := range nodes {
		n.Close()
	}
	c.Close()

	// Restart on the same directory: same cluster, index kept.
	c2, err := Start(ctx, Config{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if c2.ClusterID() != c.ClusterID() {
		t.Fatalf("cluster id %s then %s", c.ClusterID(), c2.ClusterID())
	}
}

func nodeClient(t *testing.T, addr string) nodepb.NodeClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return nodepb.NewNodeClient(conn)
}

// TestExternalEtcd runs a coordinator on another coordinator's etcd, as
// with an external etcd cluster: same cluster identity, shared index.
func TestExternalEtcd(t *testing.T) {
	ctx := context.Background()
	a, err := Start(ctx, Config{Dir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Start(ctx, Config{EtcdEndpoints: a.EtcdEndpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.ClusterID() != b.ClusterID() {
		t.Fatalf("cluster ids %s and %s", a.ClusterID(), b.ClusterID())
	}
	resp, err := b.Join(ctx, &coordpb.JoinRequest{Addr: "127.0.0.1:1"})
	if err != nil || resp.NodeId != 1 {
		t.Fatalf("join through b: %v %v", resp, err)
	}
	nodes, err := a.ListNodes(ctx, &coordpb.ListNodesRequest{})
	if err != nil || len(nodes.Nodes) != 1 || nodes.Nodes[0].Live {
		t.Fatalf("a sees %v %v", nodes, err)
	}
	if _, err := Start(ctx, Config{}); !base.IsInvalidArgument(err) {
		t.Fatalf("no dir, no etcd: %v", err)
	}
	if _, err := Start(ctx, Config{Dir: t.TempDir(), ReadMode: "raid"}); !base.IsInvalidArgument(err) {
		t.Fatalf("bad read mode: %v", err)
	}
}
