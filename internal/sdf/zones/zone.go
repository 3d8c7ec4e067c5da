package zones

import (
	"fmt"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// ErrNoSpace: no zone can take what is asked (wraps base.ErrNoSpace; it is
// sdf.ErrNoSpace).
var ErrNoSpace = base.NoSpaceErrorf("sdf: no space left on device")

// State is a zone's state in the NVMe ZNS sense.
type State uint8

const (
	// Empty: erased, write pointer at 0.
	Empty State = iota
	// Open: partially written, accepting appends at the write pointer.
	Open
	// Full: every data page and the P2L pages are written.
	Full
	// ReadOnly: the host stopped writing (a program failed or a die
	// failed); readable pages stay readable until the zone is reset.
	ReadOnly
	// Offline: no usable block (every block of the zone is bad or on a
	// failed die); never allocated again.
	Offline
	// NumStates is the number of states.
	NumStates
)

func (s State) String() string {
	switch s {
	case Empty:
		return "empty"
	case Open:
		return "open"
	case Full:
		return "full"
	case ReadOnly:
		return "read-only"
	case Offline:
		return "offline"
	}
	return fmt.Sprintf("zonestate(%d)", uint8(s))
}

// Zone is the host's record of one zone. Its fields are guarded by the
// lock of the Table's owner (internal/sdf's FS.mu), except Prog.
type Zone struct {
	ID, Channel, Block int
	// Meta: a metadata zone, or a data zone lent to the journal for a
	// checkpoint body (Body); either way no file's, and laid out as a
	// metadata zone (no P2L page).
	Meta, Body bool

	// Dies are the zone's good dies at its last reset, ascending; pages are
	// striped over them. Invariant: the die set only changes on reset.
	Dies  []int
	State State
	// WP is the number of data pages reserved (written or being written).
	// Invariant: 0 <= WP <= Capacity().
	WP int
	// Live is the number of data pages some file maps.
	// Invariant: 0 <= Live <= WP.
	Live int
	// Hint is the lifetime hint (sdf.Lifetime) of the files that write to
	// the zone, set when it is opened.
	Hint      uint8
	Erases    int       // highest erase count of the zone's blocks
	LastWrite time.Time // for cost-benefit GC
	// Owners[i] names the file page programmed at data page i (for P2L
	// entrustment). OwnersKnown is false after a reopen for pages written
	// before it, which are then read back from their OOB when needed.
	Owners      []onflash.Owner
	OwnersKnown []bool
	// P2L: the entrusted P2L pages of the zone are written.
	P2L bool
	// Writers counts files currently programming in the zone.
	Writers int
	// GCStuck: the zone holds live pages that cannot be read, so GC skips it.
	GCStuck bool
	// GC: GC opened the zone for its relocations; other writes do not use
	// it (Table.Pick). Set each time the zone is opened.
	GC bool
	// Unsealed: opened since its last reset and not yet sealed (a
	// onflash.RecZoneOpen without a later onflash.RecZoneSealed): replay
	// must scan its pages for synced data whose extents were not
	// journaled.
	Unsealed bool

	// Prog serializes the programs of the zone so they reach each block in
	// page order (held by the writer around its programs, never by this
	// package).
	Prog sync.Mutex
}

func (z *Zone) String() string {
	return fmt.Sprintf("zone %d (ch%d/b%d) %s wp=%d live=%d dies=%v pe=%d",
		z.ID, z.Channel, z.Block, z.State, z.WP, z.Live, z.Dies, z.Erases)
}

// Capacity is the zone's data pages (a metadata zone's pages).
func (z *Zone) Capacity(l onflash.Layout) int {
	if z.Meta {
		return len(z.Dies) * l.Geometry.PagesPerBlock
	}
	return len(z.Dies) * l.DataPagesPerBlock()
}

// Writable reports whether the zone accepts appends.
func (z *Zone) Writable(l onflash.Layout) bool {
	return !z.Meta && (z.State == Empty || z.State == Open) && len(z.Dies) > 0 && z.WP < z.Capacity(l)
}

// EntrustedTo is the die whose block's last page holds the P2L entries of
// die d's block in this zone: the previous die of the stripe (Reparo 6.2:
// each block's owners are entrusted to a neighbouring die). ok is false when
// the zone has a single die, which has no neighbour.
func (z *Zone) EntrustedTo(d int) (host int, ok bool) {
	if len(z.Dies) < 2 {
		return 0, false
	}
	for i, x := range z.Dies {
		if x == d {
			return z.Dies[(i+len(z.Dies)-1)%len(z.Dies)], true
		}
	}
	return 0, false
}

// DieIndex is d's position in the stripe, or -1.
func (z *Zone) DieIndex(d int) int {
	for i, x := range z.Dies {
		if x == d {
			return i
		}
	}
	return -1
}

// DropDie takes die d out of the zone's die set (a zone that is erased, or
// was never programmed, is re-formed without a die that failed).
func (z *Zone) DropDie(d int) {
	var dies []int
	for _, x := range z.Dies {
		if x != d {
			dies = append(dies, x)
		}
	}
	z.Dies = dies
}

// Open opens an empty zone for the appends of files with lifetime hint
// hint (forGC: for GC's relocations only). The caller journals the zone's
// opening (onflash.RecZoneOpen).
func (z *Zone) Open(hint uint8, forGC bool) {
	z.GC = forGC
	z.State = Open
	z.Hint = hint
	z.Unsealed = true
}

// Finish marks a zone whose every data page is programmed full (if it was
// open) and records whether its P2L pages are written. sealed reports that
// the zone was unsealed: the caller journals its sealing
// (onflash.RecZoneSealed), after its extents.
func (z *Zone) Finish(p2l bool) (sealed bool) {
	z.P2L = p2l
	if z.State == Open {
		z.State = Full
	}
	sealed = z.Unsealed
	z.Unsealed = false
	return sealed
}

// Reset records that the zone was erased on dies (its surviving good
// dies): empty, or offline when no die is left.
func (z *Zone) Reset(dies []int) {
	z.Dies = dies
	z.WP, z.Live, z.P2L, z.GCStuck, z.Unsealed = 0, 0, false, false, false
	z.Owners, z.OwnersKnown = nil, nil
	z.Erases++
	z.State = Empty
	if len(dies) == 0 {
		z.State = Offline
	}
}

// Reclaimable reports whether the zone is a data zone no file maps that
// takes no more writes: its erase loses nothing.
func (z *Zone) Reclaimable() bool {
	return !z.Meta && z.Live == 0 && z.Writers == 0 && (z.State == Full || z.State == ReadOnly)
}
