package bench

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"

	"github.com/flashmend/flashmend/internal/base"
)

// patternBytes is the length of the random block an object's contents
// repeat: odd, so that no two 64 KiB chunks of an object smaller than
// about 68 GB hold the same bytes (a chunk returned at another chunk's
// offset differs from what was put), and small enough that a run holds
// the contents of every object it reads (a block each) at any size.
const patternBytes = 1<<20 + 7

// Pattern is the contents of one benchmark object: Size bytes repeating
// one random block. Objects of any size are put and checked while holding
// only the block: Reader streams it, Checker compares a GET's bytes with it.
type Pattern struct {
	Size  int64
	block []byte
}

// NewPattern draws an object's block from rng.
func NewPattern(rng *rand.Rand, size int64) *Pattern {
	p := &Pattern{Size: size, block: make([]byte, min(size, patternBytes))}
	rng.Read(p.block)
	return p
}

// Reader returns the object's bytes as an io.ReadSeeker (a put placed
// again reads them again).
func (p *Pattern) Reader() io.ReadSeeker { return &patternReader{p: p} }

type patternReader struct {
	p   *Pattern
	off int64
}

func (r *patternReader) Read(b []byte) (int, error) {
	if r.off >= r.p.Size {
		return 0, io.EOF
	}
	n := 0
	for n < len(b) && r.off < r.p.Size {
		at := int(r.off % int64(len(r.p.block)))
		k := copy(b[n:], r.p.block[at:min(len(r.p.block), at+int(r.p.Size-r.off))])
		n += k
		r.off += int64(k)
	}
	return n, nil
}

func (r *patternReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.p.Size
	default:
		return 0, base.InvalidArgumentf("seek whence %d", whence)
	}
	if offset < 0 {
		return 0, base.InvalidArgumentf("seek to %d", offset)
	}
	r.off = offset
	return offset, nil
}

// Checker returns a writer that compares what is written with the
// object's bytes.
func (p *Pattern) Checker() *PatternChecker { return &PatternChecker{p: p} }

// PatternChecker compares a GET's bytes with a Pattern. A write that
// differs fails, and so does every later one.
type PatternChecker struct {
	p   *Pattern
	off int64
	err error
}

func (c *PatternChecker) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if int64(len(b)) > c.p.Size-c.off {
		c.err = fmt.Errorf("%d bytes past the object's %d", c.off+int64(len(b))-c.p.Size, c.p.Size)
		return 0, c.err
	}
	for done := 0; done < len(b); {
		at := int(c.off % int64(len(c.p.block)))
		k := min(len(b)-done, len(c.p.block)-at)
		if !bytes.Equal(b[done:done+k], c.p.block[at:at+k]) {
			c.err = fmt.Errorf("bytes at offset %d differ from those put", c.off)
			return 0, c.err
		}
		done += k
		c.off += int64(k)
	}
	return len(b), nil
}

// Mismatch is the error of the first write that differed from the
// object's bytes (or went past its end), nil when none did.
func (c *PatternChecker) Mismatch() error { return c.err }

// Complete reports whether every byte of the object arrived and matched.
func (c *PatternChecker) Complete() error {
	if c.err == nil && c.off != c.p.Size {
		return fmt.Errorf("read %d of the %d bytes put", c.off, c.p.Size)
	}
	return c.err
}
