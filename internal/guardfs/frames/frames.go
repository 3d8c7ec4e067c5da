package frames

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

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

// Overlaps reports whether r and o share a byte.
func (r Range) Overlaps(o Range) bool { return r.Off < o.End() && o.Off < r.End() }

// Frame layout (little endian), the unit of every guardfs structure:
//
//	magic u32 | kind u8 | reserved u8 (0) | length u16 | id u64 | offset u64 | crc u32 | data[length]
//
// crc is the CRC32C of the first 24 header bytes (magic, kind, reserved,
// length, id, offset) followed by the data. It binds the data to the file's
// identity (id, chosen at Create, kept across Rename) and to its logical
// offset, so a frame read from another file, another incarnation of the
// same name, or a stale block never verifies as this file's data.
//
// Kinds:
//   - KindData: data[0:length] are the logical bytes [offset,
//     offset+length) of the file; 1 <= length <= MaxBytes.
//   - KindSeal: written when the file is closed; offset is the file's
//     final logical size and length is 0. A file with a seal is complete:
//     bytes missing below its size are lost, not torn.
const (
	Magic       uint32 = 0x31534647 // "GFS1"
	KindData    byte   = 1
	KindSeal    byte   = 2
	frameCRCOff        = 24
	// HeaderBytes is the size of a frame header.
	HeaderBytes = 28
	// MaxBytes bounds the data of one frame (and so every checksum
	// domain of guardfs).
	MaxBytes = 4096
)

func putHeader(h []byte, kind byte, length int, id uint64, off int64) {
	binary.LittleEndian.PutUint32(h[0:], Magic)
	h[4] = kind
	h[5] = 0
	binary.LittleEndian.PutUint16(h[6:], uint16(length))
	binary.LittleEndian.PutUint64(h[8:], id)
	binary.LittleEndian.PutUint64(h[16:], uint64(off))
}

func frameChecksum(h, data []byte) uint32 {
	return base.CRC32CUpdate(base.CRC32C(h[:frameCRCOff]), data)
}

// Append appends the frames holding data, the logical bytes at off of
// file id, cut into frames of at most frameBytes of data.
func Append(dst []byte, id uint64, off int64, data []byte, frameBytes int) []byte {
	for len(data) > 0 {
		n := min(len(data), frameBytes)
		var h [HeaderBytes]byte
		putHeader(h[:], KindData, n, id, off)
		binary.LittleEndian.PutUint32(h[frameCRCOff:], frameChecksum(h[:], data[:n]))
		dst = append(append(dst, h[:]...), data[:n]...)
		data, off = data[n:], off+int64(n)
	}
	return dst
}

// AppendSeal appends the seal frame recording that file id is complete at
// size logical bytes.
func AppendSeal(dst []byte, id uint64, size int64) []byte {
	var h [HeaderBytes]byte
	putHeader(h[:], KindSeal, 0, id, size)
	binary.LittleEndian.PutUint32(h[frameCRCOff:], frameChecksum(h[:], nil))
	return append(dst, h[:]...)
}

// Frame is a frame that verified against its own header.
type Frame struct {
	Kind byte
	ID   uint64
	Off  int64  // logical offset (data) or final size (seal)
	Data []byte // aliases the buffer parsed
	Pos  int64  // physical position of the header
}

func (f Frame) End() int64 { return f.Off + int64(len(f.Data)) }

func (f Frame) String() string {
	k := "data"
	if f.Kind == KindSeal {
		k = "seal"
	}
	return fmt.Sprintf("%s id=%016x off=%d len=%d @%d", k, f.ID, f.Off, len(f.Data), f.Pos)
}

// VerifyAt reports whether a frame that verifies starts at buf[pos:].
func VerifyAt(buf []byte, pos int) (Frame, bool) {
	if pos+HeaderBytes > len(buf) {
		return Frame{}, false
	}
	h := buf[pos : pos+HeaderBytes]
	if binary.LittleEndian.Uint32(h) != Magic || h[5] != 0 {
		return Frame{}, false
	}
	kind, n := h[4], int(binary.LittleEndian.Uint16(h[6:]))
	off := int64(binary.LittleEndian.Uint64(h[16:]))
	switch {
	case off < 0:
		return Frame{}, false
	case kind == KindData && (n < 1 || n > MaxBytes || off > 1<<62):
		return Frame{}, false
	case kind == KindSeal && n != 0:
		return Frame{}, false
	case kind != KindData && kind != KindSeal:
		return Frame{}, false
	}
	if pos+HeaderBytes+n > len(buf) {
		return Frame{}, false
	}
	data := buf[pos+HeaderBytes : pos+HeaderBytes+n]
	if binary.LittleEndian.Uint32(h[frameCRCOff:]) != frameChecksum(h, data) {
		return Frame{}, false
	}
	return Frame{Kind: kind, ID: binary.LittleEndian.Uint64(h[8:]), Off: off, Data: data, Pos: int64(pos)}, true
}

var MagicBytes = func() []byte {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], Magic)
	return b[:]
}()

// Parse returns every frame of buf that verifies, in physical order.
// After bytes that do not verify (damage, a torn tail, junk) it
// resynchronizes on the next header that verifies: a damaged frame costs
// only itself, never the frames after it.
func Parse(buf []byte) []Frame {
	var out []Frame
	pos := 0
	for pos+HeaderBytes <= len(buf) {
		if f, ok := VerifyAt(buf, pos); ok {
			out = append(out, f)
			pos += HeaderBytes + len(f.Data)
			continue
		}
		i := bytes.Index(buf[pos+1:], MagicBytes)
		if i < 0 {
			break
		}
		pos += 1 + i
	}
	return out
}

// CopyState is what one copy of a framed file holds: its frames (nil if
// the copy is missing or unreadable) and its physical size.
type CopyState struct {
	Present  bool
	Physical int64
	Frames   []Frame
}

// Merged is the logical content of a framed file reconstructed from its
// copies.
type Merged struct {
	ID     uint64
	Size   int64 // logical size
	Sealed bool  // a seal verified in some copy: size is the final size
	Data   []byte
	// lost are the ranges below size that no copy holds intact (and,
	// should two copies ever hold different verified bytes for the same
	// offset, those bytes: guardfs never picks between them).
	Lost []Range
	// perfect[i] reports that copy i alone holds the whole content and
	// nothing else: no damaged, foreign or torn bytes, the seal if sealed.
	Perfect []bool
	// gaps counts the ranges missing from one copy that another copy
	// filled (frames repaired by the merge).
	Gaps int
	// conflicts counts offsets where verified frames disagreed.
	Conflicts int
}

// coverage returns the sorted, merged ranges that frames of id cover.
func coverage(frames []Frame, id uint64) []Range {
	var rs []Range
	for _, f := range frames {
		if f.ID == id && f.Kind == KindData {
			rs = append(rs, Range{Off: f.Off, Len: int64(len(f.Data))})
		}
	}
	return Normalize(rs)
}

// Normalize sorts ranges and merges overlapping or touching ones.
func Normalize(rs []Range) []Range {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Off < rs[j].Off })
	out := rs[:0]
	for _, r := range rs {
		if r.Len <= 0 {
			continue
		}
		if k := len(out) - 1; k >= 0 && r.Off <= out[k].End() {
			out[k].Len = max(out[k].End(), r.End()) - out[k].Off
			continue
		}
		out = append(out, r)
	}
	return out
}

// Subtract returns the parts of [0, size) not in cov (sorted, merged).
func Subtract(size int64, cov []Range) []Range {
	var out []Range
	at := int64(0)
	for _, r := range cov {
		if r.Off >= size {
			break
		}
		if r.Off > at {
			out = append(out, Range{Off: at, Len: r.Off - at})
		}
		at = max(at, r.End())
	}
	if at < size {
		out = append(out, Range{Off: at, Len: size - at})
	}
	return out
}

// Merge reconstructs the content of file id from its copies, frame by
// frame: each logical byte comes from any copy holding a verified frame of
// id that covers it. The size is the seal's if any copy kept one, else the
// end of the last verified frame (a torn tail is a shorter file).
func Merge(id uint64, copies []CopyState) Merged {
	m := Merged{ID: id, Perfect: make([]bool, len(copies))}
	var all []Frame
	sealSize := int64(-1)
	for _, c := range copies {
		for _, f := range c.Frames {
			if f.ID != id {
				continue
			}
			switch f.Kind {
			case KindSeal:
				sealSize = max(sealSize, f.Off)
			case KindData:
				all = append(all, f)
				m.Size = max(m.Size, f.End())
			}
		}
	}
	if sealSize >= 0 {
		m.Sealed, m.Size = true, sealSize
	}
	m.Data = make([]byte, m.Size)
	sort.SliceStable(all, func(i, j int) bool { return all[i].Off < all[j].Off })
	var cov []Range // sorted, disjoint; only the last can reach past the next frame's start
	var conflicts []Range
	for _, f := range all {
		fr := Range{Off: f.Off, Len: int64(len(f.Data))}
		if fr.Off >= m.Size {
			continue // past a seal: cannot belong to the file
		}
		if fr.End() > m.Size {
			fr.Len = m.Size - fr.Off
		}
		src := f.Data[:fr.Len]
		k := len(cov) - 1
		if k >= 0 && fr.Off < cov[k].End() {
			// Bytes already filled must agree.
			ov := min(fr.End(), cov[k].End()) - fr.Off
			if !bytes.Equal(m.Data[fr.Off:fr.Off+ov], src[:ov]) {
				conflicts = append(conflicts, Range{Off: fr.Off, Len: ov})
			}
			if fr.End() > cov[k].End() {
				from := cov[k].End()
				copy(m.Data[from:fr.End()], src[from-fr.Off:])
				cov[k].Len = fr.End() - cov[k].Off
			}
			continue
		}
		copy(m.Data[fr.Off:fr.End()], src)
		if k >= 0 && fr.Off == cov[k].End() {
			cov[k].Len += fr.Len
		} else {
			cov = append(cov, fr)
		}
	}
	m.Conflicts = len(conflicts)
	m.Lost = Normalize(append(Subtract(m.Size, cov), conflicts...))
	for _, r := range conflicts {
		clear(m.Data[r.Off:r.End()])
	}
	for i, c := range copies {
		if !c.Present {
			continue
		}
		own := coverage(c.Frames, id)
		missing := Subtract(m.Size, own)
		// A range this copy misses that the merge holds was repaired.
		for _, r := range missing {
			if !coveredBy(r, m.Lost) {
				m.Gaps++
			}
		}
		var used int64
		hasSeal := false
		for _, f := range c.Frames {
			if f.ID == id && (f.Kind == KindData && f.Off < m.Size || f.Kind == KindSeal && f.Off == m.Size) {
				used += HeaderBytes + int64(len(f.Data))
				hasSeal = hasSeal || f.Kind == KindSeal
			}
		}
		m.Perfect[i] = len(missing) == 0 && used == c.Physical && hasSeal == m.Sealed
	}
	return m
}

// coveredBy reports whether r lies wholly inside one range of rs (sorted).
func coveredBy(r Range, rs []Range) bool {
	for _, o := range rs {
		if o.Off <= r.Off && r.End() <= o.End() {
			return true
		}
	}
	return false
}

// ResolveID picks the identity of a framed file: the id its copies' names
// carry (the directory entries are metadata a misdirected or stale data
// write cannot change), by majority, ties broken by verified bytes; with no
// named copy, the id holding the most verified bytes of data.
func ResolveID(named []uint64, copies []CopyState) uint64 {
	bytesOf := map[uint64]int64{}
	for _, c := range copies {
		for _, f := range c.Frames {
			bytesOf[f.ID] += int64(len(f.Data)) + 1
		}
	}
	if len(named) > 0 {
		votes := map[uint64]int{}
		for _, id := range named {
			votes[id]++
		}
		best := named[0]
		for id, v := range votes {
			if v > votes[best] || v == votes[best] && (bytesOf[id] > bytesOf[best] || bytesOf[id] == bytesOf[best] && id < best) {
				best = id
			}
		}
		return best
	}
	var best uint64
	var bestBytes int64
	for id, n := range bytesOf {
		if n > bestBytes || n == bestBytes && id < best {
			best, bestBytes = id, n
		}
	}
	return best
}

// Encode returns a whole copy of m: frames of every range it holds,
// cut at frameBytes, and a seal when sealed.
func Encode(m Merged, frameBytes int, seal bool) []byte {
	held := Subtract(m.Size, m.Lost)
	var out []byte
	for _, r := range held {
		out = Append(out, m.ID, r.Off, m.Data[r.Off:r.End()], frameBytes)
	}
	if seal {
		out = AppendSeal(out, m.ID, m.Size)
	}
	return out
}
