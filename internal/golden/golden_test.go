package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScript runs a script whose commands echo their words in reverse.
func TestScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.txt")
	want := "# a comment\nrev a b c\n  c\n  b\n  a\n\nrev x\n  x\n"
	if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	var commands []string
	Script(t, path, func(line string) []string {
		commands = append(commands, line)
		f := strings.Fields(line)[1:]
		for i, j := 0, len(f)-1; i < j; i, j = i+1, j-1 {
			f[i], f[j] = f[j], f[i]
		}
		return f
	})
	if strings.Join(commands, "|") != "rev a b c|rev x" {
		t.Fatalf("commands run: %q", commands)
	}
}
