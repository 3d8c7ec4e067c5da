package sdf

import (
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
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
func (fs *FS) acquireZone(hint Lifetime, ino *inode, forGC bool) (*zones.Zone, error) {
	minEmpty := fs.opts.GCFreeZonesMin
	if forGC {
		minEmpty = 0
	}
	// Every GC round that reclaims a zone earns one more attempt, up to
	// one per data zone. NB: when the free space is spread thin (a few dead
	// pages in every zone, as after a die loss and its repair, or random
	// overwrites near full) one round gains only its victim's dead pages,
	// and many rounds are needed before an empty zone is left over; with a
	// fixed count of attempts a device with room in it reported no space.
	fs.mu.Lock()
	maxRounds := len(fs.zones.Data())
	fs.mu.Unlock()
	rounds := 0
	for attempt := 0; attempt < 16+rounds; attempt++ {
		fs.mu.Lock()
		if fs.closed {
			fs.mu.Unlock()
			return nil, ErrClosed
		}
		req := zones.Request{Hint: uint8(hint), Last: ino.last, Channel: ino.channel, MinEmpty: minEmpty,
			ForGC: forGC, MaxOpen: fs.opts.MaxOpenZones}
		if !forGC {
			// The empty zones the next checkpoint body needs.
			req.MinEmpty += fs.jr.BodyReserveLocked()
		}
		z, needGC := fs.zones.Pick(req)
		if z == nil && ino.prefer && ino.channel >= 0 {
			// Its channel has nothing to give: a channel it need not
			// avoid (the next ones in turn), else anywhere else.
			C := fs.l.Geometry.Channels
			for i := 1; i < C && z == nil && ino.avoid != 0; i++ {
				if c := (ino.channel + i) % C; ino.avoid&(1<<c) == 0 {
					req.Channel = c
					z, needGC = fs.zones.Pick(req)
				}
			}
			if z == nil {
				req.Channel = -1
				z, needGC = fs.zones.Pick(req)
			}
		}
		if z != nil {
			z.Writers++
			if z.State == ZoneEmpty {
				z.Open(uint8(hint), forGC)
				fs.logLocked(metalog.ZoneOpen{Zone: z.ID, Open: true}.Record())
				fs.jr.MarkUrgentLocked()
			}
			fs.mu.Unlock()
			z.Prog.Lock()
			fs.mu.Lock()
			ok := z.Writable(fs.l)
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
		} else if rounds < maxRounds {
			rounds++
		}
	}
	return nil, ErrNoSpace
}

func (fs *FS) releaseZone(z *zones.Zone) {
	z.Prog.Unlock()
	fs.mu.Lock()
	z.Writers--
	fs.mu.Unlock()
}

// gcLastZones is how many empty zones only GC may take: one zone receives
// a victim's live pages (fewer than a zone's, since a victim holds dead
// pages), and the victim's reset gives it back.
const gcLastZones = 1

// finishZone writes the zone's P2L entrustment pages (the last page of the
// block on each die records the owners of the next die's block, Reparo 6.2)
// and marks it full. The caller holds z.Prog.
func (fs *FS) finishZone(z *zones.Zone) {
	fs.mu.Lock()
	dies := append([]int(nil), z.Dies...)
	owners := append([]onflash.Owner(nil), z.Owners...)
	known := append([]bool(nil), z.OwnersKnown...)
	fs.mu.Unlock()
	w := len(dies)
	g := fs.l.Geometry
	// Owners of pages programmed before a reopen are read back from OOB.
	var reads []*channels.Op
	var idx []int
	for i := range owners {
		if !known[i] {
			reads = append(reads, &channels.Op{Kind: channels.Read, Addr: fs.l.DataPageAddr(z.ID, dies, i),
				Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)})
			idx = append(idx, i)
		}
	}
	fs.chans[z.Channel].Do(reads...)
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
			onflash.EncodeP2L(data, z.ID, about, list)
			oob := make([]byte, g.OOBSize)
			onflash.KindOOB(oob, onflash.KindP2L, data)
			ops = append(ops, &channels.Op{Kind: channels.Program,
				Addr: flash.PageAddr{Channel: z.Channel, Die: host, Block: z.Block, Page: fs.l.P2LPage()}, Data: data, OOB: oob})
		}
		fs.chans[z.Channel].Do(ops...)
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
	if z.Finish(ok) {
		// Every page of the zone is installed and its extents record
		// queued before this one, so once this is durable replay need not
		// scan the zone.
		fs.logLocked(metalog.ZoneOpen{Zone: z.ID}.Record())
	}
}
