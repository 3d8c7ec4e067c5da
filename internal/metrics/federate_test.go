package metrics

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
)

// fakeNode serves only the Metrics RPC, from its own registry (nil: as a
// node without metrics does).
type fakeNode struct {
	nodepb.UnimplementedNodeServer
	reg *Registry
}

func (f *fakeNode) Metrics(context.Context, *nodepb.MetricsRequest) (*nodepb.MetricsResponse, error) {
	if f.reg == nil {
		return nil, status.Error(codes.Unimplemented, "this node runs without metrics (--metrics off)")
	}
	text, err := f.reg.Text()
	return &nodepb.MetricsResponse{Text: text}, err
}

func serveFake(t *testing.T, reg *Registry) string {
	t.Helper()
	srv := grpc.NewServer()
	nodepb.RegisterNodeServer(srv, &fakeNode{reg: reg})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// nodeRegistry is a registry with a node's request figures.
func nodeRegistry(node string, requests int) *Registry {
	r := New()
	for i := 0; i < requests; i++ {
		r.requestSeconds.WithLabelValues(node, "Node/ReadChunk", "OK").Observe(0.001)
	}
	return r
}

func family(fams []*dto.MetricFamily, name string) *dto.MetricFamily {
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// TestFederation: the local registry's families and every live node's
// flashmend_ families are merged; a dead node is not asked; a node
// without metrics is named in the error and the rest is still returned.
func TestFederation(t *testing.T) {
	local := New()
	local.clientRepairs.WithLabelValues("chunk", "ok").Add(2)
	n1 := serveFake(t, nodeRegistry("1", 3))
	n2 := serveFake(t, nodeRegistry("2", 5))
	n3 := serveFake(t, nil)
	nodes := []*coordpb.NodeInfo{
		{Id: 1, Addr: n1, Live: true},
		{Id: 2, Addr: n2, Live: true},
		{Id: 4, Addr: "127.0.0.1:1", Live: false}, // down: not asked
	}
	fed := NewFederation(local.Gatherer(), func(context.Context) ([]*coordpb.NodeInfo, error) { return nodes, nil }, nil)
	defer fed.Close()
	fams, err := fed.Gather()
	if err != nil {
		t.Fatal(err)
	}
	req := family(fams, "flashmend_request_duration_seconds")
	if req == nil || len(req.Metric) != 2 {
		t.Fatalf("request histograms: %v", req)
	}
	var count uint64
	for _, m := range req.Metric {
		count += m.GetHistogram().GetSampleCount()
	}
	if count != 8 {
		t.Fatalf("requests over both nodes: %d, want 8", count)
	}
	if f := family(fams, "flashmend_client_repairs_total"); f == nil || len(f.Metric) != 1 || f.Metric[0].GetCounter().GetValue() != 2 {
		t.Fatalf("local family: %v", f)
	}
	// Each process's Go runtime figures are its own: only the local ones.
	if f := family(fams, "go_goroutines"); f == nil || len(f.Metric) != 1 {
		t.Fatalf("go_goroutines: %v", f)
	}

	nodes = append(nodes, &coordpb.NodeInfo{Id: 3, Addr: n3, Live: true})
	fams, err = fed.Gather()
	if err == nil || !strings.Contains(err.Error(), "node 3") || !strings.Contains(err.Error(), "without metrics") {
		t.Fatalf("a node without metrics: %v", err)
	}
	if f := family(fams, "flashmend_request_duration_seconds"); f == nil || len(f.Metric) != 2 {
		t.Fatalf("the other nodes' figures are gone with the error: %v", f)
	}
}

// TestFederationTypeClash: a family whose type differs between processes
// is reported, not merged.
func TestFederationTypeClash(t *testing.T) {
	local := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "flashmend_request_bytes_total", Help: "a gauge here"})
	local.MustRegister(g)
	r := New()
	r.requestBytes.WithLabelValues("1", "Node/ReadChunk", "in").Add(10)
	addr := serveFake(t, r)
	fed := NewFederation(local, func(context.Context) ([]*coordpb.NodeInfo, error) {
		return []*coordpb.NodeInfo{{Id: 1, Addr: addr, Live: true}}, nil
	}, nil)
	defer fed.Close()
	_, err := fed.Gather()
	if err == nil || !strings.Contains(err.Error(), "flashmend_request_bytes_total is a COUNTER here and a GAUGE elsewhere") {
		t.Fatalf("type clash: %v", err)
	}
}
