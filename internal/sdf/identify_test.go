package sdf

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
)

// TestIdentifiersAgreeWithTruth: on seeded random fills (overwrites,
// removes, open zones, GC), IDR, CDR and CDR* list exactly the pages a read
// finds lost on the failed die, over the whole space and window by window.
func TestIdentifiersAgreeWithTruth(t *testing.T) {
	g := flash.Geometry{Channels: 4, DiesPerChannel: 3, BlocksPerDie: 12, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewSource(seed))
			dev, fs := newMem(t, g, Options{MaxOpenZones: 1 + rng.Intn(4)})
			defer fs.Close()
			want := map[string][]byte{}
			for i := 0; i < 60; i++ {
				name := fmt.Sprintf("f%02d", rng.Intn(25))
				data := randBytes(rng, rng.Intn(120_000))
				writeFile(t, fs, name, Lifetime(rng.Intn(int(numLifetimes))), data)
				want[name] = data
				if rng.Intn(7) == 0 {
					fs.Remove(name)
					delete(want, name)
				}
			}
			die := flash.DieAddr{Channel: rng.Intn(g.Channels), Die: rng.Intn(g.DiesPerChannel)}
			if err := dev.FailDie(die); err != nil {
				t.Fatal(err)
			}
			ref := lostByReading(t, fs, want, die)
			if len(ref) == 0 {
				t.Fatalf("nothing on %s: the test proves nothing", die)
			}
			var maxID uint64
			for id := range fs.byID {
				maxID = max(maxID, id)
			}
			for _, m := range reparo.Methods {
				all, st, err := fs.Identify(die, m, reparo.All)
				if err != nil {
					t.Fatal(err)
				}
				if got := rangesToPages(all, int64(g.PageSize)); !reflect.DeepEqual(got, ref) {
					t.Fatalf("%v identified %v\nreads lost %v", m, got, ref)
				}
				// Window by window: the union is the same, each window
				// holds only its files.
				var union []FileRange
				for _, w := range reparo.Windows(maxID, 1+uint64(rng.Intn(7))) {
					rs, _, err := fs.Identify(die, m, w)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range rs {
						if !w.Contains(r.FileID) {
							t.Fatalf("%v window %v returned %v", m, w, r)
						}
					}
					union = append(union, rs...)
				}
				if !reflect.DeepEqual(union, all) {
					t.Fatalf("%v: windows give %v\nwhole space %v", m, union, all)
				}
				t.Logf("%s", st)
			}
		})
	}
	_, fs := newMem(t, small(), Options{})
	defer fs.Close()
	if _, _, err := fs.Identify(flash.DieAddr{Channel: 9}, reparo.IdentifyIDR, reparo.All); err == nil {
		t.Fatal("out-of-range die accepted")
	}
	if _, _, err := fs.Identify(flash.DieAddr{}, reparo.IdentifyIDR, reparo.Window{From: 5, To: 5}); err == nil {
		t.Fatal("empty window accepted")
	}
	if _, _, err := fs.Identify(flash.DieAddr{}, reparo.Method(9), reparo.All); err == nil {
		t.Fatal("unknown method accepted")
	}
}
