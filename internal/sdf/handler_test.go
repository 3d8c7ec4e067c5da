package sdf

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
)

func usageSpread(us []ChannelUsage) (lo, hi float64) {
	lo, hi = 2, -1
	for _, u := range us {
		lo, hi = min(lo, u.Utilization), max(hi, u.Utilization)
	}
	return lo, hi
}

// TestHandlerAfterSuccessiveDieFailures: five dies of one channel fail one
// after another (the paper's worst case, section 7.2.3). After each, the
// lost ranges are identified and rewritten (the cluster's repair) and,
// under CDR, the victim's excess moved (fake failures): every byte reads
// back, and CDR keeps the channels' utilizations within a zone's worth of
// each other while IDR leaves the victim fuller.
func TestHandlerAfterSuccessiveDieFailures(t *testing.T) {
	g := flash.Geometry{Channels: 4, DiesPerChannel: 8, BlocksPerDie: 16, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
	victimGap := map[reparo.Policy]float64{}
	for _, policy := range []reparo.Policy{reparo.HandlerCDR, reparo.HandlerIDR} {
		t.Run(policy.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(21))
			dev, fs := newMem(t, g, Options{Handler: policy, MaxOpenZones: 4})
			defer fs.Close()
			want := map[string][]byte{}
			for i := 0; i < 40; i++ {
				name := fmt.Sprintf("f%02d", i)
				want[name] = randBytes(rng, 100_000+rng.Intn(200_000))
				writeFile(t, fs, name, LifetimeNone, want[name])
			}
			const victim = 2
			for k := 0; k < 5; k++ {
				die := flash.DieAddr{Channel: victim, Die: k}
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
						t.Fatalf("repair of %v after %d failures: %v", r, k+1, err)
					}
				}
				fake := fs.FakeFailures()
				moved, err := fs.Rebalance(0)
				if err != nil {
					t.Fatal(err)
				}
				if policy == reparo.HandlerIDR && (len(fake) != 0 || moved != 0) {
					t.Fatalf("IDR moved %d bytes", moved)
				}
				checkFiles(t, fs, want)
				// The workload goes on: every file is written again, so
				// the data settles where the handler places new zones.
				for name := range want {
					if err := fs.Remove(name); err != nil {
						t.Fatal(err)
					}
					writeFile(t, fs, name, LifetimeNone, want[name])
				}
				if _, err := fs.GC(); err != nil {
					t.Fatal(err)
				}
				checkFiles(t, fs, want)
				us := fs.ChannelUsage()
				lo, hi := usageSpread(us)
				zone := float64(fs.l.DataPagesPerBlock()*(g.DiesPerChannel-k-1)) / float64(us[victim].CapacityPages)
				t.Logf("%v after %d failures: lost %d ranges, fake %d, moved %d B; utilization %.3f..%.3f (victim %.3f); usage %+v",
					policy, k+1, len(lost), len(fake), moved, lo, hi, us[victim].Utilization, us)
				if policy == reparo.HandlerCDR && hi-lo > 2*zone+0.02 {
					t.Fatalf("CDR after %d failures: utilization spread %.3f..%.3f, more than two zones (%.3f)", k+1, lo, hi, zone)
				}
				if k == 4 {
					other := 0.0
					for c, u := range us {
						if c != victim {
							other = max(other, u.Utilization)
						}
					}
					victimGap[policy] = us[victim].Utilization - other
				}
			}
			if got := fs.Stats().FailedDies; got != 5 {
				t.Fatalf("failed dies %d", got)
			}
		})
	}
	t.Logf("victim's utilization above the fullest helper after 5 failures: CDR %.3f, IDR %.3f", victimGap[reparo.HandlerCDR], victimGap[reparo.HandlerIDR])
	if victimGap[reparo.HandlerIDR] <= victimGap[reparo.HandlerCDR] {
		t.Fatalf("IDR did not leave the victim fuller than CDR: %v", victimGap)
	}
}

// TestHealthDegradesWhenSpareRunsOut: dies fail one after another, spread
// over the channels, on a device three quarters full; the device stays
// healthy while the surviving dies hold the live data beside GC's room,
// and reports itself degraded, with the reason, once they no longer do.
func TestHealthDegradesWhenSpareRunsOut(t *testing.T) {
	g := flash.Geometry{Channels: 4, DiesPerChannel: 4, BlocksPerDie: 16, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
	rng := rand.New(rand.NewSource(5))
	dev, fs := newMem(t, g, Options{})
	defer fs.Close()
	if h := fs.Health(); h.Degraded || h.FailedDies != 0 || h.Spare <= 0 {
		t.Fatalf("new device: %+v", h)
	}
	usable := fs.Stats().Usable
	for i := 0; fs.Stats().Live < usable*3/4; i++ {
		writeFile(t, fs, fmt.Sprintf("f%03d", i), LifetimeNone, randBytes(rng, 64<<10))
	}
	degradedAt := 0
	for k := 0; k < g.Channels*(g.DiesPerChannel-1); k++ {
		die := flash.DieAddr{Channel: k % g.Channels, Die: k / g.Channels}
		if err := dev.FailDie(die); err != nil {
			t.Fatal(err)
		}
		if err := fs.MarkDieFailed(die); err != nil {
			t.Fatal(err)
		}
		h := fs.Health()
		t.Logf("%d failed: surviving %s, live %s, GC room %s, spare %s, degraded %t %s", h.FailedDies, h.Surviving, h.Live, h.GCRoom, h.Spare, h.Degraded, h.Reason)
		if h.FailedDies != k+1 {
			t.Fatalf("failed dies %d, want %d", h.FailedDies, k+1)
		}
		if h.Degraded != (h.Live+h.GCRoom > h.Surviving) {
			t.Fatalf("after %d failures: degraded %t with %+v", k+1, h.Degraded, h)
		}
		if h.Degraded {
			if !strings.Contains(h.Reason, "no spare capacity") {
				t.Fatalf("reason %q", h.Reason)
			}
			degradedAt = k + 1
			break
		}
	}
	if degradedAt <= 1 {
		t.Fatalf("degraded after %d failures: the device had spare for at least one", degradedAt)
	}
	// A channel that loses every die degrades the device whatever the room.
	_, fs2 := newMem(t, g, Options{})
	defer fs2.Close()
	for d := 0; d < g.DiesPerChannel; d++ {
		if err := fs2.MarkDieFailed(flash.DieAddr{Channel: 1, Die: d}); err != nil {
			t.Fatal(err)
		}
	}
	if h := fs2.Health(); !h.Degraded || !strings.Contains(h.Reason, "channels [1] lost every die") {
		t.Fatalf("a lost channel: %+v", h)
	}
}
