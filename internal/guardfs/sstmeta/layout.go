package sstmeta

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/flashmend/flashmend/internal/base"
)

// Region is one metadata region of an sstable, the bytes [Off, Off+Len): a
// block with its 5-byte trailer (whose checksum covers the block), or the
// footer.
type Region struct {
	Off, Len int64
	Block    bool // a block with its trailer; false for the footer
}

func (r Region) String() string { return fmt.Sprintf("[%d,%d)", r.Off, r.Off+r.Len) }

// Layout is what a copy of an sstable's metadata needs to know of it: its
// metadata regions, sorted by offset, and the checksum type of its blocks.
type Layout struct {
	Regions  []Region
	Checksum block.ChecksumType
}

// ReadLayout opens the sstable readable through f (size bytes) and returns its metadata
// regions: the index blocks (and top-level index), filter blocks,
// range-deletion and range-key blocks, value index, blob reference index,
// properties, meta-index (each with its block trailer) and the footer. ro
// must carry the DB's comparer, mergers and key schemas so the table opens.
// NB: ReadLayout closes f once Pebble has opened it (the reader owns it); to
// keep a file open, pass a wrapper whose Close does nothing.
func ReadLayout(ro sstable.ReaderOptions, f sstable.ReadableFile, size int64) (Layout, error) {
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		return Layout{}, err
	}
	rd, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		_ = readable.Close()
		return Layout{}, err
	}
	defer rd.Close()
	l, err := rd.Layout()
	if err != nil {
		return Layout{}, err
	}
	out := Layout{Checksum: rd.BlockReader().ChecksumType()}
	add := func(h block.Handle, isBlock bool) {
		if h.Length == 0 {
			return
		}
		n := int64(h.Length)
		if isBlock {
			n += block.TrailerLen
		}
		out.Regions = append(out.Regions, Region{Off: int64(h.Offset), Len: min(n, size-int64(h.Offset)), Block: isBlock})
	}
	for _, h := range l.Index {
		add(h, true)
	}
	add(l.TopIndex, true)
	for _, h := range l.Filter {
		add(h.Handle, true)
	}
	for _, h := range []block.Handle{l.RangeDel, l.RangeKey, l.ValueIndex, l.BlobReferenceIndex, l.Properties, l.MetaIndex} {
		add(h, true)
	}
	add(l.Footer, false)
	sort.Slice(out.Regions, func(i, j int) bool { return out.Regions[i].Off < out.Regions[j].Off })
	return out, nil
}

// VerifiedBytes reads region reg from r and checks it: a block must match
// its trailer's checksum (of the layout's type); the footer (which has no
// checksum of its own here) must read the same twice. A copy is only ever
// made of bytes that passed this check, so a transient flip on the read
// that makes the copy cannot become a permanent wrong copy.
func (l Layout) VerifiedBytes(r io.ReaderAt, reg Region) ([]byte, error) {
	buf := make([]byte, reg.Len)
	if n, err := r.ReadAt(buf, reg.Off); int64(n) != reg.Len {
		return nil, fmt.Errorf("reading %s: %w", reg, orEOF(err))
	}
	if reg.Block {
		if reg.Len < block.TrailerLen {
			return nil, base.CorruptionErrorf("block %s shorter than its trailer", reg)
		}
		h := block.Handle{Offset: uint64(reg.Off), Length: uint64(reg.Len - block.TrailerLen)}
		if err := block.ValidateChecksum(l.Checksum, buf, h); err != nil {
			return nil, base.CorruptionErrorf("block %s: %v", reg, err)
		}
		return buf, nil
	}
	again := make([]byte, reg.Len)
	if n, err := r.ReadAt(again, reg.Off); int64(n) != reg.Len {
		return nil, fmt.Errorf("reading %s: %w", reg, orEOF(err))
	}
	if !bytes.Equal(buf, again) {
		return nil, base.CorruptionErrorf("footer %s reads differently twice", reg)
	}
	return buf, nil
}

func orEOF(err error) error {
	if err == nil {
		return io.ErrUnexpectedEOF
	}
	return err
}
