package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/node"
)

// Registry holds one process's metrics.
type Registry struct {
	reg *prometheus.Registry

	repairSeconds       *prometheus.HistogramVec // node, kind (KV repairs)
	clientRepairs       *prometheus.CounterVec   // kind, result
	clientRepairBytes   *prometheus.CounterVec   // kind
	clientRepairSeconds *prometheus.HistogramVec // kind
	requestSeconds      *prometheus.HistogramVec // node, op, code
	requestBytes        *prometheus.CounterVec   // node, op, direction
}

// Repair latencies run from a millisecond (a chunk rewritten at once) to
// tens of seconds (a KV rebuild, a repair queued behind the scrubber's
// budget): 1 ms doubling to 65 s.
var repairBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

// Request latencies: 100 µs doubling to 13 s.
var requestBuckets = prometheus.ExponentialBuckets(0.0001, 2, 18)

// New returns a registry with the Go runtime and process collectors and
// flashmend's event metrics (collectors of running parts are added with
// AddNodes and AddScrubber).
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.repairSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flashmend_repair_duration_seconds",
		Help:    "KV replica repairs (kind kv_patch or kv_rebuild): time from the corruption's detection to the repaired state installed.",
		Buckets: repairBuckets,
	}, []string{"node", "kind"})
	r.clientRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashmend_client_repairs_total",
		Help: "Repair writes this process's clients attempted, by how the good data was found (chunk, vote, ec_row) and result (ok, failed).",
	}, []string{"kind", "result"})
	r.clientRepairBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashmend_client_repair_bytes_total",
		Help: "Bytes this process's clients wrote to repair chunks, by kind.",
	}, []string{"kind"})
	r.clientRepairSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flashmend_client_repair_duration_seconds",
		Help:    "Chunk repairs this process's clients wrote: time from the read that found the damage to the node's acknowledgement.",
		Buckets: repairBuckets,
	}, []string{"kind"})
	r.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flashmend_request_duration_seconds",
		Help:    "gRPC requests a node served, by operation (service/method) and status code; the count is the request throughput.",
		Buckets: requestBuckets,
	}, []string{"node", "op", "code"})
	r.requestBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashmend_request_bytes_total",
		Help: "Encoded message bytes of the requests a node served, by operation and direction (in: received, out: sent).",
	}, []string{"node", "op", "direction"})
	r.reg.MustRegister(r.repairSeconds, r.clientRepairs, r.clientRepairBytes, r.clientRepairSeconds, r.requestSeconds, r.requestBytes)
	return r
}

// Gatherer is the registry's gatherer (tests read it without HTTP).
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry in the Prometheus exposition format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorLog: nil, Registry: r.reg})
}

// AddNodes exports the nodes nodes returns at each scrape (a cluster's
// nodes come and go). A registry exports one set of nodes: a second call
// fails.
func (r *Registry) AddNodes(nodes func() []*node.Node) error {
	return r.reg.Register(newNodeCollector(nodes))
}

// AddScrubber exports the scrubber scrubber returns at each scrape (nil:
// none running). A registry exports one scrubber: a second call fails.
func (r *Registry) AddScrubber(scrubber func() *client.Scrubber) error {
	return r.reg.Register(newScrubCollector(scrubber))
}

// ClientRepair records one repair write of a client
// (client.Options.OnRepair).
func (r *Registry) ClientRepair(ev client.RepairEvent) {
	kind := ev.Kind
	if kind == "" {
		kind = "unknown"
	}
	if ev.Err != nil {
		r.clientRepairs.WithLabelValues(kind, "failed").Inc()
		return
	}
	r.clientRepairs.WithLabelValues(kind, "ok").Inc()
	r.clientRepairBytes.WithLabelValues(kind).Add(float64(ev.Bytes))
	if ev.Latency > 0 {
		r.clientRepairSeconds.WithLabelValues(kind).Observe(ev.Latency.Seconds())
	}
}

// KVRepair records one completed KV replica repair (kv.Options.OnRepair).
// Its count and bytes are the replica's own counters (ReplicaStats), read
// by the node collector; only the latency is kept here.
func (r *Registry) KVRepair(ev kv.RepairEvent) {
	kind := kindKVPatch
	if ev.Rebuild {
		kind = kindKVRebuild
	}
	if l := ev.Latency(); l > 0 {
		r.repairSeconds.WithLabelValues(nodeLabel(ev.Node), kind).Observe(l.Seconds())
	}
}

// ClientOptions sets opts.OnRepair to record into r (keeping one already
// set) and returns opts.
func (r *Registry) ClientOptions(opts client.Options) client.Options {
	prev := opts.OnRepair
	opts.OnRepair = func(ev client.RepairEvent) {
		r.ClientRepair(ev)
		if prev != nil {
			prev(ev)
		}
	}
	return opts
}

// KVOptions sets opts.OnRepair to record into r (keeping one already set)
// and returns opts.
func (r *Registry) KVOptions(opts kv.Options) kv.Options {
	prev := opts.OnRepair
	opts.OnRepair = func(ev kv.RepairEvent) {
		r.KVRepair(ev)
		if prev != nil {
			prev(ev)
		}
	}
	return opts
}

// ServerOptions returns the gRPC server options that measure a node's
// requests (node.Config.ServerOptions).
func (r *Registry) ServerOptions(id base.NodeID) []grpc.ServerOption {
	i := &interceptor{r: r, node: nodeLabel(id)}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(i.unary), grpc.ChainStreamInterceptor(i.stream)}
}

// Server is a running /metrics endpoint.
type Server struct {
	lis  net.Listener
	srv  *http.Server
	done chan struct{}
	err  error
}

// Serve serves the registry at http://addr/metrics (addr "127.0.0.1:0"
// picks a port) until Close.
func (r *Registry) Serve(addr string) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, base.InvalidArgumentf("metrics: listen on %q: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", r.Handler())
	s := &Server{lis: lis, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s, nil
}

// URL is the endpoint's address: http://HOST:PORT/metrics.
func (s *Server) URL() string { return "http://" + s.lis.Addr().String() + "/metrics" }

// Close stops serving.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return errors.Join(err, s.err)
}

func nodeLabel(id base.NodeID) string { return strconv.FormatUint(uint64(id), 10) }

// Repair kinds of flashmend_repairs_total (see doc.go).
const (
	kindChunk        = "chunk"
	kindChunkMissing = "chunk_missing"
	kindMetadata     = "metadata"
	kindDie          = "die"
	kindKVPatch      = "kv_patch"
	kindKVBlockMerge = "kv_block_merge"
	kindKVRebuild    = "kv_rebuild"
)
