package sdf

import (
	"fmt"
	"math/rand"
	"testing"
)

// TestCrashKeepsSyncedData abandons an FS without closing it (a crash: the
// pending journal records and buffered bytes are lost) and checks that a
// new FS on the same device has every synced byte, and that writing goes
// on correctly over the orphaned pages.
func TestCrashKeepsSyncedData(t *testing.T) {
	for seed := int64(0); seed < 5; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dev, fs := newMem(t, small(), Options{MaxOpenZones: 3})
			rng := rand.New(rand.NewSource(seed))
			synced := map[string][]byte{}
			for i := 0; i < 6; i++ {
				name := fmt.Sprintf("f%d", i)
				f, err := fs.Create(name, Lifetime(i%3))
				if err != nil {
					t.Fatal(err)
				}
				var data []byte
				for j := 0; j < 4; j++ {
					chunk := randBytes(rng, rng.Intn(40_000))
					f.Write(chunk)
					data = append(data, chunk...)
					if rng.Intn(2) == 0 {
						if err := f.Sync(); err != nil {
							t.Fatal(err)
						}
						synced[name] = append([]byte(nil), data...)
					}
				}
				// Some bytes stay unsynced: written to flash or buffered.
				f.Write(randBytes(rng, rng.Intn(300_000)))
			}
			// Crash: no Close, no flush. A new FS replays what is durable.
			fs2, err := Open(dev, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer fs2.Close()
			for name, want := range synced {
				st, err := fs2.Stat(name)
				if err != nil {
					t.Fatal(err)
				}
				if st.Size < int64(len(want)) {
					t.Fatalf("%s: size %d after crash, %d bytes were synced", name, st.Size, len(want))
				}
				got := make([]byte, len(want))
				f, _ := fs2.OpenFile(name)
				if _, err := f.ReadAt(got, 0); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				f.Close()
				mustEqual(t, name, got, want)
			}
			// Writing continues over the orphaned pages.
			more := randBytes(rng, 500_000)
			writeFile(t, fs2, "after", LifetimeNone, more)
			mustEqual(t, "after", readFile(t, fs2, "after"), more)
		})
	}
}
