package raftlog

import (
	"encoding/binary"

	"github.com/flashmend/flashmend/internal/base"
)

// The log files are cut into blocks of Options.BlockBytes, and a record is
// written as one or more fragments that never cross a block boundary (the
// record layout of LevelDB's and Pebble's write-ahead logs). Each fragment
// carries its own checksum, so no checksum covers more than one block: a
// bit flip loses at most the record it lands in, and the two copies of a
// file are merged fragment by fragment (one copy's damaged fragment is read
// from the other).
//
// Fragment layout, little endian:
//
//	crc     uint32  CRC32C over generation, file offset, type, length, data
//	length  uint16  data bytes (at least 1)
//	type    uint8   fragFull, fragFirst, fragMiddle or fragLast
//	data
//
// The checksum covers the fragment's identity (generation and file offset):
// bytes written at another place, or left from an older generation, never
// verify, so a reader can resynchronize after damage by trying every offset.
// A block whose remaining space is too small for a header and one byte of
// data is padded with zeros.
const fragHeaderBytes = 4 + 2 + 1

// Fragment types.
const (
	fragFull   byte = 1
	fragFirst  byte = 2
	fragMiddle byte = 3
	fragLast   byte = 4
)

func fragCRC(gen uint64, off int64, typ byte, data []byte) uint32 {
	var id [8 + 8 + 1 + 2]byte
	binary.LittleEndian.PutUint64(id[0:], gen)
	binary.LittleEndian.PutUint64(id[8:], uint64(off))
	id[16] = typ
	binary.LittleEndian.PutUint16(id[17:], uint16(len(data)))
	return base.CRC32CUpdate(base.CRC32C(id[:]), data)
}

// framer appends records to a file of generation gen whose current size is
// off. It does no I/O: appendRecord returns the bytes to write.
type framer struct {
	gen        uint64
	blockBytes int64
	off        int64
}

// appendRecord appends the fragments of rec (at least one byte) to dst.
func (w *framer) appendRecord(dst, rec []byte) []byte {
	first := true
	for len(rec) > 0 {
		room := w.blockBytes - w.off%w.blockBytes
		if room < fragHeaderBytes+1 {
			dst = append(dst, make([]byte, room)...)
			w.off += room
			continue
		}
		n := min(int64(len(rec)), room-fragHeaderBytes)
		last := n == int64(len(rec))
		typ := fragMiddle
		switch {
		case first && last:
			typ = fragFull
		case first:
			typ = fragFirst
		case last:
			typ = fragLast
		}
		data := rec[:n]
		var h [fragHeaderBytes]byte
		binary.LittleEndian.PutUint32(h[0:], fragCRC(w.gen, w.off, typ, data))
		binary.LittleEndian.PutUint16(h[4:], uint16(n))
		h[6] = typ
		dst = append(append(dst, h[:]...), data...)
		w.off += fragHeaderBytes + n
		rec = rec[n:]
		first = false
	}
	return dst
}

// decodeFrag verifies the fragment at off of one copy (data is the whole
// copy). It returns the type, the data and the fragment's total length.
func decodeFrag(gen uint64, data []byte, off, blockBytes int64) (typ byte, payload []byte, n int64, ok bool) {
	return decodeFragAt(gen, data, 0, off, blockBytes)
}

// decodeFragAt is decodeFrag for data holding the file's bytes from file
// offset dataOff on.
func decodeFragAt(gen uint64, data []byte, dataOff, off, blockBytes int64) (typ byte, payload []byte, n int64, ok bool) {
	blockEnd := (off/blockBytes + 1) * blockBytes
	end := dataOff + int64(len(data))
	if off < dataOff || off+fragHeaderBytes+1 > min(blockEnd, end) {
		return 0, nil, 0, false
	}
	p := off - dataOff
	length := int64(binary.LittleEndian.Uint16(data[p+4:]))
	typ = data[p+6]
	if length == 0 || off+fragHeaderBytes+length > blockEnd || off+fragHeaderBytes+length > end {
		return 0, nil, 0, false
	}
	if typ < fragFull || typ > fragLast {
		return 0, nil, 0, false
	}
	payload = data[p+fragHeaderBytes : p+fragHeaderBytes+length]
	if binary.LittleEndian.Uint32(data[p:]) != fragCRC(gen, off, typ, payload) {
		return 0, nil, 0, false
	}
	return typ, payload, fragHeaderBytes + length, true
}

// item is one element of a parsed generation: a whole record, or a loss (one
// or more records, of unknown kinds, that no copy holds intact).
type item struct {
	rec  []byte // nil for a loss
	off  int64  // file offset where the record (or the damage) starts
	loss bool
	// lossBytes is the extent of a loss: from off to the next intact
	// fragment.
	lossBytes int64
}

// parseResult is what parseCopies found in a generation's copies.
type parseResult struct {
	items []item
	// end is the offset just past the last intact fragment: where appends
	// would continue.
	end int64
	// tornBytes is the length of a damaged or incomplete tail after end that
	// no intact fragment follows: a write torn by a crash (never
	// acknowledged), dropped.
	tornBytes int64
	// fragsRepaired counts fragments read from one copy because another
	// copy's bytes there did not verify.
	fragsRepaired int
}

// parseCopies reads the records of one generation from its copies (the
// same byte stream written to every file; a copy may be shorter after a
// crash between writes). Each fragment is taken from the first copy where
// it verifies. Where no copy verifies, the reader resynchronizes on the
// next offset in the block where any copy holds a verifying fragment, or
// on the next block, and reports a loss.
func parseCopies(gen uint64, copies [][]byte, blockBytes int64) parseResult {
	var size int64
	for _, c := range copies {
		size = max(size, int64(len(c)))
	}
	var res parseResult
	var cur []byte // record being assembled
	curOff := int64(-1)
	inRecord := false
	lossAt := int64(-1)   // start of an unreported loss
	firstBad := int64(-1) // first bad fragment after the last whole record
	noteLoss := func(at int64) {
		if firstBad < 0 {
			firstBad = at
		}
		if inRecord {
			at = curOff
			inRecord, cur = false, nil
		}
		if lossAt < 0 {
			lossAt = at
		}
	}
	flushLoss := func(upTo int64) {
		if lossAt >= 0 {
			res.items = append(res.items, item{loss: true, off: lossAt, lossBytes: upTo - lossAt})
			lossAt = -1
		}
	}
	off := int64(0)
	for off < size {
		if blockBytes-off%blockBytes < fragHeaderBytes+1 {
			off = (off/blockBytes + 1) * blockBytes // padding
			continue
		}
		typ, data, n, good, bad := byte(0), []byte(nil), int64(0), -1, 0
		for i, c := range copies {
			if t, d, m, ok := decodeFrag(gen, c, off, blockBytes); ok {
				if good < 0 {
					typ, data, n, good = t, d, m, i
				}
				continue
			}
			if off < int64(len(c)) {
				bad++
			}
		}
		if good < 0 {
			// NB: the writer leaves no gaps (only padding shorter than a
			// header at a block's end), so bytes that do not verify here,
			// zeros included, are damage or a torn tail, never "nothing
			// written".
			noteLoss(off)
			off = resync(gen, copies, off, blockBytes, size)
			continue
		}
		if bad > 0 {
			res.fragsRepaired++
		}
		switch typ {
		case fragFull, fragFirst:
			if inRecord {
				noteLoss(curOff) // the previous record lost its tail
			}
			flushLoss(off)
			if typ == fragFull {
				res.items = append(res.items, item{rec: append([]byte(nil), data...), off: off})
				firstBad = -1
			} else {
				inRecord, cur, curOff = true, append([]byte(nil), data...), off
			}
		case fragMiddle, fragLast:
			if !inRecord {
				noteLoss(off) // its first fragment is lost
				break
			}
			cur = append(cur, data...)
			if typ == fragLast {
				flushLoss(curOff)
				res.items = append(res.items, item{rec: cur, off: curOff})
				inRecord, cur = false, nil
				firstBad = -1
			}
		}
		off += n
		if !inRecord && lossAt < 0 {
			res.end = off
		}
	}
	// A loss or a partial record after the last whole record, with no
	// intact record after it, is either a write torn by a crash (never
	// acknowledged: dropped) or damage to records that were synced. Copies
	// are written one after the other, each synced before the next
	// (Log.writeLocked), so a crash tears copy 0 only while the later
	// copies hold nothing there: if a later copy has bytes where the tail
	// went bad, copy 0 held it whole, and the tail is damage (reported as
	// a loss).
	if inRecord || lossAt >= 0 {
		bad := res.end
		if firstBad >= 0 {
			bad = firstBad
		}
		damaged := false
		for _, c := range copies[1:] {
			if int64(len(c)) > bad {
				damaged = true
			}
		}
		if damaged {
			res.items = append(res.items, item{loss: true, off: bad, lossBytes: size - bad})
		} else {
			res.tornBytes = size - res.end
		}
	} else if size > res.end {
		res.tornBytes = size - res.end
	}
	return res
}

// resync returns the next offset after off, within off's block, at which
// some copy holds a verifying fragment, or the start of the next block.
func resync(gen uint64, copies [][]byte, off, blockBytes, size int64) int64 {
	blockEnd := (off/blockBytes + 1) * blockBytes
	for p := off + 1; p+fragHeaderBytes < blockEnd && p < size; p++ {
		for _, c := range copies {
			if _, _, _, ok := decodeFrag(gen, c, p, blockBytes); ok {
				return p
			}
		}
	}
	return blockEnd
}
