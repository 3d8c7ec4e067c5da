package sdf

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
)

// repairDie rewrites what the identifier says die d lost from want (the
// cluster's repair, with the reference copy standing in for the remote
// replicas) until nothing live is left on it.
func repairDie(fs *FS, d flash.DieAddr, want map[string][]byte, mu *sync.Mutex) error {
	for round := 0; round < 5; round++ {
		lost, _, err := fs.Identify(d, reparo.IdentifyCDRStar, reparo.All)
		if err != nil {
			return err
		}
		if len(lost) == 0 {
			return nil
		}
		for _, r := range lost {
			mu.Lock()
			data := want[r.Name]
			mu.Unlock()
			if int64(len(data)) < r.Off+r.Len {
				continue // rewritten or removed meanwhile
			}
			if err := fs.RewriteRange(r.Name, r.Off, data[r.Off:r.Off+r.Len]); err != nil {
				return fmt.Errorf("repair %v: %w", r, err)
			}
		}
	}
	return fmt.Errorf("die %s still holds live data after five rounds", d)
}

// TestDieFailureDuringActivity: a die fails while files are written, while
// GC relocates, and while the repair of an earlier die failure runs. Writes
// never fail because of it (their pages go elsewhere), what the dead dies
// held is identified and repaired, and every byte reads back.
func TestDieFailureDuringActivity(t *testing.T) {
	g := flash.Geometry{Channels: 4, DiesPerChannel: 3, BlocksPerDie: 24, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
	for _, during := range []string{"writes", "gc", "repair"} {
		t.Run(during, func(t *testing.T) {
			const seed = 31
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewSource(seed))
			dev, fs := newMem(t, g, Options{MaxOpenZones: 4})
			defer fs.Close()
			want := map[string][]byte{}
			var mu sync.Mutex
			for i := 0; i < 30; i++ {
				name := fmt.Sprintf("f%02d", i%20)
				want[name] = randBytes(rng, 20_000+rng.Intn(150_000))
				writeFile(t, fs, name, Lifetime(rng.Intn(int(numLifetimes))), want[name])
			}
			first := flash.DieAddr{Channel: 1, Die: 2}
			second := flash.DieAddr{Channel: 3, Die: 0}
			fail := func(d flash.DieAddr) {
				if err := dev.FailDie(d); err != nil {
					t.Error(err)
				}
				if err := fs.MarkDieFailed(d); err != nil {
					t.Error(err)
				}
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			switch during {
			case "writes":
				wg.Add(1)
				go func() {
					defer wg.Done()
					wrng := rand.New(rand.NewSource(seed + 1))
					close(start)
					for i := 0; i < 20; i++ {
						name := fmt.Sprintf("w%02d", i)
						data := randBytes(wrng, 10_000+wrng.Intn(120_000))
						f, err := fs.Create(name, LifetimeNone)
						if err == nil {
							_, err = f.Write(data)
							if cerr := f.Close(); err == nil {
								err = cerr
							}
						}
						if err != nil {
							t.Errorf("write %s while a die fails: %v", name, err)
							return
						}
						mu.Lock()
						want[name] = data
						mu.Unlock()
					}
				}()
				<-start
				fail(first)
			case "gc":
				for i := 0; i < 20; i++ { // garbage for GC to collect
					name := fmt.Sprintf("f%02d", i)
					want[name] = randBytes(rng, 20_000+rng.Intn(150_000))
					writeFile(t, fs, name, LifetimeNone, want[name])
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					close(start)
					if _, err := fs.GC(); err != nil {
						t.Errorf("gc: %v", err)
					}
				}()
				<-start
				fail(first)
			case "repair":
				fail(first)
				wg.Add(1)
				go func() {
					defer wg.Done()
					close(start)
					if err := repairDie(fs, first, want, &mu); err != nil {
						t.Error(err)
					}
				}()
				<-start
				fail(second)
			}
			wg.Wait()
			if err := repairDie(fs, first, want, &mu); err != nil {
				t.Fatal(err)
			}
			if during == "repair" {
				if err := repairDie(fs, second, want, &mu); err != nil {
					t.Fatal(err)
				}
			}
			checkFiles(t, fs, want)
			if err := fs.Close(); err != nil {
				t.Fatal(err)
			}
			// And after a reopen.
			fs2, err := Open(dev, Options{MaxOpenZones: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer fs2.Close()
			checkFiles(t, fs2, want)
		})
	}
}
