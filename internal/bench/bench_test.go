package bench

import (
	"errors"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {90, 90 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(lat, tc.p); got != tc.want {
			t.Errorf("p%g = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("one sample: %v", got)
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("no sample: %v", got)
	}
}

func TestSummarize(t *testing.T) {
	samples := []sample{
		{get: true, latency: 4 * time.Millisecond},
		{get: false, latency: 2 * time.Millisecond},
		{get: true, latency: 1 * time.Millisecond, err: errors.New("node down")},
		{get: true, latency: 8 * time.Millisecond},
	}
	r := Summarize(samples, 2*time.Second, 1000)
	if r.Ops != 3 || r.Gets != 2 || r.Puts != 1 || r.Errors != 1 || r.FirstError != "node down" {
		t.Fatalf("counts: %+v", r)
	}
	if r.Bytes != 3000 || r.ThroughputBytesPerS != 1500 || r.OpsPerS != 1.5 {
		t.Fatalf("rates: %+v", r)
	}
	if r.LatencyMsP50 != 4 || r.LatencyMsP99 != 8 || r.LatencyMsMax != 8 {
		t.Fatalf("latencies: %+v", r)
	}
}
