package sdf

import (
	"fmt"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestSpreadFreeSpaceUsableAfterDieLoss: a device 90% full (of what its
// surviving dies hold) loses a die; its data is repaired and, under each
// Handler, rebalanced. Then the workload overwrites random pages of its
// files for as much as the usable space, so the space it frees is spread thin
// over the zones of every channel, the victim's included: GC must gather it
// (many rounds for one empty zone), and no write may fail for want of space
// while the live data fits. Before the fix, acquireZone gave up after 16 GC
// rounds, each gaining one victim's few dead pages, and reported no space.
func TestSpreadFreeSpaceUsableAfterDieLoss(t *testing.T) {
	g := flash.Geometry{Channels: 4, DiesPerChannel: 4, BlocksPerDie: 16, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
	for _, policy := range []reparo.Policy{reparo.HandlerCDR, reparo.HandlerIDR} {
		t.Run(policy.String(), func(t *testing.T) {
			rng := testseed.Rand(t, "SDF_SEED")
			dev, fs := newMem(t, g, Options{Handler: policy, MaxOpenZones: 4})
			defer fs.Close()
			// Usable after the loss: every data zone on its surviving dies.
			data := fs.l.Zones() - 7
			usable := int64(data*g.DiesPerChannel-g.BlocksPerDie) * int64(fs.l.DataPagesPerBlock()) * int64(g.PageSize)
			want := map[string][]byte{}
			var names []string
			var live int64
			for i := 0; live < usable*90/100; i++ {
				name := fmt.Sprintf("f%03d", i)
				want[name] = randBytes(rng, 64<<10)
				writeFile(t, fs, name, LifetimeNone, want[name])
				names = append(names, name)
				live += int64(len(want[name]))
			}
			die := flash.DieAddr{Channel: 1, Die: 2}
			if err := dev.FailDie(die); err != nil {
				t.Fatal(err)
			}
			if err := fs.MarkDieFailed(die); err != nil {
				t.Fatal(err)
			}
			lost, _, err := fs.LostRanges(die)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range lost {
				if err := fs.RewriteRange(r.Name, r.Off, want[r.Name][r.Off:r.Off+r.Len]); err != nil {
					t.Fatalf("repair of %v: %v", r, err)
				}
			}
			if _, err := fs.Rebalance(0); err != nil {
				t.Fatal(err)
			}
			gcRuns := fs.Stats().GCRuns
			for op := 0; int64(op)*int64(g.PageSize) < usable; op++ {
				name := names[rng.Intn(len(names))]
				off := int64(rng.Intn(len(want[name])/g.PageSize)) * int64(g.PageSize)
				page := want[name][off : off+int64(g.PageSize)]
				rng.Read(page)
				if err := fs.RewriteRange(name, off, page); err != nil {
					t.Fatalf("overwrite %d of %s at %d (live %d of %d usable; usage %+v): %v",
						op, name, off, live, usable, fs.ChannelUsage(), err)
				}
			}
			checkFiles(t, fs, want)
			if fs.Stats().GCRuns == gcRuns {
				t.Fatal("the overwrites never needed GC: the test does not spread the free space")
			}
			t.Logf("%v: live %d of %d usable; usage %+v", policy, live, usable, fs.ChannelUsage())
		})
	}
}
