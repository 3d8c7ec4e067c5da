package flash

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// TestConcurrentDies runs a program/read/erase loop per die, plus two
// goroutines racing on one block, under the race detector.
func TestConcurrentDies(t *testing.T) {
	g := testGeometry()
	e := mustMemory(t, g, Options{Seed: 1, ErrorModel: PhysicalModel{Fit: ConstantRBER(1e-5), CodewordBytes: 132, CorrectableBits: 8}})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			wg.Add(1)
			go func(c, d int) {
				defer wg.Done()
				data := make([]byte, g.PageSize)
				for round := 0; round < 3; round++ {
					for b := 1; b < g.BlocksPerDie; b++ {
						for p := 0; p < g.PagesPerBlock; p++ {
							pa := PageAddr{c, d, b, p}
							if err := e.Program(pa, pageData(g, pa, byte(round)), nil); err != nil {
								errs <- err
								return
							}
							if _, err := e.Read(pa, data, nil); err != nil || !bytes.Equal(data, pageData(g, pa, byte(round))) {
								errs <- errors.New("read back differs on " + pa.String())
								return
							}
						}
						if err := e.Erase(BlockAddr{c, d, b}); err != nil {
							errs <- err
							return
						}
					}
					_ = e.Stats()
				}
			}(c, d)
		}
	}
	// Two writers race for block 0 of die (0,0): every page is programmed
	// exactly once, the loser of each race sees ErrNotErased.
	var won [2]int
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, g.PageSize)
			for p := 0; p < g.PagesPerBlock; p++ {
				err := e.Program(PageAddr{0, 0, 0, p}, buf, nil)
				switch {
				case err == nil:
					won[w]++
				case errors.Is(err, ErrNotErased), errors.Is(err, ErrProgramOrder):
				default:
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if won[0]+won[1] != g.PagesPerBlock || e.mustBlock(t, BlockAddr{0, 0, 0}).WrittenPage != g.PagesPerBlock {
		t.Fatalf("racing writers programmed %v pages", won)
	}
}
