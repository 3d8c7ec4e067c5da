package reparo

import "time"

// Throttle is a token bucket for repair traffic: Rate bytes per second with
// a burst of Burst bytes. Time is the caller's.
type Throttle struct {
	Rate  float64 // bytes per second; <= 0: unlimited
	Burst float64 // bytes; default one second of Rate

	tokens float64
	last   time.Time
}

// Reserve takes n bytes and returns how long the caller must wait before
// sending them (0 when the bucket holds enough).
func (t *Throttle) Reserve(n int64, now time.Time) time.Duration {
	if t.Rate <= 0 {
		return 0
	}
	burst := t.Burst
	if burst <= 0 {
		burst = t.Rate
	}
	if t.last.IsZero() {
		t.tokens = burst
		t.last = now
	}
	if now.After(t.last) {
		t.tokens = min(burst, t.tokens+now.Sub(t.last).Seconds()*t.Rate)
		t.last = now
	}
	t.tokens -= float64(n)
	if t.tokens >= 0 {
		return 0
	}
	return time.Duration(-t.tokens / t.Rate * float64(time.Second))
}
