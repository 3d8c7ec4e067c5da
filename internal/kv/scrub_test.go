package kv_test

import (
	"bytes"
	"context"
	"sync"
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

// TestScrubFindsDamageInEitherRemainder: a file an excise cut backs two
// tables (the remainders on either side of the patched block), and the
// scrubber names the file once, with the first table's bounds. Damage in
// the second remainder was isolated within the first one's bounds, found
// no damaged block there, and fell back to patching those whole bounds
// (keys far from the damage, on a run: up to the whole shard) while the
// real damage stayed. Now it is isolated to its block in the table it
// belongs to.
func TestScrubFindsDamageInEitherRemainder(t *testing.T) {
	var mu sync.Mutex
	var events []kv.RepairEvent
	c, cl := startCluster(t, kv.Options{OnRepair: func(e kv.RepairEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loadKeys(t, cl, 2000)
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Node(leader%3 + 1).Replica(1)
	waitAllCaughtUp(t, c, 1)
	scrub := func() {
		t.Helper()
		if _, _, err := victim.Scrub(); err != nil {
			t.Fatal(err)
		}
	}
	if err := victim.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	file, off, err := victim.CorruptBlock(testKey(300))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("damaged block %d of %s", off, file)
	// No compaction from here on (the patch's flush would be compacted
	// with the cut table, rewriting both remainders).
	sm, unlock := victim.LockSM()
	release := sm.HoldCompactions(10 * time.Second)
	unlock()
	defer release()
	scrub()
	waitFor(t, "the first repair", func() bool { return victim.Stats().PatchesApplied >= 1 })
	// The damaged file now backs both remainders; damage the second.
	sm, unlock = victim.LockSM()
	off, err = sm.CorruptBlockInTable(file, testKey(1500))
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("damaged block %d of %s", off, file)
	scrub()
	waitFor(t, "the second repair", func() bool { return victim.Stats().PatchesApplied >= 2 })
	mu.Lock()
	last := events[len(events)-1]
	mu.Unlock()
	lo, hi := testKey(1400), testKey(1600)
	for _, rg := range last.Ranges {
		if bytes.Compare(rg.Start, lo) < 0 || rg.End == nil || bytes.Compare(rg.End, hi) > 0 {
			t.Fatalf("the second repair patched %v, not the damaged block's keys near %q", last.Ranges, testKey(1500))
		}
	}
	if st := victim.Stats(); st.Rebuilds != 0 {
		t.Fatalf("rebuilt: %v", st)
	}
	waitAllCaughtUp(t, c, 1)
	assertSame(t, checksums(t, c, 1))
}
