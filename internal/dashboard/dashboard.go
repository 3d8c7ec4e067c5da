package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

//go:embed assets
var assets embed.FS

// Options configures a Dashboard.
type Options struct {
	// Gatherer is the process's metrics registry (metrics.Registry's
	// Gatherer).
	Gatherer prometheus.Gatherer
	// ObjectMix, when set, counts the cluster's objects by redundancy
	// ("REP", "EC").
	ObjectMix func(ctx context.Context) (map[string]int, error)
	// Clock stamps each state (default the system clock).
	Clock base.Clock
}

// Dashboard serves the page ("/" and its assets) and its feed
// ("/api/state").
type Dashboard struct {
	opts  Options
	files http.Handler
}

// New returns a dashboard over opts.Gatherer.
func New(opts Options) (*Dashboard, error) {
	if opts.Gatherer == nil {
		return nil, base.InvalidArgumentf("dashboard: a metrics gatherer is required")
	}
	if opts.Clock == nil {
		opts.Clock = base.SystemClock{}
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	return &Dashboard{opts: opts, files: http.FileServer(http.FS(sub))}, nil
}

// ServeHTTP serves the feed at /api/state and the embedded assets
// elsewhere.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api/state" {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		st := d.State(ctx)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(st)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	d.files.ServeHTTP(w, r)
}

// State is the feed's document.
type State struct {
	TimeMs int64       `json:"time_ms"`
	Nodes  []NodeState `json:"nodes"`
	Totals Totals      `json:"totals"`
	// RepairsByKind sums flashmend_repairs_total over nodes.
	RepairsByKind map[string]float64 `json:"repairs_by_kind"`
	// RepairLatency merges the chunk (client) and KV repair latency
	// histograms.
	RepairLatency Histogram `json:"repair_latency"`
	// Objects counts objects by redundancy; nil when unknown.
	Objects map[string]int `json:"objects"`
	Errors  []string       `json:"errors,omitempty"`
}

// NodeState is one node's part of the cluster map.
type NodeState struct {
	Node          string    `json:"node"`
	DieErases     []float64 `json:"die_erases"`
	FailedDies    float64   `json:"failed_dies"`
	Degraded      bool      `json:"degraded"`
	CapacityBytes float64   `json:"capacity_bytes"`
	UsedBytes     float64   `json:"used_bytes"`
	ReadErrors    float64   `json:"read_errors"`
	Repairs       float64   `json:"repairs"`
	RaftLeaders   float64   `json:"raft_leaders"`
}

// Totals are cluster-wide counters.
type Totals struct {
	ReadErrors    float64 `json:"read_errors"`
	Repairs       float64 `json:"repairs"`
	RepairBytes   float64 `json:"repair_bytes"`
	DieFailures   float64 `json:"die_failures"`
	Requests      float64 `json:"requests"`
	InjectedFlips float64 `json:"injected_flips"`
}

// Histogram is a cumulative histogram.
type Histogram struct {
	Buckets []Bucket `json:"buckets"`
	Count   uint64   `json:"count"`
	Sum     float64  `json:"sum_seconds"`
}

// Bucket counts observations at most LE seconds (cumulative).
type Bucket struct {
	LE    float64 `json:"le"`
	Count uint64  `json:"count"`
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}

// State computes the feed from the registry.
func (d *Dashboard) State(ctx context.Context) *State {
	st := &State{TimeMs: d.opts.Clock.Now().UnixMilli(), RepairsByKind: map[string]float64{}}
	fams, err := d.opts.Gatherer.Gather()
	if err != nil {
		st.Errors = append(st.Errors, "metrics: "+err.Error())
	}
	nodes := map[string]*NodeState{}
	nodeOf := func(m *dto.Metric) *NodeState {
		id := label(m, "node")
		n := nodes[id]
		if n == nil {
			n = &NodeState{Node: id}
			nodes[id] = n
		}
		return n
	}
	latency := map[float64]uint64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			v := value(m)
			switch f.GetName() {
			case "flashmend_die_erases_total":
				n := nodeOf(m)
				die, err := strconv.Atoi(label(m, "die"))
				if err != nil || die < 0 || die > 1<<12 {
					continue
				}
				for len(n.DieErases) <= die {
					n.DieErases = append(n.DieErases, 0)
				}
				n.DieErases[die] = v
			case "flashmend_device_failed_dies":
				nodeOf(m).FailedDies = v
			case "flashmend_device_degraded":
				nodeOf(m).Degraded = v != 0
			case "flashmend_device_capacity_bytes":
				nodeOf(m).CapacityBytes = v
			case "flashmend_device_used_bytes":
				nodeOf(m).UsedBytes = v
			case "flashmend_read_errors_total":
				nodeOf(m).ReadErrors += v
				st.Totals.ReadErrors += v
			case "flashmend_repairs_total":
				nodeOf(m).Repairs += v
				st.Totals.Repairs += v
				st.RepairsByKind[label(m, "kind")] += v
			case "flashmend_repair_bytes_total", "flashmend_client_repair_bytes_total":
				// KV repairs' bytes (node side) and chunk repairs' (the
				// process's clients): disjoint.
				st.Totals.RepairBytes += v
			case "flashmend_die_failures_total":
				st.Totals.DieFailures += v
			case "flashmend_injected_bit_flips_total":
				st.Totals.InjectedFlips += v
			case "flashmend_kv_raft_leader":
				nodeOf(m).RaftLeaders += v
			case "flashmend_request_duration_seconds":
				st.Totals.Requests += float64(m.GetHistogram().GetSampleCount())
			case "flashmend_repair_duration_seconds", "flashmend_client_repair_duration_seconds":
				h := m.GetHistogram()
				st.RepairLatency.Count += h.GetSampleCount()
				st.RepairLatency.Sum += h.GetSampleSum()
				for _, b := range h.GetBucket() {
					latency[b.GetUpperBound()] += b.GetCumulativeCount()
				}
			}
		}
	}
	for le, c := range latency {
		if !math.IsInf(le, 1) {
			st.RepairLatency.Buckets = append(st.RepairLatency.Buckets, Bucket{LE: le, Count: c})
		}
	}
	sort.Slice(st.RepairLatency.Buckets, func(i, j int) bool { return st.RepairLatency.Buckets[i].LE < st.RepairLatency.Buckets[j].LE })
	for _, n := range nodes {
		st.Nodes = append(st.Nodes, *n)
	}
	sort.Slice(st.Nodes, func(i, j int) bool {
		a, _ := strconv.Atoi(st.Nodes[i].Node)
		b, _ := strconv.Atoi(st.Nodes[j].Node)
		return a < b
	})
	if d.opts.ObjectMix != nil {
		mix, err := d.opts.ObjectMix(ctx)
		if err != nil {
			st.Errors = append(st.Errors, "objects: "+err.Error())
		} else {
			st.Objects = mix
		}
	}
	return st
}

// ObjectLister is the part of the cluster client ObjectMixOf needs.
type ObjectLister interface {
	List(ctx context.Context, prefix string) ([]*objectpb.ObjectRecord, error)
}

// ObjectMixOf counts a cluster's objects by redundancy with c's listing
// (the whole key space: meant for dev-sized clusters).
func ObjectMixOf(c ObjectLister) func(ctx context.Context) (map[string]int, error) {
	return func(ctx context.Context) (map[string]int, error) {
		recs, err := c.List(ctx, "")
		if err != nil {
			return nil, err
		}
		mix := map[string]int{"REP": 0, "EC": 0}
		for _, r := range recs {
			mix[r.Redundancy.String()]++
		}
		return mix, nil
	}
}
