package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

// TestBenchJSON runs flashmend bench against a dev cluster: GETs and a
// mixed run print one JSON object with the figures the report needs, and
// bad flags are usage errors.
func TestBenchJSON(t *testing.T) {
	o := devOptions{dir: filepath.Join(t.TempDir(), "dev"), nodes: 6, store: "sdf", readMode: "direct", maxObject: 8 * base.MiB, deviceSize: 64 * base.MiB}
	o.scrub.off = true
	ep := startDevForTest(t, o)
	for _, op := range []string{"get", "mixed"} {
		out, errOut, code := runCLI(t, "bench", "--endpoint", ep, "--op", op, "--size", "256KiB", "--concurrency", "2",
			"--duration", "500ms", "--objects", "3", "--format", "json", "--redundancy", "ec")
		if code != 0 {
			t.Fatalf("bench --op %s exit %d: %s%s", op, code, out, errOut)
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench --op %s printed %q: %v", op, out, err)
		}
		for _, k := range []string{"throughput_bytes_per_s", "ops_per_s", "latency_ms_p50", "latency_ms_p99", "latency_ms_max"} {
			if v, ok := r[k].(float64); !ok || v <= 0 {
				t.Fatalf("bench --op %s: %s = %v in %s", op, k, r[k], out)
			}
		}
		if r["errors"].(float64) != 0 || r["op"] != op || r["size_bytes"].(float64) != 256*1024 {
			t.Fatalf("bench --op %s: %s", op, out)
		}
	}
	// The run deleted what it wrote.
	if out, errOut, code := runCLI(t, "ctl", "ls", "--endpoint", ep); code != 0 || strings.Contains(out, "bench/") {
		t.Fatalf("ctl ls after the runs (exit %d): %q %s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"--op", "delete"}, {"--format", "yaml"}, {"--redundancy", "raid"}, {"--concurrency", "0"},
	} {
		if _, _, code := runCLI(t, append([]string{"bench", "--endpoint", ep, "--duration", "10ms"}, args...)...); code == 0 {
			t.Fatalf("bench %v: exit %d, want an error", args, code)
		}
	}
}
