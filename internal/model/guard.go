package model

import (
	"fmt"
	"math"

	"github.com/flashmend/flashmend/internal/base"
)

// Bounds of GuardParams.
const (
	maxGuardFileBytes  = 1 << 40 // 1 TiB
	maxGuardFrameBytes = 1 << 20
	maxGuardCopies     = 8
)

// GuardParams describe a file protected by internal/guardfs: FileBytes
// logical bytes cut into frames of FrameBytes data, each frame stored with
// a HeaderBytes header (its checksum covers header and data), in Copies
// copies whose stored bits flip independently with probability UBER.
type GuardParams struct {
	UBER        float64 // per bit stored
	FileBytes   int64
	FrameBytes  int64
	HeaderBytes int64
	Copies      int
}

func (p GuardParams) String() string {
	return fmt.Sprintf("UBER=%g L=%s F=%s H=%dB N=%d", p.UBER, base.Bytes(p.FileBytes), base.Bytes(p.FrameBytes), p.HeaderBytes, p.Copies)
}

// Validate reports whether the parameters describe a model this package
// can evaluate; the Guard functions return NaN for parameters that do not
// validate.
func (p GuardParams) Validate() error {
	switch {
	case !(p.UBER >= 0 && p.UBER <= 1):
		return base.InvalidArgumentf("model: UBER %g is not a probability in [0, 1]", p.UBER)
	case p.FileBytes < 0 || p.FileBytes > maxGuardFileBytes:
		return base.InvalidArgumentf("model: file size %d bytes is outside [0, %s]", p.FileBytes, base.Bytes(maxGuardFileBytes))
	case p.FrameBytes <= 0 || p.FrameBytes > maxGuardFrameBytes:
		return base.InvalidArgumentf("model: frame size %d bytes is outside (0, %s]", p.FrameBytes, base.Bytes(maxGuardFrameBytes))
	case p.HeaderBytes < 0 || p.HeaderBytes > maxGuardFrameBytes:
		return base.InvalidArgumentf("model: header size %d bytes is outside [0, %s]", p.HeaderBytes, base.Bytes(maxGuardFrameBytes))
	case p.Copies < 1 || p.Copies > maxGuardCopies:
		return base.InvalidArgumentf("model: %d copies is outside [1, %d]", p.Copies, maxGuardCopies)
	}
	return nil
}

// logIntact returns log P(no bit of n bytes flips) = 8n log(1-UBER).
func logIntact(uber float64, n int64) float64 {
	return float64(bitsPerByte*n) * math.Log1p(-uber)
}

// frameLogSurvives returns log P(a frame survives), a frame being lost
// when each of its copies, of stored bytes under one checksum, has a flip.
func frameLogSurvives(uber float64, stored int64, copies int) float64 {
	q := -math.Expm1(logIntact(uber, stored)) // P(one copy has a flip)
	// log(1 - q^copies), precise when q^copies is tiny.
	return math.Log1p(-math.Exp(float64(copies) * math.Log(q)))
}

// GuardFramedLoss is the probability that a guardfs framed file (MANIFEST,
// OPTIONS, a sidecar) loses some byte: that some frame fails its checksum
// in every one of its Copies copies. Frames fail independently (a damaged
// frame never costs its neighbours: the parser resynchronizes on the next
// header that verifies) and the copies share frame boundaries (they are
// written by the same Writes), so
//
//	P = 1 - prod_frames (1 - q(n)^Copies),  q(n) = 1 - (1-UBER)^(8(n+HeaderBytes))
//
// for a frame of n data bytes. Seal frames are left out: a lost seal only
// matters together with a lost data frame, which this already counts.
func GuardFramedLoss(p GuardParams) float64 {
	if p.Validate() != nil {
		return math.NaN()
	}
	if p.FileBytes == 0 || p.UBER == 0 {
		return 0
	}
	whole, rem := p.FileBytes/p.FrameBytes, p.FileBytes%p.FrameBytes
	logSurvive := float64(whole) * frameLogSurvives(p.UBER, p.FrameBytes+p.HeaderBytes, p.Copies)
	if rem > 0 {
		logSurvive += frameLogSurvives(p.UBER, rem+p.HeaderBytes, p.Copies)
	}
	return -math.Expm1(logSurvive)
}

// GuardSealedLoss is the probability that some byte of an sstable's
// metadata ranges (FileBytes of them in all) is unreadable under guardfs.
// The sstable holds each byte once, unframed (Pebble's block checksum
// tells damage); its sidecar is a framed file in K = max(1, Copies-1)
// copies holding a header and range table (structBytes, padded to whole
// frames) and then a copy of the ranges, frame-aligned. A frame of copied
// bytes is lost when every sidecar copy of it fails; its bytes are then
// read from the sstable, so they are unreadable only if the sstable's
// bytes under that frame have a flip too. If the structure is lost in
// every copy, the sidecar is unusable and every metadata byte is read from
// the sstable. With d(n) = 1-(1-UBER)^(8n), q(n) = d(n+HeaderBytes):
//
//	P(ok) = Ps * prod_frames (1 - d(n) q(n)^K) + (1 - Ps) (1-UBER)^(8 FileBytes)
//	Ps    = (1 - q(FrameBytes)^K)^ceil(structBytes/FrameBytes)
func GuardSealedLoss(p GuardParams, structBytes int64) float64 {
	if p.Validate() != nil || structBytes < 0 {
		return math.NaN()
	}
	if p.UBER == 0 {
		return 0
	}
	k := float64(max(1, p.Copies-1))
	d := func(n int64) float64 { return -math.Expm1(logIntact(p.UBER, n)) }
	logFrameOK := func(n int64) float64 { // log(1 - d(n) q(n)^K)
		return math.Log1p(-math.Exp(math.Log(d(n)) + k*math.Log(d(n+p.HeaderBytes))))
	}
	whole, rem := p.FileBytes/p.FrameBytes, p.FileBytes%p.FrameBytes
	logData := float64(whole) * logFrameOK(p.FrameBytes)
	if rem > 0 {
		logData += logFrameOK(rem)
	}
	structFrames := float64((structBytes + p.FrameBytes - 1) / p.FrameBytes)
	logPs := structFrames * math.Log1p(-math.Exp(k*math.Log(d(p.FrameBytes+p.HeaderBytes))))
	// 1 - P(ok) = (1 - D) + (1 - Ps)(D - I), D = exp(logData) and I =
	// P(sstable bytes intact), each term computed without cancellation.
	logI := logIntact(p.UBER, p.FileBytes)
	return -math.Expm1(logData) + -math.Expm1(logPs)*math.Exp(logI)*math.Expm1(logData-logI)
}

// GuardTable tabulates GuardFramedLoss for each file size, UBER and
// number of copies (with sealed, GuardSealedLoss for that much sstable
// metadata in 32 ranges): the table behind guardfs's default number of
// copies (internal/guardfs/doc.go).
func GuardTable(title string, frameBytes, headerBytes int64, fileBytes []int64, ubers []float64, copies []int, sealed bool) (Table, error) {
	t := Table{Title: title, Columns: []Column{{Name: "bytes", Format: "%.0f"}, {Name: "UBER", Format: "%g"}}}
	for _, n := range copies {
		t.Columns = append(t.Columns, Column{Name: fmt.Sprintf("P(loss) N=%d", n), Format: "%.2e"})
	}
	for _, size := range fileBytes {
		for _, u := range ubers {
			row := []Cell{Num(float64(size)), Num(u)}
			for _, n := range copies {
				p := GuardParams{UBER: u, FileBytes: size, FrameBytes: frameBytes, HeaderBytes: headerBytes, Copies: n}
				if err := p.Validate(); err != nil {
					return Table{}, err
				}
				v := GuardFramedLoss(p)
				if sealed {
					v = GuardSealedLoss(p, 24+32*16)
				}
				row = append(row, Num(v))
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t, nil
}
