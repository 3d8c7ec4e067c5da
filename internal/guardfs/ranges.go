package guardfs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
)

// Range is a byte range [Off, Off+Len) of a file.
type Range struct {
	Off int64
	Len int64
}

func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Off, r.Off+r.Len) }

// End is the first byte after the range.
func (r Range) End() int64 { return r.Off + r.Len }

// overlaps reports whether r and o share a byte.
func (r Range) overlaps(o Range) bool { return r.Off < o.End() && o.Off < r.End() }

// RangesFunc returns the byte ranges of a just-written file that are
// metadata to keep in a second copy (DIRECT 000 section 4.1: local metadata
// duplication). It is called with the file's content readable through r.
// ok=false means "not a file this hook handles". SSTMetadataRanges is the
// hook for Pebble sstables (internal/sdfvfs uses it through an alias).
type RangesFunc func(path string, r io.ReaderAt, size int64) (ranges []Range, ok bool, err error)

// metaRange is one metadata range of an sstable: a block with its 5-byte
// trailer (whose checksum covers the block), or the footer.
type metaRange struct {
	Range
	block bool // a block with its trailer; false for the footer
}

// sstLayout is what sealing needs to know of an sstable: its metadata
// ranges and the checksum type of its blocks.
type sstLayout struct {
	ranges   []metaRange
	checksum block.ChecksumType
}

// readSSTLayout opens the sstable readable through r (size bytes) and
// returns its metadata ranges: the index blocks (and top-level index),
// filter blocks, range-deletion and range-key blocks, value index, blob
// reference index, properties, meta-index (each with its block trailer) and
// the footer. ro must carry the DB's comparer, mergers and key schemas so
// the table opens.
func readSSTLayout(ro sstable.ReaderOptions, name string, r io.ReaderAt, size int64) (sstLayout, error) {
	readable, err := sstable.NewSimpleReadable(readableFile{r: r, size: size, name: name})
	if err != nil {
		return sstLayout{}, err
	}
	rd, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		_ = readable.Close()
		return sstLayout{}, err
	}
	defer rd.Close()
	l, err := rd.Layout()
	if err != nil {
		return sstLayout{}, err
	}
	out := sstLayout{checksum: rd.BlockReader().ChecksumType()}
	add := func(h block.Handle, isBlock bool) {
		if h.Length == 0 {
			return
		}
		n := int64(h.Length)
		if isBlock {
			n += block.TrailerLen
		}
		out.ranges = append(out.ranges, metaRange{Range: Range{Off: int64(h.Offset), Len: min(n, size-int64(h.Offset))}, block: isBlock})
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
	sort.Slice(out.ranges, func(i, j int) bool { return out.ranges[i].Off < out.ranges[j].Off })
	return out, nil
}

// verifiedRangeBytes reads mr from r and checks it: a block must match its
// trailer's checksum; the footer (which has no checksum of its own here)
// must read the same twice. A copy is only ever made of bytes that passed
// this check, so a transient flip on the read that makes the copy cannot
// become a permanent wrong copy.
func verifiedRangeBytes(r io.ReaderAt, mr metaRange, typ block.ChecksumType) ([]byte, error) {
	buf := make([]byte, mr.Len)
	if n, err := r.ReadAt(buf, mr.Off); int64(n) != mr.Len {
		return nil, fmt.Errorf("reading %s: %w", mr.Range, orEOF(err))
	}
	if mr.block {
		if mr.Len < block.TrailerLen {
			return nil, base.CorruptionErrorf("block %s shorter than its trailer", mr.Range)
		}
		h := block.Handle{Offset: uint64(mr.Off), Length: uint64(mr.Len - block.TrailerLen)}
		if err := block.ValidateChecksum(typ, buf, h); err != nil {
			return nil, base.CorruptionErrorf("block %s: %v", mr.Range, err)
		}
		return buf, nil
	}
	again := make([]byte, mr.Len)
	if n, err := r.ReadAt(again, mr.Off); int64(n) != mr.Len {
		return nil, fmt.Errorf("reading %s: %w", mr.Range, orEOF(err))
	}
	if !bytes.Equal(buf, again) {
		return nil, base.CorruptionErrorf("footer %s reads differently twice", mr.Range)
	}
	return buf, nil
}

func orEOF(err error) error {
	if err == nil {
		return io.ErrUnexpectedEOF
	}
	return err
}

// SSTMetadataRanges returns a RangesFunc for Pebble sstables (*.sst): the
// index blocks (and top-level index), filter blocks, range-deletion and
// range-key blocks, value index, blob reference index, properties,
// meta-index and footer, each block with its 5-byte trailer. Every block's
// checksum is verified first: a table whose metadata does not verify is an
// error marked as corruption (a copy of damaged bytes would protect
// nothing). ro must carry the DB's comparer, mergers and key schemas so the
// table opens.
func SSTMetadataRanges(ro sstable.ReaderOptions) RangesFunc {
	return func(path string, r io.ReaderAt, size int64) ([]Range, bool, error) {
		if !isSST(path) {
			return nil, false, nil
		}
		l, err := readSSTLayout(ro, baseName(path), r, size)
		if err != nil {
			return nil, false, err
		}
		out := make([]Range, 0, len(l.ranges))
		for _, mr := range l.ranges {
			if mr.block {
				if _, err := verifiedRangeBytes(r, mr, l.checksum); err != nil {
					return nil, false, err
				}
			}
			out = append(out, mr.Range)
		}
		return out, true, nil
	}
}

func isSST(path string) bool {
	return len(path) > 4 && path[len(path)-4:] == ".sst"
}

// baseName is the last element of a slash- or OS-separated path.
func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' || p[i] == os.PathSeparator {
			return p[i+1:]
		}
	}
	return p
}

// readableFile adapts an io.ReaderAt of known size to sstable.ReadableFile.
type readableFile struct {
	r    io.ReaderAt
	size int64
	name string
}

func (f readableFile) ReadAt(p []byte, off int64) (int, error) { return f.r.ReadAt(p, off) }
func (f readableFile) Close() error                            { return nil }
func (f readableFile) Stat() (vfs.FileInfo, error) {
	return fileInfo{name: f.name, size: f.size}, nil
}

// fileInfo is a vfs.FileInfo of a file as guardfs presents it (a framed
// file at its logical size, a sealed sstable at its recorded size).
type fileInfo struct {
	name  string
	size  int64
	mtime time.Time
	mode  os.FileMode
}

var _ vfs.FileInfo = fileInfo{}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return fi.size }
func (fi fileInfo) ModTime() time.Time { return fi.mtime }
func (fi fileInfo) IsDir() bool        { return false }
func (fi fileInfo) Sys() any           { return nil }
func (fi fileInfo) Mode() os.FileMode {
	if fi.mode == 0 {
		return 0o644
	}
	return fi.mode
}
func (fi fileInfo) DeviceID() vfs.DeviceID { return vfs.DeviceID{} }
func (fi fileInfo) String() string         { return fmt.Sprintf("%s (%d B)", fi.name, fi.size) }
