package sdf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
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
	active [onflash.MetaCopies]*zone // one zone per copy; nil before the first checkpoint
	wp     [onflash.MetaCopies]int   // next page index in each active zone
	seq    uint32                    // next stream page index of the epoch

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
	room := j.active[0].capacity(fs.l) - j.wp[0]
	for c, z := range j.active {
		room = min(room, z.capacity(fs.l)-j.wp[c])
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
		var ops [onflash.MetaCopies]*pageOp
		for _, z := range j.active {
			if len(z.dies) == 0 {
				return fmt.Errorf("sdf: metadata write: zone %d has no usable die left", z.id)
			}
		}
		for c, z := range j.active {
			if j.wp[c] >= z.capacity(fs.l) {
				// The state outgrew the zone (a checkpoint of a device
				// whose files are cut into many extents): a clean error,
				// never a program past the zone's last page.
				return fmt.Errorf("sdf: metadata write: zone %d is full (%d pages): %w", z.id, j.wp[c], ErrNoSpace)
			}
		}
		for c := range ops {
			data := make([]byte, ps)
			onflash.FillMetaPage(data, j.epoch, j.seq, stream[:n])
			oob := make([]byte, fs.l.Geometry.OOBSize)
			onflash.KindOOB(oob, onflash.KindMeta, data)
			z := j.active[c]
			ops[c] = &pageOp{kind: opProgram, addr: fs.l.MetaPageAddr(z.id, z.dies, j.wp[c]), data: data, oob: oob}
			j.wp[c]++
		}
		fs.doParallel(ops[:])
		j.pagesWritten += onflash.MetaCopies
		fs.ctr.metaPages.Add(onflash.MetaCopies)
		j.seq++
		stream = stream[n:]
		var errs []error
		for _, op := range ops {
			errs = append(errs, op.err)
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
func (fs *FS) checkpointLocked(keep []*zone) error {
	j := &fs.jr
	exclude := map[*zone]bool{}
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
		case inlinePages > fs.l.Geometry.DiesPerChannel*fs.l.Geometry.PagesPerBlock:
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
				if z.channel == set[c].channel {
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
			fs.releaseBodyLocked(old.zones)
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
	op := &pageOp{kind: opProgram, addr: fs.l.MetaPageAddr(z.id, z.dies, j.wp[c]), data: data, oob: oob}
	fs.chans[z.channel].do(op)
	j.wp[c]++
	fs.ctr.metaPages.Add(1)
	return op.err
}

// pickMetaZones erases and returns onflash.MetaCopies usable metadata zones not in
// exclude, least worn first, on different channels when possible.
func (fs *FS) pickMetaZones(exclude map[*zone]bool, minPages int) ([onflash.MetaCopies]*zone, error) {
	var cands []*zone
	for _, z := range fs.zones[:onflash.MetaZoneCount] {
		if !exclude[z] && z.state != ZoneOffline && z.capacity(fs.l) >= minPages {
			cands = append(cands, z)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].erases < cands[b].erases })
	var picked []*zone
	taken := func(z *zone) bool {
		for _, p := range picked {
			if p == z {
				return true
			}
		}
		return false
	}
	onChannel := func(ch int) bool {
		for _, p := range picked {
			if p.channel == ch {
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
			if exclude[z] || taken(z) || (pass == 0 && fs.l.Geometry.Channels > 1 && onChannel(z.channel)) {
				continue
			}
			if err := fs.resetZone(z); err != nil || len(z.dies) == 0 {
				exclude[z] = true
				continue
			}
			picked = append(picked, z)
		}
	}
	var out [onflash.MetaCopies]*zone
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
	g := fs.l.Geometry
	var w onflash.RecWriter
	w.Uvarint(onflash.FormatVersion)
	for _, v := range []int{g.Channels, g.DiesPerChannel, g.BlocksPerDie, g.PagesPerBlock, g.PageSize, g.OOBSize} {
		w.Uvarint(uint64(v))
	}
	w.Varint(fs.created)
	super = w.Frame(onflash.RecSuper)
	for _, d := range fs.failedDieList() {
		w = onflash.RecWriter{}
		w.Uvarint(uint64(d.Channel))
		w.Uvarint(uint64(d.Die))
		out = append(out, w.Frame(onflash.RecFailedDie)...)
	}
	full := fs.l.FullDieMask()
	for _, z := range fs.zones[onflash.MetaZoneCount:] {
		if m := onflash.MaskOf(z.dies); m != full {
			out = append(out, zoneResetRecord(z.id, m)...)
		}
		if z.state == ZoneReadOnly || z.state == ZoneOffline {
			out = append(out, zoneStateRecord(z.id, z.state)...)
		}
		if z.unsealed {
			out = append(out, zoneRecord(onflash.RecZoneOpen, z.id)...)
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
		exts := ino.m.exts
		for first := true; first || len(exts) > 0; first = false {
			n := min(len(exts), 512)
			out = append(out, extentsRecord(ino, exts[:n])...)
			exts = exts[n:]
		}
	}
	w = onflash.RecWriter{}
	w.Uvarint(fs.nextFileID)
	w.Uvarint(fs.nextSeq)
	return super, out, w.Frame(onflash.RecCheckpointDone)
}

// snapshotStreamLocked is the whole checkpoint as one inline stream (for
// tests). The caller holds fs.mu.
func (fs *FS) snapshotStreamLocked() []byte {
	super, records, done := fs.snapshotLocked()
	return append(append(super, records...), done...)
}

func zoneResetRecord(z int, mask uint64) []byte {
	var w onflash.RecWriter
	w.Uvarint(uint64(z))
	w.Uvarint(mask)
	return w.Frame(onflash.RecZoneReset)
}

func zoneRecord(typ byte, z int) []byte {
	var w onflash.RecWriter
	w.Uvarint(uint64(z))
	return w.Frame(typ)
}

func zoneStateRecord(z int, s ZoneState) []byte {
	var w onflash.RecWriter
	w.Uvarint(uint64(z))
	w.Uvarint(uint64(s))
	return w.Frame(onflash.RecZoneState)
}

func createRecord(ino *inode) []byte {
	var w onflash.RecWriter
	w.Uvarint(ino.id)
	w.Str(ino.name)
	w.Uvarint(uint64(ino.hint))
	w.Varint(ino.mtime)
	return w.Frame(onflash.RecCreate)
}

func extentsRecord(ino *inode, exts []extent) []byte {
	var w onflash.RecWriter
	w.Uvarint(ino.id)
	w.Uvarint(uint64(ino.size))
	w.Varint(ino.mtime)
	w.Uvarint(uint64(len(exts)))
	for _, e := range exts {
		w.Uvarint(e.filePage)
		w.Uvarint(uint64(e.zone))
		w.Uvarint(uint64(e.zonePage))
		w.Uvarint(uint64(e.n))
		w.Uvarint(e.seq)
	}
	return w.Frame(onflash.RecExtents)
}

// metaPage is one metadata page found on open: its copies, merged unit by
// unit.
type metaPage struct {
	epoch uint64
	seq   uint32
	// payload is the page's slice of the stream, nil when some unit
	// verifies in no copy and no vote rebuilds it.
	payload []byte
	zones   []int // zones holding a copy
	// sure: some unit of some copy verifies (not only a claimed header).
	sure bool
	// merged counts units that did not verify in some copy (taken from
	// another); voted those rebuilt by a bit-by-bit majority vote.
	merged, voted int
}

// metaScan is what the metadata zones hold.
type metaScan struct {
	pages []metaPage
	// oldFormat counts pages of the format before units (onflash.MetaMagicV1).
	oldFormat int
	// unreadable counts pages the device could not return at all (failed
	// die, bad block).
	unreadable int
}

// scanMeta reads every programmed page of the metadata zones, including the
// content of pages the device reports uncorrectable, and merges the copies
// of each page unit by unit: a unit is taken from any copy where it
// verifies, and a unit that verifies in no copy is voted bit by bit over
// three copies (the result must verify). A page copy whose every unit is
// damaged cannot be told apart and adds nothing.
func (fs *FS) scanMeta() metaScan {
	type pageKey struct {
		epoch uint64
		seq   uint32
	}
	type copyOf struct {
		raw         []byte
		zone, index int
		verified    bool // some unit of this copy verifies (its identity is sure)
	}
	type zonePage struct{ zone, index int }
	var scan metaScan
	raw := map[zonePage][]byte{} // every page read, by place
	units := map[pageKey]map[int][]byte{}
	counts := map[pageKey]int{}
	claimed := map[pageKey]map[int]int{} // unit counts claimed by unverified copies
	copies := map[pageKey][]copyOf{}
	g := fs.l.Geometry
	per := onflash.MetaUnitsPerPage(g.PageSize)
	for _, z := range fs.zones[:onflash.MetaZoneCount] {
		var ops []*pageOp
		for d := 0; d < g.DiesPerChannel; d++ {
			info := fs.blockInfo(fs.l.ZoneBlockAddr(z.id, d))
			for p := 0; p < info.WrittenPage; p++ {
				ops = append(ops, &pageOp{kind: opRead,
					addr: flash.PageAddr{Channel: z.channel, Die: d, Block: z.block, Page: p},
					data: make([]byte, g.PageSize), oob: make([]byte, g.OOBSize)})
			}
		}
		fs.chans[z.channel].do(ops...)
		for _, op := range ops {
			if op.err != nil && !errors.Is(op.err, flash.ErrUncorrectable) {
				scan.unreadable++
				continue
			}
			// The page's index in its zone (the inverse of onflash.MetaPageAddr
			// for a zone striped over all its dies).
			index := op.addr.Page*len(z.dies) + slices.Index(z.dies, op.addr.Die)
			raw[zonePage{z.id, index}] = op.data
			// The page's identity is what most of its verifying units say.
			votes := map[pageKey]int{}
			var good []onflash.MetaUnit
			for k := 0; k < per; k++ {
				u, ok := onflash.ParseMetaUnit(op.data[k*onflash.MetaUnitSize : (k+1)*onflash.MetaUnitSize])
				if !ok || u.Index != k {
					continue
				}
				good = append(good, u)
				votes[pageKey{u.Epoch, u.Seq}]++
			}
			var key pageKey
			switch le := binary.LittleEndian; {
			case len(good) > 0:
				for k, n := range votes {
					if n > votes[key] || (n == votes[key] && (k.epoch > key.epoch || (k.epoch == key.epoch && k.seq > key.seq))) {
						key = k
					}
				}
			case le.Uint32(op.data) == onflash.MetaMagic:
				// No unit verifies (a one-unit page with a flip, say):
				// go by what unit 0's header claims, so the copy can
				// still take part in a vote; a vote must verify.
				key = pageKey{le.Uint64(op.data[4:]), le.Uint32(op.data[12:])}
				if claimed[key] == nil {
					claimed[key] = map[int]int{}
				}
				claimed[key][int(op.data[17])]++
			case le.Uint32(op.data) == onflash.MetaMagicV1:
				scan.oldFormat++
				continue
			default:
				continue
			}
			if key.seq == onflash.FillerSeq {
				continue
			}
			copies[key] = append(copies[key], copyOf{op.data, z.id, index, len(good) > 0})
			if units[key] == nil {
				units[key] = map[int][]byte{}
			}
			for _, u := range good {
				if (pageKey{u.Epoch, u.Seq}) != key {
					continue
				}
				if n, seen := counts[key]; seen && n != u.Units {
					continue
				}
				counts[key] = u.Units
				units[key][u.Index] = u.Payload
			}
		}
	}
	// Where each epoch's copies start in their zones (a copy on the channel
	// of an earlier one starts after filler pages): page seq of copy c is
	// at index seq+shift in its zone. Used to find, by place, copies of a
	// page whose identity was damaged, for a vote.
	type zoneEpoch struct {
		zone  int
		epoch uint64
	}
	shifts := map[zoneEpoch]int{}
	for key, cs := range copies {
		for _, c := range cs {
			if c.verified {
				shifts[zoneEpoch{c.zone, key.epoch}] = c.index - int(key.seq)
			}
		}
	}
	candidates := func(key pageKey, cs []copyOf) [][]byte {
		var out [][]byte
		have := map[zonePage]bool{}
		for _, c := range cs {
			out = append(out, c.raw)
			have[zonePage{c.zone, c.index}] = true
		}
		for ze, shift := range shifts {
			at := zonePage{ze.zone, int(key.seq) + shift}
			if ze.epoch == key.epoch && !have[at] && raw[at] != nil {
				have[at] = true
				out = append(out, raw[at])
			}
		}
		return out
	}
	for key, cs := range copies {
		p := metaPage{epoch: key.epoch, seq: key.seq}
		seenZone := map[int]bool{}
		for _, c := range cs {
			p.sure = p.sure || c.verified
			if !seenZone[c.zone] {
				seenZone[c.zone] = true
				p.zones = append(p.zones, c.zone)
			}
		}
		sort.Ints(p.zones)
		n, ok := counts[key]
		if !ok {
			// No unit of any copy verifies: take the unit count most
			// copies claim, for the vote.
			for units, votes := range claimed[key] {
				if units >= 1 && units <= per && (!ok || votes > claimed[key][n]) {
					n, ok = units, true
				}
			}
		}
		var payload []byte
		for k := 0; ok && k < n; k++ {
			part, have := units[key][k]
			if !have {
				if part, have = onflash.VoteMetaUnit(candidates(key, cs), key.epoch, key.seq, k, n); have {
					p.voted++
				}
			}
			if !have {
				ok = false
				break
			}
			damaged := len(cs) < onflash.MetaCopies
			for _, c := range cs {
				u, good := onflash.ParseMetaUnit(c.raw[k*onflash.MetaUnitSize : (k+1)*onflash.MetaUnitSize])
				damaged = damaged || !good || u.Epoch != key.epoch || u.Seq != key.seq || u.Index != k
			}
			if damaged {
				p.merged++
			}
			payload = append(payload, part...)
		}
		if ok {
			p.payload = payload
			if p.payload == nil {
				p.payload = []byte{}
			}
		}
		scan.pages = append(scan.pages, p)
	}
	return scan
}

// epochInfo says how the epoch replayed on open was assembled.
type epochInfo struct {
	epoch uint64
	zones []int // zones holding its pages
	// pages is the number of stream pages replayed; lost counts pages of
	// the epoch after the first page that could not be assembled (their
	// records are not replayed).
	pages, lost   int
	units         int // units of the pages replayed
	merged, voted int
}

// latestEpoch assembles the newest epoch whose checkpoint is complete and
// returns its record stream and how it was assembled.
func latestEpoch(scan metaScan) ([]byte, epochInfo, error) {
	byEpoch := map[uint64]map[uint32]metaPage{}
	for _, p := range scan.pages {
		if byEpoch[p.epoch] == nil {
			byEpoch[p.epoch] = map[uint32]metaPage{}
		}
		byEpoch[p.epoch][p.seq] = p
	}
	var epochs []uint64
	for e := range byEpoch {
		epochs = append(epochs, e)
	}
	sort.Slice(epochs, func(a, b int) bool { return epochs[a] > epochs[b] })
	for _, e := range epochs {
		var s []byte
		info := epochInfo{epoch: e}
		zoneSet := map[int]bool{}
		seq := uint32(0)
		for ; ; seq++ {
			p, ok := byEpoch[e][seq]
			if !ok || p.payload == nil {
				break
			}
			s = append(s, p.payload...)
			info.pages++
			info.units += max(1, (len(p.payload)+onflash.MetaUnitPayload-1)/onflash.MetaUnitPayload)
			info.merged += p.merged
			info.voted += p.voted
		}
		for q, p := range byEpoch[e] {
			if q >= seq && (p.sure || p.payload != nil) {
				info.lost++
			}
			for _, z := range p.zones {
				zoneSet[z] = true
			}
		}
		if onflash.CheckpointComplete(s) {
			for z := range zoneSet {
				info.zones = append(info.zones, z)
			}
			sort.Ints(info.zones)
			return s, info, nil
		}
	}
	if scan.oldFormat > 0 && len(scan.pages) == 0 {
		return nil, epochInfo{}, base.CorruptionErrorf("sdf: the device holds %d metadata pages of an older format (before per-unit checksums): this version cannot read it", scan.oldFormat)
	}
	return nil, epochInfo{}, base.CorruptionErrorf("sdf: no complete metadata checkpoint on the device (%d metadata pages found, %d unreadable)", len(scan.pages), scan.unreadable)
}

// MetaLayout is how the metadata journal is stored: every page in copies
// copies, each cut into units of unitBytes bytes (for models of its failure
// probability; OpenInfo.MetaUnits counts the units replayed).
func MetaLayout() (unitBytes, copies int) { return onflash.MetaUnitSize, onflash.MetaCopies }
