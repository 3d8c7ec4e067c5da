package netfault

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// pair starts node 1's server (gated by g1) on a loopback port and returns
// node 2's client of it (gated by g2).
func pair(t *testing.T, g1, g2 *Gate) (healthpb.HealthClient, *health.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(g1.ServerOptions()...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), append(g2.DialOptions(1),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc), hs
}

func check(ctx context.Context, c healthpb.HealthClient) codes.Code {
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return status.Code(err)
}

func TestGateCutsBothEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g1, g2 := New(1), New(2)
	c, _ := pair(t, g1, g2)
	if code := check(ctx, c); code != codes.OK {
		t.Fatalf("no partition: %v", code)
	}
	// The server's side of the cut: it knows the caller from metadata.
	g1.Block(2)
	if code := check(ctx, c); code != codes.Unavailable {
		t.Fatalf("server cut off from the caller: %v, want Unavailable", code)
	}
	if g1.Cuts() == 0 || g2.Cuts() != 0 {
		t.Fatalf("cuts counted %d, %d: want the server's only", g1.Cuts(), g2.Cuts())
	}
	g1.Heal()
	if code := check(ctx, c); code != codes.OK {
		t.Fatalf("healed: %v", code)
	}
	// The caller's side of the cut.
	g2.Block(1)
	if code := check(ctx, c); code != codes.Unavailable {
		t.Fatalf("caller cut off from the server: %v, want Unavailable", code)
	}
	if g2.Cuts() == 0 || g1.Cuts() != 0 {
		t.Fatalf("cuts counted %d, %d: want the caller's only (the server's were healed)", g1.Cuts(), g2.Cuts())
	}
	g2.Heal()
	if code := check(ctx, c); code != codes.OK {
		t.Fatalf("healed: %v", code)
	}
	// A node never cuts itself off, and a nil gate adds nothing.
	g1.Block(1)
	if len(g1.Blocked()) != 0 {
		t.Fatalf("self blocked: %v", g1.Blocked())
	}
	var none *Gate
	if none.DialOptions(1) != nil || none.ServerOptions() != nil {
		t.Fatal("a nil gate added options")
	}
}

// TestCoordinatorLinkCut: a node that blocks the coordinator refuses the
// calls the coordinator makes (named through Naming) and fails its own
// calls to the coordinator, which keeps no gate; other peers still pass.
func TestCoordinatorLinkCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := New(3)
	start := func(opts ...grpc.ServerOption) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(opts...)
		healthpb.RegisterHealthServer(srv, health.NewServer())
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		return lis.Addr().String()
	}
	dial := func(addr string, opts []grpc.DialOption) healthpb.HealthClient {
		cc, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return healthpb.NewHealthClient(cc)
	}
	nodeAddr := start(node.ServerOptions()...)
	coordAddr := start()
	fromCoord := dial(nodeAddr, Naming(Coordinator))
	toCoord := dial(coordAddr, node.DialOptions(Coordinator))
	fromPeer := dial(nodeAddr, New(4).DialOptions(3))
	for name, c := range map[string]healthpb.HealthClient{"coordinator to node": fromCoord, "node to coordinator": toCoord, "peer to node": fromPeer} {
		if code := check(ctx, c); code != codes.OK {
			t.Fatalf("%s before the cut: %v", name, code)
		}
	}
	node.Set(Coordinator)
	for name, c := range map[string]healthpb.HealthClient{"coordinator to node": fromCoord, "node to coordinator": toCoord} {
		if code := check(ctx, c); code != codes.Unavailable {
			t.Fatalf("%s while cut: %v, want Unavailable", name, code)
		}
	}
	if code := check(ctx, fromPeer); code != codes.OK {
		t.Fatalf("a peer was cut with the coordinator: %v", code)
	}
	cuts := node.Cuts()
	node.Set() // Set keeps counting, Heal starts afresh
	if node.Cuts() != cuts || cuts < 2 {
		t.Fatalf("cuts %d, then %d after Set: want at least 2, kept", cuts, node.Cuts())
	}
	for name, c := range map[string]healthpb.HealthClient{"coordinator to node": fromCoord, "node to coordinator": toCoord} {
		if code := check(ctx, c); code != codes.OK {
			t.Fatalf("%s after Set(): %v", name, code)
		}
	}
}

// TestWaitForReadyWaitsForHeal: a call that waits for ready waits over a
// cut link (counted once) until the link heals, or fails when its context
// ends, instead of failing at once.
func TestWaitForReadyWaitsForHeal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g1, g2 := New(1), New(2)
	c, _ := pair(t, g1, g2)
	g2.Block(1)
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if _, err := c.Check(short, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("waiting call over a cut link, context ended: %v, want DeadlineExceeded", err)
	}
	if code := check(ctx, c); code != codes.Unavailable {
		t.Fatalf("fail-fast call over a cut link: %v, want Unavailable", code)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a waiting call returned over a cut link: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cuts := g2.Cuts()
	g2.Set()
	if err := <-done; err != nil {
		t.Fatalf("waiting call after the heal: %v", err)
	}
	if cuts != 3 {
		t.Fatalf("cuts %d, want 3 (one per call, not per wake-up)", cuts)
	}
}

// TestGateCutsOpenStream: a stream opened before the partition loses the
// messages that arrive while it is cut.
func TestGateCutsOpenStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g1, g2 := New(1), New(2)
	c, hs := pair(t, g1, g2)
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil { // the current status
		t.Fatal(err)
	}
	g2.Block(1)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if _, err := w.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("message on a cut stream: %v, want Unavailable", err)
	}
}

func TestControlEndpoint(t *testing.T) {
	g := New(4)
	srv := httptest.NewServer(g)
	defer srv.Close()
	post := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 256)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	if code, body := post("/block?peers=3,1"); code != 200 || body != "blocked 1,3 cuts 0\n" {
		t.Fatalf("block: %d %q", code, body)
	}
	for _, bad := range []string{"/block?peers=x", "/block?peers=0", "/block", "/nothing"} {
		if code, _ := post(bad); code == 200 {
			t.Fatalf("%s accepted", bad)
		}
	}
	if got := g.Blocked(); len(got) != 2 {
		t.Fatalf("a rejected request changed the gate: %v", got)
	}
	if code, body := post("/set?peers=coordinator,2"); code != 200 || body != "blocked 2,coordinator cuts 0\n" {
		t.Fatalf("set: %d %q", code, body)
	}
	for _, bad := range []string{"/set?peers=2,x", "/set?peers=18446744073709551615"} {
		if code, _ := post(bad); code == 200 {
			t.Fatalf("%s accepted", bad)
		}
	}
	if got := g.Blocked(); len(got) != 2 || got[1] != Coordinator {
		t.Fatalf("a rejected /set changed the gate: %v", got)
	}
	if code, body := post("/set?peers="); code != 200 || body != "blocked  cuts 0\n" {
		t.Fatalf("set to none: %d %q", code, body)
	}
	post("/block?peers=1")
	if code, body := post("/heal"); code != 200 || body != "blocked  cuts 0\n" {
		t.Fatalf("heal: %d %q", code, body)
	}
}
