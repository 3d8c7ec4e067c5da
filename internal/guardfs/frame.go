package guardfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/flashmend/flashmend/internal/base"
)

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
//   - frameData: data[0:length] are the logical bytes [offset,
//     offset+length) of the file; 1 <= length <= MaxFrameBytes.
//   - frameSeal: written when the file is closed; offset is the file's
//     final logical size and length is 0. A file with a seal is complete:
//     bytes missing below its size are lost, not torn.
const (
	frameMagic  uint32 = 0x31534647 // "GFS1"
	frameData   byte   = 1
	frameSeal   byte   = 2
	frameCRCOff        = 24
	// FrameHeaderBytes is the size of a frame header.
	FrameHeaderBytes = 28
	// MaxFrameBytes bounds the data of one frame (and so every checksum
	// domain of guardfs).
	MaxFrameBytes = 4096
)

func putHeader(h []byte, kind byte, length int, id uint64, off int64) {
	binary.LittleEndian.PutUint32(h[0:], frameMagic)
	h[4] = kind
	h[5] = 0
	binary.LittleEndian.PutUint16(h[6:], uint16(length))
	binary.LittleEndian.PutUint64(h[8:], id)
	binary.LittleEndian.PutUint64(h[16:], uint64(off))
}

func frameChecksum(h, data []byte) uint32 {
	return base.CRC32CUpdate(base.CRC32C(h[:frameCRCOff]), data)
}

// appendFrames appends the frames holding data, the logical bytes at off of
// file id, cut into frames of at most frameBytes of data.
func appendFrames(dst []byte, id uint64, off int64, data []byte, frameBytes int) []byte {
	for len(data) > 0 {
		n := min(len(data), frameBytes)
		var h [FrameHeaderBytes]byte
		putHeader(h[:], frameData, n, id, off)
		binary.LittleEndian.PutUint32(h[frameCRCOff:], frameChecksum(h[:], data[:n]))
		dst = append(append(dst, h[:]...), data[:n]...)
		data, off = data[n:], off+int64(n)
	}
	return dst
}

// appendSeal appends the seal frame recording that file id is complete at
// size logical bytes.
func appendSeal(dst []byte, id uint64, size int64) []byte {
	var h [FrameHeaderBytes]byte
	putHeader(h[:], frameSeal, 0, id, size)
	binary.LittleEndian.PutUint32(h[frameCRCOff:], frameChecksum(h[:], nil))
	return append(dst, h[:]...)
}

// frame is a frame that verified against its own header.
type frame struct {
	kind byte
	id   uint64
	off  int64  // logical offset (data) or final size (seal)
	data []byte // aliases the buffer parsed
	pos  int64  // physical position of the header
}

func (f frame) end() int64 { return f.off + int64(len(f.data)) }

func (f frame) String() string {
	k := "data"
	if f.kind == frameSeal {
		k = "seal"
	}
	return fmt.Sprintf("%s id=%016x off=%d len=%d @%d", k, f.id, f.off, len(f.data), f.pos)
}

// verifyAt reports whether a frame that verifies starts at buf[pos:].
func verifyAt(buf []byte, pos int) (frame, bool) {
	if pos+FrameHeaderBytes > len(buf) {
		return frame{}, false
	}
	h := buf[pos : pos+FrameHeaderBytes]
	if binary.LittleEndian.Uint32(h) != frameMagic || h[5] != 0 {
		return frame{}, false
	}
	kind, n := h[4], int(binary.LittleEndian.Uint16(h[6:]))
	off := int64(binary.LittleEndian.Uint64(h[16:]))
	switch {
	case off < 0:
		return frame{}, false
	case kind == frameData && (n < 1 || n > MaxFrameBytes || off > 1<<62):
		return frame{}, false
	case kind == frameSeal && n != 0:
		return frame{}, false
	case kind != frameData && kind != frameSeal:
		return frame{}, false
	}
	if pos+FrameHeaderBytes+n > len(buf) {
		return frame{}, false
	}
	data := buf[pos+FrameHeaderBytes : pos+FrameHeaderBytes+n]
	if binary.LittleEndian.Uint32(h[frameCRCOff:]) != frameChecksum(h, data) {
		return frame{}, false
	}
	return frame{kind: kind, id: binary.LittleEndian.Uint64(h[8:]), off: off, data: data, pos: int64(pos)}, true
}

var magicBytes = func() []byte {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], frameMagic)
	return b[:]
}()

// parseFrames returns every frame of buf that verifies, in physical order.
// After bytes that do not verify (damage, a torn tail, junk) it
// resynchronizes on the next header that verifies: a damaged frame costs
// only itself, never the frames after it.
func parseFrames(buf []byte) []frame {
	var out []frame
	pos := 0
	for pos+FrameHeaderBytes <= len(buf) {
		if f, ok := verifyAt(buf, pos); ok {
			out = append(out, f)
			pos += FrameHeaderBytes + len(f.data)
			continue
		}
		i := bytes.Index(buf[pos+1:], magicBytes)
		if i < 0 {
			break
		}
		pos += 1 + i
	}
	return out
}

// copyState is what one copy of a framed file holds: its frames (nil if
// the copy is missing or unreadable) and its physical size.
type copyState struct {
	present  bool
	physical int64
	frames   []frame
}

// merged is the logical content of a framed file reconstructed from its
// copies.
type merged struct {
	id     uint64
	size   int64 // logical size
	sealed bool  // a seal verified in some copy: size is the final size
	data   []byte
	// lost are the ranges below size that no copy holds intact (and,
	// should two copies ever hold different verified bytes for the same
	// offset, those bytes: guardfs never picks between them).
	lost []Range
	// perfect[i] reports that copy i alone holds the whole content and
	// nothing else: no damaged, foreign or torn bytes, the seal if sealed.
	perfect []bool
	// gaps counts the ranges missing from one copy that another copy
	// filled (frames repaired by the merge).
	gaps int
	// conflicts counts offsets where verified frames disagreed.
	conflicts int
}

// covered returns the sorted, merged ranges that frames of id cover.
func coverage(frames []frame, id uint64) []Range {
	var rs []Range
	for _, f := range frames {
		if f.id == id && f.kind == frameData {
			rs = append(rs, Range{Off: f.off, Len: int64(len(f.data))})
		}
	}
	return normalize(rs)
}

// normalize sorts ranges and merges overlapping or touching ones.
func normalize(rs []Range) []Range {
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

// subtract returns the parts of [0, size) not in cov (sorted, merged).
func subtract(size int64, cov []Range) []Range {
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

// merge reconstructs the content of file id from its copies, frame by
// frame: each logical byte comes from any copy holding a verified frame of
// id that covers it. The size is the seal's if any copy kept one, else the
// end of the last verified frame (a torn tail is a shorter file).
func merge(id uint64, copies []copyState) merged {
	m := merged{id: id, perfect: make([]bool, len(copies))}
	var all []frame
	sealSize := int64(-1)
	for _, c := range copies {
		for _, f := range c.frames {
			if f.id != id {
				continue
			}
			switch f.kind {
			case frameSeal:
				sealSize = max(sealSize, f.off)
			case frameData:
				all = append(all, f)
				m.size = max(m.size, f.end())
			}
		}
	}
	if sealSize >= 0 {
		m.sealed, m.size = true, sealSize
	}
	m.data = make([]byte, m.size)
	sort.SliceStable(all, func(i, j int) bool { return all[i].off < all[j].off })
	var cov []Range // sorted, disjoint; only the last can reach past the next frame's start
	var conflicts []Range
	for _, f := range all {
		fr := Range{Off: f.off, Len: int64(len(f.data))}
		if fr.Off >= m.size {
			continue // past a seal: cannot belong to the file
		}
		if fr.End() > m.size {
			fr.Len = m.size - fr.Off
		}
		src := f.data[:fr.Len]
		k := len(cov) - 1
		if k >= 0 && fr.Off < cov[k].End() {
			// Bytes already filled must agree.
			ov := min(fr.End(), cov[k].End()) - fr.Off
			if !bytes.Equal(m.data[fr.Off:fr.Off+ov], src[:ov]) {
				conflicts = append(conflicts, Range{Off: fr.Off, Len: ov})
			}
			if fr.End() > cov[k].End() {
				from := cov[k].End()
				copy(m.data[from:fr.End()], src[from-fr.Off:])
				cov[k].Len = fr.End() - cov[k].Off
			}
			continue
		}
		copy(m.data[fr.Off:fr.End()], src)
		if k >= 0 && fr.Off == cov[k].End() {
			cov[k].Len += fr.Len
		} else {
			cov = append(cov, fr)
		}
	}
	m.conflicts = len(conflicts)
	m.lost = normalize(append(subtract(m.size, cov), conflicts...))
	for _, r := range conflicts {
		clear(m.data[r.Off:r.End()])
	}
	for i, c := range copies {
		if !c.present {
			continue
		}
		own := coverage(c.frames, id)
		missing := subtract(m.size, own)
		// A range this copy misses that the merge holds was repaired.
		for _, r := range missing {
			if !coveredBy(r, m.lost) {
				m.gaps++
			}
		}
		var used int64
		hasSeal := false
		for _, f := range c.frames {
			if f.id == id && (f.kind == frameData && f.off < m.size || f.kind == frameSeal && f.off == m.size) {
				used += FrameHeaderBytes + int64(len(f.data))
				hasSeal = hasSeal || f.kind == frameSeal
			}
		}
		m.perfect[i] = len(missing) == 0 && used == c.physical && hasSeal == m.sealed
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

// resolveID picks the identity of a framed file: the id its copies' names
// carry (the directory entries are metadata a misdirected or stale data
// write cannot change), by majority, ties broken by verified bytes; with no
// named copy, the id holding the most verified bytes of data.
func resolveID(named []uint64, copies []copyState) uint64 {
	bytesOf := map[uint64]int64{}
	for _, c := range copies {
		for _, f := range c.frames {
			bytesOf[f.id] += int64(len(f.data)) + 1
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

// encodeContent returns a whole copy of m: frames of every range it holds,
// cut at frameBytes, and a seal when sealed.
func encodeContent(m merged, frameBytes int, seal bool) []byte {
	held := subtract(m.size, m.lost)
	var out []byte
	for _, r := range held {
		out = appendFrames(out, m.id, r.Off, m.data[r.Off:r.End()], frameBytes)
	}
	if seal {
		out = appendSeal(out, m.id, m.size)
	}
	return out
}
