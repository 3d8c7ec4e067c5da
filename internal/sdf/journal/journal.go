package journal

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// Host is the layer a Journal journals (internal/sdf's FS).
type Host interface {
	// Lock and Unlock are the host's mutex (FS.mu), which guards the zone
	// table and the Journal's pending records: records are logged under it
	// in the order their effects are applied.
	sync.Locker
	// SnapshotLocked encodes the whole metadata state as a checkpoint: the
	// superblock record, the state's records and RecCheckpointDone. The
	// caller holds the lock.
	SnapshotLocked() (super, records, done []byte)
	// ResetZone erases metadata zone z on its good dies (taking z.Prog and
	// the lock itself).
	ResetZone(z *zones.Zone) error
	// Run runs ops on their channels' workers, every channel at once, and
	// returns when all ran.
	Run(ops []*channels.Op)
}

// Stats counts the journal's work (atomics, read without locks).
type Stats struct {
	MetaPages   atomic.Int64 // metadata and body pages programmed (every copy, fillers)
	Checkpoints atomic.Int64
}

// Journal is the SDF layer's metadata journal on flash.
type Journal struct {
	l        onflash.Layout
	host     Host
	table    *zones.Table
	readOnly bool
	Stats    Stats

	// Guarded by the host's lock.
	pending []byte
	// urgent: pending holds a record a sync must make durable before it
	// returns (a zone open).
	urgent bool
	// checkpointDue asks the next flush for a new epoch (a die of the
	// body or of an active metadata zone failed).
	checkpointDue bool
	// bodyReserve is how many empty zones writes leave for the next
	// checkpoint body.
	bodyReserve int

	// mu serializes flushes and checkpoints (the I/O); it guards what
	// follows.
	mu     sync.Mutex
	epoch  uint64
	active [onflash.MetaCopies]*zones.Zone // one zone per copy; nil before the first checkpoint
	wp     [onflash.MetaCopies]int         // next page index in each active zone
	seq    uint32                          // next stream page index of the epoch
	// body is the newest durable epoch's checkpoint body, nil when its
	// checkpoint is inline.
	body *writtenBody
}

// New is the journal of the device of layout l whose zone table is table
// (guarded by host's lock). A read-only journal writes nothing: a flush
// drops the pending records.
func New(l onflash.Layout, host Host, table *zones.Table, readOnly bool) *Journal {
	return &Journal{l: l, host: host, table: table, readOnly: readOnly}
}

// LogLocked appends a record to the pending log. The caller holds the
// host's lock and has already applied the record's effect in memory.
func (j *Journal) LogLocked(rec []byte) { j.pending = append(j.pending, rec...) }

// MarkUrgentLocked says the pending log holds a record a file's sync must
// make durable before it returns (a zone opened). The caller holds the
// host's lock.
func (j *Journal) MarkUrgentLocked() { j.urgent = true }

// UrgentLocked reports whether a sync must flush the journal. The caller
// holds the host's lock.
func (j *Journal) UrgentLocked() bool { return j.urgent }

// CheckpointDueLocked asks the next flush to write a new epoch elsewhere.
// The caller holds the host's lock.
func (j *Journal) CheckpointDueLocked() { j.checkpointDue = true }

// BodyReserveLocked is how many empty zones writes leave for the next
// checkpoint body. The caller holds the host's lock.
func (j *Journal) BodyReserveLocked() int { return j.bodyReserve }

// payloadPerPage is the stream bytes one metadata page carries.
func (j *Journal) payloadPerPage() int {
	return onflash.MetaUnitsPerPage(j.l.Geometry.PageSize) * onflash.MetaUnitPayload
}

// Flush makes every pending record durable.
func (j *Journal) Flush() error {
	if j.readOnly {
		j.host.Lock()
		j.pending, j.urgent = nil, false
		j.host.Unlock()
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.host.Lock()
	buf := j.pending
	j.pending = nil
	j.urgent = false
	j.host.Unlock()
	if len(buf) == 0 {
		return nil
	}
	pages := (len(buf) + j.payloadPerPage() - 1) / j.payloadPerPage()
	j.host.Lock()
	due := j.checkpointDue
	j.checkpointDue = false
	j.host.Unlock()
	if j.active[0] == nil || due || j.metaRoom() < pages {
		return j.checkpointLocked(nil)
	}
	if err := j.writeMetaPages(buf); err != nil {
		// One copy may be missing: start a new epoch elsewhere, which
		// rewrites everything (the records' effects are in memory).
		if cerr := j.checkpointLocked(nil); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	return nil
}

// FlushIfIdle flushes the pending records unless a flush or checkpoint is
// under way (the caller may be inside one, whose erase found a die
// failed): that one, or the next, writes them.
func (j *Journal) FlushIfIdle() error {
	if j.readOnly || !j.mu.TryLock() {
		return nil
	}
	j.mu.Unlock()
	return j.Flush()
}

// Checkpoint starts a new epoch (checkpointLocked) on metadata zones other
// than those in keep, which hold the epoch Open replayed.
func (j *Journal) Checkpoint(keep []*zones.Zone) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.checkpointLocked(keep)
}

// Adopt takes over the epoch Open replayed: its number and its checkpoint
// body (nil: inline) on lent, the zones the body's runs occupy, which stay
// lent to the journal until the next checkpoint is durable.
func (j *Journal) Adopt(epoch uint64, body *onflash.CheckpointBody, lent []*zones.Zone) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.epoch = max(epoch, j.epoch)
	if body != nil {
		j.body = &writtenBody{rec: *body, zones: lent}
		j.epoch = max(j.epoch, body.Epoch)
	}
}

func (j *Journal) metaRoom() int {
	room := j.active[0].Capacity(j.l) - j.wp[0]
	for c, z := range j.active {
		room = min(room, z.Capacity(j.l)-j.wp[c])
	}
	return room
}

// writeMetaPages writes stream to every active zone, page by page.
func (j *Journal) writeMetaPages(stream []byte) error {
	ps := j.l.Geometry.PageSize
	per := j.payloadPerPage()
	for len(stream) > 0 {
		n := min(per, len(stream))
		var ops [onflash.MetaCopies]*channels.Op
		for _, z := range j.active {
			if len(z.Dies) == 0 {
				return fmt.Errorf("sdf: metadata write: zone %d has no usable die left", z.ID)
			}
		}
		for c, z := range j.active {
			if j.wp[c] >= z.Capacity(j.l) {
				// The state outgrew the zone (a checkpoint of a device
				// whose files are cut into many extents): a clean error,
				// never a program past the zone's last page.
				return fmt.Errorf("sdf: metadata write: zone %d is full (%d pages): %w", z.ID, j.wp[c], zones.ErrNoSpace)
			}
		}
		for c := range ops {
			data := make([]byte, ps)
			onflash.FillMetaPage(data, j.epoch, j.seq, stream[:n])
			oob := make([]byte, j.l.Geometry.OOBSize)
			onflash.KindOOB(oob, onflash.KindMeta, data)
			z := j.active[c]
			ops[c] = &channels.Op{Kind: channels.Program, Addr: j.l.MetaPageAddr(z.ID, z.Dies, j.wp[c]), Data: data, OOB: oob}
			j.wp[c]++
		}
		j.host.Run(ops[:])
		j.Stats.MetaPages.Add(onflash.MetaCopies)
		j.seq++
		stream = stream[n:]
		var errs []error
		for _, op := range ops {
			errs = append(errs, op.Err)
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("sdf: metadata write: %w", err)
		}
		crashpoint.Hit("sdf-meta-page")
	}
	return nil
}

// checkpointLocked starts a new epoch on onflash.MetaCopies freshly erased
// metadata zones (never the active ones nor those in keep, which hold the
// last durable epoch) and writes the whole metadata state there: inline
// when it fits half a metadata zone, else as a checkpoint body in data
// zones lent to the journal (body.go) with only the superblock, the body's
// place and RecCheckpointDone in the metadata zones. The caller holds j.mu.
// The old epoch stays intact until the next checkpoint erases its zones,
// so a crash in the middle leaves the old epoch readable; the old epoch's
// body is handed back once the new root is durable.
func (j *Journal) checkpointLocked(keep []*zones.Zone) error {
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
	j.host.Lock()
	super, records, done := j.host.SnapshotLocked()
	j.pending = nil
	j.urgent = false
	j.host.Unlock()
	inline := append(append(append([]byte(nil), super...), records...), done...)
	inlinePages := j.pagesOf(len(inline)) + onflash.MetaCopies
	root := inline
	var body *writtenBody
	if inlinePages > j.inlineCheckpointPages() {
		j.epoch++
		b, err := j.writeBody(j.epoch, records)
		switch {
		case err == nil:
			crashpoint.Hit("sdf-checkpoint-body")
			body = b
			root = append(append(append([]byte(nil), super...), b.rec.Record()...), done...)
		case inlinePages > j.metaZonePages():
			return fmt.Errorf("sdf: checkpoint of %d pages: %w", inlinePages, err)
		}
		// No room for a body but the state still fits a metadata zone:
		// inline it is.
	}
	// The root must fit one zone per copy (plus the filler pages that
	// stagger copies sharing a channel): zones that lost dies are smaller,
	// and one too small would fail the checkpoint half-written.
	need := j.pagesOf(len(root)) + onflash.MetaCopies
	var lastErr error
	for attempt := 0; attempt < onflash.MetaZoneCount; attempt++ {
		set, err := j.pickMetaZones(exclude, need)
		if err != nil {
			if lastErr != nil {
				err = errors.Join(lastErr, err)
			}
			if body != nil {
				j.release(body.zones)
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
				if err := j.writeFiller(c); err != nil {
					lastErr = err
					exclude[set[c]] = true
					failed = true
					break
				}
			}
		}
		if !failed {
			if err := j.writeMetaPages(root); err != nil {
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
		j.Stats.Checkpoints.Add(1)
		crashpoint.Hit("sdf-checkpoint")
		old := j.body
		j.body = body
		j.host.Lock()
		j.bodyReserve = j.bodyReserveFor(j.pagesOf(len(records)))
		if old != nil {
			j.table.Release(old.zones)
		}
		j.host.Unlock()
		return nil
	}
	if body != nil {
		j.release(body.zones)
	}
	return fmt.Errorf("sdf: no set of metadata zones accepted a checkpoint: %w", lastErr)
}

// writeFiller programs a filler page at the next page of copy c's zone.
func (j *Journal) writeFiller(c int) error {
	z := j.active[c]
	data := make([]byte, j.l.Geometry.PageSize)
	onflash.FillMetaPage(data, j.epoch, onflash.FillerSeq, nil)
	oob := make([]byte, j.l.Geometry.OOBSize)
	onflash.KindOOB(oob, onflash.KindMeta, data)
	op := &channels.Op{Kind: channels.Program, Addr: j.l.MetaPageAddr(z.ID, z.Dies, j.wp[c]), Data: data, OOB: oob}
	j.host.Run([]*channels.Op{op})
	j.wp[c]++
	j.Stats.MetaPages.Add(1)
	return op.Err
}

// pickMetaZones erases and returns onflash.MetaCopies usable metadata
// zones not in exclude, least worn first, on different channels when
// possible.
func (j *Journal) pickMetaZones(exclude map[*zones.Zone]bool, minPages int) ([onflash.MetaCopies]*zones.Zone, error) {
	cands := j.table.MetaCandidates(exclude, minPages)
	var picked []*zones.Zone
	onChannel := func(ch int) bool {
		return slices.ContainsFunc(picked, func(p *zones.Zone) bool { return p.Channel == ch })
	}
	// First pass: distinct channels; second: any channel.
	for pass := 0; pass < 2 && len(picked) < onflash.MetaCopies; pass++ {
		for _, z := range cands {
			if len(picked) == onflash.MetaCopies {
				break
			}
			if exclude[z] || slices.Contains(picked, z) || (pass == 0 && j.l.Geometry.Channels > 1 && onChannel(z.Channel)) {
				continue
			}
			if err := j.host.ResetZone(z); err != nil || len(z.Dies) == 0 {
				exclude[z] = true
				continue
			}
			picked = append(picked, z)
		}
	}
	var out [onflash.MetaCopies]*zones.Zone
	if len(picked) < onflash.MetaCopies {
		return out, fmt.Errorf("sdf: fewer than %d usable metadata zones of %d pages left: %w", onflash.MetaCopies, minPages, zones.ErrNoSpace)
	}
	copy(out[:], picked)
	return out, nil
}

// Scan reads every programmed page of the metadata zones, including the
// content of pages the device reports uncorrectable, and merges the copies
// of each page (metalog.Merge).
func (j *Journal) Scan() metalog.Scan {
	g := j.l.Geometry
	var raws []metalog.RawPage
	unreadable := 0
	for _, z := range j.table.Meta() {
		var ops []*channels.Op
		for d := 0; d < g.DiesPerChannel; d++ {
			info := j.table.Block(j.l.ZoneBlockAddr(z.ID, d))
			for p := 0; p < info.WrittenPage; p++ {
				ops = append(ops, &channels.Op{Kind: channels.Read,
					Addr: flash.PageAddr{Channel: z.Channel, Die: d, Block: z.Block, Page: p},
					Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)})
			}
		}
		j.host.Run(ops)
		for _, op := range ops {
			if op.Err != nil && !errors.Is(op.Err, flash.ErrUncorrectable) {
				unreadable++
				continue
			}
			// The page's index in its zone (the inverse of
			// onflash.MetaPageAddr for a zone striped over all its dies).
			index := op.Addr.Page*len(z.Dies) + slices.Index(z.Dies, op.Addr.Die)
			raws = append(raws, metalog.RawPage{Zone: z.ID, Index: index, Data: op.Data})
		}
	}
	scan := metalog.Merge(g.PageSize, raws)
	scan.Unreadable = unreadable
	return scan
}
