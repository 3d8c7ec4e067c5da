package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/client/devcluster"
)

// startDevForTest runs `flashmend dev` with o (in o.dir) until the test
// ends, and returns the cluster endpoint once it serves.
func startDevForTest(t *testing.T, o devOptions) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *devcluster.Cluster, 1)
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, o, io.Discard, io.Discard, func(c *devcluster.Cluster) { ready <- c }) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("dev: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	ep, err := os.ReadFile(filepath.Join(o.dir, "endpoint"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ep))
}
