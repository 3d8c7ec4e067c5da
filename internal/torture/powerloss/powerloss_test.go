package powerloss

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/flashmend/flashmend/internal/testseed"
)

// TestPowerLossFileStore is the seeded slice of `flashmend torture
// powerloss`: a node's plain-file object store crashed at drawn I/O steps
// of a put/sums/index/repair/delete/compact workload, in every mode,
// restarted from the crash image: every acknowledged chunk and index entry
// reads back verified, nothing verifies with other bytes.
func TestPowerLossFileStore(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_POWERLOSS_SEED")
	res, err := Run(Options{Seed: seed, Workloads: 2, CrashesPerWorkload: 20, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	total := res.Total()
	t.Logf("seed %d: %d trials, %d acknowledged chunks and %d entries checked, in flight absent/corrupt/whole %d/%d/%d, torn tails %d, resurrected %d (ops per workload %v, %v)",
		seed, total.Trials, total.AckedChunks, total.AckedEntries, total.InFlightAbsent, total.InFlightCorrupt, total.InFlightWhole, total.TornTails, total.Resurrected, res.Ops, res.Elapsed)
	if !res.Passed() {
		t.Fatalf("%d failures; first: %v", len(res.Failures), res.Failures[0])
	}
	if total.AckedChunks == 0 || total.InFlightAbsent+total.InFlightCorrupt+total.InFlightWhole == 0 {
		t.Fatalf("the trials checked nothing: %+v", total)
	}
}

// The checks can fail: a store that does not sync, cut off from power,
// loses acknowledged chunks, and the trial says so.
func TestPowerLossCatchesAStoreThatDoesNotSync(t *testing.T) {
	opts := Options{Seed: 5}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	wl := drawWorkload(rand.New(rand.NewSource(5)), opts)
	total, err := wl.dryRun(Mode{Sync: false, Keep: 0})
	if err != nil {
		t.Fatal(err)
	}
	tally, step, fails := wl.trial(Mode{Sync: false, Keep: 0}, total, 1)
	if tally.Lost == 0 || len(fails) == 0 {
		t.Fatalf("a power loss of a store that never syncs lost nothing (crash at %d of %d, %s): %+v", total, total, step, tally)
	}
	t.Logf("%d lost, first: %s", tally.Lost, fails[0])
}

// TestPowerLossSDFStore is the seeded slice of `flashmend torture
// powerloss --store sdf`: a node's SDF store on an emulated flash device
// whose page file is on fsys.Mem, cut from power at drawn file-system
// operations (page programs and erases, the device's syncs and state
// saves, the format markers), restarted from the image: every
// acknowledged chunk and index entry reads back verified, nothing
// verifies with other bytes.
func TestPowerLossSDFStore(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_POWERLOSS_SEED")
	res, err := Run(Options{Seed: seed, Store: StoreSDF, Workloads: 2, CrashesPerWorkload: 10, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	total := res.Total()
	t.Logf("seed %d: %d trials, %d acknowledged chunks and %d entries checked, in flight absent/corrupt/whole %d/%d/%d, resurrected %d (ops per workload %v, %v)",
		seed, total.Trials, total.AckedChunks, total.AckedEntries, total.InFlightAbsent, total.InFlightCorrupt, total.InFlightWhole, total.Resurrected, res.Ops, res.Elapsed)
	if !res.Passed() {
		t.Fatalf("%d failures; first: %v", len(res.Failures), res.Failures[0])
	}
	if total.AckedChunks == 0 {
		t.Fatalf("the trials checked nothing: %+v", total)
	}
}

// The SDF trials can fail: without the device's power-safe fsyncs
// (nosync, SDFStoreOptions.PowerUnsafe), a power loss in the middle of a
// workload keeping nothing unsynced loses acknowledged chunks (the store's
// Close at the end syncs the device, so the cuts are before it).
func TestPowerLossCatchesAnSDFStoreThatIsNotPowerSafe(t *testing.T) {
	opts := Options{Seed: 5, Store: StoreSDF}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	wl := drawWorkload(rand.New(rand.NewSource(5)), opts)
	unsafe := Mode{Sync: false, Keep: 0}
	total, err := wl.dryRun(unsafe)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{total / 2, total * 3 / 4, total * 9 / 10} {
		tally, step, fails := wl.trial(unsafe, at, 1)
		if tally.Lost > 0 || tally.Errors > 0 {
			t.Logf("cut at %d of %d (%s): %d lost, %d errors, first: %s", at, total, step, tally.Lost, tally.Errors, fails[0])
			return
		}
	}
	t.Fatalf("power losses of an SDF store without its device fsyncs lost nothing (%d operations)", total)
}

// SDF trial counts and outcomes varied run to run for one seed: SDF's
// channel workers ran a request's dies, and the layer its channels, in
// parallel, so the device's operations reached the file system in another
// order on each run (the dry runs of one workload counted 2109-2111
// operations), the crash points drawn from that count differed, and a cut
// at the n-th operation kept other pages. The store now runs its device
// serially (SDFStoreOptions.Serial): the same seed gives the same
// operations, trials and outcome.
func TestSDFPowerLossTrialCountsVaryRunToRun(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_POWERLOSS_SEED")
	opts := Options{Seed: seed, Store: StoreSDF, Workloads: 1, CrashesPerWorkload: 6}
	a, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Ops, b.Ops) || !reflect.DeepEqual(a.Cells, b.Cells) || !reflect.DeepEqual(a.Failures, b.Failures) {
		t.Fatalf("seed %d ran twice differently: operations per workload %v then %v; tallies %v then %v", seed, a.Ops, b.Ops,
			tallies(a), tallies(b))
	}
	if tot := a.Total(); tot.Trials != len(opts.Modes)*opts.CrashesPerWorkload && tot.Trials != len(AllModes)*opts.CrashesPerWorkload {
		t.Fatalf("%d trials, want %d per mode", tot.Trials, opts.CrashesPerWorkload)
	}
}

func tallies(r *Result) map[string]map[string]Tally {
	out := map[string]map[string]Tally{}
	for m, byStep := range r.Cells {
		out[m] = map[string]Tally{}
		for s, t := range byStep {
			out[m][s] = *t
		}
	}
	return out
}
