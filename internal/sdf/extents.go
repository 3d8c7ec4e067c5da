package sdf

import (
	"fmt"
	"sort"
)

// extent maps n consecutive file pages starting at filePage to n consecutive
// data pages of one zone starting at zonePage. Page k of the extent was
// programmed with sequence number seq+k. Extents never cross a zone.
type extent struct {
	filePage uint64
	zone     int
	zonePage int
	n        int
	seq      uint64
}

func (e extent) String() string {
	return fmt.Sprintf("[%d,+%d)->z%d/%d@%d", e.filePage, e.n, e.zone, e.zonePage, e.seq)
}

func (e extent) end() uint64 { return e.filePage + uint64(e.n) }

// slice returns the part of e covering file pages [from, to).
func (e extent) slice(from, to uint64) extent {
	d := from - e.filePage
	return extent{filePage: from, zone: e.zone, zonePage: e.zonePage + int(d), n: int(to - from), seq: e.seq + d}
}

// extentMap is a file's page map: non-overlapping extents sorted by filePage.
type extentMap struct {
	exts []extent
}

// find returns the extent covering page p.
func (m *extentMap) find(p uint64) (extent, bool) {
	i := sort.Search(len(m.exts), func(i int) bool { return m.exts[i].end() > p })
	if i < len(m.exts) && m.exts[i].filePage <= p {
		return m.exts[i], true
	}
	return extent{}, false
}

// put maps e's pages, replacing older mappings of the same file pages, and
// calls dropped for every replaced piece. A new extent that continues the
// previous one in the same zone is merged with it.
func (m *extentMap) put(e extent, dropped func(extent)) {
	from, to := e.filePage, e.end()
	i := sort.Search(len(m.exts), func(i int) bool { return m.exts[i].end() > from })
	j := i
	var left, right []extent
	for ; j < len(m.exts) && m.exts[j].filePage < to; j++ {
		old := m.exts[j]
		if dropped != nil {
			dropped(old.slice(max(old.filePage, from), min(old.end(), to)))
		}
		if old.filePage < from {
			left = append(left, old.slice(old.filePage, from))
		}
		if old.end() > to {
			right = append(right, old.slice(to, old.end()))
		}
	}
	out := make([]extent, 0, len(m.exts)+2)
	out = append(out, m.exts[:i]...)
	out = append(out, left...)
	out = append(out, e)
	out = append(out, right...)
	out = append(out, m.exts[j:]...)
	m.exts = mergeAdjacent(out)
}

// mergeAdjacent joins extents that continue each other physically and in
// sequence numbers.
func mergeAdjacent(exts []extent) []extent {
	if len(exts) < 2 {
		return exts
	}
	out := exts[:1]
	for _, e := range exts[1:] {
		last := &out[len(out)-1]
		if last.end() == e.filePage && last.zone == e.zone &&
			last.zonePage+last.n == e.zonePage && last.seq+uint64(last.n) == e.seq {
			last.n += e.n
			continue
		}
		out = append(out, e)
	}
	return out
}

// truncate drops every page at or after p, calling dropped for each piece.
func (m *extentMap) truncate(p uint64, dropped func(extent)) {
	var out []extent
	for _, e := range m.exts {
		switch {
		case e.end() <= p:
			out = append(out, e)
		case e.filePage >= p:
			if dropped != nil {
				dropped(e)
			}
		default:
			out = append(out, e.slice(e.filePage, p))
			if dropped != nil {
				dropped(e.slice(p, e.end()))
			}
		}
	}
	m.exts = out
}
