package base

import (
	"sync"
	"time"
)

// Clock is the injected source of time. Production code uses SystemClock; the
// simulator and tests use a ManualClock so that runs are reproducible.
type Clock interface {
	Now() time.Time
}

// SystemClock reads the wall clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to. It is safe for
// concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock stopped at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now implements Clock.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (which must not be negative) and
// returns the new time.
func (c *ManualClock) Advance(d time.Duration) time.Time {
	if d < 0 {
		panic("base.ManualClock.Advance: negative duration")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t if t is not before the current time.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}
