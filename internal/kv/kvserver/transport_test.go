package kvserver

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// TestDrainLetsGracefulStopFinish: a peer's raft stream never ends on its
// own, and a gRPC server's graceful stop waits for every open stream;
// Service.Drain ends them (the node calls it first), and a stream opened
// after it ends at once.
func TestDrainLetsGracefulStopFinish(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	svc := &Service{}
	svc.RegisterServices(srv)
	go func() { _ = srv.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := kvpb.NewReplicationClient(cc).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A batch for a shard no node holds is dropped; the stream stays up.
	if err := st.Send(&kvpb.RaftBatch{FromNode: 2, Messages: []*kvpb.RaftMessage{{Shard: 9, Message: []byte{1}}}}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		svc.Drain()
		srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second): // never, unless Drain is broken
		srv.Stop()
		t.Fatal("graceful stop still waiting for the raft stream after Drain")
	}
	if _, err := st.CloseAndRecv(); err == nil {
		t.Fatal("the drained stream ended without an error")
	}
}
