package patch

import (
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/kv/keyspan"
)

// TestRetryBacksOff: a request asked again waits RetryBase, then twice as
// long each time, never more than the cap; it keeps its detection time.
func TestRetryBacksOff(t *testing.T) {
	now := time.Unix(1000, 0)
	q := &Request{Path: "000009.sst", Detected: now.Add(-time.Second)}
	missing := []Piece{{Range: keyspan.Range{Start: []byte("a"), End: []byte("b")}, Wide: keyspan.Range{Start: []byte("a"), End: []byte("b")}}}
	var waits []time.Duration
	for range 8 {
		q = Retry(q, missing, now, time.Second)
		waits = append(waits, q.RetryAfter.Sub(now))
		if !q.Detected.Equal(now.Add(-time.Second)) {
			t.Fatalf("detection time moved to %v", q.Detected)
		}
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000, 1000}
	for i, w := range want {
		if waits[i] != w*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", waits, want)
		}
	}
	if Retry(q, nil, now, time.Second) != nil {
		t.Fatal("a retry with nothing missing")
	}
}
