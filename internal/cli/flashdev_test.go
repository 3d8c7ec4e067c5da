package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFlashDeviceCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	out, errOut, code := runCLI(t, "flash", "format", "--dir", dir, "--preset", "small", "--blocks", "24")
	if code != 0 || !strings.Contains(out, "usable") {
		t.Fatalf("format exit %d: %s%s", code, out, errOut)
	}
	if _, _, code := runCLI(t, "flash", "format", "--dir", dir, "--preset", "small"); code != 2 {
		t.Fatalf("format over an existing device: exit %d, want 2", code)
	}
	out, errOut, code = runCLI(t, "flash", "info", "--dir", dir)
	if code != 0 || !strings.Contains(out, "2ch x 2die x 24blk") || !strings.Contains(out, "failed dies: 0") ||
		!strings.Contains(out, "wear") {
		t.Fatalf("info exit %d: %s%s", code, out, errOut)
	}
	var usable string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "usable") {
			usable = line
		}
	}
	if usable == "" {
		t.Fatalf("no usable line in:\n%s", out)
	}
	out, errOut, code = runCLI(t, "flash", "inject", "--dir", dir, "--fail-die", "1/0", "--uber", "1e-6")
	if code != 0 {
		t.Fatalf("inject exit %d: %s%s", code, out, errOut)
	}
	out, _, _ = runCLI(t, "flash", "info", "--dir", dir)
	if !strings.Contains(out, "failed dies: 1 ch1/d0") || !strings.Contains(out, "injected UBER: 1e-06") {
		t.Fatalf("info after inject:\n%s", out)
	}
	// bench reformats the device; run it small and without real timing.
	report := filepath.Join(t.TempDir(), "sdf.md")
	out, errOut, code = runCLI(t, "flash", "bench", "--dir", dir, "--runs", "1", "--timing", "none",
		"--random-reads", "5", "--fills", "0.5", "--report", report)
	if code != 0 || !strings.Contains(out, "read / raw") {
		t.Fatalf("bench exit %d: %s%s", code, out, errOut)
	}
	md, err := os.ReadFile(report)
	if err != nil || !strings.Contains(string(md), "Sequential throughput against channels") ||
		!strings.Contains(string(md), "Write amplification under random overwrites") {
		t.Fatalf("report: %v\n%s", err, md)
	}
	for _, bad := range [][]string{
		{"flash", "info", "--dir", filepath.Join(t.TempDir(), "none")},
		{"flash", "inject", "--dir", dir},
		{"flash", "inject", "--dir", dir, "--fail-die", "x"},
		{"flash", "bench", "--dir", dir, "--timing", "virtual"},
		{"flash", "format"},
	} {
		if _, _, code := runCLI(t, bad...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", bad, code)
		}
	}
}
