package torture

import (
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/torture/nemesis"
)

// TestReportSumsUpTheHarness: torture.md has a section for every part of
// the harness, says which parts did not run, and counts a failed nemesis
// or crash point as a miss.
func TestReportSumsUpTheHarness(t *testing.T) {
	render := func(r Run) string {
		t.Helper()
		rep, err := r.Report()
		if err != nil {
			t.Fatal(err)
		}
		return string(rep.Markdown(report.Env{}))
	}
	empty := render(Run{Seed: 1})
	for _, want := range []string{"## Helix\n\nNot run", "## Nemesis\n\nNot run", "## Crash points\n\nNot run"} {
		if !strings.Contains(empty, want) {
			t.Errorf("a run without the harness: %q missing", want)
		}
	}
	ok := &nemesis.Result{Seed: 1, Nodes: 6, Store: "sdf", Linearizable: "Ok", KVOps: 100, KVOK: 90, ObjPuts: 7, ObjFinalOK: 7,
		Faults: []nemesis.Injected{{Kind: nemesis.FaultFill}, {Kind: nemesis.FaultKill}, {Kind: nemesis.FaultKill}}, Elapsed: time.Minute}
	crash := &nemesis.CrashResult{Seed: 1, Store: "sdf", DeviceSize: "256MiB", Nodes: 6, Linearizable: "Ok",
		Points: []nemesis.CrashPoint{{Point: "raftlog-copy", Layer: "raftlog", Node: 2, At: 1, Reached: true, Outcome: nemesis.CrashOK}}}
	r := Run{Seed: 1, Nemesis: []*nemesis.Result{ok}, Crash: crash}
	md := render(r)
	for _, want := range []string{"fill 1, kill 2", "nemesis-sdf.md", "`raftlog-copy`", "1 ok", "Verdict: pass"} {
		if !strings.Contains(md, want) {
			t.Errorf("report: %q missing", want)
		}
	}
	if r.HarnessBad() != 0 {
		t.Fatalf("a passing harness counted %d misses", r.HarnessBad())
	}
	crash.Points = append(crash.Points, nemesis.CrashPoint{Point: "chunk-sums", Outcome: nemesis.CrashFailed, Detail: "object lost"})
	r.NemesisErr = []string{"file: the cluster did not start"}
	r.HelixErr = "helix: damage could not be injected"
	if got := r.HarnessBad(); got != 3 {
		t.Fatalf("a failed crash point, a nemesis and a helix that did not run: %d misses, want 3", got)
	}
	if md := render(r); !strings.Contains(md, "FAILED") || !strings.Contains(md, "the cluster did not start") || !strings.Contains(md, "could not be injected") {
		t.Fatalf("failures not reported:\n%s", md)
	}
}
