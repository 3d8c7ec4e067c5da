// Package golden runs golden script tests: a file of command lines, each
// followed by the output it gave when the file was last checked, which the
// test regenerates and compares (go test -update rewrites the file after a
// deliberate change). It is for tests only.
//
// # Format
//
// A line that is empty or starts with # is kept as it is; a line indented by
// two spaces is output (dropped and regenerated); any other line is a
// command, handed to the test's run function, whose output lines follow it
// indented.
//
// # Invariants
//
//   - Script compares the whole regenerated file, so a command that stops
//     giving output, or gives more, fails the test as well as one that
//     gives other output.
//
// # Failure model
//
// A file that cannot be read or written fails the test.
package golden

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden script files with the output the commands give now")

// Script runs the script at path: run(line) is called for each command line
// in order and returns its output lines.
func Script(t *testing.T, path string, run func(line string) []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.HasPrefix(line, "  ") {
			continue // output: regenerated below
		}
		out.WriteString(line + "\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, o := range run(line) {
			out.WriteString("  " + o + "\n")
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := out.String(); got != string(b) {
		t.Fatalf("%s differs (run with -update after checking):\n%s", path, got)
	}
}
