package experiments

import (
	"context"
	"testing"
	"time"
)

// TestSingleFaultSweep runs a seeded slice of the single-fault sweep (the
// full sweep is `flashmend experiments run single-fault-objects`): every
// file type of a node (on plain files and on emulated flash) and of the
// coordinator, with one of the five faults each, drawn from the seed. Every
// cell must be correct, repaired, or one dead node whose data is
// re-created: never wrong data, a loss, a reformat, a hang or the whole
// cluster down.
func TestSingleFaultSweep(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	pick := map[string]sweepFault{}
	for i, ft := range sweepFileTypes {
		pick[ft.Name] = sweepFaults[(int(seed%int64(len(sweepFaults)))+i)%len(sweepFaults)]
	}
	o := sweepOptions{Nodes: 7, Seed: seed, Objects: 1, CellTimeout: 2 * time.Minute,
		Cells: func(t sweepFileType, f sweepFault) bool { return pick[t.Name] == f }}
	cells, err := runFaultSweep(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != len(sweepFileTypes) {
		t.Fatalf("%d cells ran, want %d", len(cells), len(sweepFileTypes))
	}
	for _, c := range cells {
		t.Logf("%-18s %-8s %-6s %s: %s (%s)", c.Type, c.Fault, c.Took.Round(time.Millisecond), c.Outcome, c.File, c.Detail)
		if c.failed() {
			t.Errorf("%s / %s on %s: %s: %s", c.Type, c.Fault, c.File, c.Outcome, c.Detail)
		}
	}
}
