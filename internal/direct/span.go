package direct

import (
	"fmt"
	"sort"

	"github.com/klauspost/reedsolomon"

	"github.com/flashmend/flashmend/internal/base"
)

// Span is a byte range [Off, Off+Len) of one chunk. The spans a repair
// fetches are sector-aligned (Cover): the checksum unit is the smallest
// piece that can be verified on its own, so it is the smallest piece worth
// moving (DIRECT 000 section 2, principle 1, "recover data from remote
// servers at the smallest possible granularity", and section 4.2.2: HDFS
// checksums every 512 B).
type Span struct {
	Off, Len int
}

func (s Span) String() string { return fmt.Sprintf("[%d,%d)", s.Off, s.Off+s.Len) }

// End is the first byte after the span.
func (s Span) End() int { return s.Off + s.Len }

// FirstSector is the index of the sector the span starts in.
func (s Span) FirstSector() int { return s.Off / SectorSize }

// MaxSpans bounds the spans of one chunk a repair asks for: a chunk has
// at most SectorsPerChunk sectors, so at most half as many disjoint runs.
const MaxSpans = SectorsPerChunk / 2

// Cover returns the sector-aligned spans that cover the byte ranges lost
// of a chunk of chunkLen bytes, clipped to the chunk, sorted and merged
// where they overlap or touch: a lost range that starts or ends inside a
// sector takes the whole sector (a sector verifies only whole), and the
// last span ends at chunkLen when the chunk's last sector is short. Ranges
// past the chunk's end are dropped; a negative range, or a chunkLen outside
// (0, ChunkSize], is an error.
func Cover(chunkLen int, lost []Span) ([]Span, error) {
	if chunkLen <= 0 || chunkLen > ChunkSize {
		return nil, base.InvalidArgumentf("cover: chunk length %d outside (0, %d]", chunkLen, ChunkSize)
	}
	var out []Span
	for _, r := range lost {
		if r.Off < 0 || r.Len < 0 {
			return nil, base.InvalidArgumentf("cover: range %v of a chunk of %d bytes", r, chunkLen)
		}
		if r.Len == 0 || r.Off >= chunkLen {
			continue
		}
		lo := r.Off / SectorSize * SectorSize
		hi := min((r.End()+SectorSize-1)/SectorSize*SectorSize, chunkLen)
		out = append(out, Span{Off: lo, Len: hi - lo})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Off < out[b].Off })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && s.Off <= merged[n-1].End() {
			merged[n-1].Len = max(merged[n-1].End(), s.End()) - merged[n-1].Off
			continue
		}
		merged = append(merged, s)
	}
	return merged, nil
}

// CheckSpan validates a span a reader asks of a chunk: sector-aligned
// start, positive length within one chunk (the end is clipped to the
// chunk by the reader).
func CheckSpan(s Span) error {
	if s.Off < 0 || s.Off%SectorSize != 0 || s.Off >= ChunkSize {
		return base.InvalidArgumentf("span %v: offset not a sector boundary inside a chunk", s)
	}
	if s.Len <= 0 || s.Len > ChunkSize-s.Off {
		return base.InvalidArgumentf("span %v: length outside (0, %d]", s, ChunkSize-s.Off)
	}
	return nil
}

// DecideSpanREP is DecideREP for one span of a replicated chunk: reads are
// the span as the other replicas returned it (Data the span's bytes, Sums
// the stored sums of its sectors). The first replica whose span verifies
// wins; when none does, each sector is taken from a replica where it
// verifies and voted bit by bit only where none does (DIRECT 000 section
// 4.2.2, Figure 6b, on the span alone). The replicas found corrupt in the
// span are in Repairs, their new span in RepairData.
func DecideSpanREP(id ChunkID, span Span, reads []ReplicaRead) Decision {
	if err := checkSectorSpan(span); err != nil {
		return Decision{Err: err}
	}
	return decideREP(id, span.FirstSector(), span.Len, reads)
}

// DecideSpanEC reconstructs one span of shard target's chunk in an EC row
// from the same span of the other shards' chunks: Reed-Solomon codes each
// byte position across the shards independently, so equal sub-ranges of k
// shards decode that sub-range of the others (the smallest repair unit of
// an RS row, DIRECT 000 section 2, principle 1, applied to Reparo's lost
// LBAs, 003 section 4.2 steps 2-4). reads[target] is ignored (its span is
// what was lost); the others are the span as each shard's node returned
// it. The decision fetches shards until four verify over the span, then
// decodes; with fewer, it decodes sector by sector from the shards that
// verify at each sector. Its Repairs include target (with the rebuilt span
// in RepairData) and every other shard found corrupt in the span.
func DecideSpanEC(enc reedsolomon.Encoder, ids [TotalShards]ChunkID, target int, span Span, reads [TotalShards]ReplicaRead) Decision {
	if err := checkSectorSpan(span); err != nil {
		return Decision{Err: err}
	}
	if target < 0 || target >= TotalShards {
		return Decision{Err: base.InvalidArgumentf("EC span: target shard %d out of range", target)}
	}
	// The target's span is lost: it reads as a corrupt copy with no data,
	// so the core rebuilds it and lists it for repair.
	reads[target] = ReplicaRead{Fetched: true}
	return decideEC(enc, ids, span.FirstSector(), span.Len, reads, nil)
}

func checkSectorSpan(s Span) error {
	if s.Off < 0 || s.Off%SectorSize != 0 || s.Len <= 0 || s.End() > ChunkSize {
		return base.InvalidArgumentf("span %v is not a sector-aligned range of a chunk", s)
	}
	return nil
}
