package cli

import (
	"strings"
	"testing"
)

func TestFlashCommands(t *testing.T) {
	out, errOut, code := runCLI(t, "flash", "presets")
	if code != 0 || !strings.Contains(out, "44ch x 2die") || !strings.Contains(out, "qlc") {
		t.Fatalf("presets exit %d: %s%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "flash", "throughput", "--requests", "1", "--request", "2MiB", "--format", "csv")
	if code != 0 {
		t.Fatalf("throughput exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 8 || !strings.HasPrefix(lines[7], "44,1.66") {
		t.Fatalf("throughput csv:\n%s", out)
	}
	for _, args := range [][]string{
		{"flash", "errors", "--reads", "20000", "--uber", "1e-3"},
		{"flash", "errors", "--model", "physical", "--reads", "20000"},
	} {
		out, errOut, code = runCLI(t, args...)
		if code != 0 || strings.Contains(out, "NO") || !strings.Contains(out, "yes") {
			t.Fatalf("%v exit %d:\n%s%s", args, code, out, errOut)
		}
	}
	for _, bad := range [][]string{
		{"flash", "errors", "--model", "magic"},
		{"flash", "errors", "--reads", "0"},
		{"flash", "errors", "--uber", "2"},
		{"flash", "throughput", "--preset", "plc"},
		{"flash", "throughput", "--request", "100"},
	} {
		if _, _, code := runCLI(t, bad...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", bad, code)
		}
	}
}
