package sdf

import (
	"fmt"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// ZoneState is a zone's state in the NVMe ZNS sense.
type ZoneState uint8

const (
	// ZoneEmpty: erased, write pointer at 0.
	ZoneEmpty ZoneState = iota
	// ZoneOpen: partially written, accepting appends at the write pointer.
	ZoneOpen
	// ZoneFull: every data page and the P2L pages are written.
	ZoneFull
	// ZoneReadOnly: the host stopped writing (a program failed or a die
	// failed); readable pages stay readable until the zone is reset.
	ZoneReadOnly
	// ZoneOffline: no usable block (every block of the zone is bad or on a
	// failed die); never allocated again.
	ZoneOffline
	numZoneStates
)

func (s ZoneState) String() string {
	switch s {
	case ZoneEmpty:
		return "empty"
	case ZoneOpen:
		return "open"
	case ZoneFull:
		return "full"
	case ZoneReadOnly:
		return "read-only"
	case ZoneOffline:
		return "offline"
	}
	return fmt.Sprintf("zonestate(%d)", uint8(s))
}

// zone is the host's record of one zone. Fields are guarded by FS.mu, except
// wmu, which serializes the programs of the zone so they reach each block in
// page order.
type zone struct {
	id, channel, block int
	// meta: a metadata zone, or a data zone lent to the journal for a
	// checkpoint body (body); either way no file's, and laid out as a
	// metadata zone (no P2L page).
	meta, body bool

	// dies are the zone's good dies at its last reset, ascending; pages are
	// striped over them. Invariant: the die set only changes on reset.
	dies  []int
	state ZoneState
	// wp is the number of data pages reserved (written or being written).
	// Invariant: 0 <= wp <= capacity().
	wp int
	// live is the number of data pages some file maps.
	// Invariant: 0 <= live <= wp.
	live      int
	hint      Lifetime
	erases    int       // highest erase count of the zone's blocks
	lastWrite time.Time // for cost-benefit GC
	gen       uint64    // bumped on every reset
	// owners[i] names the file page programmed at data page i (for P2L
	// entrustment). ownersKnown is false after a reopen for pages written
	// before it, which are then read back from their OOB when needed.
	owners      []onflash.Owner
	ownersKnown []bool
	// p2l: the entrusted P2L pages of the zone are written.
	p2l bool
	// writers counts files currently programming in the zone.
	writers int
	// gcStuck: the zone holds live pages that cannot be read, so GC skips it.
	gcStuck bool
	// gc: GC opened the zone for its relocations; other writes do not use
	// it (pickZoneLocked). Set each time the zone is opened.
	gc bool
	// unsealed: opened since its last reset and not yet sealed (a
	// onflash.RecZoneOpen without a later onflash.RecZoneSealed): replay must scan its
	// pages for synced data whose extents were not journaled.
	unsealed bool

	wmu sync.Mutex
}

func (z *zone) String() string {
	return fmt.Sprintf("zone %d (ch%d/b%d) %s wp=%d live=%d dies=%v pe=%d",
		z.id, z.channel, z.block, z.state, z.wp, z.live, z.dies, z.erases)
}

// capacity is the zone's data pages.
func (z *zone) capacity(l onflash.Layout) int {
	if z.meta {
		return len(z.dies) * l.Geometry.PagesPerBlock
	}
	return len(z.dies) * l.DataPagesPerBlock()
}

// writable reports whether the zone accepts appends.
func (z *zone) writable(l onflash.Layout) bool {
	return !z.meta && (z.state == ZoneEmpty || z.state == ZoneOpen) && len(z.dies) > 0 && z.wp < z.capacity(l)
}

// neighbour is the die whose block's last page holds the P2L entries of die
// d's block in this zone: the previous die of the stripe (Reparo 6.2: each
// block's owners are entrusted to a neighbouring die). ok is false when the
// zone has a single die, which has no neighbour.
func (z *zone) entrustedTo(d int) (host int, ok bool) {
	if len(z.dies) < 2 {
		return 0, false
	}
	for i, x := range z.dies {
		if x == d {
			return z.dies[(i+len(z.dies)-1)%len(z.dies)], true
		}
	}
	return 0, false
}

// dieIndex is d's position in the stripe, or -1.
func (z *zone) dieIndex(d int) int {
	for i, x := range z.dies {
		if x == d {
			return i
		}
	}
	return -1
}
