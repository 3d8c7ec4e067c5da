package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestPebbleCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	if out, errOut, code := runCLI(t, "flash", "format", "--dir", dir, "--preset", "small", "--blocks", "64"); code != 0 {
		t.Fatalf("format exit %d: %s%s", code, out, errOut)
	}
	out, errOut, code := runCLI(t, "pebble", "load", "--dir", dir, "--keys", "20000", "--sst-metadata-copies")
	if code != 0 || !strings.Contains(out, "loaded 20000 keys") || !strings.Contains(out, "write amplification: sdf") {
		t.Fatalf("load exit %d: %s%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "pebble", "check", "--dir", dir, "--keys", "20000")
	if code != 0 || !strings.Contains(out, "correct 20000, corruption errors 0, missing 0, wrong 0") {
		t.Fatalf("check exit %d: %s%s", code, out, errOut)
	}
	// Keys that were never written are missing: the command fails.
	if _, _, code := runCLI(t, "pebble", "check", "--dir", dir, "--keys", "20001"); code != 1 {
		t.Fatalf("check of unwritten keys: exit %d, want 1", code)
	}
	// With transient UBER, reads fail as corruption, never as wrong data.
	if out, errOut, code := runCLI(t, "flash", "inject", "--dir", dir, "--uber", "1e-5"); code != 0 {
		t.Fatalf("inject exit %d: %s%s", code, out, errOut)
	}
	// At this (very high) rate the MANIFEST and both reads of its shadow
	// can all be hit: Pebble then refuses to open, as a corruption.
	out, errOut, code = runCLI(t, "pebble", "check", "--dir", dir, "--keys", "20000")
	switch {
	case code == 1 && strings.Contains(errOut, "corrupt") && !strings.Contains(errOut, "wrong"):
		t.Logf("store did not open under UBER: %s", errOut)
	case code != 0 || !strings.Contains(out, "missing 0, wrong 0") || strings.Contains(out, "corruption errors 0,"):
		t.Fatalf("check under UBER exit %d: %s%s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"pebble", "load"},
		{"pebble", "load", "--dir", dir, "--keys", "0"},
		{"pebble", "check", "--dir", dir, "--value-bytes", "2"},
	} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
}
