package onflash

import (
	"fmt"

	"github.com/flashmend/flashmend/internal/base"
)

// CheckpointBody says where a checkpoint's records are when they are too
// many for the metadata zones (RecCheckpointBody). The body is a stream of
// records cut into metadata pages (FillMetaPage: units with their own
// CRC32C, epoch and sequence number BodySeq(i)), written MetaCopies times;
// copy c's pages lie in order over its Runs, each run the first Pages pages
// of a zone striped over the dies of Mask (MetaPageAddr). CRC is the
// CRC32C of the whole body stream, checked after the copies are merged.
type CheckpointBody struct {
	// Epoch is the epoch the body's pages carry: the checkpoint that wrote
	// it (a root written again after a failed attempt has a newer one).
	Epoch  uint64
	Bytes  uint64
	CRC    uint32
	Copies [MetaCopies][]BodyRun
}

// BodyRun is the first Pages pages of Zone, striped over the dies of Mask.
type BodyRun struct {
	Zone  int
	Mask  uint64
	Pages int
}

// BodySeq is the sequence number of body page i: the high bit set keeps it
// apart from the journal stream's own pages (and FillerSeq is never one).
func BodySeq(i int) uint32 { return 1<<31 | uint32(i) }

// maxBodyRuns bounds the runs of one copy a record may claim, so a damaged
// but verifying record cannot make replay allocate without bound.
const maxBodyRuns = 1 << 20

// Record encodes b as a RecCheckpointBody record.
func (b CheckpointBody) Record() []byte {
	var w RecWriter
	w.Uvarint(b.Epoch)
	w.Uvarint(b.Bytes)
	w.Uvarint(uint64(b.CRC))
	for _, runs := range b.Copies {
		w.Uvarint(uint64(len(runs)))
		for _, r := range runs {
			w.Uvarint(uint64(r.Zone))
			w.Uvarint(r.Mask)
			w.Uvarint(uint64(r.Pages))
		}
	}
	return w.Frame(RecCheckpointBody)
}

// Pages is the number of body pages in copy c.
func (b CheckpointBody) Pages(c int) int {
	n := 0
	for _, r := range b.Copies[c] {
		n += r.Pages
	}
	return n
}

// DecodeCheckpointBody decodes a RecCheckpointBody record's body and checks
// it against the layout: every zone a data zone, every mask a subset of the
// channel's dies, every run within its zone.
func DecodeCheckpointBody(l Layout, body []byte) (CheckpointBody, error) {
	r := NewRecReader(body)
	var b CheckpointBody
	b.Epoch = r.Uvarint()
	b.Bytes = r.Uvarint()
	crc := r.Uvarint()
	b.CRC = uint32(crc)
	if r.Err == nil && crc > 1<<32-1 {
		return b, base.CorruptionErrorf("sdf: checkpoint body record: CRC %#x out of range", crc)
	}
	for c := range b.Copies {
		n := r.Uvarint()
		if r.Err != nil {
			break
		}
		if n > maxBodyRuns || n > uint64(l.Zones()) {
			return b, base.CorruptionErrorf("sdf: checkpoint body record: copy %d claims %d runs", c, n)
		}
		for i := uint64(0); i < n; i++ {
			run := BodyRun{Zone: int(r.Uvarint()), Mask: r.Uvarint(), Pages: int(r.Uvarint())}
			if r.Err != nil {
				break
			}
			dies := len(DiesOf(run.Mask))
			if run.Zone < MetaZoneCount || run.Zone >= l.Zones() || run.Mask == 0 || run.Mask&^l.FullDieMask() != 0 ||
				run.Pages <= 0 || run.Pages > dies*l.Geometry.PagesPerBlock {
				return b, base.CorruptionErrorf("sdf: checkpoint body record: bad run %+v", run)
			}
			b.Copies[c] = append(b.Copies[c], run)
		}
	}
	if r.Err != nil {
		return b, base.CorruptionErrorf("sdf: checkpoint body record: %v", r.Err)
	}
	per := MetaUnitsPerPage(l.Geometry.PageSize) * MetaUnitPayload
	for c := range b.Copies {
		if got := b.Pages(c); uint64(got) != (b.Bytes+uint64(per)-1)/uint64(per) {
			return b, base.CorruptionErrorf("sdf: checkpoint body record: copy %d has %d pages for %d bytes", c, got, b.Bytes)
		}
	}
	return b, nil
}

func (r BodyRun) String() string {
	return fmt.Sprintf("zone %d dies %#x pages %d", r.Zone, r.Mask, r.Pages)
}
