package sdf

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// journal is the metadata log (DIRECT policy 2: every page is written
// onflash.MetaCopies times, to zones whose copies of a page sit on different dies).
// An epoch starts
// with a checkpoint (superblock, zone table, file table, then
// onflash.RecCheckpointDone) and continues with incremental records.
type journal struct {
	// mu serializes flushes and checkpoints (the I/O); pending is guarded by
	// FS.mu so that records enter the log in the order their effects were
	// applied in memory.
	mu      sync.Mutex
	pending []byte
	// urgent: pending holds a record a Sync must make durable before it
	// returns (a zone open). Guarded by FS.mu.
	urgent bool

	epoch  uint64
	active [onflash.MetaCopies]*zones.Zone // one zone per copy; nil before the first checkpoint
	wp     [onflash.MetaCopies]int         // next page index in each active zone
	seq    uint32                          // next stream page index of the epoch

	pagesWritten int64 // metadata pages programmed (every copy), under mu
	checkpoints  int64

	// body is the newest durable epoch's checkpoint body (ckptbody.go), nil
	// when its checkpoint is inline. Under mu.
	body *writtenBody
}

// payloadPerPage is the stream bytes one metadata page carries.
func (fs *FS) payloadPerPage() int {
	return onflash.MetaUnitsPerPage(fs.l.Geometry.PageSize) * onflash.MetaUnitPayload
}

// logLocked appends a record to the pending log. The caller holds fs.mu and
// has already applied the record's effect in memory.
func (fs *FS) logLocked(rec []byte) { fs.jr.pending = append(fs.jr.pending, rec...) }

// flushJournal makes every pending record durable.
func (fs *FS) flushJournal() error {
	if fs.opts.ReadOnly {
		fs.mu.Lock()
		fs.jr.pending, fs.jr.urgent = nil, false
		fs.mu.Unlock()
		return nil
	}
	j := &fs.jr
	j.mu.Lock()
	defer j.mu.Unlock()
	fs.mu.Lock()
	buf := j.pending
	j.pending = nil
	j.urgent = false
	fs.mu.Unlock()
	if len(buf) == 0 {
		return nil
	}
	pages := (len(buf) + fs.payloadPerPage() - 1) / fs.payloadPerPage()
	fs.mu.Lock()
	due := fs.checkpointDue
	fs.checkpointDue = false
	fs.mu.Unlock()
	if j.active[0] == nil || due || fs.metaRoom() < pages {
		return fs.checkpointLocked(nil)
	}
	if err := fs.writeMetaPages(buf); err != nil {
		// One copy may be missing: start a new epoch elsewhere, which
		// rewrites everything (the records' effects are in memory).
		if cerr := fs.checkpointLocked(nil); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	return nil
}

func (fs *FS) metaRoom() int {
	j := &fs.jr
	room := j.active[0].Capacity(fs.l) - j.wp[0]
	for c, z := range j.active {
		room = min(room, z.Capacity(fs.l)-j.wp[c])
	}
	return room
}

// writeMetaPages writes stream to every active zone, page by page.
func (fs *FS) writeMetaPages(stream []byte) error {
	j := &fs.jr
	ps := fs.l.Geometry.PageSize
	per := fs.payloadPerPage()
	for len(stream) > 0 {
		n := min(per, len(stream))
		var ops [onflash.MetaCopies]*channels.Op
		for _, z := range j.active {
			if len(z.Dies) == 0 {
				return fmt.Errorf("sdf: metadata write: zone %d has no usable die left", z.ID)
			}
		}
		for c, z := range j.active {
			if j.wp[c] >= z.Capacity(fs.l) {
				// The state outgrew the zone (a checkpoint of a device
				// whose files are cut into many extents): a clean error,
				// never a program past the zone's last page.
				return fmt.Errorf("sdf: metadata write: zone %d is full (%d pages): %w", z.ID, j.wp[c], ErrNoSpace)
			}
		}
		for c := range ops {
			data := make([]byte, ps)
			onflash.FillMetaPage(data, j.epoch, j.seq, stream[:n])
			oob := make([]byte, fs.l.Geometry.OOBSize)
			onflash.KindOOB(oob, onflash.KindMeta, data)
			z := j.active[c]
			ops[c] = &channels.Op{Kind: channels.Program, Addr: fs.l.MetaPageAddr(z.ID, z.Dies, j.wp[c]), Data: data, OOB: oob}
			j.wp[c]++
		}
		fs.doParallel(ops[:])
		j.pagesWritten += onflash.MetaCopies
		fs.ctr.metaPages.Add(onflash.MetaCopies)
		j.seq++
		stream = stream[n:]
		var errs []error
		for _, op := range ops {
			errs = append(errs, op.Err)
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("sdf: metadata write: %w", err)
		}
	}
	return nil
}

// checkpointLocked starts a new epoch on onflash.MetaCopies freshly erased metadata
// zones (never the active ones nor those in keep, which hold the last
// durable epoch) and writes the whole metadata state there: inline when it
// fits half a metadata zone, else as a checkpoint body in data zones lent
// to the journal (ckptbody.go) with only the superblock, the body's place
// and RecCheckpointDone in the metadata zones. The caller holds jr.mu. The
// old epoch stays intact until the next checkpoint erases its zones, so a
// crash in the middle leaves the old epoch readable; the old epoch's body
// is handed back once the new root is durable.
func (fs *FS) checkpointLocked(keep []*zones.Zone) error {
	j := &fs.jr
	exclude := map[*zones.Zone]bool{}
	for _, z := range keep {
		exclude[z] = true
	}
	if j.active[0] != nil {
		for _, z := range j.active {
			exclude[z] = true
		}
	}
	// One snapshot for every attempt: records logged after it stay pending
	// and go to the new epoch's log.
	fs.mu.Lock()
	super, records, done := fs.snapshotLocked()
	j.pending = nil
	j.urgent = false
	fs.mu.Unlock()
	inline := append(append(append([]byte(nil), super...), records...), done...)
	inlinePages := fs.pagesOf(len(inline)) + onflash.MetaCopies
	root := inline
	var body *writtenBody
	if inlinePages > fs.inlineCheckpointPages() {
		j.epoch++
		b, err := fs.writeBody(j.epoch, records)
		switch {
		case err == nil:
			body = b
			root = append(append(append([]byte(nil), super...), b.rec.Record()...), done...)
		case inlinePages > fs.metaZonePages():
			return fmt.Errorf("sdf: checkpoint of %d pages: %w", inlinePages, err)
		}
		// No room for a body but the state still fits a metadata zone:
		// inline it is.
	}
	// The root must fit one zone per copy (plus the filler pages that
	// stagger copies sharing a channel): zones that lost dies are smaller,
	// and one too small would fail the checkpoint half-written.
	need := fs.pagesOf(len(root)) + onflash.MetaCopies
	var lastErr error
	for attempt := 0; attempt < onflash.MetaZoneCount; attempt++ {
		set, err := fs.pickMetaZones(exclude, need)
		if err != nil {
			if lastErr != nil {
				err = errors.Join(lastErr, err)
			}
			if body != nil {
				fs.releaseBody(body.zones)
			}
			return err
		}
		j.epoch++
		j.active = set
		j.wp = [onflash.MetaCopies]int{}
		j.seq = 0
		failed := false
		for c := 1; c < onflash.MetaCopies && !failed; c++ {
			// Copies on the channel of an earlier copy start that many
			// pages later, so copy k of every page is on another die.
			shift := 0
			for _, z := range set[:c] {
				if z.Channel == set[c].Channel {
					shift++
				}
			}
			for ; shift > 0; shift-- {
				if err := fs.writeFiller(c); err != nil {
					lastErr = err
					exclude[set[c]] = true
					failed = true
					break
				}
			}
		}
		if !failed {
			if err := fs.writeMetaPages(root); err != nil {
				lastErr = err
				for _, z := range set {
					exclude[z] = true
				}
				failed = true
			}
		}
		if failed {
			j.active[0] = nil
			continue
		}
		j.checkpoints++
		fs.ctr.checkpoints.Add(1)
		old := j.body
		j.body = body
		fs.mu.Lock()
		fs.bodyReserve = fs.bodyReserveLocked(fs.pagesOf(len(records)))
		if old != nil {
			fs.zones.Release(old.zones)
		}
		fs.mu.Unlock()
		return nil
	}
	if body != nil {
		fs.releaseBody(body.zones)
	}
	return fmt.Errorf("sdf: no set of metadata zones accepted a checkpoint: %w", lastErr)
}

// writeFiller programs a filler page at the next page of copy c's zone.
func (fs *FS) writeFiller(c int) error {
	j := &fs.jr
	z := j.active[c]
	data := make([]byte, fs.l.Geometry.PageSize)
	onflash.FillMetaPage(data, j.epoch, onflash.FillerSeq, nil)
	oob := make([]byte, fs.l.Geometry.OOBSize)
	onflash.KindOOB(oob, onflash.KindMeta, data)
	op := &channels.Op{Kind: channels.Program, Addr: fs.l.MetaPageAddr(z.ID, z.Dies, j.wp[c]), Data: data, OOB: oob}
	fs.chans[z.Channel].Do(op)
	j.wp[c]++
	fs.ctr.metaPages.Add(1)
	return op.Err
}

// pickMetaZones erases and returns onflash.MetaCopies usable metadata zones not in
// exclude, least worn first, on different channels when possible.
func (fs *FS) pickMetaZones(exclude map[*zones.Zone]bool, minPages int) ([onflash.MetaCopies]*zones.Zone, error) {
	cands := fs.zones.MetaCandidates(exclude, minPages)
	var picked []*zones.Zone
	taken := func(z *zones.Zone) bool {
		for _, p := range picked {
			if p == z {
				return true
			}
		}
		return false
	}
	onChannel := func(ch int) bool {
		for _, p := range picked {
			if p.Channel == ch {
				return true
			}
		}
		return false
	}
	// First pass: distinct channels; second: any channel.
	for pass := 0; pass < 2 && len(picked) < onflash.MetaCopies; pass++ {
		for _, z := range cands {
			if len(picked) == onflash.MetaCopies {
				break
			}
			if exclude[z] || taken(z) || (pass == 0 && fs.l.Geometry.Channels > 1 && onChannel(z.Channel)) {
				continue
			}
			if err := fs.resetZone(z); err != nil || len(z.Dies) == 0 {
				exclude[z] = true
				continue
			}
			picked = append(picked, z)
		}
	}
	var out [onflash.MetaCopies]*zones.Zone
	if len(picked) < onflash.MetaCopies {
		return out, fmt.Errorf("sdf: fewer than %d usable metadata zones of %d pages left: %w", onflash.MetaCopies, minPages, ErrNoSpace)
	}
	copy(out[:], picked)
	return out, nil
}

// snapshotLocked encodes the whole metadata state as a checkpoint: the
// superblock record, the records of the state (failed dies, zones, files)
// and RecCheckpointDone. The caller holds fs.mu.
func (fs *FS) snapshotLocked() (super, records, done []byte) {
	var out []byte
	super = metalog.Super{Geometry: fs.l.Geometry, Created: fs.created}.Record()
	for _, d := range fs.zones.FailedList() {
		out = append(out, metalog.FailedDie{Channel: d.Channel, Die: d.Die}.Record()...)
	}
	full := fs.l.FullDieMask()
	for _, z := range fs.zones.Data() {
		if m := onflash.MaskOf(z.Dies); m != full {
			out = append(out, zoneResetRecord(z.ID, m)...)
		}
		if z.State == ZoneReadOnly || z.State == ZoneOffline {
			out = append(out, zoneStateRecord(z.ID, z.State)...)
		}
		if z.Unsealed {
			out = append(out, metalog.ZoneOpen{Zone: z.ID, Open: true}.Record()...)
		}
	}
	ids := make([]uint64, 0, len(fs.byID))
	for id, ino := range fs.byID {
		if !ino.unlinked {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		ino := fs.byID[id]
		out = append(out, createRecord(ino)...)
		exts := ino.m.Exts
		for first := true; first || len(exts) > 0; first = false {
			n := min(len(exts), 512)
			out = append(out, extentsRecord(ino, exts[:n])...)
			exts = exts[n:]
		}
	}
	return super, out, metalog.CheckpointDone{NextFileID: fs.nextFileID, NextSeq: fs.nextSeq}.Record()
}

// snapshotStreamLocked is the whole checkpoint as one inline stream (for
// tests). The caller holds fs.mu.
func (fs *FS) snapshotStreamLocked() []byte {
	super, records, done := fs.snapshotLocked()
	return append(append(super, records...), done...)
}

func zoneResetRecord(z int, mask uint64) []byte {
	return metalog.ZoneReset{Zone: z, Mask: mask}.Record()
}

func zoneStateRecord(z int, s ZoneState) []byte {
	return metalog.ZoneState{Zone: z, State: uint64(s)}.Record()
}

func createRecord(ino *inode) []byte {
	return metalog.Create{ID: ino.id, Name: ino.name, Hint: uint64(ino.hint), MTime: ino.mtime}.Record()
}

func extentsRecord(ino *inode, exts []extmap.Extent) []byte {
	return metalog.Extents{ID: ino.id, Size: ino.size, MTime: ino.mtime, Exts: exts}.Record()
}

// scanMeta reads every programmed page of the metadata zones, including the
// content of pages the device reports uncorrectable, and merges the copies
// of each page (metalog.Merge).
func (fs *FS) scanMeta() metalog.Scan {
	g := fs.l.Geometry
	var raws []metalog.RawPage
	unreadable := 0
	for _, z := range fs.zones.Meta() {
		var ops []*channels.Op
		for d := 0; d < g.DiesPerChannel; d++ {
			info := fs.zones.Block(fs.l.ZoneBlockAddr(z.ID, d))
			for p := 0; p < info.WrittenPage; p++ {
				ops = append(ops, &channels.Op{Kind: channels.Read,
					Addr: flash.PageAddr{Channel: z.Channel, Die: d, Block: z.Block, Page: p},
					Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)})
			}
		}
		fs.chans[z.Channel].Do(ops...)
		for _, op := range ops {
			if op.Err != nil && !errors.Is(op.Err, flash.ErrUncorrectable) {
				unreadable++
				continue
			}
			// The page's index in its zone (the inverse of onflash.MetaPageAddr
			// for a zone striped over all its dies).
			index := op.Addr.Page*len(z.Dies) + slices.Index(z.Dies, op.Addr.Die)
			raws = append(raws, metalog.RawPage{Zone: z.ID, Index: index, Data: op.Data})
		}
	}
	scan := metalog.Merge(g.PageSize, raws)
	scan.Unreadable = unreadable
	return scan
}

// MetaLayout is how the metadata journal is stored: every page in copies
// copies, each cut into units of unitBytes bytes (for models of its failure
// probability; OpenInfo.MetaUnits counts the units replayed).
func MetaLayout() (unitBytes, copies int) { return onflash.MetaUnitSize, onflash.MetaCopies }
