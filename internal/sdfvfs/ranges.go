package sdfvfs

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/sdf"
)

// Range-copy file layout (".sdfvfs/ranges/<path>"), little endian:
//
//	header: magic u32 | version u32 | record count u32 | CRC32C of the first 12 bytes u32
//	record: file offset u64 | length u32 | CRC32C(offset, length, data) u32 | data
//
// Records are sorted by offset and do not overlap or touch. The copy lives
// in zones of its own lifetime class, apart from its primary's zones; sdf
// verifies every page of it on read and the record CRC checks it end to end.
const (
	rangesMagic      = 0x43525653 // "SVRC"
	rangesVersion    = 1
	rangesHeaderSize = 16
	rangeRecordHead  = 16
)

func recordCRC(off int64, data []byte) uint32 {
	var h [12]byte
	binary.LittleEndian.PutUint64(h[0:], uint64(off))
	binary.LittleEndian.PutUint32(h[8:], uint32(len(data)))
	return base.CRC32CUpdate(base.CRC32C(h[:]), data)
}

// normalizeRanges sorts ranges and merges overlapping or touching ones.
func normalizeRanges(rs []Range, size int64) ([]Range, error) {
	out := make([]Range, 0, len(rs))
	for _, r := range rs {
		if r.Off < 0 || r.Len < 0 || r.End() > size {
			return nil, base.InvalidArgumentf("sdfvfs: range %s outside the file's %d bytes", r, size)
		}
		if r.Len > 0 {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Off < out[j].Off })
	merged := out[:0]
	for _, r := range out {
		if k := len(merged) - 1; k >= 0 && r.Off <= merged[k].End() {
			merged[k].Len = max(merged[k].End(), r.End()) - merged[k].Off
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

// DuplicateRanges keeps a second copy of the given byte ranges of the file
// at name (DIRECT policy 2 for SST metadata blocks: index, filter,
// properties, meta-index, footer), replacing any earlier range copy of the
// file. The bytes are read back through verification first, so a copy is
// only made of intact data. Reads that hit a damaged page inside a copied
// range are then served from the copy, and the page is rewritten from it.
// The copy is durable when DuplicateRanges returns.
func (fs *FS) DuplicateRanges(name string, ranges []Range) error {
	p, err := fs.filePath("duplicate", name)
	if err != nil {
		return err
	}
	if fs.opts.NoDuplication {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.duplicateRangesLocked(p, ranges)
}

// duplicateRangesLocked is DuplicateRanges with fs.mu held.
func (fs *FS) duplicateRangesLocked(p string, ranges []Range) error {
	f, err := fs.sfs.OpenFile(p)
	if err != nil {
		return pathErr("duplicate", p, err)
	}
	defer f.Close()
	rs, err := normalizeRanges(ranges, f.Size())
	if err != nil {
		return err
	}
	var total int64
	for _, r := range rs {
		total += r.Len
	}
	if total > int64(fs.opts.MaxRangeCopyBytes) {
		return base.InvalidArgumentf("sdfvfs: %d bytes of ranges of %q exceed MaxRangeCopyBytes %s",
			total, p, fs.opts.MaxRangeCopyBytes)
	}
	buf := make([]byte, rangesHeaderSize, rangesHeaderSize+int(total)+len(rs)*rangeRecordHead)
	binary.LittleEndian.PutUint32(buf[0:], rangesMagic)
	binary.LittleEndian.PutUint32(buf[4:], rangesVersion)
	binary.LittleEndian.PutUint32(buf[8:], uint32(len(rs)))
	binary.LittleEndian.PutUint32(buf[12:], base.CRC32C(buf[:12]))
	for _, r := range rs {
		data := make([]byte, r.Len)
		if n, err := fs.readAt(f, data, r.Off); n != len(data) {
			return fmt.Errorf("sdfvfs: reading %s of %q to duplicate it: %w", r, p, err)
		}
		var head [rangeRecordHead]byte
		binary.LittleEndian.PutUint64(head[0:], uint64(r.Off))
		binary.LittleEndian.PutUint32(head[8:], uint32(r.Len))
		binary.LittleEndian.PutUint32(head[12:], recordCRC(r.Off, data))
		buf = append(append(buf, head[:]...), data...)
	}
	ch, avoid := -1, []int(nil)
	if !fs.opts.UnpinnedCopies {
		ch, avoid = fs.rangesChannel(f, rs)
	}
	// A preference: when its channel has no zone to give, the copy goes to
	// another that holds none of the ranges, or else anywhere: a copy that
	// shares a channel beats no copy (Placement reports where it went).
	w, err := fs.sfs.CreateApart(rangesName(p), copyLifetime, ch, avoid)
	if err != nil {
		return pathErr("duplicate", p, err)
	}
	if _, err := w.Write(buf); err != nil {
		_ = w.Close()
		return pathErr("duplicate", p, err)
	}
	if err := w.Close(); err != nil {
		return pathErr("duplicate", p, err)
	}
	fs.ctr.rangeCopies.Add(1)
	fs.ctr.rangeCopyBytes.Add(total)
	return nil
}

// rangesChannel picks the channel of the range copy of f: a channel with
// no failed die that holds no page of the copied ranges rs (the bytes the
// copy must outlive: the file's other pages may share a channel with it),
// the one with the fewest of f's zones among those; if every such channel
// holds a page of them, the one holding the fewest such pages. NB: the
// file's zones and the channels with a free zone at that moment do not say
// it: an sstable of two zones on channels 1 and 3, its footer on 1, got its
// copy on 1 while 0 and 2 had no free zone, so that one failed die took
// the footer and its copy (and the table no longer opened after a
// restart).
//
// avoid lists the channels that hold pages of rs.
func (fs *FS) rangesChannel(f *sdf.File, rs []Range) (ch int, avoid []int) {
	hs := fs.liveChannels()
	if len(hs) < 2 {
		return -1, nil // sdf places it
	}
	held := make([]int, fs.channels) // pages of rs on each channel
	for _, r := range rs {
		for c, k := range fs.sfs.RangeChannels(f, r.Off, r.Len) {
			if c < len(held) {
				held[c] += k
			}
		}
	}
	zones := make([]int, fs.channels)
	for _, z := range f.Stat().Zones {
		zones[z%fs.channels]++
	}
	best := hs[0]
	for _, c := range hs[1:] {
		if held[c] < held[best] || (held[c] == held[best] && zones[c] < zones[best]) {
			best = c
		}
	}
	for c, n := range held {
		if n > 0 {
			avoid = append(avoid, c)
		}
	}
	return best, avoid
}

// channelApart picks the healthy channel holding the fewest of the given
// zones (none, when the file does not cover every channel). Zone z is on
// channel z mod channels (sdf's layout).
func (fs *FS) channelApart(zones []int) int {
	hs := fs.healthyChannels()
	if len(hs) < 2 {
		return -1 // sdf places it
	}
	count := make([]int, fs.channels)
	for _, z := range zones {
		count[z%fs.channels]++
	}
	best := hs[0]
	for _, c := range hs {
		if count[c] < count[best] {
			best = c
		}
	}
	return best
}

// overwrite rewrites bytes [off, off+len(p)) of the file at p and of its
// copies.
func (fs *FS) overwrite(p string, data []byte, off int64) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.sfs.RewriteRange(p, off, data); err != nil {
		return err
	}
	if fi, err := fs.sfs.Stat(shadowName(p)); err == nil && off < fi.Size {
		n := min(int64(len(data)), fi.Size-off)
		if err := fs.sfs.RewriteRange(shadowName(p), off, data[:n]); err != nil {
			return fmt.Errorf("sdfvfs: shadow copy: %w", err)
		}
	}
	recs, err := fs.loadRanges(p)
	if err != nil {
		// An unreadable range copy would serve stale bytes: drop it.
		return fs.sfs.Remove(rangesName(p))
	}
	w := Range{Off: off, Len: int64(len(data))}
	for _, r := range recs {
		if r.Off < w.End() && w.Off < r.End() {
			rs := make([]Range, len(recs))
			for i, r := range recs {
				rs[i] = r.Range
			}
			return fs.duplicateRangesLocked(p, rs)
		}
	}
	return nil
}

// DuplicatedRanges returns the ranges of the file at name that have a
// second copy: the whole file for a shadowed file, else its range copy's
// records (nil if none).
func (fs *FS) DuplicatedRanges(name string) ([]Range, error) {
	p, err := fs.filePath("duplicated", name)
	if err != nil {
		return nil, err
	}
	if fi, err := fs.sfs.Stat(shadowName(p)); err == nil {
		return []Range{{Off: 0, Len: fi.Size}}, nil
	}
	recs, err := fs.loadRanges(p)
	if err != nil || recs == nil {
		return nil, err
	}
	out := make([]Range, len(recs))
	for i, r := range recs {
		out[i] = r.Range
	}
	return out, nil
}

type rangeRecord struct {
	Range
	data []byte
	ok   bool // CRC verified
}

// loadRanges reads and parses the range copy of p (nil, nil if none).
func (fs *FS) loadRanges(p string) ([]rangeRecord, error) {
	f, err := fs.sfs.OpenFile(rangesName(p))
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	size := f.Size()
	if size > int64(fs.opts.MaxRangeCopyBytes)*2+rangesHeaderSize {
		return nil, base.CorruptionErrorf("sdfvfs: range copy of %q is %d bytes, past its bound", p, size)
	}
	buf := make([]byte, size)
	if n, err := f.ReadAt(buf, 0); int64(n) != size {
		return nil, fmt.Errorf("sdfvfs: reading range copy of %q: %w", p, err)
	}
	if len(buf) < rangesHeaderSize || binary.LittleEndian.Uint32(buf[0:]) != rangesMagic ||
		binary.LittleEndian.Uint32(buf[12:]) != base.CRC32C(buf[:12]) {
		return nil, base.CorruptionErrorf("sdfvfs: range copy of %q has a bad header", p)
	}
	if v := binary.LittleEndian.Uint32(buf[4:]); v != rangesVersion {
		return nil, base.CorruptionErrorf("sdfvfs: range copy of %q has unknown version %d", p, v)
	}
	count := int(binary.LittleEndian.Uint32(buf[8:]))
	recs := make([]rangeRecord, 0, min(count, len(buf)/rangeRecordHead))
	pos := rangesHeaderSize
	for i := 0; i < count; i++ {
		if pos+rangeRecordHead > len(buf) {
			return recs, base.CorruptionErrorf("sdfvfs: range copy of %q is truncated", p)
		}
		off := int64(binary.LittleEndian.Uint64(buf[pos:]))
		n := int(binary.LittleEndian.Uint32(buf[pos+8:]))
		crc := binary.LittleEndian.Uint32(buf[pos+12:])
		pos += rangeRecordHead
		if n < 0 || pos+n > len(buf) {
			return recs, base.CorruptionErrorf("sdfvfs: range copy of %q is truncated", p)
		}
		data := buf[pos : pos+n]
		pos += n
		recs = append(recs, rangeRecord{Range: Range{Off: off, Len: int64(n)}, data: data, ok: recordCRC(off, data) == crc})
	}
	return recs, nil
}

// fillFromRanges fills dst with bytes [off, off+len(dst)) of p from its
// range copy, if one verified record holds all of them.
func (fs *FS) fillFromRanges(p string, dst []byte, off int64) bool {
	recs, err := fs.loadRanges(p)
	if err != nil {
		return false
	}
	end := off + int64(len(dst))
	for _, r := range recs {
		if r.ok && r.Off <= off && end <= r.End() {
			copy(dst, r.data[off-r.Off:])
			return true
		}
	}
	return false
}

// runRangesHook asks Options.MetadataRanges which ranges of the just-closed
// file at p are metadata and duplicates them.
func (fs *FS) runRangesHook(p string) error {
	f, err := fs.sfs.OpenFile(p)
	if err != nil {
		if isNotExist(err) {
			return nil // removed meanwhile
		}
		return err
	}
	size := f.Size()
	rs, ok, err := fs.opts.MetadataRanges(p, verifiedReader{fs: fs, f: f}, size)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("sdfvfs: metadata ranges of %q: %w", p, err)
	}
	if !ok || len(rs) == 0 {
		return nil
	}
	return fs.DuplicateRanges(p, rs)
}

// verifiedReader reads through FS.readAt (verification, copies).
type verifiedReader struct {
	fs *FS
	f  *sdf.File
}

func (r verifiedReader) ReadAt(p []byte, off int64) (int, error) { return r.fs.readAt(r.f, p, off) }

// SSTMetadataRanges returns the RangesFunc for Pebble sstables
// (guardfs.SSTMetadataRanges: the index, filter, range-deletion and
// range-key blocks, value index, blob reference index, properties,
// meta-index and footer, every block's checksum verified first).
func SSTMetadataRanges(ro sstable.ReaderOptions) RangesFunc { return guardfs.SSTMetadataRanges(ro) }
