package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/kv"
)

// TestScrubberRepairsColdData damages a block nobody reads: the scrubber
// finds it and the patch goes through the log; later scrubs, which still see
// the damage in the physical file, do not repair the excised range again.
func TestScrubberRepairsColdData(t *testing.T) {
	c, cl := startCluster(t, kv.Options{ScrubInterval: 100 * time.Millisecond, OnRepair: func(e kv.RepairEvent) { t.Logf("repair: %v", e) }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loadKeys(t, cl, 2000)
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Node(leader%3 + 1).Replica(1)
	waitAllCaughtUp(t, c, 1)
	corruptReplica(t, victim, testKey(700))
	waitFor(t, "scrub repair", func() bool { return victim.Stats().PatchesApplied >= 1 })
	time.Sleep(500 * time.Millisecond) // five more scrubs
	if st := victim.Stats(); st.PatchesApplied != 1 || st.CorruptionsDetected != 1 || st.Rebuilds != 0 {
		t.Fatalf("one damaged block, repairs: %v", st)
	}
	// The physical file keeps the excised damage; the scrubs that found
	// it again marked it repaired, and now pass over it to the blocks
	// after it (engine.TestVerifySSTableSkipping). Before, every scrub
	// named it again (damaged=1 here) and never got past it.
	waitFor(t, "a scrub that passes over the repaired block", func() bool {
		files, damaged, err := victim.Scrub()
		if err != nil || files == 0 {
			t.Fatalf("scrub: files=%d damaged=%d err=%v", files, damaged, err)
		}
		return damaged == 0
	})
	if st := victim.Stats(); st.PatchesApplied != 1 || st.Rebuilds != 0 {
		t.Fatalf("the repaired block repaired again: %v", st)
	}
	assertSame(t, checksums(t, c, 1))
}
