package catalog

import (
	"math"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

func TestPresetsAreValid(t *testing.T) {
	for _, name := range Names() {
		p, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Geometry.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		g := p.Geometry
		g.BlocksPerDie = 1 // keep the memory device small
		e, err := flash.NewMemory(g, p.Options(flash.TimingVirtual, p.PhysicalModel(1), 1))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = e.Close()
		t.Logf("%s", p)
	}
	if _, err := Lookup("plc"); !base.IsInvalidArgument(err) {
		t.Fatal(err)
	}
	if g := flash.SDFGeometry(4096); g.Channels*g.DiesPerChannel != 88 || g.BlockSize() != 2<<20 || g.RawCapacity()/44 != 16<<30 {
		t.Fatalf("SDF geometry %s does not match SDF 002 Table 3", g)
	}
}

func TestRBERFit(t *testing.T) {
	f := All()["tlc"].Fit
	if got := f.RBER(0, 0, 0); got != f.Fresh {
		t.Fatalf("fresh RBER %g, want %g", got, f.Fresh)
	}
	if got := f.RBER(f.RatedEndurance, 0, 0); math.Abs(got-f.AtRated) > 1e-12 {
		t.Fatalf("rated RBER %g, want %g", got, f.AtRated)
	}
	prev := 0.0
	for _, pe := range []int{0, 100, 1000, 3000, 6000} {
		r := f.RBER(pe, 0, 0)
		if r < prev {
			t.Fatalf("RBER not increasing with wear at %d: %g < %g", pe, r, prev)
		}
		prev = r
		if f.RBER(pe, 30*24*time.Hour, 0) <= r || f.RBER(pe, 0, 100000) <= r {
			t.Fatalf("retention or read disturb does not raise RBER at %d P/E", pe)
		}
	}
}
