package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/dirlock"
)

// The start-up and shutdown of the long-running commands (dev, coordinator,
// node) share one discipline:
//
//   - The data directory is locked first (internal/dirlock): a second
//     process on the same directory fails at once, naming the first one's
//     pid, instead of blocking on a file lock deeper down.
//   - Every blocking start-up step runs under one context that ends at the
//     first SIGINT or SIGTERM, or after --start-timeout.
//   - After the first signal the signals take their default action again:
//     a second Ctrl-C ends a process whose shutdown is stuck.
//   - A shutdown asked for by a signal that completes cleanly exits 0.

// errInterrupted is the cause of a context ended by SIGINT or SIGTERM.
var errInterrupted = errors.New("interrupted")

// signalContext returns a context that ends, with a cause wrapping
// errInterrupted, at the first SIGINT or SIGTERM. From then on the signals
// are no longer caught, so a second one ends the process at once. stop
// releases the signal handler.
func signalContext() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigc:
			signal.Stop(sigc)
			cancel(fmt.Errorf("%w by %v", errInterrupted, sig))
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigc)
		close(done)
		cancel(context.Canceled)
	}
}

// startFlags are the start-up bounds of the long-running commands.
type startFlags struct {
	timeout time.Duration
}

func (s *startFlags) register(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&s.timeout, "start-timeout", 2*time.Minute,
		"give up when start-up (opening stores, starting etcd, joining) takes longer (0: wait for ever)")
}

// startContext bounds start-up by the --start-timeout (0: no bound).
func (s *startFlags) startContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, s.timeout,
		fmt.Errorf("start-up did not finish within --start-timeout %s", s.timeout))
}

// startError explains why start-up failed when its context ended.
func startError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return fmt.Errorf("start-up stopped: %w", cause)
	}
	return err
}

// shutdownTimeout bounds a clean shutdown; a second signal ends the
// process sooner.
const shutdownTimeout = 30 * time.Second

// closeWithin runs closeFn and gives up waiting after d.
func closeWithin(d time.Duration, closeFn func() error) error {
	done := make(chan error, 1)
	go func() { done <- closeFn() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("shutdown did not finish within %s", d)
	}
}

// lockDir takes the data directory's lock (see internal/dirlock).
func lockDir(dir string) (*dirlock.Lock, error) { return dirlock.Acquire(dir) }

// endpointFile is the file in a data directory holding the cluster
// endpoint while a dev cluster or coordinator serves it.
const endpointFile = "endpoint"

// writeEndpoint records the cluster endpoint in DIR/endpoint.
func writeEndpoint(dir, addr string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, endpointFile+".tmp")
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, endpointFile))
}

// removeEndpoint removes DIR/endpoint at shutdown, so that nobody follows
// it to a cluster that is gone.
func removeEndpoint(dir string) error {
	err := os.Remove(filepath.Join(dir, endpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// readEndpoint returns the endpoint recorded in DIR/endpoint.
func readEndpoint(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, endpointFile))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
