package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// exampleInvocations returns the flashmend command lines of an example:
// continuation lines joined, comments and leading VAR=value assignments
// dropped, split into words (the examples quote nothing).
func exampleInvocations(example string) [][]string {
	var out [][]string
	joined := strings.ReplaceAll(example, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		words := strings.Fields(line)
		for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
			words = words[1:]
		}
		if len(words) > 0 && words[0] == "flashmend" {
			out = append(out, words[1:])
		}
	}
	return out
}

// TestEveryCommandHasAnExample walks every command: its --help shows an
// example, at least one of the example's lines runs that command (or one
// below it), and every flashmend line of it names an existing command
// with flags and arguments that parse.
func TestEveryCommandHasAnExample(t *testing.T) {
	root := NewRoot(io.Discard, io.Discard)
	var all []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		all = append(all, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if len(all) < 60 {
		t.Fatalf("walked %d commands: the tree is not what this test expects", len(all))
	}
	for _, c := range all {
		path := c.CommandPath()
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s: no example in --help", path)
			continue
		}
		args := append(strings.Fields(path)[1:], "--help")
		out, errOut, code := runCLI(t, args...)
		if code != 0 || !strings.Contains(out, "Examples:\n"+c.Example) {
			t.Errorf("%s --help (exit %d, %s) shows no Examples section with its example", path, code, errOut)
		}
		runsItself := false
		for _, words := range exampleInvocations(c.Example) {
			// A fresh tree per line: parsing sets flags.
			fresh := NewRoot(io.Discard, io.Discard)
			found, rest, err := fresh.Find(words)
			if err != nil {
				t.Errorf("%s: example %q: %v", path, strings.Join(words, " "), err)
				continue
			}
			found.InitDefaultHelpFlag()
			if err := found.ParseFlags(rest); err != nil {
				t.Errorf("%s: example %q: %v", path, strings.Join(words, " "), err)
				continue
			}
			if err := found.ValidateArgs(found.Flags().Args()); err != nil {
				t.Errorf("%s: example %q: %v", path, strings.Join(words, " "), err)
				continue
			}
			if found.CommandPath() == path || strings.HasPrefix(found.CommandPath(), path+" ") {
				runsItself = true
			}
		}
		if !runsItself {
			t.Errorf("%s: no line of its example runs it:\n%s", path, c.Example)
		}
	}
}
