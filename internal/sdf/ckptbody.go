package sdf

import (
	"errors"
	"fmt"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// A checkpoint body holds a checkpoint's records when they are too many for
// the metadata zones. The seven metadata zones are fixed, one block per die
// of a channel each, while the file table grows with the files: a device of
// small files (the object store keeps a file per chunk) would otherwise stop
// taking files once its table filled one metadata zone, long before its data
// zones were full. The body is written, MetaCopies times on different
// channels, to empty data zones lent to the journal (zones.Zone.Body, which also
// sets Zone.Meta so that allocation, GC, reclaim and Identify leave them
// alone); the epoch's root in the metadata zones keeps the superblock, a
// RecCheckpointBody record naming the body's zones, and RecCheckpointDone.
// The body of the newest durable epoch is the only one kept: the previous
// one is handed back to the data zones (read-only, no live page, so reclaim
// erases it) as soon as a newer root is durable.

// inlineCheckpointPages is the largest checkpoint (stream pages, plus the
// filler pages that stagger copies) written inline in the metadata zones:
// half a healthy metadata zone, so that a checkpoint leaves the log at least
// as much room again before the next one.
func (fs *FS) inlineCheckpointPages() int { return fs.metaZonePages() / 2 }

// metaZonePages is the pages of a metadata zone (or a zone lent to a body)
// on every die of its channel.
func (fs *FS) metaZonePages() int { return fs.l.Geometry.DiesPerChannel * fs.l.Geometry.PagesPerBlock }

// pagesOf is the number of metadata pages a stream of n bytes fills.
func (fs *FS) pagesOf(n int) int { return (n + fs.payloadPerPage() - 1) / fs.payloadPerPage() }

// bodyReserveLocked recomputes how many empty zones writes leave for the
// next checkpoint body: room for MetaCopies copies of twice the body just
// written (the state may grow by what the log holds before the next
// checkpoint, and the old body stays until the new one is durable). A state
// small enough to stay inline reserves nothing. Beyond the reserve, a body
// takes any empty zone, or the checkpoint falls back to inline if it fits,
// or it fails with ErrNoSpace. The caller holds fs.mu.
func (fs *FS) bodyReserveLocked(streamPages int) int {
	if streamPages+onflash.MetaCopies <= fs.inlineCheckpointPages()/2 {
		return 0
	}
	perZone := fs.metaZonePages()
	return onflash.MetaCopies * ((2*streamPages + perZone - 1) / perZone)
}

// writtenBody is a body on flash: its record and the zones it occupies.
type writtenBody struct {
	rec   onflash.CheckpointBody
	zones []*zones.Zone
}

// writeBody writes records as a checkpoint body of epoch (MetaCopies
// copies, each on zones of channels the other copies do not use where the
// device has channels enough). The caller holds jr.mu. A copy whose program
// fails is written again on other zones; the failed zone is handed back.
func (fs *FS) writeBody(epoch uint64, records []byte) (*writtenBody, error) {
	per := fs.payloadPerPage()
	pages := fs.pagesOf(len(records))
	wb := &writtenBody{rec: onflash.CheckpointBody{Epoch: epoch, Bytes: uint64(len(records)), CRC: base.CRC32C(records)}}
	used := map[int]bool{} // channels holding a copy
	for c := 0; c < onflash.MetaCopies; c++ {
		var lastErr error
		done := false
		for attempt := 0; attempt < 4 && !done; attempt++ {
			lent, err := fs.lendZones(pages, used)
			if err != nil {
				fs.releaseBody(wb.zones)
				return nil, errors.Join(lastErr, err)
			}
			var ops []*channels.Op
			var runs []onflash.BodyRun
			i := 0
			for _, z := range lent {
				n := min(len(z.Dies)*fs.l.Geometry.PagesPerBlock, pages-i)
				runs = append(runs, onflash.BodyRun{Zone: z.ID, Mask: onflash.MaskOf(z.Dies), Pages: n})
				for k := 0; k < n; k, i = k+1, i+1 {
					data := make([]byte, fs.l.Geometry.PageSize)
					onflash.FillMetaPage(data, epoch, onflash.BodySeq(i), records[i*per:min(len(records), (i+1)*per)])
					oob := make([]byte, fs.l.Geometry.OOBSize)
					onflash.KindOOB(oob, onflash.KindMeta, data)
					ops = append(ops, &channels.Op{Kind: channels.Program, Addr: fs.l.MetaPageAddr(z.ID, z.Dies, k), Data: data, OOB: oob})
				}
			}
			fs.doParallel(ops)
			fs.jr.pagesWritten += int64(len(ops))
			fs.ctr.metaPages.Add(int64(len(ops)))
			fs.mu.Lock()
			for k, z := range lent {
				z.WP = runs[k].Pages // programmed or tried: never handed back as empty
			}
			fs.mu.Unlock()
			var errs []error
			for _, op := range ops {
				errs = append(errs, op.Err)
			}
			if err := errors.Join(errs...); err != nil {
				lastErr = fmt.Errorf("sdf: checkpoint body copy %d: %w", c, err)
				fs.releaseBody(lent)
				continue
			}
			for _, z := range lent {
				used[z.Channel] = true
			}
			wb.zones = append(wb.zones, lent...)
			wb.rec.Copies[c] = runs
			done = true
		}
		if !done {
			fs.releaseBody(wb.zones)
			return nil, lastErr
		}
	}
	return wb, nil
}

// lendZones takes empty data zones for one copy of a body of pages pages,
// preferring channels not in avoid, least worn first, and lends them to the
// journal (zones.Table.Lend).
func (fs *FS) lendZones(pages int, avoid map[int]bool) ([]*zones.Zone, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	lent, ok := fs.zones.Lend(pages, avoid)
	if !ok {
		return nil, fmt.Errorf("sdf: no empty zones left for a %d-page checkpoint body: %w", pages, ErrNoSpace)
	}
	return lent, nil
}

// releaseBody hands a body's zones back to the data zones: read-only with no
// live page, so reclaim (or GC) erases them (zones.Table.Release).
func (fs *FS) releaseBody(lent []*zones.Zone) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.zones.Release(lent)
}

// readBody reads a checkpoint body back: every page from its first copy,
// and a page that does not verify there is merged unit by unit from the
// other copies (and voted bit by bit where no copy has a unit), like the
// metadata pages. The whole stream must match the record's CRC32C.
func (fs *FS) readBody(b onflash.CheckpointBody) ([]byte, error) {
	g := fs.l.Geometry
	pages := b.Pages(0)
	addrs := make([][onflash.MetaCopies]flash.PageAddr, pages)
	for c := range b.Copies {
		i := 0
		for _, r := range b.Copies[c] {
			dies := onflash.DiesOf(r.Mask)
			for k := 0; k < r.Pages; k, i = k+1, i+1 {
				addrs[i][c] = fs.l.MetaPageAddr(r.Zone, dies, k)
			}
		}
	}
	read := func(c int, idx []int) [][]byte {
		ops := make([]*channels.Op, len(idx))
		for j, i := range idx {
			ops[j] = &channels.Op{Kind: channels.Read, Addr: addrs[i][c], Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)}
		}
		fs.doParallel(ops)
		out := make([][]byte, len(idx))
		for j, op := range ops {
			if op.Err == nil || errors.Is(op.Err, flash.ErrUncorrectable) {
				out[j] = op.Data // an uncorrectable page still takes part in the merge
			}
		}
		return out
	}
	all := make([]int, pages)
	for i := range all {
		all[i] = i
	}
	raws := make([][][]byte, pages)
	payloads := make([][]byte, pages)
	var todo []int
	for j, raw := range read(0, all) {
		raws[j] = append(raws[j], raw)
		if p, ok := metalog.ParseBodyPage(raw, b.Epoch, j); ok {
			payloads[j] = p
		} else {
			todo = append(todo, j)
		}
	}
	for c := 1; c < onflash.MetaCopies && len(todo) > 0; c++ {
		for j, raw := range read(c, todo) {
			raws[todo[j]] = append(raws[todo[j]], raw)
		}
	}
	for _, i := range todo {
		p, ok := metalog.MergeBodyPage(raws[i], b.Epoch, i)
		if !ok {
			return nil, base.CorruptionErrorf("sdf: checkpoint body of epoch %d: page %d verifies in none of its %d copies", b.Epoch, i, onflash.MetaCopies)
		}
		payloads[i] = p
		fs.openInfo.BodyPagesMerged++
	}
	fs.openInfo.BodyPages += pages
	var stream []byte
	for _, p := range payloads {
		stream = append(stream, p...)
	}
	if uint64(len(stream)) != b.Bytes || base.CRC32C(stream) != b.CRC {
		return nil, base.CorruptionErrorf("sdf: checkpoint body of epoch %d: %d bytes read back, CRC mismatch or want %d bytes", b.Epoch, len(stream), b.Bytes)
	}
	return stream, nil
}
