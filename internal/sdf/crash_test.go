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

// TestCrashRecoveryRandom crashes repeatedly in the middle of a seeded
// workload of appends and syncs on several files. After every crash each
// file must hold at least its synced bytes, and every byte it holds must be
// a prefix of what was appended (unsynced pages may survive, never garbage
// or a hole).
func TestCrashRecoveryRandom(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	dev, fs := newMem(t, small(), Options{MaxOpenZones: 4})
	written := map[string][]byte{} // everything appended, per file
	var recovered int64
	synced := map[string]int{} // bytes synced
	for crash := 0; crash < 6; crash++ {
		files := map[string]*File{}
		for i := 0; i < 3; i++ {
			name := fmt.Sprintf("c%d-f%d", crash, i)
			f, err := fs.Create(name, Lifetime(rng.Intn(3)))
			if err != nil {
				t.Fatal(err)
			}
			files[name] = f
			written[name] = nil
			synced[name] = 0
		}
		for step := 0; step < 40; step++ {
			name := fmt.Sprintf("c%d-f%d", crash, rng.Intn(3))
			f := files[name]
			chunk := randBytes(rng, 1+rng.Intn(12_000))
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
			written[name] = append(written[name], chunk...)
			if rng.Intn(3) == 0 {
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
				synced[name] = len(written[name])
			}
		}
		// Crash: abandon fs and its open writers; reopen the device.
		var err error
		if fs, err = Open(dev, Options{MaxOpenZones: 4}); err != nil {
			t.Fatalf("crash %d: %v", crash, err)
		}
		recovered += fs.Stats().RecoveredPages
		for name, all := range written {
			st, err := fs.Stat(name)
			if err != nil {
				t.Fatalf("crash %d: %s: %v", crash, name, err)
			}
			if st.Size < int64(synced[name]) || st.Size > int64(len(all)) {
				t.Fatalf("crash %d: %s size %d, synced %d, written %d", crash, name, st.Size, synced[name], len(all))
			}
			mustEqual(t, fmt.Sprintf("crash %d: %s", crash, name), readFile(t, fs, name), all[:st.Size])
			// What survived is what later crashes must keep.
			written[name] = all[:st.Size]
			synced[name] = int(st.Size)
		}
	}
	if st := fs.Stats(); st.Files != len(written) {
		t.Fatalf("%d files, want %d", st.Files, len(written))
	}
	if recovered == 0 {
		t.Fatal("no page was recovered from OOB: the test misses the recovery path")
	}
	t.Logf("%d pages recovered from OOB over 6 crashes", recovered)
	fs.Close()
}
