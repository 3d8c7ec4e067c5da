package sdf

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
)

func zoneBytes(fs *FS) int {
	return fs.l.DataPagesPerBlock() * fs.l.Geometry.DiesPerChannel * fs.l.Geometry.PageSize
}

func TestZoneRules(t *testing.T) {
	dev, fs := newMem(t, small(), Options{MaxOpenZones: 2})
	defer fs.Close()
	for _, z := range fs.Zones() {
		if z.State != ZoneEmpty && !z.Meta {
			t.Fatalf("after format: %s", z)
		}
	}
	rng := rand.New(rand.NewSource(2))
	// A file of 2.5 zones: two full zones and one open one; extents never
	// cross a zone.
	zb := zoneBytes(fs)
	data := randBytes(rng, zb*5/2)
	writeFile(t, fs, "big", LifetimeLong, data)
	fi, _ := fs.Stat("big")
	if len(fi.Zones) != 3 || fi.Extents != 3 {
		t.Fatalf("big: %s", fi)
	}
	states := map[ZoneState]int{}
	for _, zi := range fs.Zones() {
		if zi.Meta {
			continue
		}
		states[zi.State]++
		if zi.State == ZoneFull && (zi.WritePointer != zi.Capacity || zi.Live != zi.Capacity) {
			t.Fatalf("full zone %s", zi)
		}
		if zi.State == ZoneFull {
			// Striping: both dies of the zone's channel hold the same
			// number of pages, including the P2L page.
			for d := 0; d < fs.l.Geometry.DiesPerChannel; d++ {
				info, _ := dev.Block(flash.BlockAddr{Channel: zi.Channel, Die: d, Block: zi.Block})
				if info.WrittenPage != fs.l.Geometry.PagesPerBlock {
					t.Fatalf("%s: die %d has %d pages written", zi, d, info.WrittenPage)
				}
			}
		}
	}
	if states[ZoneFull] != 2 || states[ZoneOpen] != 1 {
		t.Fatalf("zone states %v", states)
	}
	// Interleaved writers never open more than MaxOpenZones zones.
	var files []*File
	for i := 0; i < 5; i++ {
		f, err := fs.Create(fmt.Sprintf("w%d", i), Lifetime(i%int(numLifetimes)))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	for round := 0; round < 20; round++ {
		for _, f := range files {
			if _, err := f.Write(randBytes(rng, 3*4096)); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			if open := fs.Stats().Zones[ZoneOpen]; open > 2 {
				t.Fatalf("%d open zones with MaxOpenZones 2", open)
			}
		}
	}
	for _, f := range files {
		f.Close()
	}
	// Removing the big file leaves its full zones without live data: they
	// are reset (erased) at once and become empty again.
	before := fs.Stats().Resets
	if err := fs.Remove("big"); err != nil {
		t.Fatal(err)
	}
	if got := fs.Stats().Resets - before; got < 2 {
		t.Fatalf("%d resets after removing a file that filled 2 zones", got)
	}
	for _, z := range fi.Zones[:2] {
		zi := fs.Zones()[z]
		if zi.State != ZoneEmpty || zi.WritePointer != 0 || zi.EraseCount == 0 {
			t.Fatalf("after reset: %s", zi)
		}
	}
}

func TestRoundRobinAndLeastWorn(t *testing.T) {
	g := small()
	dev, err := flash.NewMemory(g, flash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Wear every block of channel 0 except block 9 (zone 9*2+0 = 18), so
	// the least-worn empty zone of channel 0 is zone 18.
	for b := 0; b < g.BlocksPerDie; b++ {
		if b == 9 {
			continue
		}
		for d := 0; d < g.DiesPerChannel; d++ {
			for i := 0; i < 3; i++ {
				if err := dev.Erase(flash.BlockAddr{Channel: 0, Die: d, Block: b}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	fs, err := Format(dev, Options{MaxOpenZones: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	rng := rand.New(rand.NewSource(3))
	zb := zoneBytes(fs)
	var chans []int
	var first []int
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("f%d", i)
		writeFile(t, fs, name, LifetimeMedium, randBytes(rng, zb)) // exactly one zone each
		fi, _ := fs.Stat(name)
		if len(fi.Zones) != 1 {
			t.Fatalf("%s: %s", name, fi)
		}
		chans = append(chans, fs.Zones()[fi.Zones[0]].Channel)
		first = append(first, fi.Zones[0])
	}
	for i := 1; i < len(chans); i++ {
		if chans[i] == chans[i-1] {
			t.Fatalf("zones not round-robin over channels: channels %v (zones %v)", chans, first)
		}
	}
	if chans[0] != 0 || first[0] != 18 {
		t.Fatalf("first zone %d on channel %d; want least-worn zone 18 on channel 0 (zones %v)", first[0], chans[0], first)
	}
}
