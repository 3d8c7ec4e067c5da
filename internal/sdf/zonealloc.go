package sdf

import (
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// acquireZone picks a zone to append to and locks its program order.
// Preference: the file's last zone; an open zone of the same lifetime hint
// that nobody is writing; a new zone (round-robin over channels, least worn
// on the channel) while fewer than MaxOpenZones are open; any open zone.
// When empty zones run low, host GC runs first (not for GC's own writes).
//
// Empty zones are handed to other writes only while more than
// GCFreeZonesMin are left; when GC can make no more room they may take all
// but the last one, which only GC may use (gcLastZones). NB: without that
// floor writes could fill every zone, and once files are deleted GC would
// have nowhere to relocate a victim's live pages: the device would stay
// full for good (a repair could never be written again).
func (fs *FS) acquireZone(hint Lifetime, ino *inode, forGC bool) (*zone, error) {
	minEmpty := fs.opts.GCFreeZonesMin
	if forGC {
		minEmpty = 0
	}
	for attempt := 0; attempt < 16; attempt++ {
		fs.mu.Lock()
		if fs.closed {
			fs.mu.Unlock()
			return nil, ErrClosed
		}
		z, needGC := fs.pickZoneLocked(hint, ino, minEmpty, forGC)
		if z == nil && ino.prefer && ino.channel >= 0 {
			// Its channel has nothing to give: anywhere else.
			pinned := ino.channel
			ino.channel = -1
			z, needGC = fs.pickZoneLocked(hint, ino, minEmpty, forGC)
			ino.channel = pinned
		}
		if z != nil {
			z.writers++
			if z.state == ZoneEmpty {
				z.gc = forGC
				z.state = ZoneOpen
				z.hint = hint
				z.unsealed = true
				fs.logLocked(metalog.ZoneOpen{Zone: z.id, Open: true}.Record())
				fs.jr.urgent = true
			}
			fs.mu.Unlock()
			z.wmu.Lock()
			fs.mu.Lock()
			ok := z.writable(fs.l)
			fs.mu.Unlock()
			if ok {
				return z, nil
			}
			fs.releaseZone(z)
			continue
		}
		fs.mu.Unlock()
		if !needGC || forGC {
			break
		}
		progressed, err := fs.gcOnce()
		if err != nil {
			return nil, err
		}
		if !progressed {
			// Nothing to collect: the reserve of empty zones is all
			// there is, but for the zones GC itself needs.
			minEmpty = gcLastZones
		}
	}
	return nil, ErrNoSpace
}

func (fs *FS) releaseZone(z *zone) {
	z.wmu.Unlock()
	fs.mu.Lock()
	z.writers--
	fs.mu.Unlock()
}

// gcLastZones is how many empty zones only GC may take: one zone receives
// a victim's live pages (fewer than a zone's, since a victim holds dead
// pages), and the victim's reset gives it back.
const gcLastZones = 1

// pickZoneLocked implements acquireZone's preference: an empty zone is
// handed out only while more than minEmpty are left. needGC is set when the
// caller should collect garbage before a new zone is handed out.
//
// Zones GC opened take only GC's relocations (zone.gc), and GC writes to
// them or to a new zone first: NB: when other writers could take the pages
// of GC's zone while it relocates a victim, GC would need more zones than
// the victim's live pages fill, and could take the last empty zone and
// still fail, leaving no zone for any GC again.
func (fs *FS) pickZoneLocked(hint Lifetime, ino *inode, minEmpty int, forGC bool) (z *zone, needGC bool) {
	if !forGC {
		// The empty zones the next checkpoint body needs (ckptbody.go).
		minEmpty += fs.bodyReserve
	}
	if p := ino.last; p != nil && p.state == ZoneOpen && p.gc == forGC && p.hint == hint && p.writable(fs.l) && p.writers == 0 &&
		(ino.channel < 0 || p.channel == ino.channel) && !fs.avoided(p.channel) {
		return p, false
	}
	open := 0
	var sameHint, anyIdle, anyOpen, own *zone
	for _, c := range fs.zones[onflash.MetaZoneCount:] {
		if c.state != ZoneOpen {
			continue
		}
		open++
		if !c.writable(fs.l) || (ino.channel >= 0 && c.channel != ino.channel) || (ino.channel < 0 && fs.avoided(c.channel)) {
			continue
		}
		if c.gc && forGC && c.writers == 0 && own == nil {
			own = c
		}
		if c.gc && !forGC {
			continue
		}
		if c.writers == 0 && c.hint == hint && sameHint == nil {
			sameHint = c
		}
		if c.writers == 0 && (anyIdle == nil || absDiff(c.hint, hint) < absDiff(anyIdle.hint, hint)) {
			anyIdle = c
		}
		if anyOpen == nil || c.writers < anyOpen.writers {
			anyOpen = c
		}
	}
	if forGC {
		if own != nil {
			return own, false
		}
		if fs.countStateLocked(ZoneEmpty) > 0 {
			if e := fs.allocEmptyLocked(ino.channel); e != nil {
				return e, false
			}
		}
	}
	if sameHint != nil {
		return sameHint, false
	}
	if open < fs.opts.MaxOpenZones {
		empty := fs.countStateLocked(ZoneEmpty)
		if empty > minEmpty {
			if e := fs.allocEmptyLocked(ino.channel); e != nil {
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
	if fs.countStateLocked(ZoneEmpty) > minEmpty {
		if e := fs.allocEmptyLocked(ino.channel); e != nil {
			return e, false
		}
	}
	return nil, true
}

func absDiff(a, b Lifetime) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

func (fs *FS) countStateLocked(s ZoneState) int {
	n := 0
	for _, z := range fs.zones[onflash.MetaZoneCount:] {
		if z.state == s {
			n++
		}
	}
	return n
}

// allocEmptyLocked hands out an empty zone: channels in round-robin order
// (SDF places consecutive writes on consecutive channels), and on the
// channel the least-worn empty zone (dynamic wear leveling; ties to the
// lowest ID).
func (fs *FS) allocEmptyLocked(only int) *zone {
	C := fs.l.Geometry.Channels
	if fs.alloc != nil && only < 0 {
		// A die failed: Reparo's Handler weights the channels.
		if ch := fs.alloc.Next(func(c int) bool { return !fs.avoided(c) && fs.emptyZoneOnLocked(c) != nil }); ch >= 0 {
			return fs.emptyZoneOnLocked(ch)
		}
		if fs.avoid == nil {
			return nil
		}
	}
	for i := 0; i < C; i++ {
		ch := (fs.rr + i) % C
		if (only >= 0 && ch != only) || (only < 0 && fs.avoided(ch)) {
			continue
		}
		var best *zone
		for b := 0; b < fs.l.Geometry.BlocksPerDie; b++ {
			z := fs.zones[b*C+ch]
			if z.meta || z.state != ZoneEmpty || len(z.dies) == 0 {
				continue
			}
			if best == nil || z.erases < best.erases {
				best = z
			}
		}
		if best != nil {
			if only < 0 {
				fs.rr = ch + 1
			}
			return best
		}
	}
	return nil
}

// avoided reports whether Rebalance is moving data off channel c.
func (fs *FS) avoided(c int) bool { return c < len(fs.avoid) && fs.avoid[c] }

// emptyZoneOnLocked is the least-worn empty zone of channel c, or nil.
func (fs *FS) emptyZoneOnLocked(c int) *zone {
	var best *zone
	for b := 0; b < fs.l.Geometry.BlocksPerDie; b++ {
		z := fs.zones[b*fs.l.Geometry.Channels+c]
		if z.meta || z.state != ZoneEmpty || len(z.dies) == 0 {
			continue
		}
		if best == nil || z.erases < best.erases {
			best = z
		}
	}
	return best
}

// finishZone writes the zone's P2L entrustment pages (the last page of the
// block on each die records the owners of the next die's block, Reparo 6.2)
// and marks it full. The caller holds z.wmu.
func (fs *FS) finishZone(z *zone) {
	fs.mu.Lock()
	dies := append([]int(nil), z.dies...)
	owners := append([]onflash.Owner(nil), z.owners...)
	known := append([]bool(nil), z.ownersKnown...)
	fs.mu.Unlock()
	w := len(dies)
	g := fs.l.Geometry
	// Owners of pages programmed before a reopen are read back from OOB.
	var reads []*channels.Op
	var idx []int
	for i := range owners {
		if !known[i] {
			reads = append(reads, &channels.Op{Kind: channels.Read, Addr: fs.l.DataPageAddr(z.id, dies, i),
				Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)})
			idx = append(idx, i)
		}
	}
	fs.chans[z.channel].Do(reads...)
	for k, op := range reads {
		if op.Err == nil {
			if id, ok := onflash.DecodeOOB(op.OOB, op.Data); ok {
				owners[idx[k]] = onflash.Owner{FileID: id.FileID, Page: uint32(id.Page)}
			}
		}
	}
	var ops []*channels.Op
	if w >= 2 {
		for hi, host := range dies {
			about := dies[(hi+1)%w]
			ai := (hi + 1) % w
			var list []onflash.Owner
			for p := 0; p < fs.l.DataPagesPerBlock(); p++ {
				list = append(list, owners[p*w+ai])
			}
			data := make([]byte, g.PageSize)
			onflash.EncodeP2L(data, z.id, about, list)
			oob := make([]byte, g.OOBSize)
			onflash.KindOOB(oob, onflash.KindP2L, data)
			ops = append(ops, &channels.Op{Kind: channels.Program,
				Addr: flash.PageAddr{Channel: z.channel, Die: host, Block: z.block, Page: fs.l.P2LPage()}, Data: data, OOB: oob})
		}
		fs.chans[z.channel].Do(ops...)
		fs.ctr.p2lPages.Add(int64(len(ops)))
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ok := w >= 2
	for _, op := range ops {
		if op.Err != nil {
			ok = false
		}
	}
	z.p2l = ok
	if z.state == ZoneOpen {
		z.state = ZoneFull
	}
	if z.unsealed {
		// Every page of the zone is installed and its extents record
		// queued before this one, so once this is durable replay need not
		// scan the zone.
		z.unsealed = false
		fs.logLocked(metalog.ZoneOpen{Zone: z.id}.Record())
	}
}
