package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashmend/flashmend/internal/base"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

var _ base.Clock = fixedClock{}

// TestState: the feed is the registry's counters, summed and arranged as
// the page shows them (checked against the figures put in).
func TestState(t *testing.T) {
	reg := prometheus.NewRegistry()
	repairs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flashmend_repairs_total"}, []string{"node", "kind"})
	erases := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flashmend_die_erases_total"}, []string{"node", "die"})
	readErrors := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flashmend_read_errors_total"}, []string{"node", "class"})
	failed := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flashmend_device_failed_dies"}, []string{"node"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flashmend_client_repair_duration_seconds", Buckets: []float64{0.001, 0.01}}, []string{"kind"})
	kvLatency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flashmend_repair_duration_seconds", Buckets: []float64{0.001, 0.01}}, []string{"node", "kind"})
	reg.MustRegister(repairs, erases, readErrors, failed, latency, kvLatency)
	repairs.WithLabelValues("1", "chunk").Add(3)
	repairs.WithLabelValues("2", "chunk").Add(2)
	repairs.WithLabelValues("2", "die").Add(1)
	erases.WithLabelValues("2", "0").Add(7)
	erases.WithLabelValues("2", "3").Add(9)
	erases.WithLabelValues("10", "0").Add(1)
	readErrors.WithLabelValues("1", "transient").Add(4)
	readErrors.WithLabelValues("1", "persistent").Add(1)
	failed.WithLabelValues("2").Set(1)
	latency.WithLabelValues("chunk").Observe(0.0005)
	latency.WithLabelValues("vote").Observe(0.005)
	kvLatency.WithLabelValues("1", "kv_patch").Observe(0.002)
	d, err := New(Options{Gatherer: reg, Clock: fixedClock{time.UnixMilli(1234)},
		ObjectMix: func(context.Context) (map[string]int, error) { return map[string]int{"REP": 5, "EC": 2}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	st := d.State(context.Background())
	if st.TimeMs != 1234 || st.Totals.Repairs != 6 || st.Totals.ReadErrors != 5 || st.Objects["REP"] != 5 || st.Objects["EC"] != 2 {
		t.Fatalf("totals %+v, objects %v", st.Totals, st.Objects)
	}
	if !reflect.DeepEqual(st.RepairsByKind, map[string]float64{"chunk": 5, "die": 1}) {
		t.Fatalf("repairs by kind %v", st.RepairsByKind)
	}
	var ids []string
	for _, n := range st.Nodes {
		ids = append(ids, n.Node)
	}
	if strings.Join(ids, ",") != "1,2,10" { // numeric order
		t.Fatalf("nodes %v", ids)
	}
	if n := st.Nodes[1]; !reflect.DeepEqual(n.DieErases, []float64{7, 0, 0, 9}) || n.FailedDies != 1 || n.Repairs != 3 {
		t.Fatalf("node 2: %+v", n)
	}
	want := Histogram{Buckets: []Bucket{{LE: 0.001, Count: 1}, {LE: 0.01, Count: 3}}, Count: 3, Sum: 0.0075}
	if h := st.RepairLatency; len(h.Buckets) != 2 || h.Buckets[0] != want.Buckets[0] || h.Buckets[1] != want.Buckets[1] || h.Count != 3 || h.Sum < 0.00749 || h.Sum > 0.00751 {
		t.Fatalf("repair latency %+v, want %+v", h, want)
	}

	// Served as JSON; the page and its assets are embedded.
	srv := httptest.NewServer(d)
	defer srv.Close()
	var got State
	resp, err := srv.Client().Get(srv.URL + "/api/state")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || got.Totals.Repairs != 6 {
		t.Fatalf("/api/state: %+v %v", got.Totals, err)
	}
	for _, path := range []string{"/", "/app.js", "/style.css"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", path, resp.Status, err)
		}
		resp.Body.Close()
	}

	// A failing object count is reported, not shown as zeros.
	d, _ = New(Options{Gatherer: reg, ObjectMix: func(context.Context) (map[string]int, error) { return nil, errors.New("coordinator down") }})
	if st := d.State(context.Background()); st.Objects != nil || len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "coordinator down") {
		t.Fatalf("objects %v, errors %v", st.Objects, st.Errors)
	}
}
