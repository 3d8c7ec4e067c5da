package cli

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// syncBuffer is a strings.Builder safe for a heartbeat goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProgress: a step is always a line; a tick only once the interval has
// passed since the last line; --quiet prints nothing.
func TestProgress(t *testing.T) {
	clock := base.NewManualClock(time.Unix(1000, 0))
	var out syncBuffer
	p := newProgress(&out, false, clock, 5*time.Second)
	p.Linef("scrub: %d objects to verify", 10)
	clock.Advance(2 * time.Second)
	p.Tickf("scrub: %d of %d", 1, 10)
	clock.Advance(3 * time.Second)
	p.Tickf("scrub: %d of %d", 2, 10)
	clock.Advance(4 * time.Second)
	p.Tickf("scrub: %d of %d", 3, 10)
	p.Linef("scrub: done")
	want := "scrub: 10 objects to verify [0s]\nscrub: 2 of 10 [5s]\nscrub: done [9s]\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}

	var quiet syncBuffer
	q := newProgress(&quiet, true, clock, 5*time.Second)
	q.Linef("x")
	clock.Advance(time.Minute)
	q.Tickf("y")
	q.heartbeat(func() string { return "z" })()
	if quiet.String() != "" {
		t.Fatalf("quiet printed %q", quiet.String())
	}
}

// TestProgressHeartbeat prints while a step runs and stops when told.
func TestProgressHeartbeat(t *testing.T) {
	var out syncBuffer
	p := newProgress(&out, false, base.SystemClock{}, time.Millisecond)
	stop := p.heartbeat(func() string { return "experiment 1/1 x: running" })
	waitFor(t, "a heartbeat line", func() bool { return strings.Contains(out.String(), "experiment 1/1 x: running [") })
	stop()
	n := strings.Count(out.String(), "\n")
	time.Sleep(20 * time.Millisecond) // nothing may follow a stopped heartbeat
	if got := strings.Count(out.String(), "\n"); got != n {
		t.Fatalf("%d lines after stop, then %d", n, got)
	}
}

// TestExperimentsProgress: experiments run says on stderr which
// experiment runs; --quiet says nothing.
func TestExperimentsProgress(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := runCLI(t, "experiments", "run", "model-direct", "--quick", "--out", dir)
	if code != 0 || !strings.Contains(errOut, "experiment 1/1 model-direct: running [") || !strings.Contains(out, "experiment model-direct: wrote") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	_, errOut, code = runCLI(t, "experiments", "run", "model-direct", "--quick", "--out", dir, "--quiet")
	if code != 0 || errOut != "" {
		t.Fatalf("--quiet: exit %d, stderr %q", code, errOut)
	}
}
