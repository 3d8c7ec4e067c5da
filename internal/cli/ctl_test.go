package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client/devcluster"
)

// TestDevAndCtl runs `flashmend dev` and drives it with `flashmend ctl`
// end to end: put, get, stat, ls, corrupt and repair, nodes, repairs, rm,
// bad input; then restarts the cluster on the same directory.
func TestDevAndCtl(t *testing.T) {
	dir := t.TempDir()
	start := func() (context.CancelFunc, chan error, string) {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan *devcluster.Cluster, 1)
		done := make(chan error, 1)
		var out bytes.Buffer
		go func() {
			o := devOptions{dir: dir, nodes: 6, store: "sdf", readMode: "direct", maxObject: base.MiB, deviceSize: 64 * base.MiB}
			o.scrub.off = true
			done <- runDev(ctx, o, &out, io.Discard, func(c *devcluster.Cluster) { ready <- c })
		}()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("dev: %v", err)
		}
		ep, err := os.ReadFile(filepath.Join(dir, "endpoint"))
		if err != nil {
			t.Fatal(err)
		}
		return cancel, done, strings.TrimSpace(string(ep))
	}
	cancel, done, ep := start()
	ctl := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(append([]string{"ctl", "--endpoint", ep}, args...), &out, &errOut)
		if code != wantCode {
			t.Fatalf("ctl %v: exit %d (want %d): %s %s", args, code, wantCode, out.String(), errOut.String())
		}
		return out.String()
	}
	data := bytes.Repeat([]byte("flashmend "), 30000) // 300000 bytes
	file := filepath.Join(t.TempDir(), "obj")
	os.WriteFile(file, data, 0o644)
	ctl(0, "put", "docs/a", file)
	ctl(0, "put", "docs/b", file, "--redundancy", "ec")
	if out := ctl(0, "ls", "docs/"); !strings.Contains(out, "docs/a") || !strings.Contains(out, "docs/b") {
		t.Fatalf("ls: %s", out)
	}
	if out := ctl(0, "stat", "docs/b"); !strings.Contains(out, "300000B ec") {
		t.Fatalf("stat: %s", out)
	}
	ctl(0, "corrupt", "docs/a", "--replica", "0", "--offset", "100", "--bits", "5")
	ctl(0, "corrupt", "docs/b", "--replica", "1", "--offset", "7", "--bits", "2")
	for _, key := range []string{"docs/a", "docs/b"} {
		if out := ctl(0, "get", key); out != string(data) {
			t.Fatalf("get %s: %d bytes", key, len(out))
		}
	}
	outFile := filepath.Join(t.TempDir(), "out")
	ctl(0, "get", "docs/a", outFile)
	if got, _ := os.ReadFile(outFile); !bytes.Equal(got, data) {
		t.Fatal("get to file")
	}
	// Damage a replica reads do not start at; the scrub finds and repairs it.
	ctl(0, "corrupt", "docs/a", "--replica", "2", "--offset", "70000")
	if out := ctl(0, "scrub", "docs/"); !strings.Contains(out, "1 chunks repaired") {
		t.Fatalf("scrub: %s", out)
	}
	if out := ctl(0, "scrub"); !strings.Contains(out, "0 chunks repaired (0 of them missing), 0 repairs failed, 0 objects failed") {
		t.Fatalf("second scrub: %s", out)
	}
	if out := ctl(0, "repairs"); !strings.Contains(out, "PERSISTENT") || !strings.Contains(out, "REPAIR FAILED") {
		t.Fatalf("repairs: %s", out)
	}
	if out := ctl(0, "nodes"); strings.Count(out, " up ") != 6 {
		t.Fatalf("nodes: %s", out)
	}
	ctl(2, "put", "", file)
	ctl(2, "put", "x", file, "--redundancy", "raid")
	ctl(2, "inject", "uber", "--node", "42", "1e-7")
	ctl(2, "inject", "uber", "1e-7")
	ctl(2, "corrupt", "docs/a", "--replica", "5", "--offset", "0")
	ctl(2, "fail-die", "--node", "1", "--die", "99")
	ctl(0, "fail-die", "--node", "1", "--die", "0")
	ctl(1, "get", "nothere")
	ctl(0, "inject", "uber", "--node", "1", "0")
	ctl(0, "rm", "docs/a")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Start again on the same directory: the data is kept.
	cancel, done, ep = start()
	defer func() {
		cancel()
		<-done
	}()
	if out := ctl(0, "get", "docs/b"); out != string(data) {
		t.Fatalf("after restart: %d bytes", len(out))
	}
	if out := ctl(0, "ls"); strings.Contains(out, "docs/a") {
		t.Fatalf("deleted key back: %s", out)
	}
}
