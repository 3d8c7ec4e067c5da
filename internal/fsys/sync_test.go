package fsys

import (
	"bytes"
	"math/rand"
	"os"
	"testing"

	"github.com/flashmend/flashmend/internal/testseed"
)

// A Sync copies only the sectors written since the last one when the size
// did not change: seeded runs of writes (in place, growing), truncates and
// syncs, each ended by a power cut keeping nothing unsynced, must leave
// exactly what the last Sync saw.
func TestMemSyncKeepsExactlyTheLastSyncedContent(t *testing.T) {
	rng := testseed.Rand(t, "FLASHMEND_FSYS_SEED")
	for trial := 0; trial < 200; trial++ {
		m := NewMem()
		f, err := m.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		var model, synced []byte
		steps := 1 + rng.Intn(60)
		for i := 0; i < steps; i++ {
			switch r := rng.Intn(10); {
			case r < 6:
				off := int64(rng.Intn(len(model) + 2000))
				p := make([]byte, 1+rng.Intn(1500))
				rng.Read(p)
				if _, err := f.WriteAt(p, off); err != nil {
					t.Fatal(err)
				}
				if end := int(off) + len(p); end > len(model) {
					model = append(model, make([]byte, end-len(model))...)
				}
				copy(model[off:], p)
			case r < 7:
				size := rng.Intn(len(model) + 1)
				if err := f.Truncate(int64(size)); err != nil {
					t.Fatal(err)
				}
				model = append([]byte(nil), model[:size]...)
			default:
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
				synced = bytes.Clone(model)
			}
		}
		img := m.Crash(CrashConfig{KeepPercent: 0, Rand: rand.New(rand.NewSource(1))})
		got, err := ReadFile(img, "/f")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, synced) {
			t.Fatalf("trial %d (%d steps): the image holds %d bytes, the last sync %d", trial, steps, len(got), len(synced))
		}
	}
}
