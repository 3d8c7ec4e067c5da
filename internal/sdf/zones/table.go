package zones

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// Table is the zone table of one device: every zone, the state of every
// block read at open, the dies known failed, and the allocation state (the
// round-robin cursor, Reparo's channel weights, the channels Rebalance
// drains). It holds no lock and does no I/O: its owner (internal/sdf's
// FS) guards it with its mutex and runs the erases and programs.
type Table struct {
	L onflash.Layout
	// All is every zone by ID; the first onflash.MetaZoneCount are the
	// metadata zones.
	All []*Zone
	// Blocks is every block's state read at open, by BlockIndex; Bad is
	// kept current as erases fail.
	Blocks []flash.BlockInfo
	Failed map[flash.DieAddr]bool
	// Alloc chooses the channel of new zones once a die failed (Reparo's
	// Handler, SetWeights); nil before. Avoid, during a rebalance, marks
	// the channels holding more than their share.
	Alloc *reparo.Allocator
	Avoid []bool
	rr    int // next channel for round-robin zone allocation
}

// New is the table of a device of layout l whose blocks are in the state
// blocks (by BlockIndex): every zone empty on every die, worn as its most
// worn block.
func New(l onflash.Layout, blocks []flash.BlockInfo) *Table {
	t := &Table{L: l, Blocks: blocks, Failed: map[flash.DieAddr]bool{}}
	for z := 0; z < l.Zones(); z++ {
		zn := &Zone{ID: z, Channel: l.ZoneChannel(z), Block: l.ZoneBlock(z), Meta: l.IsMeta(z)}
		zn.Dies = onflash.DiesOf(l.FullDieMask())
		for d := 0; d < l.Geometry.DiesPerChannel; d++ {
			zn.Erases = max(zn.Erases, t.Block(l.ZoneBlockAddr(z, d)).EraseCount)
		}
		t.All = append(t.All, zn)
	}
	return t
}

// LoadBlocks reads the state of every block of dev, by BlockIndex: what a
// table starts from on open (New).
func LoadBlocks(dev flash.Device) ([]flash.BlockInfo, error) {
	g := dev.Geometry()
	blocks := make([]flash.BlockInfo, g.Dies()*g.BlocksPerDie)
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			for b := 0; b < g.BlocksPerDie; b++ {
				a := flash.BlockAddr{Channel: c, Die: d, Block: b}
				info, err := dev.Block(a)
				if err != nil {
					return nil, fmt.Errorf("sdf: reading block state of %s: %w", a, err)
				}
				blocks[BlockIndex(g, a)] = info
			}
		}
	}
	return blocks, nil
}

// BlockIndex is a's index in Blocks.
func BlockIndex(g flash.Geometry, a flash.BlockAddr) int {
	return (a.Channel*g.DiesPerChannel+a.Die)*g.BlocksPerDie + a.Block
}

// Block is block a's state as of open (Bad kept current).
func (t *Table) Block(a flash.BlockAddr) flash.BlockInfo {
	return t.Blocks[BlockIndex(t.L.Geometry, a)]
}

// MarkBad records that block a went bad.
func (t *Table) MarkBad(a flash.BlockAddr) { t.Blocks[BlockIndex(t.L.Geometry, a)].Bad = true }

// Data is the data zones (every zone after the metadata zones).
func (t *Table) Data() []*Zone { return t.All[onflash.MetaZoneCount:] }

// Meta is the metadata zones.
func (t *Table) Meta() []*Zone { return t.All[:onflash.MetaZoneCount] }

// OnChannel is the zone of block b on channel c.
func (t *Table) OnChannel(c, b int) *Zone { return t.All[b*t.L.Geometry.Channels+c] }

// GoodDies lists the dies of zone z whose block was not bad at open (or
// since) and whose die is not known failed.
func (t *Table) GoodDies(z *Zone) []int {
	var dies []int
	for d := 0; d < t.L.Geometry.DiesPerChannel; d++ {
		if t.Block(t.L.ZoneBlockAddr(z.ID, d)).Bad || t.Failed[flash.DieAddr{Channel: z.Channel, Die: d}] {
			continue
		}
		dies = append(dies, d)
	}
	return dies
}

// FailedList lists the failed dies in die order.
func (t *Table) FailedList() []flash.DieAddr {
	var out []flash.DieAddr
	for d := range t.Failed {
		out = append(out, d)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Index(t.L.Geometry) < out[b].Index(t.L.Geometry) })
	return out
}

// LiveDies counts the surviving dies of every channel.
func (t *Table) LiveDies() []int {
	g := t.L.Geometry
	out := make([]int, g.Channels)
	for c := range out {
		for d := 0; d < g.DiesPerChannel; d++ {
			if !t.Failed[flash.DieAddr{Channel: c, Die: d}] {
				out[c]++
			}
		}
	}
	return out
}

// SetWeights sets the allocator's channel weights from the surviving dies
// under policy (after a die failure).
func (t *Table) SetWeights(policy reparo.Policy) {
	live := t.LiveDies()
	w := reparo.ZoneWeights(reparo.Shares(policy, live), live)
	if t.Alloc == nil {
		t.Alloc = reparo.NewAllocator(w)
	} else {
		t.Alloc.SetWeights(w)
	}
}

// CountState counts the data zones in state s.
func (t *Table) CountState(s State) int {
	n := 0
	for _, z := range t.Data() {
		if z.State == s {
			n++
		}
	}
	return n
}

// Avoided reports whether a rebalance is moving data off channel c.
func (t *Table) Avoided(c int) bool { return c < len(t.Avoid) && t.Avoid[c] }

// EmptyOn is the least-worn empty data zone of channel c (ties to the
// lowest ID), or nil.
func (t *Table) EmptyOn(c int) *Zone {
	var best *Zone
	for b := 0; b < t.L.Geometry.BlocksPerDie; b++ {
		z := t.OnChannel(c, b)
		if z.Meta || z.State != Empty || len(z.Dies) == 0 {
			continue
		}
		if best == nil || z.Erases < best.Erases {
			best = z
		}
	}
	return best
}

// AllocEmpty hands out an empty zone on channel only (< 0: any): channels
// in round-robin order (SDF places consecutive writes on consecutive
// channels), or by the allocator's weights once a die failed (Reparo's
// Handler), and on the channel the least-worn empty zone (dynamic wear
// leveling).
func (t *Table) AllocEmpty(only int) *Zone {
	C := t.L.Geometry.Channels
	if t.Alloc != nil && only < 0 {
		if ch := t.Alloc.Next(func(c int) bool { return !t.Avoided(c) && t.EmptyOn(c) != nil }); ch >= 0 {
			return t.EmptyOn(ch)
		}
		if t.Avoid == nil {
			return nil
		}
	}
	for i := 0; i < C; i++ {
		ch := (t.rr + i) % C
		if (only >= 0 && ch != only) || (only < 0 && t.Avoided(ch)) {
			continue
		}
		if best := t.EmptyOn(ch); best != nil {
			if only < 0 {
				t.rr = ch + 1
			}
			return best
		}
	}
	return nil
}

// Request is what a writer asks Pick for.
type Request struct {
	Hint uint8 // the file's lifetime hint
	// Last is the zone of the file's last write, preferred for the next.
	Last *Zone
	// Channel is the only channel the zone may be on (< 0: any).
	Channel int
	// MinEmpty: an empty zone is handed out only while more than MinEmpty
	// are left.
	MinEmpty int
	// ForGC: the zone takes GC's relocations.
	ForGC bool
	// MaxOpen bounds the open zones (a new zone is opened only below it).
	MaxOpen int
}

// Pick chooses a zone to append to. Preference: the file's last zone; an
// open zone of the same lifetime hint that nobody is writing; a new zone
// (AllocEmpty) while fewer than MaxOpen are open; any idle open zone, the
// nearest hint first; the open zone with the fewest writers. needGC is set
// when the caller should collect garbage before a new zone is handed out.
//
// Zones GC opened take only GC's relocations (Zone.GC), and GC writes to
// them or to a new zone first: NB: when other writers could take the pages
// of GC's zone while it relocates a victim, GC would need more zones than
// the victim's live pages fill, and could take the last empty zone and
// still fail, leaving no zone for any GC again.
func (t *Table) Pick(r Request) (z *Zone, needGC bool) {
	if p := r.Last; p != nil && p.State == Open && p.GC == r.ForGC && p.Hint == r.Hint && p.Writable(t.L) && p.Writers == 0 &&
		(r.Channel < 0 || p.Channel == r.Channel) && !t.Avoided(p.Channel) {
		return p, false
	}
	open := 0
	var sameHint, anyIdle, anyOpen, own *Zone
	for _, c := range t.Data() {
		if c.State != Open {
			continue
		}
		open++
		if !c.Writable(t.L) || (r.Channel >= 0 && c.Channel != r.Channel) || (r.Channel < 0 && t.Avoided(c.Channel)) {
			continue
		}
		if c.GC && r.ForGC && c.Writers == 0 && own == nil {
			own = c
		}
		if c.GC && !r.ForGC {
			continue
		}
		if c.Writers == 0 && c.Hint == r.Hint && sameHint == nil {
			sameHint = c
		}
		if c.Writers == 0 && (anyIdle == nil || hintDistance(c.Hint, r.Hint) < hintDistance(anyIdle.Hint, r.Hint)) {
			anyIdle = c
		}
		if anyOpen == nil || c.Writers < anyOpen.Writers {
			anyOpen = c
		}
	}
	if r.ForGC {
		if own != nil {
			return own, false
		}
		if t.CountState(Empty) > 0 {
			if e := t.AllocEmpty(r.Channel); e != nil {
				return e, false
			}
		}
	}
	if sameHint != nil {
		return sameHint, false
	}
	if open < r.MaxOpen {
		if t.CountState(Empty) > r.MinEmpty {
			if e := t.AllocEmpty(r.Channel); e != nil {
				return e, false
			}
		} else if anyIdle == nil && anyOpen == nil {
			return nil, true
		}
	}
	if anyIdle != nil {
		return anyIdle, false
	}
	if anyOpen != nil {
		return anyOpen, false
	}
	if t.CountState(Empty) > r.MinEmpty {
		if e := t.AllocEmpty(r.Channel); e != nil {
			return e, false
		}
	}
	return nil, true
}

func hintDistance(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// Victim chooses the zone GC collects among the full and read-only data
// zones that hold dead pages and nobody writes: with costBenefit the one
// maximising age*(1-u)/(2u) (Rosenblum and Ousterhout's LFS cleaner, u the
// live fraction, age since the zone's last write at now), else the one
// with the lowest u (greedy). nil: no victim.
//
// u is measured against what the zone holds once reset (ResetCapacity):
// the pages of a failed die, or of a block gone bad, were
// never free space (their data was repaired elsewhere), and a zone whose
// live pages fill its good dies gains nothing from a reset. NB: counting
// them as dead made such zones look the emptiest after a die loss, so GC
// relocated them for no gain and a device with room spread over its zones
// ran out of space.
func (t *Table) Victim(costBenefit bool, now time.Time) *Zone {
	var best *Zone
	bestScore := math.Inf(-1)
	for _, z := range t.Data() {
		if z.Meta || (z.State != Full && z.State != ReadOnly) || z.Writers > 0 || z.GCStuck {
			continue
		}
		c := t.ResetCapacity(z)
		if c == 0 || z.Live >= c {
			continue
		}
		u := float64(z.Live) / float64(c)
		score := -u
		if costBenefit {
			age := now.Sub(z.LastWrite).Seconds() + 1
			score = (1 - u) * age / (2*u + 1e-9)
		}
		if score > bestScore {
			best, bestScore = z, score
		}
	}
	return best
}

// ResetCapacity is the data pages data zone z holds once reset: its dies
// that have not failed and whose block is not bad since.
func (t *Table) ResetCapacity(z *Zone) int {
	n := 0
	for _, d := range z.Dies {
		if !t.Failed[flash.DieAddr{Channel: z.Channel, Die: d}] && !t.Block(t.L.ZoneBlockAddr(z.ID, d)).Bad {
			n++
		}
	}
	return n * t.L.DataPagesPerBlock()
}

// Reclaimable lists the data zones Zone.Reclaimable says may be erased.
func (t *Table) Reclaimable() []*Zone {
	var dead []*Zone
	for _, z := range t.Data() {
		if z.Reclaimable() {
			dead = append(dead, z)
		}
	}
	return dead
}

// MetaCandidates lists the metadata zones not in exclude that are not
// offline and hold at least minPages pages, least worn first.
func (t *Table) MetaCandidates(exclude map[*Zone]bool, minPages int) []*Zone {
	var cands []*Zone
	for _, z := range t.Meta() {
		if !exclude[z] && z.State != Offline && z.Capacity(t.L) >= minPages {
			cands = append(cands, z)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].Erases < cands[b].Erases })
	return cands
}

// Lend takes empty data zones holding at least pages pages (laid out as
// metadata zones) for one copy of a checkpoint body, the least worn empty
// zone of the allowed channels each time, channels in avoid only when the
// others have none, and lends them to the journal: full (no path that
// looks for a zone to append to takes one) and Meta (allocation, GC,
// reclaim and the identifier leave them alone). ok is false, and nothing
// is lent, when the empty zones do not hold pages pages.
func (t *Table) Lend(pages int, avoid map[int]bool) (lent []*Zone, ok bool) {
	got := 0
	for pass := 0; pass < 2 && got < pages; pass++ {
		for got < pages {
			var best *Zone
			for c := 0; c < t.L.Geometry.Channels; c++ {
				if z := t.EmptyOn(c); z != nil && !(pass == 0 && avoid[c]) && (best == nil || z.Erases < best.Erases) {
					best = z
				}
			}
			if best == nil {
				break
			}
			best.Meta, best.Body, best.State = true, true, Full
			best.Owners, best.OwnersKnown = nil, nil
			lent = append(lent, best)
			got += best.Capacity(t.L)
		}
	}
	if got < pages {
		t.Release(lent)
		return nil, false
	}
	return lent, true
}

// Release hands lent zones back to the data zones: read-only with no live
// page, so reclaim (or GC) erases them; a zone nothing was programmed in is
// still erased, and empty.
func (t *Table) Release(lent []*Zone) {
	for _, z := range lent {
		z.Meta, z.Body = false, false
		z.State, z.Live = ReadOnly, 0
		z.WP = min(z.WP, z.Capacity(t.L))
		if z.WP == 0 {
			z.State = Empty
		}
	}
}

// Rebuild derives every data zone's die set, write pointer and state on
// open from the journal's die masks (zones absent: every die) and states
// (read-only, offline) and the blocks' written-page counts. The write
// pointer is the programmed prefix of the stripe: a crash in the middle of
// a striped batch can leave a die ahead of the prefix, and such a zone
// cannot continue in stripe order, so it takes no more writes. A zone
// with a die known failed takes no more writes either.
func (t *Table) Rebuild(masks map[int]uint64, states map[int]State) {
	P := t.L.Geometry.PagesPerBlock
	for _, z := range t.Data() {
		mask, ok := masks[z.ID]
		if !ok {
			mask = t.L.FullDieMask()
		}
		z.Dies = onflash.DiesOf(mask)
		counts := make([]int, len(z.Dies))
		sum, p2l := 0, false
		for i, d := range z.Dies {
			w := t.Block(t.L.ZoneBlockAddr(z.ID, d)).WrittenPage
			counts[i] = min(w, P-1)
			sum += counts[i]
			if w == P {
				p2l = true
			}
		}
		if sum == 0 {
			z.Dies = t.GoodDies(z)
			z.State = Empty
			if len(z.Dies) == 0 || states[z.ID] == Offline {
				z.State = Offline
			}
			continue
		}
		w := len(z.Dies)
		k := 0
		for k < w*(P-1) && counts[k%w] > k/w {
			k++
		}
		z.WP = k
		ragged := k != sum
		z.Owners = make([]onflash.Owner, z.Capacity(t.L))
		z.OwnersKnown = make([]bool, z.Capacity(t.L))
		z.P2L = p2l
		switch {
		case states[z.ID] == ReadOnly || states[z.ID] == Offline:
			z.State = states[z.ID]
		case z.WP >= z.Capacity(t.L):
			z.WP = z.Capacity(t.L)
			z.State = Full
		case ragged:
			z.WP = sum
			z.State = ReadOnly
		default:
			z.State = Open
		}
		for _, d := range z.Dies {
			if t.Failed[flash.DieAddr{Channel: z.Channel, Die: d}] && z.State == Open {
				z.State = ReadOnly
			}
		}
	}
}

// LendBody marks the zones holding the checkpoint body replayed at open as
// lent to the journal (metadata, full, no owners or P2L of their own) and
// returns them: they stay lent until the next checkpoint is durable.
func (t *Table) LendBody(body *onflash.CheckpointBody) []*Zone {
	if body == nil {
		return nil
	}
	var lent []*Zone
	for c := range body.Copies {
		for _, run := range body.Copies[c] {
			z := t.All[run.Zone]
			z.Meta, z.Body = true, true
			z.Dies = onflash.DiesOf(run.Mask)
			z.State, z.WP, z.Unsealed = Full, run.Pages, false
			z.Owners, z.OwnersKnown, z.P2L = nil, nil, false
			lent = append(lent, z)
		}
	}
	return lent
}

// CountLive adds to every zone the live pages of the extent maps (the
// file table replayed at open).
func (t *Table) CountLive(maps []*extmap.Map) {
	for _, m := range maps {
		for _, e := range m.Exts {
			t.All[e.Zone].Live += e.N
		}
	}
}

// Settle finishes the table after replay and recovery at open. A zone
// filled before the crash whose seal never became durable is sealed (the
// checkpoint written next holds its extents). A data zone that is
// programmed but mapped by no file and not open for recovered appends (an
// older epoch's checkpoint body, or a body whose checkpoint never
// completed) is read-only: its pages are no data zone's (no owners, no
// P2L), so it takes no appends, and reclaim erases it.
func (t *Table) Settle() {
	for _, z := range t.Data() {
		if z.Unsealed && z.State == Full {
			z.Unsealed = false
		}
		if !z.Meta && z.State == Open && z.Live == 0 && !z.Unsealed {
			z.State = ReadOnly
		}
	}
}
