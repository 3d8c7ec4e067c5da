package keyspan

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// Range is a user key range [Start, End); an empty End is unbounded.
type Range struct {
	Start, End []byte
}

func (r Range) String() string {
	if len(r.End) == 0 {
		return fmt.Sprintf("[%q, +inf)", r.Start)
	}
	return fmt.Sprintf("[%q, %q)", r.Start, r.End)
}

// Contains reports whether k is in r.
func (r Range) Contains(k []byte) bool {
	return bytes.Compare(k, r.Start) >= 0 && (len(r.End) == 0 || bytes.Compare(k, r.End) < 0)
}

// Overlaps reports whether r and o share a key.
func (r Range) Overlaps(o Range) bool {
	return (len(o.End) == 0 || bytes.Compare(r.Start, o.End) < 0) &&
		(len(r.End) == 0 || bytes.Compare(o.Start, r.End) < 0)
}

// Includes reports whether every key of inner is in r.
func (r Range) Includes(inner Range) bool {
	return r.Contains(inner.Start) &&
		(len(r.End) == 0 || (len(inner.End) != 0 && bytes.Compare(inner.End, r.End) <= 0))
}

// Equal reports whether r and o have the same bounds.
func (r Range) Equal(o Range) bool {
	return bytes.Equal(r.Start, o.Start) && bytes.Equal(r.End, o.End)
}

// endBefore reports whether end a (exclusive, empty = unbounded) is below
// end b.
func endBefore(a, b []byte) bool {
	if len(a) == 0 {
		return false
	}
	return len(b) == 0 || bytes.Compare(a, b) < 0
}

// Subtract returns the parts of r not covered by any of holes, in order.
func Subtract(r Range, holes []Range) []Range {
	out := []Range{r}
	for _, h := range holes {
		var next []Range
		for _, p := range out {
			if !p.Overlaps(h) {
				next = append(next, p)
				continue
			}
			if bytes.Compare(p.Start, h.Start) < 0 {
				next = append(next, Range{Start: p.Start, End: h.Start})
			}
			if len(h.End) != 0 && endBefore(h.End, p.End) {
				next = append(next, Range{Start: h.End, End: p.End})
			}
		}
		out = next
	}
	return out
}

// Covers reports whether the union of pieces covers r.
func Covers(pieces []Range, r Range) bool {
	sorted := append([]Range(nil), pieces...)
	sort.Slice(sorted, func(i, j int) bool { return bytes.Compare(sorted[i].Start, sorted[j].Start) < 0 })
	at := r.Start
	for _, p := range sorted {
		if bytes.Compare(p.Start, at) > 0 {
			break // a gap at at
		}
		if len(p.End) == 0 {
			return true
		}
		if bytes.Compare(p.End, at) > 0 {
			at = p.End
		}
		if len(r.End) != 0 && bytes.Compare(at, r.End) >= 0 {
			return true
		}
	}
	return false
}

// Merge returns the union of rgs as disjoint ranges in key order: ranges
// that overlap or touch become one. rgs is not changed.
func Merge(rgs []Range) []Range {
	if len(rgs) == 0 {
		return nil
	}
	in := append([]Range(nil), rgs...)
	sort.Slice(in, func(i, j int) bool { return bytes.Compare(in[i].Start, in[j].Start) < 0 })
	out := []Range{in[0]}
	for _, r := range in[1:] {
		last := &out[len(out)-1]
		if len(last.End) != 0 && bytes.Compare(r.Start, last.End) > 0 {
			out = append(out, r)
			continue
		}
		if endBefore(last.End, r.End) {
			last.End = r.End
		}
	}
	return out
}

// Remove returns rgs without one entry equal to each of drop.
func Remove(rgs, drop []Range) []Range {
	out := append([]Range(nil), rgs...)
	for _, d := range drop {
		for i, rg := range out {
			if rg.Equal(d) {
				out = append(out[:i], out[i+1:]...)
				break
			}
		}
	}
	return out
}

// Has reports whether rgs holds a range equal to rg.
func Has(rgs []Range, rg Range) bool {
	for _, m := range rgs {
		if m.Equal(rg) {
			return true
		}
	}
	return false
}

// ToProto is the wire form of rs.
func ToProto(rs []Range) []*kvpb.KeyRange {
	out := make([]*kvpb.KeyRange, len(rs))
	for i, r := range rs {
		out[i] = &kvpb.KeyRange{Start: r.Start, End: r.End}
	}
	return out
}

// FromProto reads rs from its wire form.
func FromProto(rs []*kvpb.KeyRange) []Range {
	out := make([]Range, len(rs))
	for i, r := range rs {
		out[i] = Range{Start: r.Start, End: r.End}
	}
	return out
}
