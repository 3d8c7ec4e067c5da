package patch

import (
	"time"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv/keyspan"
)

// Piece is one range of a patch entry as the damaged replica applies it:
// the range it lost, the span its patch excises, the damaged blocks it
// covers and, when its peers' pieces cover it, the rows they sent there.
type Piece struct {
	Range, Wide keyspan.Range
	Blocks      []uint64
	Rows        []*kvpb.KeyValue
}

// Assemble sorts the ranges of request q's patch entry by what arrived:
// covered (the peers' pieces cover the range; Rows holds the rows received
// in it) and missing (no patch in time: block merge, then asked again).
// Both keep the entry's order.
func Assemble(q *Request, ranges []keyspan.Range, got Parts) (covered, missing []Piece) {
	for i, rg := range ranges {
		p := Piece{Range: rg, Wide: rg}
		if i < len(q.Wide) {
			p.Wide = q.Wide[i]
		}
		if i < len(q.Blocks) {
			p.Blocks = q.Blocks[i]
		}
		if !got.Covers(rg) {
			missing = append(missing, p)
			continue
		}
		for _, kv := range got.Rows[rg.String()] {
			if rg.Contains(kv.Key) {
				p.Rows = append(p.Rows, kv)
			}
		}
		covered = append(covered, p)
	}
	return covered, missing
}

// Retry is the request that asks again, at a later entry, for the pieces
// of q still missing (a builder may have been damaged in that range
// itself, and is likely patched within moments). It is proposed no
// sooner than first after now, doubled for each retry q already was, and
// at most last after now. It keeps q's detection time. Nil if nothing is
// missing.
func Retry(q *Request, missing []Piece, now time.Time, first, last time.Duration) *Request {
	if len(missing) == 0 {
		return nil
	}
	wait := first
	for i := 0; i < q.Retries && wait < last; i++ {
		wait *= 2
	}
	out := &Request{Path: q.Path, Detected: q.Detected, RetryAfter: now.Add(min(wait, last)), Retries: q.Retries + 1}
	for _, p := range missing {
		out.Ranges = append(out.Ranges, p.Range)
		out.Wide = append(out.Wide, p.Wide)
		out.Blocks = append(out.Blocks, p.Blocks)
	}
	return out
}

// Remainders is the request for what an excise of file path cut off around
// its spans (lost), detected at now: patched from the peers like any
// damage, each range excised as it is. Nil if nothing was lost.
func Remainders(path string, now time.Time, lost []keyspan.Range) *Request {
	if len(lost) == 0 {
		return nil
	}
	lost = keyspan.Merge(lost)
	return &Request{Path: path, Detected: now, Ranges: lost, Wide: lost, Blocks: make([][]uint64, len(lost))}
}
