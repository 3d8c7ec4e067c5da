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
		wseed := rng.Int63()
		dry := fsys.NewMem()
		if err := runPowerLossWorkload(dry, true, wseed, &plModel{synced: map[string][]byte{}, removed: map[string]bool{}}); err != nil {
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
		err := runPowerLossWorkload(m, true, wseed, model)
		if img == nil {
			// The run made fewer operations than the dry run (the channel
			// workers interleave): cut the power at its end.
			img = m.Crash(fsys.CrashConfig{KeepPercent: keep, Rand: keepRand})
		} else if err == nil || !errors.Is(err, fsys.ErrCrashed) {
			t.Logf("trial %d: the workload ended with %v after the cut", trial, err)
		}
		where := fmt.Sprintf("trial %d (workload seed %d, power cut before file operation %d of about %d, keeping %d%%, keep seed %d)", trial, wseed, at, dry.Ops(), keep, keepSeed)
		dev, err := flash.OpenFile("/dev", small(), flash.Options{Seed: 1, FS: img, PowerSafe: true})
		if err != nil {
			t.Fatalf("%s: device reopen: %v", where, err)
		}
		if !model.formatted {
			_ = dev.Close()
			continue
		}
		fs, err := Open(dev, Options{})
		if err != nil {
			t.Fatalf("%s: sdf reopen: %v", where, err)
		}
		for name, want := range model.synced {
			f, err := fs.OpenFile(name)
			if name == model.removing && errors.Is(err, ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatalf("%s: synced file %s: %v (files %v, open info %+v, removed %v)", where, name, err, fs.List(), fs.OpenInfo(), model.removed)
			}
			got := make([]byte, len(want))
			if _, err := f.ReadAt(got, 0); err != nil {
				t.Fatalf("%s: synced file %s (%d bytes): %v", where, name, len(want), err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: synced file %s reads other bytes", where, name)
			}
			f.Close()
			checked++
		}
		for name := range model.removed {
			if _, err := fs.Stat(name); err == nil {
				t.Fatalf("%s: removed file %s is back", where, name)
			}
		}
		if err := fs.Close(); err != nil {
			t.Fatalf("%s: close: %v", where, err)
		}
		if err := dev.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d synced files checked", checked)
	if checked == 0 {
		t.Fatal("no synced file was checked")
	}
}
