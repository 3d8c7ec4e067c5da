package report

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func testEnv() Env {
	return Env{Command: "flashmend experiments run demo", Commit: "abc123", Machine: "test machine", Date: "2026-01-01T00:00:00Z"}
}

func buildDemo(t *testing.T) *Report {
	t.Helper()
	r, err := New("demo", "Demo report")
	if err != nil {
		t.Fatal(err)
	}
	r.Text("Measured %d things.", 3)
	if err := r.Table(Table{Caption: "Table 1: numbers", Header: []string{"a", "b|c"}, Rows: [][]string{{"1", "x|y"}, {"2", "z"}}}); err != nil {
		t.Fatal(err)
	}
	p, err := LinePlot{
		Title: "t", XLabel: "x", YLabel: "y", LogX: true, LogY: true,
		Series: []Series{
			{Name: "model", X: []float64{1e-9, 1e-6, 1e-3}, Y: []float64{1e-12, 0, 1e-2}},
			{Name: "measured", X: []float64{1e-6}, Y: []float64{2e-6}, Points: true},
		},
	}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Plot("curve", "error rate against UBER", p); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMarkdownGolden(t *testing.T) {
	got := buildDemo(t).Markdown(testEnv())
	golden := filepath.Join("testdata", "demo.md")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("markdown differs from %s (run with -update):\n%s", golden, got)
	}
}

func TestWriteSavesPlots(t *testing.T) {
	dir := t.TempDir()
	if err := buildDemo(t).Write(dir, testEnv()); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "demo-curve.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(svg), "<svg") {
		t.Fatal("plot is not an SVG")
	}
	md, err := os.ReadFile(filepath.Join(dir, "demo.md"))
	if err != nil || !strings.Contains(string(md), "(demo-curve.svg)") {
		t.Fatalf("markdown does not link the plot: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := New("Bad Name", "x"); err == nil {
		t.Fatal("accepted a bad report name")
	}
	r, _ := New("ok", "x")
	if err := r.Table(Table{Header: []string{"a"}, Rows: [][]string{{"1", "2"}}}); err == nil {
		t.Fatal("accepted a ragged table")
	}
	p, _ := LinePlot{}.Build()
	if err := r.Plot("p", "c", p); err != nil {
		t.Fatal(err)
	}
	if err := r.Plot("p", "c", p); err == nil {
		t.Fatal("accepted a duplicate plot name")
	}
	if _, err := (LinePlot{Series: []Series{{X: []float64{1}, Y: nil}}}).Build(); err == nil {
		t.Fatal("accepted a series of mismatched lengths")
	}
}

// TestDegenerateLogPlotsDraw: log-scale plots whose series have no points
// (an experiment that measured nothing) or a single x below 1 (one repair)
// render; gonum panics drawing either unless Build fixes the range.
func TestDegenerateLogPlotsDraw(t *testing.T) {
	for name, series := range map[string][]Series{
		"empty":  {{Name: "none"}},
		"single": {{Name: "one", X: []float64{0.4}, Y: []float64{1}}},
		"column": {{Name: "same x", X: []float64{0.01, 0.01}, Y: []float64{0.5, 1}}},
	} {
		p, err := LinePlot{Title: name, LogX: true, LogY: true, Series: series}.Build()
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(name, "x")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Plot("p", "degenerate", p); err != nil {
			t.Fatal(err)
		}
		// Write draws the plot: that is where gonum panicked.
		if err := r.Write(t.TempDir(), testEnv()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestCell(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"a|b\nc", 0, `a\|b c`},
		{"abcdef", 3, "abc..."},
		{"abc", 3, "abc"},
	} {
		if got := Cell(c.in, c.max); got != c.want {
			t.Errorf("Cell(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
