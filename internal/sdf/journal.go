package sdf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

// Metadata page layout (data area; the OOB holds kindMeta and a CRC of data):
//
//	[0:4]   magic
//	[4:12]  epoch: the checkpoint generation the page belongs to
//	[12:16] seq: the page's index in the epoch's record stream (filler: ^0)
//	[16:20] payload bytes
//	[20:24] copy (0 primary, 1 mirror), diagnostic only
//	[24:28] CRC32C of [0:24] and the payload
//	[28:32] zero
//	[32:]   payload: a slice of the record stream
const (
	metaMagic      = 0x464D_4A31 // "FMJ1"
	metaHeaderSize = 32
	fillerSeq      = ^uint32(0)
)

// journal is the metadata log (DIRECT policy 2: every page is written twice,
// to two zones whose copies of a page sit on different dies). An epoch starts
// with a checkpoint (superblock, zone table, file table, then
// recCheckpointDone) and continues with incremental records.
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
	active [2]*zone // primary, mirror; nil before the first checkpoint
	wp     [2]int   // next page index in each active zone
	seq    uint32   // next stream page index of the epoch

	pagesWritten int64 // metadata pages programmed (both copies), under mu
	checkpoints  int64
}

// payloadPerPage is the stream bytes one metadata page carries.
func (fs *FS) payloadPerPage() int { return fs.l.g.PageSize - metaHeaderSize }

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
	if j.active[0] == nil || fs.metaRoom() < pages {
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
	return min(j.active[0].capacity(fs.l)-j.wp[0], j.active[1].capacity(fs.l)-j.wp[1])
}

// writeMetaPages writes stream to both active zones, page by page.
func (fs *FS) writeMetaPages(stream []byte) error {
	j := &fs.jr
	ps := fs.l.g.PageSize
	per := fs.payloadPerPage()
	for len(stream) > 0 {
		n := min(per, len(stream))
		var ops [2]*pageOp
		for c := 0; c < 2; c++ {
			data := make([]byte, ps)
			fillMetaPage(data, j.epoch, j.seq, stream[:n], c)
			oob := make([]byte, fs.l.g.OOBSize)
			kindOOB(oob, kindMeta, data)
			z := j.active[c]
			ops[c] = &pageOp{kind: opProgram, addr: fs.l.metaPageAddr(z.id, z.dies, j.wp[c]), data: data, oob: oob}
			j.wp[c]++
		}
		fs.doParallel(ops[:])
		j.pagesWritten += 2
		fs.ctr.metaPages.Add(2)
		j.seq++
		stream = stream[n:]
		if err := errors.Join(ops[0].err, ops[1].err); err != nil {
			return fmt.Errorf("sdf: metadata write: %w", err)
		}
	}
	return nil
}

func fillMetaPage(data []byte, epoch uint64, seq uint32, payload []byte, copyIdx int) {
	clear(data)
	binary.LittleEndian.PutUint32(data[0:], metaMagic)
	binary.LittleEndian.PutUint64(data[4:], epoch)
	binary.LittleEndian.PutUint32(data[12:], seq)
	binary.LittleEndian.PutUint32(data[16:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(data[20:], uint32(copyIdx))
	copy(data[metaHeaderSize:], payload)
	c := crc32.Update(crc32.Checksum(data[:24], castagnoli), castagnoli, payload)
	binary.LittleEndian.PutUint32(data[24:], c)
}

// parseMetaPage verifies a metadata page.
func parseMetaPage(data []byte) (epoch uint64, seq uint32, payload []byte, ok bool) {
	if binary.LittleEndian.Uint32(data[0:]) != metaMagic {
		return 0, 0, nil, false
	}
	n := int(binary.LittleEndian.Uint32(data[16:]))
	if n > len(data)-metaHeaderSize {
		return 0, 0, nil, false
	}
	payload = data[metaHeaderSize : metaHeaderSize+n]
	c := crc32.Update(crc32.Checksum(data[:24], castagnoli), castagnoli, payload)
	if c != binary.LittleEndian.Uint32(data[24:]) {
		return 0, 0, nil, false
	}
	return binary.LittleEndian.Uint64(data[4:]), binary.LittleEndian.Uint32(data[12:]), payload, true
}

// checkpointLocked starts a new epoch on two freshly erased metadata zones
// (never the active ones nor those in keep, which hold the last durable
// epoch) and writes the whole metadata state there. The caller holds jr.mu.
// The old epoch stays intact until the next checkpoint erases its zones, so
// a crash in the middle leaves the old epoch readable.
func (fs *FS) checkpointLocked(keep []*zone) error {
	j := &fs.jr
	exclude := map[*zone]bool{}
	for _, z := range keep {
		exclude[z] = true
	}
	if j.active[0] != nil {
		exclude[j.active[0]], exclude[j.active[1]] = true, true
	}
	var lastErr error
	for attempt := 0; attempt < metaZoneCount; attempt++ {
		pair, err := fs.pickMetaPair(exclude)
		if err != nil {
			if lastErr != nil {
				err = errors.Join(lastErr, err)
			}
			return err
		}
		fs.mu.Lock()
		stream := fs.snapshotLocked()
		j.pending = nil
		j.urgent = false
		fs.mu.Unlock()
		j.epoch++
		j.active = pair
		j.wp = [2]int{0, 0}
		j.seq = 0
		if pair[0].channel == pair[1].channel {
			// Same channel: shift the mirror by one page so that copy k of
			// every page is on a different die than the primary's.
			if err := fs.writeFiller(pair[1]); err != nil {
				lastErr = err
				exclude[pair[1]] = true
				j.active[0] = nil
				continue
			}
		}
		if err := fs.writeMetaPages(stream); err != nil {
			lastErr = err
			exclude[pair[0]], exclude[pair[1]] = true, true
			j.active[0] = nil
			continue
		}
		j.checkpoints++
		fs.ctr.checkpoints.Add(1)
		return nil
	}
	return fmt.Errorf("sdf: no metadata zone pair accepted a checkpoint: %w", lastErr)
}

func (fs *FS) writeFiller(z *zone) error {
	j := &fs.jr
	data := make([]byte, fs.l.g.PageSize)
	fillMetaPage(data, j.epoch, fillerSeq, nil, 1)
	oob := make([]byte, fs.l.g.OOBSize)
	kindOOB(oob, kindMeta, data)
	op := &pageOp{kind: opProgram, addr: fs.l.metaPageAddr(z.id, z.dies, j.wp[1]), data: data, oob: oob}
	fs.chans[z.channel].do(op)
	j.wp[1]++
	fs.ctr.metaPages.Add(1)
	return op.err
}

// pickMetaPair erases and returns two usable metadata zones not in exclude,
// least worn first, on different channels when possible.
func (fs *FS) pickMetaPair(exclude map[*zone]bool) ([2]*zone, error) {
	var cands []*zone
	for _, z := range fs.zones[:metaZoneCount] {
		if !exclude[z] && z.state != ZoneOffline {
			cands = append(cands, z)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].erases < cands[b].erases })
	var picked []*zone
	for _, z := range cands {
		if len(picked) == 1 && z.channel == picked[0].channel && fs.l.g.Channels > 1 {
			continue
		}
		if err := fs.resetZone(z); err != nil || len(z.dies) == 0 {
			exclude[z] = true
			continue
		}
		picked = append(picked, z)
		if len(picked) == 2 {
			return [2]*zone{picked[0], picked[1]}, nil
		}
	}
	// Fall back to a same-channel pair.
	for _, z := range cands {
		if len(picked) == 2 {
			break
		}
		if exclude[z] || (len(picked) == 1 && picked[0] == z) {
			continue
		}
		if err := fs.resetZone(z); err != nil || len(z.dies) == 0 {
			exclude[z] = true
			continue
		}
		picked = append(picked, z)
	}
	if len(picked) == 2 {
		return [2]*zone{picked[0], picked[1]}, nil
	}
	return [2]*zone{}, fmt.Errorf("sdf: fewer than two usable metadata zones left: %w", ErrNoSpace)
}

// snapshotLocked encodes the whole metadata state as a checkpoint stream.
// The caller holds fs.mu.
func (fs *FS) snapshotLocked() []byte {
	var out []byte
	g := fs.l.g
	var w recWriter
	w.u(formatVersion)
	for _, v := range []int{g.Channels, g.DiesPerChannel, g.BlocksPerDie, g.PagesPerBlock, g.PageSize, g.OOBSize} {
		w.u(uint64(v))
	}
	w.i(fs.created)
	out = append(out, w.frame(recSuper)...)
	for _, d := range fs.failedDieList() {
		w = recWriter{}
		w.u(uint64(d.Channel))
		w.u(uint64(d.Die))
		out = append(out, w.frame(recFailedDie)...)
	}
	full := fs.l.fullDieMask()
	for _, z := range fs.zones[metaZoneCount:] {
		if m := maskOf(z.dies); m != full {
			out = append(out, zoneResetRecord(z.id, m)...)
		}
		if z.state == ZoneReadOnly || z.state == ZoneOffline {
			out = append(out, zoneStateRecord(z.id, z.state)...)
		}
		if z.unsealed {
			out = append(out, zoneRecord(recZoneOpen, z.id)...)
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
	w = recWriter{}
	w.u(fs.nextFileID)
	w.u(fs.nextSeq)
	out = append(out, w.frame(recCheckpointDone)...)
	return out
}

func zoneResetRecord(z int, mask uint64) []byte {
	var w recWriter
	w.u(uint64(z))
	w.u(mask)
	return w.frame(recZoneReset)
}

func zoneRecord(typ byte, z int) []byte {
	var w recWriter
	w.u(uint64(z))
	return w.frame(typ)
}

func zoneStateRecord(z int, s ZoneState) []byte {
	var w recWriter
	w.u(uint64(z))
	w.u(uint64(s))
	return w.frame(recZoneState)
}

func createRecord(ino *inode) []byte {
	var w recWriter
	w.u(ino.id)
	w.s(ino.name)
	w.u(uint64(ino.hint))
	w.i(ino.mtime)
	return w.frame(recCreate)
}

func extentsRecord(ino *inode, exts []extent) []byte {
	var w recWriter
	w.u(ino.id)
	w.u(uint64(ino.size))
	w.i(ino.mtime)
	w.u(uint64(len(exts)))
	for _, e := range exts {
		w.u(e.filePage)
		w.u(uint64(e.zone))
		w.u(uint64(e.zonePage))
		w.u(uint64(e.n))
		w.u(e.seq)
	}
	return w.frame(recExtents)
}

// metaPage is one verified metadata page found on open.
type metaPage struct {
	epoch   uint64
	seq     uint32
	payload []byte
	zone    int
}

// scanMeta reads every programmed page of the metadata zones and returns the
// pages that verify. A page that fails (bad CRC, uncorrectable, failed die)
// is skipped: its copy on the other zone is used instead.
func (fs *FS) scanMeta() []metaPage {
	var found []metaPage
	g := fs.l.g
	for _, z := range fs.zones[:metaZoneCount] {
		var ops []*pageOp
		for d := 0; d < g.DiesPerChannel; d++ {
			info := fs.blockInfo(fs.l.zoneBlockAddr(z.id, d))
			for p := 0; p < info.WrittenPage; p++ {
				ops = append(ops, &pageOp{kind: opRead,
					addr: flash.PageAddr{Channel: z.channel, Die: d, Block: z.block, Page: p},
					data: make([]byte, g.PageSize), oob: make([]byte, g.OOBSize)})
			}
		}
		fs.chans[z.channel].do(ops...)
		for _, op := range ops {
			if op.err != nil || op.oob[0] != kindMeta ||
				binary.LittleEndian.Uint32(op.oob[32:]) != crc32.Checksum(op.data, castagnoli) {
				continue
			}
			epoch, seq, payload, ok := parseMetaPage(op.data)
			if !ok || seq == fillerSeq {
				continue
			}
			found = append(found, metaPage{epoch: epoch, seq: seq, payload: payload, zone: z.id})
		}
	}
	return found
}

// latestEpoch assembles the newest epoch whose checkpoint is complete and
// returns its record stream and the zones that hold it.
func latestEpoch(pages []metaPage) (epoch uint64, stream []byte, zones []int, err error) {
	byEpoch := map[uint64]map[uint32]metaPage{}
	zoneSet := map[uint64]map[int]bool{}
	for _, p := range pages {
		if byEpoch[p.epoch] == nil {
			byEpoch[p.epoch] = map[uint32]metaPage{}
			zoneSet[p.epoch] = map[int]bool{}
		}
		byEpoch[p.epoch][p.seq] = p
		zoneSet[p.epoch][p.zone] = true
	}
	var epochs []uint64
	for e := range byEpoch {
		epochs = append(epochs, e)
	}
	sort.Slice(epochs, func(a, b int) bool { return epochs[a] > epochs[b] })
	for _, e := range epochs {
		var s []byte
		for seq := uint32(0); ; seq++ {
			p, ok := byEpoch[e][seq]
			if !ok {
				break
			}
			s = append(s, p.payload...)
		}
		if checkpointComplete(s) {
			for z := range zoneSet[e] {
				zones = append(zones, z)
			}
			sort.Ints(zones)
			return e, s, zones, nil
		}
	}
	return 0, nil, nil, base.CorruptionErrorf("sdf: no complete metadata checkpoint on the device (%d metadata pages verify)", len(pages))
}

func checkpointComplete(stream []byte) bool {
	for {
		typ, _, rest, ok := nextRecord(stream)
		if !ok {
			return false
		}
		if typ == recCheckpointDone {
			return true
		}
		stream = rest
	}
}
