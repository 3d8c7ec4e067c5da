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

// Waker is a Clock that also wakes goroutines on its own time line: timers
// and tickers that fire when that clock reaches them. SystemClock's are the
// runtime's; ManualClock's fire when Advance or Set moves it past them.
// Use After and NewTicker, which take any Clock.
type Waker interface {
	Clock
	// After returns a channel that receives the clock's time once it has
	// moved d past now.
	After(d time.Duration) <-chan time.Time
	// NewTicker returns a channel that receives the clock's time every d
	// (d > 0; a tick the receiver is not ready for is dropped, as with
	// time.Ticker) and the function that stops it.
	NewTicker(d time.Duration) (<-chan time.Time, func())
}

// After is c's After if c is a Waker, else the runtime's time.After (a
// clock that only reads time, such as a test's fixed offset, times out on
// the wall clock).
func After(c Clock, d time.Duration) <-chan time.Time {
	if w, ok := c.(Waker); ok {
		return w.After(d)
	}
	return time.After(d)
}

// NewTicker is c's NewTicker if c is a Waker, else a time.Ticker.
func NewTicker(c Clock, d time.Duration) (<-chan time.Time, func()) {
	if w, ok := c.(Waker); ok {
		return w.NewTicker(d)
	}
	return SystemClock{}.NewTicker(d)
}

// SystemClock reads the wall clock.
type SystemClock struct{}

var _ Waker = SystemClock{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// After implements Waker.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTicker implements Waker.
func (SystemClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// ManualClock is a Clock that moves only when told to. Its timers and
// tickers (Waker) fire when Advance or Set moves it to or past them. It is
// safe for concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*manualWaiter
}

var _ Waker = (*ManualClock)(nil)

// manualWaiter is a timer (period 0) or ticker of a ManualClock.
type manualWaiter struct {
	at     time.Time
	period time.Duration
	ch     chan time.Time // buffered 1: a send never blocks the clock
}

// NewManualClock returns a clock stopped at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now implements Clock.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (which must not be negative), fires
// the timers and tickers it reaches, and returns the new time.
func (c *ManualClock) Advance(d time.Duration) time.Time {
	if d < 0 {
		panic("base.ManualClock.Advance: negative duration")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
	return c.now
}

// Set moves the clock to t if t is not before the current time, and fires
// the timers and tickers it reaches.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	c.fireLocked()
}

// After implements Waker: the channel receives once the clock reaches
// now+d (at once if d <= 0).
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &manualWaiter{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.waiters = append(c.waiters, w)
	c.fireLocked()
	return w.ch
}

// NewTicker implements Waker: the channel receives each time the clock
// passes a multiple of d after now; ticks the clock jumps over at once
// are delivered as one.
func (c *ManualClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		panic("base.ManualClock.NewTicker: non-positive interval")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &manualWaiter{at: c.now.Add(d), period: d, ch: make(chan time.Time, 1)}
	c.waiters = append(c.waiters, w)
	return w.ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, o := range c.waiters {
			if o == w {
				c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
				return
			}
		}
	}
}

// fireLocked delivers every timer and ticker the clock has reached; fired
// timers are dropped, tickers move to their next tick past now.
func (c *ManualClock) fireLocked() {
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		select {
		case w.ch <- c.now:
		default: // a tick the receiver has not taken yet: dropped
		}
		if w.period > 0 {
			for !w.at.After(c.now) {
				w.at = w.at.Add(w.period)
			}
			kept = append(kept, w)
		}
	}
	for i := len(kept); i < len(c.waiters); i++ {
		c.waiters[i] = nil
	}
	c.waiters = kept
}
