package journal

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
// channels, to empty data zones lent to the journal (zones.Table.Lend:
// Zone.Body, which also sets Zone.Meta so that allocation, GC, reclaim and
// the identifier leave them alone); the epoch's root in the metadata zones
// keeps the superblock, a RecCheckpointBody record naming the body's zones,
// and RecCheckpointDone. The body of the newest durable epoch is the only
// one kept: the previous one is handed back to the data zones (read-only,
// no live page, so reclaim erases it) as soon as a newer root is durable.

// inlineCheckpointPages is the largest checkpoint (stream pages, plus the
// filler pages that stagger copies) written inline in the metadata zones:
// half a healthy metadata zone, so that a checkpoint leaves the log at least
// as much room again before the next one.
func (j *Journal) inlineCheckpointPages() int { return j.metaZonePages() / 2 }

// metaZonePages is the pages of a metadata zone (or a zone lent to a body)
// on every die of its channel.
func (j *Journal) metaZonePages() int {
	return j.l.Geometry.DiesPerChannel * j.l.Geometry.PagesPerBlock
}

// pagesOf is the number of metadata pages a stream of n bytes fills.
func (j *Journal) pagesOf(n int) int { return (n + j.payloadPerPage() - 1) / j.payloadPerPage() }

// bodyReserveFor is how many empty zones writes leave for the next
// checkpoint body after one of streamPages pages: room for MetaCopies
// copies of twice it (the state may grow by what the log holds before the
// next checkpoint, and the old body stays until the new one is durable). A
// state small enough to stay inline reserves nothing. Beyond the reserve, a
// body takes any empty zone, or the checkpoint falls back to inline if it
// fits, or it fails with zones.ErrNoSpace.
func (j *Journal) bodyReserveFor(streamPages int) int {
	if streamPages+onflash.MetaCopies <= j.inlineCheckpointPages()/2 {
		return 0
	}
	perZone := j.metaZonePages()
	return onflash.MetaCopies * ((2*streamPages + perZone - 1) / perZone)
}

// writtenBody is a body on flash: its record and the zones it occupies.
type writtenBody struct {
	rec   onflash.CheckpointBody
	zones []*zones.Zone
}

// Body is the newest durable epoch's checkpoint body and the zones lent to
// it; ok is false when the checkpoint is inline.
func (j *Journal) Body() (rec onflash.CheckpointBody, lent []*zones.Zone, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.body == nil {
		return onflash.CheckpointBody{}, nil, false
	}
	return j.body.rec, append([]*zones.Zone(nil), j.body.zones...), true
}

// WriteOrphanBody writes records as the body of the next epoch and never
// names it in a root, as a crash right after the body was written would
// leave it (for crash tests). It returns the zones the body occupies.
func (j *Journal) WriteOrphanBody(records []byte) ([]*zones.Zone, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	b, err := j.writeBody(j.epoch+1, records)
	if err != nil {
		return nil, err
	}
	return b.zones, nil
}

// writeBody writes records as a checkpoint body of epoch (MetaCopies
// copies, each on zones of channels the other copies do not use where the
// device has channels enough). The caller holds j.mu. A copy whose program
// fails is written again on other zones; the failed zone is handed back.
func (j *Journal) writeBody(epoch uint64, records []byte) (*writtenBody, error) {
	per := j.payloadPerPage()
	pages := j.pagesOf(len(records))
	wb := &writtenBody{rec: onflash.CheckpointBody{Epoch: epoch, Bytes: uint64(len(records)), CRC: base.CRC32C(records)}}
	used := map[int]bool{} // channels holding a copy
	for c := 0; c < onflash.MetaCopies; c++ {
		var lastErr error
		done := false
		for attempt := 0; attempt < 4 && !done; attempt++ {
			lent, err := j.lend(pages, used)
			if err != nil {
				j.release(wb.zones)
				return nil, errors.Join(lastErr, err)
			}
			var ops []*channels.Op
			var runs []onflash.BodyRun
			i := 0
			for _, z := range lent {
				n := min(len(z.Dies)*j.l.Geometry.PagesPerBlock, pages-i)
				runs = append(runs, onflash.BodyRun{Zone: z.ID, Mask: onflash.MaskOf(z.Dies), Pages: n})
				for k := 0; k < n; k, i = k+1, i+1 {
					data := make([]byte, j.l.Geometry.PageSize)
					onflash.FillMetaPage(data, epoch, onflash.BodySeq(i), records[i*per:min(len(records), (i+1)*per)])
					oob := make([]byte, j.l.Geometry.OOBSize)
					onflash.KindOOB(oob, onflash.KindMeta, data)
					ops = append(ops, &channels.Op{Kind: channels.Program, Addr: j.l.MetaPageAddr(z.ID, z.Dies, k), Data: data, OOB: oob})
				}
			}
			j.host.Run(ops)
			j.Stats.MetaPages.Add(int64(len(ops)))
			j.host.Lock()
			for k, z := range lent {
				z.WP = runs[k].Pages // programmed or tried: never handed back as empty
			}
			j.host.Unlock()
			var errs []error
			for _, op := range ops {
				errs = append(errs, op.Err)
			}
			if err := errors.Join(errs...); err != nil {
				lastErr = fmt.Errorf("sdf: checkpoint body copy %d: %w", c, err)
				j.release(lent)
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
			j.release(wb.zones)
			return nil, lastErr
		}
	}
	return wb, nil
}

// lend takes empty data zones for one copy of a body of pages pages,
// preferring channels not in avoid, least worn first, and lends them to the
// journal (zones.Table.Lend).
func (j *Journal) lend(pages int, avoid map[int]bool) ([]*zones.Zone, error) {
	j.host.Lock()
	defer j.host.Unlock()
	lent, ok := j.table.Lend(pages, avoid)
	if !ok {
		return nil, fmt.Errorf("sdf: no empty zones left for a %d-page checkpoint body: %w", pages, zones.ErrNoSpace)
	}
	return lent, nil
}

// release hands a body's zones back to the data zones: read-only with no
// live page, so reclaim (or GC) erases them (zones.Table.Release).
func (j *Journal) release(lent []*zones.Zone) {
	j.host.Lock()
	defer j.host.Unlock()
	j.table.Release(lent)
}

// BodyRead says how a checkpoint body was read back (OpenInfo).
type BodyRead struct {
	// Pages is the body's pages; Merged those that did not verify in their
	// first copy and were merged from the others.
	Pages, Merged int
}

// ReadBody reads a checkpoint body back: every page from its first copy,
// and a page that does not verify there is merged unit by unit from the
// other copies (and voted bit by bit where no copy has a unit), like the
// metadata pages. The whole stream must match the record's CRC32C. It adds
// what it read to *st.
func (j *Journal) ReadBody(b onflash.CheckpointBody, st *BodyRead) ([]byte, error) {
	g := j.l.Geometry
	pages := b.Pages(0)
	addrs := make([][onflash.MetaCopies]flash.PageAddr, pages)
	for c := range b.Copies {
		i := 0
		for _, r := range b.Copies[c] {
			dies := onflash.DiesOf(r.Mask)
			for k := 0; k < r.Pages; k, i = k+1, i+1 {
				addrs[i][c] = j.l.MetaPageAddr(r.Zone, dies, k)
			}
		}
	}
	read := func(c int, idx []int) [][]byte {
		ops := make([]*channels.Op, len(idx))
		for k, i := range idx {
			ops[k] = &channels.Op{Kind: channels.Read, Addr: addrs[i][c], Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)}
		}
		j.host.Run(ops)
		out := make([][]byte, len(idx))
		for k, op := range ops {
			if op.Err == nil || errors.Is(op.Err, flash.ErrUncorrectable) {
				out[k] = op.Data // an uncorrectable page still takes part in the merge
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
	for k, raw := range read(0, all) {
		raws[k] = append(raws[k], raw)
		if p, ok := metalog.ParseBodyPage(raw, b.Epoch, k); ok {
			payloads[k] = p
		} else {
			todo = append(todo, k)
		}
	}
	for c := 1; c < onflash.MetaCopies && len(todo) > 0; c++ {
		for k, raw := range read(c, todo) {
			raws[todo[k]] = append(raws[todo[k]], raw)
		}
	}
	for _, i := range todo {
		p, ok := metalog.MergeBodyPage(raws[i], b.Epoch, i)
		if !ok {
			return nil, base.CorruptionErrorf("sdf: checkpoint body of epoch %d: page %d verifies in none of its %d copies", b.Epoch, i, onflash.MetaCopies)
		}
		payloads[i] = p
		st.Merged++
	}
	st.Pages += pages
	var stream []byte
	for _, p := range payloads {
		stream = append(stream, p...)
	}
	if uint64(len(stream)) != b.Bytes || base.CRC32C(stream) != b.CRC {
		return nil, base.CorruptionErrorf("sdf: checkpoint body of epoch %d: %d bytes read back, CRC mismatch or want %d bytes", b.Epoch, len(stream), b.Bytes)
	}
	return stream, nil
}
