package guardfs

import (
	"bytes"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/guardfs/frames"
	"github.com/flashmend/flashmend/internal/model"
)

// flipBits flips each bit of b with probability uber, independently
// (geometric gaps between flips).
func flipBits(rng *rand.Rand, b []byte, uber float64) {
	logq := math.Log1p(-uber)
	for bit := int64(-1); ; {
		bit += 1 + int64(math.Log(1-rng.Float64())/logq)
		if bit >= int64(len(b))*8 {
			return
		}
		b[bit/8] ^= 1 << (bit % 8)
	}
}

// checkRate requires failures/trials to agree with the model's p within
// 4.5 standard deviations.
func checkRate(t *testing.T, name string, failures, trials int, p float64) {
	t.Helper()
	got := float64(failures) / float64(trials)
	tol := 4.5*math.Sqrt(p*(1-p)/float64(trials)) + 1/float64(trials)
	t.Logf("%s: %d/%d = %.4f, model %.4f (tolerance %.4f)", name, failures, trials, got, p, tol)
	if math.Abs(got-p) > tol {
		t.Errorf("%s: measured %.4f, model %.4f", name, got, p)
	}
}

// TestModelFramedMonteCarlo checks model.GuardFramedLoss against the merge:
// copies of a framed file get independent bit flips at rate UBER, and a
// trial fails when the merged file is not exactly the original.
func TestModelFramedMonteCarlo(t *testing.T) {
	const seed, trials, fb, size = 17, 2000, 128, 4096
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	data := randBytes(rng, size)
	clean := encode(testID, [][]byte{data}, fb, true)
	for _, c := range []struct {
		copies int
		uber   float64
	}{{1, 9e-6}, {2, 8e-5}, {3, 1.9e-4}} {
		p := model.GuardFramedLoss(model.GuardParams{UBER: c.uber, FileBytes: size, FrameBytes: fb,
			HeaderBytes: frames.HeaderBytes, Copies: c.copies})
		failures := 0
		for i := 0; i < trials; i++ {
			copies := make([][]byte, c.copies)
			for k := range copies {
				copies[k] = bytes.Clone(clean)
				flipBits(rng, copies[k], c.uber)
			}
			m := mergeOf(testID, copies...)
			if m.Size != size || len(m.Lost) != 0 {
				failures++
			}
			for _, h := range frames.Subtract(m.Size, m.Lost) {
				if !bytes.Equal(m.Data[h.Off:h.End()], data[h.Off:h.End()]) {
					t.Fatalf("wrong bytes served in %s", h)
				}
			}
		}
		checkRate(t, "framed N="+string(rune('0'+c.copies)), failures, trials, p)
	}
}

// TestModelSealedMonteCarlo checks model.GuardSealedLoss against the
// sidecar merge and the sstable read path: the sstable's metadata bytes
// and every sidecar copy get independent flips; a trial fails when a read
// of the metadata through guardfs is not the original (flips in the
// sstable's own bytes that a copy covers are served from the copy).
func TestModelSealedMonteCarlo(t *testing.T) {
	const seed, trials, fb, metaBytes = 19, 2000, 128, 2048
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	meta := randBytes(rng, metaBytes)
	content := encodeSidecar(metaBytes, []rangeCopy{{Range: Range{Off: 0, Len: metaBytes}, data: meta}}, fb)
	clean := encode(testID, [][]byte{content}, fb, true)
	fs := &FS{opts: Options{NoRepair: true}}
	for _, c := range []struct {
		copies int
		uber   float64
	}{{2, 1e-4}, {3, 2.2e-4}} {
		p := model.GuardSealedLoss(model.GuardParams{UBER: c.uber, FileBytes: metaBytes, FrameBytes: fb,
			HeaderBytes: frames.HeaderBytes, Copies: c.copies}, sidecarHeaderBytes+sidecarEntryBytes)
		failures := 0
		for i := 0; i < trials; i++ {
			primary := bytes.Clone(meta)
			flipBits(rng, primary, c.uber)
			sides := make([][]byte, max(1, c.copies-1))
			for k := range sides {
				sides[k] = bytes.Clone(clean)
				flipBits(rng, sides[k], c.uber)
			}
			sc, err := decodeSidecar(mergeOf(testID, sides...))
			if err != nil {
				sc = nil
			}
			h := newSealedFile(fs, "t.sst", vfs.NewMemFile(primary), sc, metaBytes, time.Time{}, false)
			got := make([]byte, metaBytes)
			if n, err := h.ReadAt(got, 0); n != metaBytes || err != nil {
				t.Fatalf("read %d, %v", n, err)
			}
			if !bytes.Equal(got, meta) {
				failures++
			}
		}
		checkRate(t, "sealed N="+string(rune('0'+c.copies)), failures, trials, p)
	}
}
