package sdf

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/fsys"
	"github.com/flashmend/flashmend/internal/testseed"
)

// plModel is what a power-loss workload made durable: each file's content
// as of its last Sync or Close that returned, and the files whose Remove
// returned.
type plModel struct {
	synced  map[string][]byte
	removed map[string]bool
	// removing is the file whose Remove the cut interrupted, if any: it
	// may be gone or whole.
	removing string
	// formatted: Format returned (before, nothing was acknowledged and the
	// volume may not open: objstore.OpenSDFStore formats again then).
	formatted bool
}

// runPowerLossWorkload formats SDF on a file-backed device on m and runs a
// seeded workload of creates, appends, syncs, closes and removes (enough
// to fill the device several times over, so that zones are reclaimed and
// erased and checkpoints taken) until the power is cut or it ends.
func runPowerLossWorkload(m *fsys.Mem, powerSafe bool, seed int64, model *plModel) error {
	dev, err := flash.OpenFile("/dev", small(), flash.Options{Seed: 1, FS: m, PowerSafe: powerSafe})
	if err != nil {
		return err
	}
	fs, err := Format(dev, Options{MaxOpenZones: 3})
	if err != nil {
		return err
	}
	model.formatted = true
	rng := rand.New(rand.NewSource(seed))
	var live []string
	for i := 0; i < 24; i++ {
		if len(live) > 3 {
			k := rng.Intn(len(live))
			name := live[k]
			model.removing = name
			if err := fs.Remove(name); err != nil {
				return err
			}
			model.removing = ""
			live = append(live[:k], live[k+1:]...)
			delete(model.synced, name)
			model.removed[name] = true
		}
		name := fmt.Sprintf("f%d", i)
		f, err := fs.Create(name, Lifetime(i%3))
		if err != nil {
			return err
		}
		live = append(live, name)
		var data []byte
		for j := 0; j < 1+rng.Intn(4); j++ {
			chunk := randBytes(rng, 1+rng.Intn(60_000))
			if _, err := f.Write(chunk); err != nil {
				return err
			}
			data = append(data, chunk...)
			if rng.Intn(2) == 0 {
				if err := f.Sync(); err != nil {
					return err
				}
				model.synced[name] = bytes.Clone(data)
			}
		}
		if err := f.Close(); err != nil {
			return err
		}
		model.synced[name] = data
	}
	return fs.Close()
}

// SDF on a file-backed emulated device with Options.PowerSafe, its power
// cut at a drawn file operation of the device's directory (fsys.Mem:
// unsynced sectors of the page file kept or lost) and reopened: the
// volume opens, every file synced or closed before the cut has at least
// its synced bytes, equal, and every file whose Remove returned is gone
// (sdf's doc: synced data, creates and removes are durable when the call
// returns). Seeded.
func TestPowerLossSDFOnFileDevice(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_POWERLOSS_SEED")
	rng := rand.New(rand.NewSource(seed))
	checked := 0
	for trial := 0; trial < 12; trial++ {
		n, fail := powerLossTrial(t, rng, trial, true)
		if fail != "" {
			t.Fatal(fail)
		}
		checked += n
	}
	t.Logf("%d synced files checked", checked)
	if checked == 0 {
		t.Fatal("no synced file was checked")
	}
}

// The same trials without Options.PowerSafe (what objstore's
// SDFStoreOptions.PowerUnsafe and `--unsafe-no-device-sync` run): a power
// loss that keeps none of the unsynced state loses files whose Sync or
// Close returned, or the volume itself. It is why SDF stores are
// power-safe by default; if this test ever finds nothing lost, the
// power-loss trials above no longer test the device's fsyncs.
func TestPowerLossSDFWithoutPowerSafeLosesSyncedFiles(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_POWERLOSS_SEED")
	rng := rand.New(rand.NewSource(seed))
	var failed []string
	for trial := 0; trial < 6; trial++ {
		// trial*3: every trial keeps 0% of the unsynced state.
		if _, fail := powerLossTrial(t, rng, trial*3, false); fail != "" {
			failed = append(failed, fail)
		}
	}
	for _, f := range failed {
		t.Logf("without PowerSafe: %s", f)
	}
	if len(failed) == 0 {
		t.Fatal("6 power cuts keeping none of the unsynced state lost nothing acknowledged without PowerSafe")
	}
}

// powerLossTrial runs one seeded workload on a fresh fsys.Mem, cuts its
// power at a drawn operation (keeping 0, 50 or 100% of the unsynced state
// by trial mod 3), reopens the device and SDF, and checks every synced and
// removed file: it returns the synced files checked, or what was lost or
// wrong. Setup failures are fatal.
func powerLossTrial(t *testing.T, rng *rand.Rand, trial int, powerSafe bool) (int, string) {
	t.Helper()
	wseed := rng.Int63()
	dry := fsys.NewMem()
	if err := runPowerLossWorkload(dry, powerSafe, wseed, &plModel{synced: map[string][]byte{}, removed: map[string]bool{}}); err != nil {
		t.Fatalf("trial %d without a crash: %v", trial, err)
	}
	at := 1 + rng.Int63n(dry.Ops())
	keep := []int{0, 50, 100}[trial%3]
	keepSeed := rng.Int63()
	keepRand := rand.New(rand.NewSource(keepSeed))
	m := fsys.NewMem()
	model := &plModel{synced: map[string][]byte{}, removed: map[string]bool{}}
	var img *fsys.Mem
	m.SetHook(func(op fsys.Op) {
		if op.N == at {
			img = m.Crash(fsys.CrashConfig{KeepPercent: keep, Rand: keepRand})
		}
	})
	err := runPowerLossWorkload(m, powerSafe, wseed, model)
	if img == nil {
		// The run made fewer operations than the dry run (the channel
		// workers interleave): cut the power at its end.
		img = m.Crash(fsys.CrashConfig{KeepPercent: keep, Rand: keepRand})
	} else if err == nil || !errors.Is(err, fsys.ErrCrashed) {
		t.Logf("trial %d: the workload ended with %v after the cut", trial, err)
	}
	where := fmt.Sprintf("trial %d (PowerSafe %v, workload seed %d, power cut before file operation %d of about %d, keeping %d%%, keep seed %d)",
		trial, powerSafe, wseed, at, dry.Ops(), keep, keepSeed)
	dev, err := flash.OpenFile("/dev", small(), flash.Options{Seed: 1, FS: img, PowerSafe: powerSafe})
	if err != nil {
		return 0, fmt.Sprintf("%s: device reopen: %v", where, err)
	}
	defer dev.Close()
	if !model.formatted {
		return 0, ""
	}
	fs, err := Open(dev, Options{})
	if err != nil {
		return 0, fmt.Sprintf("%s: sdf reopen: %v", where, err)
	}
	defer fs.Close()
	checked := 0
	for name, want := range model.synced {
		f, err := fs.OpenFile(name)
		if name == model.removing && errors.Is(err, ErrNotExist) {
			continue
		}
		if err != nil {
			return checked, fmt.Sprintf("%s: synced file %s: %v (files %v, open info %+v, removed %v)", where, name, err, fs.List(), fs.OpenInfo(), model.removed)
		}
		got := make([]byte, len(want))
		_, err = f.ReadAt(got, 0)
		f.Close()
		if err != nil {
			return checked, fmt.Sprintf("%s: synced file %s (%d bytes): %v", where, name, len(want), err)
		}
		if !bytes.Equal(got, want) {
			return checked, fmt.Sprintf("%s: synced file %s reads other bytes", where, name)
		}
		checked++
	}
	for name := range model.removed {
		if _, err := fs.Stat(name); err == nil {
			return checked, fmt.Sprintf("%s: removed file %s is back", where, name)
		}
	}
	return checked, ""
}
