package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimCommand(t *testing.T) {
	out, errOut, code := runCLI(t, "sim", "--workload", "ycsb-zipf", "--servers", "12", "--scale", "0.002",
		"--policy", "chameleon", "--format", "json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, k := range []string{"erase_sigma", "erases_total", "write_amplification", "write_latency_us_mean", "wall_seconds"} {
		if _, ok := res[k]; !ok {
			t.Errorf("JSON lacks %s", k)
		}
	}
	if res["servers"] != 12.0 || res["policy"] != "chameleon" || res["erases_total"].(float64) <= 0 {
		t.Fatalf("result %v", res)
	}

	dir := t.TempDir()
	out, errOut, code = runCLI(t, "sim", "--workload", "web-1", "--servers", "8", "--scale", "0.002", "--policy", "rep+ec",
		"--report", dir)
	if code != 0 || !strings.Contains(out, "erase_sigma") || !strings.Contains(out, "write_amplification") ||
		!strings.Contains(errOut, "sim: 100% of") {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	md, err := os.ReadFile(filepath.Join(dir, "sim-web-1-rep-ec-rep-8.md"))
	if err != nil || !strings.Contains(string(md), "flashmend sim --") {
		t.Fatalf("report: %v\n%s", err, md)
	}

	for _, bad := range [][]string{
		{"sim", "--policy", "raid"},
		{"sim", "--workload", "tpcc"},
		{"sim", "--servers", "0"},
		{"sim", "--format", "xml"},
		{"sim", "--scale", "-1"},
		{"sim", "--policy", "ec", "--redundancy", "rep"},
		{"sim", "--redundancy", "raid"},
		{"sim", "extra"},
	} {
		if _, errOut, code := runCLI(t, bad...); code != 2 {
			t.Errorf("%v: exit %d; want 2 (%s)", bad, code, errOut)
		}
	}
	if _, errOut, code := runCLI(t, "sim", "--workload", "msr:/no/such/trace.csv"); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing trace: exit %d: %s", code, errOut)
	}
}
