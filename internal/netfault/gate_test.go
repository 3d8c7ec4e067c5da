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
	if code, body := post("/heal"); code != 200 || body != "blocked  cuts 0\n" {
		t.Fatalf("heal: %d %q", code, body)
	}
}
