package extmap

import (
	"fmt"
	"sort"
)

// Extent maps N consecutive file pages starting at FilePage to N consecutive
// data pages of one zone starting at ZonePage. Page k of the extent was
// programmed with sequence number Seq+k. Extents never cross a zone.
type Extent struct {
	FilePage uint64
	Zone     int
	ZonePage int
	N        int
	Seq      uint64
}

func (e Extent) String() string {
	return fmt.Sprintf("[%d,+%d)->z%d/%d@%d", e.FilePage, e.N, e.Zone, e.ZonePage, e.Seq)
}

// End is the first file page after e.
func (e Extent) End() uint64 { return e.FilePage + uint64(e.N) }

// Slice returns the part of e covering file pages [from, to).
func (e Extent) Slice(from, to uint64) Extent {
	d := from - e.FilePage
	return Extent{FilePage: from, Zone: e.Zone, ZonePage: e.ZonePage + int(d), N: int(to - from), Seq: e.Seq + d}
}

// Map is a file's page map: non-overlapping extents sorted by FilePage.
type Map struct {
	Exts []Extent
}

// Find returns the extent covering page p.
func (m *Map) Find(p uint64) (Extent, bool) {
	i := sort.Search(len(m.Exts), func(i int) bool { return m.Exts[i].End() > p })
	if i < len(m.Exts) && m.Exts[i].FilePage <= p {
		return m.Exts[i], true
	}
	return Extent{}, false
}

// Put maps e's pages, replacing older mappings of the same file pages, and
// calls dropped for every replaced piece. A new extent that continues the
// previous one in the same zone is merged with it.
func (m *Map) Put(e Extent, dropped func(Extent)) {
	from, to := e.FilePage, e.End()
	i := sort.Search(len(m.Exts), func(i int) bool { return m.Exts[i].End() > from })
	j := i
	var left, right []Extent
	for ; j < len(m.Exts) && m.Exts[j].FilePage < to; j++ {
		old := m.Exts[j]
		if dropped != nil {
			dropped(old.Slice(max(old.FilePage, from), min(old.End(), to)))
		}
		if old.FilePage < from {
			left = append(left, old.Slice(old.FilePage, from))
		}
		if old.End() > to {
			right = append(right, old.Slice(to, old.End()))
		}
	}
	out := make([]Extent, 0, len(m.Exts)+2)
	out = append(out, m.Exts[:i]...)
	out = append(out, left...)
	out = append(out, e)
	out = append(out, right...)
	out = append(out, m.Exts[j:]...)
	m.Exts = mergeAdjacent(out)
}

// mergeAdjacent joins extents that continue each other physically and in
// sequence numbers.
func mergeAdjacent(exts []Extent) []Extent {
	if len(exts) < 2 {
		return exts
	}
	out := exts[:1]
	for _, e := range exts[1:] {
		last := &out[len(out)-1]
		if last.End() == e.FilePage && last.Zone == e.Zone &&
			last.ZonePage+last.N == e.ZonePage && last.Seq+uint64(last.N) == e.Seq {
			last.N += e.N
			continue
		}
		out = append(out, e)
	}
	return out
}

// Truncate drops every page at or after p, calling dropped for each piece.
func (m *Map) Truncate(p uint64, dropped func(Extent)) {
	var out []Extent
	for _, e := range m.Exts {
		switch {
		case e.End() <= p:
			out = append(out, e)
		case e.FilePage >= p:
			if dropped != nil {
				dropped(e)
			}
		default:
			out = append(out, e.Slice(e.FilePage, p))
			if dropped != nil {
				dropped(e.Slice(p, e.End()))
			}
		}
	}
	m.Exts = out
}
