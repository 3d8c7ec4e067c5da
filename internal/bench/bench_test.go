package bench

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
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

// TestPattern streams patterns of sizes around the block's length through
// their Checker, and checks that a changed byte, a short read and bytes
// past the end are caught, and that Seek rewinds.
func TestPattern(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, size := range []int64{0, 1, 100, patternBytes - 1, patternBytes, patternBytes + 1, 3*patternBytes + 12345} {
		p := NewPattern(rng, size)
		r := p.Reader()
		c := p.Checker()
		if n, err := io.CopyBuffer(c, r, make([]byte, 65536)); err != nil || n != size {
			t.Fatalf("size %d: copied %d: %v", size, n, err)
		}
		if err := c.Complete(); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if size < 2 {
			continue
		}
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		all, _ := io.ReadAll(r)
		if int64(len(all)) != size {
			t.Fatalf("size %d: read %d after seek", size, len(all))
		}
		if size > patternBytes+1000 && !bytes.Equal(all[:1000], all[patternBytes:patternBytes+1000]) {
			t.Fatalf("size %d: the contents do not repeat the block", size)
		}
		bad := append([]byte(nil), all...)
		bad[size-2] ^= 1
		c = p.Checker()
		if _, err := c.Write(bad); err == nil || c.Mismatch() == nil {
			t.Fatalf("size %d: flipped byte not caught", size)
		}
		c = p.Checker()
		_, _ = c.Write(all[:size-1])
		if c.Mismatch() != nil || c.Complete() == nil {
			t.Fatalf("size %d: short read: mismatch %v complete %v", size, c.Mismatch(), c.Complete())
		}
		if _, err := c.Write(all[size-1:]); err != nil || c.Complete() != nil {
			t.Fatalf("size %d: last byte: %v", size, err)
		}
		if _, err := c.Write([]byte{0}); err == nil {
			t.Fatalf("size %d: a byte past the end not caught", size)
		}
	}
}
