package flash

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"
)

// refDevice is the second computation the emulator is checked against: the
// NAND rules written as plainly as possible.
type refDevice struct {
	g       Geometry
	pages   map[PageAddr][]byte
	written map[BlockAddr]int
	erases  map[BlockAddr]int
	bad     map[BlockAddr]bool
	failed  map[DieAddr]bool
}

func newRefDevice(g Geometry) *refDevice {
	return &refDevice{g: g, pages: map[PageAddr][]byte{}, written: map[BlockAddr]int{},
		erases: map[BlockAddr]int{}, bad: map[BlockAddr]bool{}, failed: map[DieAddr]bool{}}
}

func (r *refDevice) program(a PageAddr, data []byte) error {
	switch b := a.BlockAddr(); {
	case !r.g.Contains(a):
		return ErrOutOfRange
	case r.failed[a.DieAddr()]:
		return ErrDieFailed
	case r.bad[b]:
		return ErrBadBlock
	case a.Page < r.written[b]:
		return ErrNotErased
	case a.Page > r.written[b]:
		return ErrProgramOrder
	}
	r.pages[a] = append([]byte(nil), data...)
	r.written[a.BlockAddr()]++
	return nil
}

func (r *refDevice) read(a PageAddr) ([]byte, error) {
	switch {
	case !r.g.Contains(a):
		return nil, ErrOutOfRange
	case r.failed[a.DieAddr()]:
		return nil, ErrDieFailed
	case r.bad[a.BlockAddr()]:
		return nil, ErrBadBlock
	}
	if p, ok := r.pages[a]; ok {
		return p, nil
	}
	return bytes.Repeat([]byte{0xFF}, r.g.PageSize), nil
}

func (r *refDevice) erase(b BlockAddr) error {
	switch {
	case r.failed[b.DieAddr()]:
		return ErrDieFailed
	case r.bad[b]:
		return ErrBadBlock
	}
	for p := 0; p < r.g.PagesPerBlock; p++ {
		delete(r.pages, PageAddr{b.Channel, b.Die, b.Block, p})
	}
	r.written[b] = 0
	r.erases[b]++
	return nil
}

func sameErr(got, want error) bool {
	if want == nil {
		return got == nil
	}
	return errors.Is(got, want)
}

// TestRandomAgainstReference runs seeded random operation sequences on the
// file backend, with a clean reopen and a crash now and then, and compares
// every result with refDevice.
func TestRandomAgainstReference(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d", seed)
			runRandom(t, seed, 1500)
		})
	}
}

func runRandom(t *testing.T, seed int64, ops int) {
	rng := rand.New(rand.NewSource(seed))
	g := testGeometry()
	dir := t.TempDir()
	open := func() *Emulator {
		e, err := OpenFile(dir, g, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	defer func() { _ = e.Close() }()
	ref := newRefDevice(g)
	randPage := func() PageAddr {
		a := PageAddr{rng.Intn(g.Channels), rng.Intn(g.DiesPerChannel), rng.Intn(g.BlocksPerDie), rng.Intn(g.PagesPerBlock)}
		if rng.Intn(50) == 0 {
			a.Page = g.PagesPerBlock // out of range now and then
		}
		return a
	}
	buf := make([]byte, g.PageSize)
	for i := 0; i < ops; i++ {
		a := randPage()
		switch k := rng.Intn(100); {
		case k < 45:
			// Mostly the next page of the block, sometimes any page.
			if rng.Intn(4) != 0 && g.Contains(a) {
				a.Page = min(ref.written[a.BlockAddr()], g.PagesPerBlock-1)
			}
			data := pageData(g, a, byte(i))
			if got, want := e.Program(a, data, nil), ref.program(a, data); !sameErr(got, want) {
				t.Fatalf("op %d program %s: got %v, want %v", i, a, got, want)
			}
		case k < 85:
			want, werr := ref.read(a)
			_, err := e.Read(a, buf, nil)
			if !sameErr(err, werr) || (werr == nil && !bytes.Equal(buf, want)) {
				t.Fatalf("op %d read %s: got %v, want %v (content equal %t)", i, a, err, werr, bytes.Equal(buf, want))
			}
		case k < 95:
			if !g.Contains(a) {
				continue
			}
			if got, want := e.Erase(a.BlockAddr()), ref.erase(a.BlockAddr()); !sameErr(got, want) {
				t.Fatalf("op %d erase %s: got %v, want %v", i, a.BlockAddr(), got, want)
			}
		case k < 96:
			if g.Contains(a) {
				ref.bad[a.BlockAddr()] = true
				if err := e.MarkBad(a.BlockAddr()); err != nil {
					t.Fatal(err)
				}
			}
		case k < 97 && rng.Intn(3) == 0:
			if g.Contains(a) {
				ref.failed[a.DieAddr()] = true
				if err := e.FailDie(a.DieAddr()); err != nil {
					t.Fatal(err)
				}
			}
		case k < 98:
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = open()
		default:
			if rng.Intn(2) == 0 {
				if err := e.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			crash(t, e)
			e = open()
		}
	}
	// Final state: every block agrees with the reference.
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			for b := 0; b < g.BlocksPerDie; b++ {
				ba := BlockAddr{c, d, b}
				info := e.mustBlock(t, ba)
				if info.Bad != ref.bad[ba] || (!info.Bad && info.WrittenPage != ref.written[ba]) {
					t.Fatalf("block %s: %v, reference written %d bad %t", ba, info, ref.written[ba], ref.bad[ba])
				}
			}
		}
	}
}
