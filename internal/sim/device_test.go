package sim

import (
	"errors"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/model"
	"github.com/flashmend/flashmend/internal/testseed"
)

func smallDevice(t *testing.T, cfg DeviceConfig) *Device {
	t.Helper()
	if cfg.LogicalBytes == 0 {
		cfg.LogicalBytes = 2 << 20 // 512 pages
	}
	d, err := NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDeviceRandomOverwrites overwrites random pages of parts filling most
// of the logical capacity, checks the maps after every step batch, and
// checks the erases the device counted against eq. 2 with the victim
// utilization it measured (a second computation of the same quantity).
func TestDeviceRandomOverwrites(t *testing.T) {
	for _, hm := range []bool{false, true} {
		t.Logf("host-managed %v", hm)
		seed := testseed.Seed(t, "SIM_SEED")
		rng := rand.New(rand.NewSource(seed))
		cfg := DeviceConfig{HostManaged: hm, ZoneBlocks: 2}
		if hm {
			cfg.LogicalBytes = 4 << 20
		}
		d := smallDevice(t, cfg)
		partPages := 16
		nParts := int(d.LogicalPages()) * 8 / 10 / partPages
		var parts []int32
		for i := 0; i < nParts; i++ {
			p, err := d.NewPart(partPages)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Write(p, 1<<uint(partPages)-1, 0); err != nil {
				t.Fatal(err)
			}
			parts = append(parts, p)
		}
		start := d.Counters()
		for step := 0; step < 40000; step++ {
			p := parts[rng.Intn(len(parts))]
			if _, err := d.Write(p, 1<<uint(rng.Intn(partPages)), int64(step)); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if step%5000 == 0 {
				if err := d.checkConsistency(); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
			}
			// Now and then a part is trimmed and written again.
			if rng.Intn(500) == 0 {
				i := rng.Intn(len(parts))
				d.FreePart(parts[i])
				np, err := d.NewPart(partPages)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := d.Write(np, 1<<uint(partPages)-1, int64(step)); err != nil {
					t.Fatal(err)
				}
				parts[i] = np
			}
		}
		if err := d.checkConsistency(); err != nil {
			t.Fatal(err)
		}
		c := d.Counters().Sub(start)
		mu := c.VictimUtilization(d.PagesPerEraseUnit())
		est, err := model.EraseEstimate(float64(c.HostPages), int(d.PagesPerEraseUnit()), mu)
		if err != nil {
			t.Fatal(err)
		}
		units := float64(c.Erases) / float64(d.PagesPerEraseUnit()/int64(d.Config().PagesPerBlock))
		wa := float64(c.HostPages+c.GCPages) / float64(c.HostPages)
		waModel, _ := model.WriteAmplification(mu)
		t.Logf("mu %.3f: erase units %.0f, eq. 2 %.1f; WA %.3f, 1/(1-mu) %.3f", mu, units, est, wa, waModel)
		// Eq. 2 holds exactly in steady state; the units open at either
		// end of the window make the difference.
		if math.Abs(est-units) > 0.02*units+float64(d.Config().GCFreeZonesMin+4) {
			t.Errorf("host-managed %v: eq. 2 estimates %.1f erase units, the device counted %.0f", hm, est, units)
		}
		if math.Abs(wa-waModel) > 0.03*waModel {
			t.Errorf("host-managed %v: WA %.3f, model %.3f", hm, wa, waModel)
		}
	}
}

func TestDeviceFullAndBadInput(t *testing.T) {
	d := smallDevice(t, DeviceConfig{})
	var err error
	for err == nil {
		var p int32
		if p, err = d.NewPart(64); err == nil {
			_, err = d.Write(p, ^uint64(0), 0)
		}
	}
	if !errors.Is(err, ErrDeviceFull) || d.LivePages() > d.LogicalPages() {
		t.Fatalf("filling: %v, %d live of %d", err, d.LivePages(), d.LogicalPages())
	}
	if _, err := d.NewPart(65); !base.IsInvalidArgument(err) {
		t.Fatal("65-page part accepted")
	}
	for name, cfg := range map[string]DeviceConfig{
		"no capacity":  {},
		"page":         {LogicalBytes: 1 << 20, PageBytes: 100},
		"op":           {LogicalBytes: 1 << 20, OverProvision: 0.95},
		"free minimum": {LogicalBytes: 1 << 20, GCFreeZonesMin: 1},
		"latency":      {LogicalBytes: 1 << 20, EraseLatency: -1},
	} {
		if _, err := NewDevice(cfg); !base.IsInvalidArgument(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDeviceTimingAndCapacity(t *testing.T) {
	d := smallDevice(t, DeviceConfig{})
	if got, want := d.PhysicalPages(), int64(8*64); got != want {
		// 512 logical pages / 0.85 = 603 pages = 10 blocks, + 4 reserve.
		t.Logf("physical pages %d", got)
	}
	if float64(d.LogicalPages()) > 0.85*float64(d.PhysicalPages()) {
		t.Fatalf("logical %d of physical %d: less than 15%% over-provisioning", d.LogicalPages(), d.PhysicalPages())
	}
	p, _ := d.NewPart(4)
	lat, err := d.Write(p, 0b1111, 1000)
	if err != nil || lat != int64(4*DefaultWriteLatency) {
		t.Fatalf("4-page write: %v, %v", time.Duration(lat), err)
	}
	// A request that arrives while the device is busy waits.
	if lat := d.Read(2, 1000); lat != int64(4*DefaultWriteLatency+2*DefaultReadLatency) {
		t.Fatalf("queued read: %v", time.Duration(lat))
	}
	hm := smallDevice(t, DeviceConfig{HostManaged: true, ZoneBlocks: 4, LogicalBytes: 4 << 20})
	if hm.PagesPerEraseUnit() != 256 || hm.LogicalPages() != 1024 ||
		hm.PhysicalPages() != int64(1024+(defaultSDFFreeZoneMin+2)*256) {
		t.Fatalf("host-managed geometry: %d pages per zone, %d logical, %d physical",
			hm.PagesPerEraseUnit(), hm.LogicalPages(), hm.PhysicalPages())
	}
}

// TestDeviceChannels: with channels, a request's pages are served in
// parallel (round-robin), requests queue per channel, and one channel is
// the single queue; where pages land does not depend on the channels.
func TestDeviceChannels(t *testing.T) {
	w, r := int64(DefaultWriteLatency), int64(DefaultReadLatency)
	for _, tc := range []struct {
		channels int
		// latencies of: a 4-page write at t=0, a 2-page read at t=0, an
		// 8-page write at t=10ms (idle device)
		write4, read2, write8 int64
	}{
		{1, 4 * w, 4*w + 2*r, 8 * w},
		{2, 2 * w, 2*w + r, 4 * w},
		{4, w, w + r, 2 * w},
		// More channels than pages: the read goes to the next two
		// channels, idle.
		{8, w, r, w},
	} {
		d := smallDevice(t, DeviceConfig{Channels: tc.channels})
		p, _ := d.NewPart(8)
		if lat, err := d.Write(p, 0b1111, 0); err != nil || lat != tc.write4 {
			t.Fatalf("%d channels: 4-page write %v (%v), want %v", tc.channels, time.Duration(lat), err, time.Duration(tc.write4))
		}
		if lat := d.Read(2, 0); lat != tc.read2 {
			t.Fatalf("%d channels: queued read %v, want %v", tc.channels, time.Duration(lat), time.Duration(tc.read2))
		}
		if lat, err := d.Write(p, 0xff, int64(10*time.Millisecond)); err != nil || lat != tc.write8 {
			t.Fatalf("%d channels: 8-page write %v (%v), want %v", tc.channels, time.Duration(lat), err, time.Duration(tc.write8))
		}
		if c := d.Counters(); c.HostPages != 12 {
			t.Fatalf("%d channels: %d host pages", tc.channels, c.HostPages)
		}
	}
	if _, err := NewDevice(DeviceConfig{LogicalBytes: 1 << 20, Channels: 1000}); !base.IsInvalidArgument(err) {
		t.Fatalf("1000 channels: %v", err)
	}
}

// TestPrecondition: on a preconditioned device every page programmed costs
// an erase (erases = (host pages + GC copies) / pages per block, to within
// the units still open or free at either end), while the same writes on a
// fresh device erase nothing until its free space is used up; the device's
// maps stay consistent and no counter moves while it is preconditioned.
func TestPrecondition(t *testing.T) {
	seed := testseed.Seed(t, "SIM_SEED")
	for _, hm := range []bool{false, true} {
		cfg := DeviceConfig{HostManaged: hm, ZoneBlocks: 2, LogicalBytes: 8 << 20}
		run := func(precondition bool) Counters {
			rng := rand.New(rand.NewSource(seed))
			d := smallDevice(t, cfg)
			const partPages = 16
			var parts []int32
			// A third of the logical capacity live, as EC's footprint
			// sits on devices sized for REP.
			for i := 0; i < int(d.LogicalPages())/3/partPages; i++ {
				p, err := d.NewPart(partPages)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := d.Write(p, 1<<partPages-1, 0); err != nil {
					t.Fatal(err)
				}
				parts = append(parts, p)
			}
			before := d.Counters()
			if precondition {
				d.Precondition()
				if d.Counters() != before {
					t.Fatalf("preconditioning counted %+v", d.Counters().Sub(before))
				}
				if err := d.checkConsistency(); err != nil {
					t.Fatal(err)
				}
			}
			// Overwrites of half the free space's worth of pages, and on a
			// preconditioned device four times the device more (garbage
			// collection copies then too).
			writes := int(d.PhysicalPages()-d.LivePages()) / 2
			if precondition {
				writes += 4 * int(d.PhysicalPages())
			}
			for i := 0; i < writes; i++ {
				p := parts[rng.Intn(len(parts))]
				if _, err := d.Write(p, 1<<uint(rng.Intn(partPages)), int64(i)); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
			if err := d.checkConsistency(); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			return d.Counters().Sub(before)
		}
		fresh, aged := run(false), run(true)
		if aged.GCPages == 0 {
			t.Errorf("seed %d host-managed %v: no GC copy in %d page writes", seed, hm, aged.HostPages)
		}
		unit := int64(cfg.PagesPerBlock)
		if unit == 0 {
			unit = DefaultPagesPerBlock
		}
		blocksPerUnit := int64(1)
		if hm {
			blocksPerUnit = int64(cfg.ZoneBlocks)
			unit *= blocksPerUnit
		}
		want := (aged.HostPages + aged.GCPages) / unit * blocksPerUnit
		slack := int64(8) * blocksPerUnit // open and reserve units
		t.Logf("host-managed %v: fresh %+v, preconditioned %+v (want about %d erases)", hm, fresh, aged, want)
		if aged.Erases < want-slack || aged.Erases > want+slack {
			t.Errorf("seed %d host-managed %v: preconditioned device erased %d blocks for %d programs, want %d +- %d",
				seed, hm, aged.Erases, aged.HostPages+aged.GCPages, want, slack)
		}
		if fresh.Erases != 0 {
			t.Errorf("seed %d host-managed %v: fresh device erased %d blocks writing half its free space", seed, hm, fresh.Erases)
		}
	}
}
