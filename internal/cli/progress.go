package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
)

// progress writes the progress lines of a long command (experiments,
// scrub, pebble load and check, bench) on stderr: a line per step, and
// while a step runs, a line at most every interval. Whole lines, never
// carriage returns, so that a log of the run reads as well as a terminal;
// --quiet silences them. Results stay on stdout.
type progress struct {
	w        io.Writer // nil: quiet
	clock    base.Clock
	start    time.Time
	interval time.Duration

	mu   sync.Mutex
	last time.Time
}

// progressInterval is the gap between periodic lines.
const progressInterval = 5 * time.Second

// registerQuiet adds --quiet to cmd.
func registerQuiet(cmd *cobra.Command, quiet *bool) {
	cmd.Flags().BoolVar(quiet, "quiet", false, "no progress lines on stderr")
}

func newProgress(w io.Writer, quiet bool, clock base.Clock, interval time.Duration) *progress {
	if quiet {
		w = nil
	}
	now := clock.Now()
	return &progress{w: w, clock: clock, start: now, interval: interval, last: now}
}

// cmdProgress is newProgress on cmd's stderr with the system clock.
func cmdProgress(cmd *cobra.Command, quiet bool) *progress {
	return newProgress(cmd.ErrOrStderr(), quiet, base.SystemClock{}, progressInterval)
}

// Elapsed is the time since the command started, rounded for display.
func (p *progress) Elapsed() time.Duration {
	return p.clock.Now().Sub(p.start).Round(time.Second)
}

// Linef prints a line (a step), with the elapsed time.
func (p *progress) Linef(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = p.clock.Now()
	fmt.Fprintf(p.w, format+" [%s]\n", append(args, p.Elapsed())...)
}

// Tickf prints a line if the interval has passed since the last one.
func (p *progress) Tickf(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	due := p.clock.Now().Sub(p.last) >= p.interval
	p.mu.Unlock()
	if due {
		p.Linef(format, args...)
	}
}

// heartbeat prints what() every interval, on a wall-clock ticker, until
// stop: for a step that reports nothing while it runs.
func (p *progress) heartbeat(what func() string) (stop func()) {
	if p.w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.Linef("%s", what())
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
