package objstore

import (
	"slices"
	"sort"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
)

// Spans of chunks: a die repair (Reparo, paper 003) knows exactly which
// bytes of a chunk the failed die took, so it moves only those sectors:
// the other copies serve the span alone (ReadChunkSpan, verified against
// the stored sums of its sectors) and the damaged node lays it over what it
// still holds (PatchChunk), verifies the whole chunk and rewrites only what
// changed (DIRECT 000 section 2, principle 1: the smallest granularity).

// ReadChunkSpan reads and verifies one sector-aligned span of a chunk,
// clipped to the chunk's end, re-reading once on a mismatch as ReadChunk
// does. Only the span's bytes and the chunk's sums record are read (a
// RangeReader store touches no other page). The result's Data is the span,
// its Sums the stored sums of the span's sectors (the whole record's with
// allSums), Corrupt and Transient judged on the span alone. A span past
// the chunk's end, as its sums record gives it, is an invalid argument; a
// missing chunk an error wrapping ErrNotFound.
func (c *ChunkStore) ReadChunkSpan(id direct.ChunkID, span direct.Span, allSums bool) (ChunkRead, error) {
	if err := direct.CheckSpan(span); err != nil {
		return ChunkRead{}, err
	}
	r, err := c.readSpanOnce(id, span, allSums)
	if err != nil {
		return r, err
	}
	return c.rereadOnMismatch(r, func() (ChunkRead, error) { return c.readSpanOnce(id, span, allSums) })
}

func (c *ChunkStore) readSpanOnce(id direct.ChunkID, span direct.Span, allSums bool) (ChunkRead, error) {
	data, err := getRange(c.store, DataName(id), int64(span.Off), int64(span.Len))
	unreadable := false
	if err != nil {
		if !IsMediaError(err) {
			return ChunkRead{}, err
		}
		c.c.readErrors.Add(1)
		data, unreadable = nil, true
	}
	rec, err := c.readRecord(id)
	if err != nil {
		if !IsMediaError(err) {
			return ChunkRead{}, err
		}
		c.c.readErrors.Add(1)
		rec = nil
	}
	first := span.FirstSector()
	r := ChunkRead{Data: data, Corrupt: true}
	if rec == nil {
		return r, nil
	}
	n, sums, derr := sumsrec.Decode(id, rec)
	if derr != nil {
		if damaged := sumsrec.Damaged(rec); len(damaged) > first {
			r.DamagedSums = damaged[first:min(len(damaged), first+direct.SectorCount(span.Len))]
		}
		return r, nil
	}
	if span.Off >= n {
		return ChunkRead{}, base.InvalidArgumentf("chunk %s: span %v past its end (%d bytes)", id, span, n)
	}
	want := min(span.End(), n) - span.Off
	spanSums := sums[first : first+direct.SectorCount(want)]
	r.Sums = spanSums
	if allSums {
		r.Sums = sums
	}
	r.Corrupt = unreadable || len(data) != want || direct.VerifyFrom(id, first, data, spanSums) != nil
	return r, nil
}

// Patch is a sector-aligned span of a chunk and its new bytes.
type Patch struct {
	Off  int
	Data []byte
}

// PatchChunk repairs part of a chunk: it lays the patches over the
// chunk's current content (the surviving sectors; a store that cannot read
// the file whole is read around the patches), verifies every sector of the
// result against the chunk's sums, and only then writes it as a repair
// (WriteChunk, which rewrites the sectors that differ and the sums record).
// The sums are the chunk's own record when it verifies; sums (the whole
// chunk's, from another replica) stand in for a record that was lost, and
// must equal a record that verifies. A result that still fails a sector
// changes nothing and returns a corruption error naming the sectors; a
// missing chunk an error wrapping ErrNotFound. It returns the bytes that
// changed.
func (c *ChunkStore) PatchChunk(id direct.ChunkID, patches []Patch, sums []uint32) (int64, error) {
	if len(patches) == 0 || len(patches) > direct.MaxSpans {
		return 0, base.InvalidArgumentf("patch %s: %d patches, want 1 to %d", id, len(patches), direct.MaxSpans)
	}
	patches = slices.Clone(patches)
	sort.Slice(patches, func(a, b int) bool { return patches[a].Off < patches[b].Off })
	for i, p := range patches {
		if err := direct.CheckSpan(direct.Span{Off: p.Off, Len: len(p.Data)}); err != nil {
			return 0, base.InvalidArgumentf("patch %s: %v", id, err)
		}
		if i > 0 && p.Off < patches[i-1].Off+len(patches[i-1].Data) {
			return 0, base.InvalidArgumentf("patch %s: patches at %d and %d overlap", id, patches[i-1].Off, p.Off)
		}
	}
	rec, err := c.readRecord(id)
	if err != nil && !IsMediaError(err) {
		return 0, err
	}
	n := -1
	recordValid := false
	if rec != nil {
		if ln, own, derr := sumsrec.Decode(id, rec); derr == nil {
			recordValid = true
			if len(sums) > 0 && !slices.Equal(sums, own) {
				return 0, base.InvalidArgumentf("patch %s: the sums given differ from the chunk's record", id)
			}
			n, sums = ln, own
		}
	}
	if n < 0 && len(sums) == 0 {
		return 0, base.CorruptionErrorf("patch %s: the chunk's sums record is lost and no sums were given", id)
	}
	cur, err := c.store.Get(DataName(id))
	if err != nil && IsMediaError(err) && n >= 0 {
		cur, err = c.readAround(id, n, patches)
	}
	if err != nil {
		return 0, err
	}
	if n < 0 {
		n = len(cur)
	}
	if len(cur) != n || direct.SectorCount(n) != len(sums) {
		return 0, base.CorruptionErrorf("patch %s: the chunk holds %d bytes, its sums cover %d sectors", id, len(cur), len(sums))
	}
	merged := slices.Clone(cur)
	for _, p := range patches {
		if p.Off+len(p.Data) > n {
			return 0, base.InvalidArgumentf("patch %s: [%d,%d) past the chunk's %d bytes", id, p.Off, p.Off+len(p.Data), n)
		}
		copy(merged[p.Off:], p.Data)
	}
	if bad := direct.BadSectors(id, merged, sums); len(bad) > 0 {
		return 0, base.CorruptionErrorf("patch %s: %d sectors fail their checksum after the patch (first %d)", id, len(bad), bad[0])
	}
	var changed int64
	for off := 0; off < n; off += direct.SectorSize {
		end := min(off+direct.SectorSize, n)
		if string(cur[off:end]) != string(merged[off:end]) {
			changed += int64(end - off)
		}
	}
	if changed == 0 && recordValid {
		return 0, nil // nothing was wrong
	}
	if err := c.WriteChunk(id, merged, sums, true); err != nil {
		return 0, err
	}
	return changed, nil
}

// readAround reads the chunk's n bytes except the patches' spans (left
// zero): for a store that fails a whole-file read on the pages the patches
// replace.
func (c *ChunkStore) readAround(id direct.ChunkID, n int, patches []Patch) ([]byte, error) {
	out := make([]byte, n)
	at := 0
	read := func(lo, hi int) error {
		if hi <= lo {
			return nil
		}
		b, err := getRange(c.store, DataName(id), int64(lo), int64(hi-lo))
		if err != nil {
			return err
		}
		if len(b) != hi-lo {
			return base.CorruptionErrorf("chunk %s: [%d,%d) reads %d bytes", id, lo, hi, len(b))
		}
		copy(out[lo:], b)
		return nil
	}
	for _, p := range patches {
		if err := read(at, min(p.Off, n)); err != nil {
			return nil, err
		}
		at = max(at, p.Off+len(p.Data))
	}
	if err := read(at, n); err != nil {
		return nil, err
	}
	return out, nil
}
