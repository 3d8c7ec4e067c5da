package experiments

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/report"
)

// TestQuickRuns runs every registered experiment in its quick form and checks
// that its report is written with the command that reproduces it.
func TestQuickRuns(t *testing.T) {
	dir := t.TempDir()
	for _, e := range All() {
		t.Run(e.Name, func(t *testing.T) {
			cfg := Config{Seed: DefaultSeed, Quick: true}
			r, err := e.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Name() != e.Name {
				t.Fatalf("report name %q, experiment %q", r.Name(), e.Name)
			}
			env := report.Env{Command: Command(e.Name, cfg), Commit: "test", Machine: "test", Date: "test"}
			if err := r.Write(dir, env); err != nil {
				t.Fatal(err)
			}
			md, err := os.ReadFile(filepath.Join(dir, e.Name+".md"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(md), "experiments run "+e.Name+" --out docs/results --quick") {
				t.Fatalf("report lacks its command:\n%s", md)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	if _, err := Lookup("no-such-experiment"); err == nil {
		t.Fatal("unknown experiment accepted")
	}
	for _, e := range All() {
		got, err := Lookup(e.Name)
		if err != nil || got.Name != e.Name {
			t.Fatalf("Lookup(%q) = %v, %v", e.Name, got.Name, err)
		}
	}
}
