package kvclient

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
)

// stallServer answers reads with a fixed value, or, when stalled, holds
// every call until its caller gives up (a paused process keeps its
// connections open and answers nothing).
type stallServer struct {
	kvpb.UnimplementedKVServer
	stalled bool
	writes  chan struct{}
}

func (s *stallServer) Get(ctx context.Context, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if s.stalled {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &kvpb.GetResponse{Value: []byte("v"), Found: true}, nil
}

// Write stalls on every server (the test's writes go to a stalled leader).
func (s *stallServer) Write(ctx context.Context, req *kvpb.WriteRequest) (*kvpb.WriteResponse, error) {
	s.writes <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

func serve(t *testing.T, s kvpb.KVServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	kvpb.RegisterKVServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestReadSkipsStalledReplica: a strong read tries node 1 first (no leader
// known yet); node 1 is stalled, so the read must move on to node 2 after
// one AttemptTimeout instead of waiting out the caller's deadline. A write
// to a stalled replica is never re-sent elsewhere.
func TestReadSkipsStalledReplica(t *testing.T) {
	stalled := &stallServer{stalled: true, writes: make(chan struct{}, 10)}
	healthy := &stallServer{writes: make(chan struct{}, 10)}
	addrs := map[base.NodeID]string{1: serve(t, stalled), 2: serve(t, healthy)}
	c, err := New(kvapi.UniformLayout([]base.NodeID{1, 2}), addrs, Options{AttemptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, found, err := c.Get(ctx, []byte("k"), Strong())
	if err != nil || !found || string(v) != "v" {
		t.Fatalf("get past a stalled replica: %q %v %v", v, found, err)
	}
	if ctx.Err() != nil {
		t.Fatal("the read waited out the caller's deadline")
	}

	wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer wcancel()
	if _, err := c.Put(wctx, []byte("k"), []byte("w")); err == nil {
		t.Fatal("a write to a stalled leader succeeded")
	}
	// (Both servers stall writes; the read made node 2 the believed
	// leader, so the write goes there first, and nowhere else.)
	if n := len(stalled.writes) + len(healthy.writes); n != 1 {
		t.Fatalf("the write was sent %d times (%d to node 1, %d to node 2): want once: it may have been proposed",
			n, len(stalled.writes), len(healthy.writes))
	}

	// With the timeout off, the read waits for the stalled replica.
	off, err := New(kvapi.UniformLayout([]base.NodeID{1, 2}), addrs, Options{AttemptTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	octx, ocancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer ocancel()
	if _, _, err := off.Get(octx, []byte("k"), Strong()); err == nil {
		t.Fatal("a read with no attempt timeout got past a stalled first replica")
	}
}
