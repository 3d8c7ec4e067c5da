package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/tlsconf"
)

// Text returns the registry's metrics in Prometheus's text exposition
// format (what /metrics serves; node.Config.Metrics).
func (r *Registry) Text() ([]byte, error) {
	fams, err := r.reg.Gather()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// remotePrefix selects what a Federation takes from the nodes: flashmend's
// own metrics, not each process's Go runtime figures.
const remotePrefix = "flashmend_"

// federationTimeout bounds one node's answer.
const federationTimeout = 5 * time.Second

// Federation gathers this process's metrics and the flashmend_ metrics of
// every live node of the cluster, asked over gRPC (the node's Metrics RPC)
// at each Gather: what the coordinator's dashboard shows in a multi-host
// deployment, where each node's figures are in its own process. Families
// are concatenated by name (each node's series carry its node label); the
// result feeds the dashboard and is not served as /metrics (a Prometheus
// server scrapes every process itself).
type Federation struct {
	local prometheus.Gatherer
	nodes func(ctx context.Context) ([]*coordpb.NodeInfo, error)
	tls   *tlsconf.Config

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

var _ prometheus.Gatherer = (*Federation)(nil)

// NewFederation returns a Federation over local and the nodes that nodes
// lists (the coordinator's membership), dialled with tc (nil: plaintext).
func NewFederation(local prometheus.Gatherer, nodes func(ctx context.Context) ([]*coordpb.NodeInfo, error), tc *tlsconf.Config) *Federation {
	return &Federation{local: local, nodes: nodes, tls: tc, conns: map[string]*grpc.ClientConn{}}
}

// Gather returns the merged families. A node that does not answer (or
// runs without metrics) is left out and named in the error; what was
// gathered is returned with it.
func (f *Federation) Gather() ([]*dto.MetricFamily, error) {
	var errs []error
	byName := map[string]*dto.MetricFamily{}
	add := func(fam *dto.MetricFamily, source string) {
		cur, ok := byName[fam.GetName()]
		switch {
		case !ok:
			byName[fam.GetName()] = fam
		case cur.GetType() != fam.GetType():
			errs = append(errs, fmt.Errorf("%s: %s is a %v here and a %v elsewhere", source, fam.GetName(), fam.GetType(), cur.GetType()))
		default:
			cur.Metric = append(cur.Metric, fam.Metric...)
		}
	}
	local, err := f.local.Gather()
	if err != nil {
		errs = append(errs, err)
	}
	for _, fam := range local {
		add(fam, "this process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), federationTimeout)
	defer cancel()
	nodes, err := f.nodes(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("nodes: %w", err))
	}
	type answer struct {
		id   uint64
		fams map[string]*dto.MetricFamily
		err  error
	}
	answers := make(chan answer, len(nodes))
	var live int
	for _, n := range nodes {
		if !n.Live || n.Addr == "" {
			continue
		}
		live++
		go func(n *coordpb.NodeInfo) {
			fams, err := f.fetch(ctx, n.Addr)
			answers <- answer{n.Id, fams, err}
		}(n)
	}
	got := make([]answer, 0, live)
	for i := 0; i < live; i++ {
		got = append(got, <-answers)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].id < got[j].id })
	for _, a := range got {
		if a.err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", a.id, a.err))
			continue
		}
		names := make([]string, 0, len(a.fams))
		for name := range a.fams {
			if strings.HasPrefix(name, remotePrefix) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			add(a.fams[name], fmt.Sprintf("node %d", a.id))
		}
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, fam := range byName {
		out = append(out, fam)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, errors.Join(errs...)
}

// fetch asks the node at addr for its metrics and parses them.
func (f *Federation) fetch(ctx context.Context, addr string) (map[string]*dto.MetricFamily, error) {
	conn, err := f.conn(addr)
	if err != nil {
		return nil, err
	}
	resp, err := nodepb.NewNodeClient(conn).Metrics(ctx, &nodepb.MetricsRequest{})
	if err != nil {
		if reason, ok := tlsconf.Explain(f.tls, err.Error()); ok {
			return nil, errors.New(reason)
		}
		return nil, errors.New(status.Convert(err).Message())
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(resp.Text))
	if err != nil {
		return nil, fmt.Errorf("its metrics do not parse: %w", err)
	}
	return fams, nil
}

func (f *Federation) conn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, f.tls.DialOption())
	if err != nil {
		return nil, err
	}
	f.conns[addr] = c
	return c, nil
}

// Close closes the connections to the nodes.
func (f *Federation) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for addr, c := range f.conns {
		errs = append(errs, c.Close())
		delete(f.conns, addr)
	}
	return errors.Join(errs...)
}
