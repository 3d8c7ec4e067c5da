package experiments

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/filestore"
	"github.com/flashmend/flashmend/internal/testseed"
)

// runSweepSlice runs the cells of the single-fault sweep that pick chooses
// (faults nil: the sweep's own), with a seed from the clock (printed), and
// checks that want cells ran and that none failed or was not run.
func runSweepSlice(t *testing.T, faults []sweepFault, want int, pick func(seed int64) func(sweepFileType, sweepFault) bool) []sweepCell {
	t.Helper()
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	o := sweepOptions{Nodes: 7, Seed: seed, Objects: 1, CellTimeout: 2 * time.Minute, Faults: faults, Cells: pick(seed)}
	cells, err := runFaultSweep(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != want {
		t.Fatalf("%d cells ran, want %d", len(cells), want)
	}
	for _, c := range cells {
		t.Logf("%-18s %-12s %-6s %s: %s (%s)", c.Type, c.Fault, c.Took.Round(time.Millisecond), c.Outcome, c.File, c.Detail)
		if c.failed() || strings.HasPrefix(c.Outcome, "not run") {
			t.Errorf("%s / %s on %s: %s: %s", c.Type, c.Fault, c.File, c.Outcome, c.Detail)
		}
	}
	return cells
}

// TestSingleFaultSweep runs a seeded slice of the single-fault sweep (the
// full sweep is `flashmend experiments run single-fault-objects`): every
// file type of a node (on plain files and on emulated flash) and of the
// coordinator, with one of the five faults each, drawn from the seed. Every
// cell must be correct, repaired, or one dead node whose data is
// re-created: never wrong data, a loss, a reformat, a hang or the whole
// cluster down.
func TestSingleFaultSweep(t *testing.T) {
	runSweepSlice(t, nil, len(sweepFileTypes), func(seed int64) func(sweepFileType, sweepFault) bool {
		pick := map[string]sweepFault{}
		for i, ft := range sweepFileTypes {
			pick[ft.Name] = sweepFaults[(int(seed%int64(len(sweepFaults)))+i)%len(sweepFaults)]
		}
		return func(t sweepFileType, f sweepFault) bool { return pick[t.Name] == f }
	})
}

// TestObjectIOFaults runs the run-time faults of the torture harness's
// object CORDS table on every plain-file type: a read error under one file
// (a pack holds many chunks: reads of what it held fail until each is
// written anew) and lost writes (every write of the type on one node
// acknowledged and dropped while objects are written, then found and
// repaired by the scrub). Each cell must be correct, repaired or one dead
// node re-created; and the read error must fire on chunk data and sums
// files (the harness once named the pack file while reads named its
// members, and never hit them).
func TestObjectIOFaults(t *testing.T) {
	cells := runSweepSlice(t, []sweepFault{faultEIORead, faultLostWrite}, 8, func(int64) func(sweepFileType, sweepFault) bool {
		return func(t sweepFileType, f sweepFault) bool { return t.Store == "file" }
	})
	for _, c := range cells {
		if c.Fault == faultEIORead && (c.Type == "chunk data" || c.Type == "sums file") && c.Outcome == "not reached" {
			t.Errorf("%s / %s on %s: the read error never fired", c.Type, c.Fault, c.File)
		}
	}
}

// TestFlashPageFileIOFaults runs the object CORDS table's run-time faults
// on the emulated flash device's page file, injected through the device
// (flash.Faults, armed before SDF mounts it): a page under the damaged
// offset that reads uncorrectable, a die that takes no more program or
// erase while objects are written, and a die that loses every program
// meanwhile (then the scrub repairs what was lost). Each must be correct,
// repaired or one dead node re-created, never wrong or lost data.
func TestFlashPageFileIOFaults(t *testing.T) {
	runSweepSlice(t, []sweepFault{faultEIORead, faultWriteError, faultLostWrite}, 3, func(int64) func(sweepFileType, sweepFault) bool {
		return func(t sweepFileType, f sweepFault) bool { return t.Name == "flash page file" }
	})
}

// TestFlashDeviceStateIOFaults runs the object CORDS table's run-time
// faults on the emulated flash device's state copies, injected through
// flash.Options.StateIO: a read error on one copy (the device once did
// not open: TestFileStateCopyEIOReadOpens in internal/flash), every write
// of the copies failing, and every write dropped. Each must be correct,
// repaired or one dead node re-created; the read error must leave no node
// dead.
func TestFlashDeviceStateIOFaults(t *testing.T) {
	cells := runSweepSlice(t, []sweepFault{faultEIORead, faultWriteError, faultLostWrite}, 3, func(int64) func(sweepFileType, sweepFault) bool {
		return func(t sweepFileType, f sweepFault) bool { return t.Name == "flash device state" }
	})
	for _, c := range cells {
		if c.Fault == faultEIORead && c.Outcome != "repaired" {
			t.Errorf("%s / %s on %s: %s (%s), want the device opened from its other copies", c.Type, c.Fault, c.File, c.Outcome, c.Detail)
		}
	}
}

// A torture run's object cells on plain-file nodes failed when the
// machine's shared disk was over 95% full: each node refused new puts to
// keep its repair reserve (5% of the disk). The sweep's plain-file nodes
// run without a reserve; SDF nodes, on devices of their own, keep it.
func TestSweepPutsRefusedOnANearlyFullSharedDisk(t *testing.T) {
	if o := sweepClusterOptions(t.TempDir(), "", 7, nil); o.RepairReserve >= 0 {
		t.Fatalf("plain-file sweep nodes keep a repair reserve of %v of the shared disk", o.RepairReserve)
	}
	if o := sweepClusterOptions(t.TempDir(), "sdf", 7, &urNodeStores{}); o.RepairReserve != 0 {
		t.Fatalf("sdf sweep nodes: reserve %v, want the default", o.RepairReserve)
	}
}

// The object cells' write errors and lost writes never fired once a
// node's PUT stream wrote its chunks in one store batch: the victim's
// fault store embedded the plain-file store, whose NewBatch was promoted,
// so batched writes went around the fault. A batch of the fault store
// meets the fault.
func TestObjectWriteFaultsBypassedByBatchedPuts(t *testing.T) {
	inner, err := filestore.Open(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	for _, fault := range []sweepFault{faultWriteError, faultLostWrite} {
		s := &objIOFaultStore{Store: inner, f: objIOFault{fault: fault, name: "d/victim"}}
		b := objstore.NewBatch(s)
		err := b.Create("d/new-chunk", []byte("chunk"))
		if err == nil {
			err = b.Commit()
		}
		if s.injected.Load() == 0 {
			t.Fatalf("%s: a batched chunk write went around the fault (err %v)", fault, err)
		}
		if fault == faultWriteError && err == nil {
			t.Fatalf("%s: the batched write succeeded", fault)
		}
	}
}
