package extmap

import (
	"fmt"
	"testing"

	"github.com/flashmend/flashmend/internal/testseed"
)

// place is where the model keeps one file page: zone, zone page, sequence
// number.
type place struct {
	zone, zonePage int
	seq            uint64
}

// expand is the page-by-page view of extents.
func expand(exts []Extent) map[uint64]place {
	out := map[uint64]place{}
	for _, e := range exts {
		for k := 0; k < e.N; k++ {
			out[e.FilePage+uint64(k)] = place{e.Zone, e.ZonePage + k, e.Seq + uint64(k)}
		}
	}
	return out
}

// checkShape fails unless m's extents are sorted, do not overlap, are not
// empty, and no two neighbours continue each other (they would be merged).
func checkShape(t *testing.T, what string, m *Map) {
	t.Helper()
	for i, e := range m.Exts {
		if e.N <= 0 {
			t.Fatalf("%s: empty extent %s", what, e)
		}
		if i == 0 {
			continue
		}
		p := m.Exts[i-1]
		if p.End() > e.FilePage {
			t.Fatalf("%s: %s overlaps or precedes %s", what, e, p)
		}
		if p.End() == e.FilePage && p.Zone == e.Zone && p.ZonePage+p.N == e.ZonePage && p.Seq+uint64(p.N) == e.Seq {
			t.Fatalf("%s: %s continues %s unmerged", what, e, p)
		}
	}
}

// TestMapAgainstModel applies random Puts and Truncates to a Map and to a
// page-by-page model, and checks after each step: the same pages in the
// same places, Find agreeing on every page, every dropped piece exactly the
// pages the model replaced or cut, and the map's shape.
func TestMapAgainstModel(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	for run := 0; run < 100; run++ {
		var m Map
		model := map[uint64]place{}
		seq := uint64(1)
		for step := 0; step < 80; step++ {
			var dropped []Extent
			drop := func(e Extent) { dropped = append(dropped, e) }
			wantDropped := map[uint64]place{}
			what := fmt.Sprintf("run %d step %d", run, step)
			if rng.Intn(8) == 0 {
				p := uint64(rng.Intn(40))
				for fp, pl := range model {
					if fp >= p {
						wantDropped[fp] = pl
						delete(model, fp)
					}
				}
				m.Truncate(p, drop)
				what += fmt.Sprintf(" truncate %d", p)
			} else {
				e := Extent{FilePage: uint64(rng.Intn(40)), Zone: rng.Intn(3), ZonePage: rng.Intn(50), N: 1 + rng.Intn(8), Seq: seq}
				if rng.Intn(3) == 0 {
					// Continue the extent of the page before, physically and
					// in sequence numbers: it must merge.
					if prev, ok := m.Find(e.FilePage - 1); ok && e.FilePage > 0 {
						d := e.FilePage - prev.FilePage
						e.Zone, e.ZonePage, e.Seq = prev.Zone, prev.ZonePage+int(d), prev.Seq+d
					}
				}
				seq += uint64(e.N)
				for k := 0; k < e.N; k++ {
					fp := e.FilePage + uint64(k)
					if pl, ok := model[fp]; ok {
						wantDropped[fp] = pl
					}
					model[fp] = place{e.Zone, e.ZonePage + k, e.Seq + uint64(k)}
				}
				m.Put(e, drop)
				what += " put " + e.String()
			}
			checkShape(t, what, &m)
			if got := expand(m.Exts); fmt.Sprint(got) != fmt.Sprint(model) {
				t.Fatalf("%s: map %v, model %v", what, m.Exts, model)
			}
			if got := expand(dropped); fmt.Sprint(got) != fmt.Sprint(wantDropped) {
				t.Fatalf("%s: dropped %v, want %v", what, dropped, wantDropped)
			}
			for fp := uint64(0); fp < 50; fp++ {
				e, ok := m.Find(fp)
				pl, want := model[fp]
				if ok != want || ok && (e.Zone != pl.zone || e.ZonePage+int(fp-e.FilePage) != pl.zonePage || e.Seq+(fp-e.FilePage) != pl.seq) {
					t.Fatalf("%s: Find(%d) = %s %v, model %v %v", what, fp, e, ok, pl, want)
				}
			}
		}
	}
}

func TestSlice(t *testing.T) {
	e := Extent{FilePage: 10, Zone: 7, ZonePage: 20, N: 5, Seq: 100}
	if got, want := e.Slice(12, 14).String(), "[12,+2)->z7/22@102"; got != want {
		t.Fatalf("slice %s, want %s", got, want)
	}
	if e.End() != 15 {
		t.Fatalf("end %d", e.End())
	}
}
