package experiments

import (
	"context"
	"testing"
	"time"
)

// TestKVSingleFaultSweep: one fault at a time (zero, junk, flip, truncate,
// delete) in one file of each kind a replica keeps: every cell starts,
// reads back every key right, and the damaged replica ends in step with
// its peers. The full sweep (every file, clean and crash stops) is
// `flashmend experiments run kv-fault-sweep`.
func TestKVSingleFaultSweep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cells, err := runKVFaultSweep(ctx, kvSweepParams{Keys: 400, Seed: 1, OnePerKind: true})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, c := range cells {
		kinds[c.Kind] = true
		t.Logf("%-22s %-13s %-28s starts=%v wrong=%d missing=%d errors=%d agree=%v %s (%v)",
			c.Kind, c.Fault, c.What, c.StartErr == "", c.Wrong, c.Missing, c.Errors, c.Converged, c.Outcome, c.Took.Round(time.Millisecond))
		if !c.Pass() {
			t.Errorf("%s %s (%s): %+v", c.File, c.Fault, c.What, c)
		}
	}
	for _, k := range []string{"raft log", "pebble MANIFEST", "pebble OPTIONS", "pebble marker", "sstable"} {
		if !kinds[k] {
			t.Errorf("no %s file in the sweep (kinds %v)", k, kinds)
		}
	}
}
