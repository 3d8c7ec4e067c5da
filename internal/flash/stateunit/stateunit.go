package stateunit

import (
	"encoding/binary"
	"sort"

	"github.com/flashmend/flashmend/internal/base"
)

// The state record is stored in Copies files ("copies"), each cut into
// fixed-size units with their own CRC32C, so that a flip costs one unit of
// one copy, not the whole copy: the record is assembled unit by unit from
// whichever copy holds a verifying unit (the device-state twin of the chunk
// sector merge). Every save writes the same record to every copy in turn
// (0, 1, 2, each synced before the next), so at most one copy is torn by a
// crash and the others hold either the new record or the previous one.
//
// Unit layout (UnitSize bytes, little endian):
//
//	magic u32 "FMSU" | seq u64 | index u32 | count u32 | payload length u16 |
//	zero u16 | payload [UnitPayload] | crc32c u32 over all before it
//
// Unit i of a copy is at byte offset i*UnitSize. A unit names its
// record (seq) and its place (index of count), so a stale or misplaced unit
// never verifies as part of another record.
const (
	Copies      = 3
	UnitSize    = 512
	UnitHeader  = 4 + 8 + 4 + 4 + 2 + 2
	UnitPayload = UnitSize - UnitHeader - 4
	UnitMagic   = 0x55534d46 // "FMSU" little endian
)

// Frame cuts an encoded state record into units.
func Frame(seq uint64, rec []byte) []byte {
	count := (len(rec) + UnitPayload - 1) / UnitPayload
	out := make([]byte, count*UnitSize)
	le := binary.LittleEndian
	for i := 0; i < count; i++ {
		u := out[i*UnitSize : (i+1)*UnitSize]
		part := rec[i*UnitPayload : min(len(rec), (i+1)*UnitPayload)]
		le.PutUint32(u[0:], UnitMagic)
		le.PutUint64(u[4:], seq)
		le.PutUint32(u[12:], uint32(i))
		le.PutUint32(u[16:], uint32(count))
		le.PutUint16(u[20:], uint16(len(part)))
		copy(u[UnitHeader:], part)
		le.PutUint32(u[UnitSize-4:], base.CRC32C(u[:UnitSize-4]))
	}
	return out
}

// Unit is a unit that verifies.
type Unit struct {
	Seq          uint64
	Index, Count int
	Payload      []byte
}

// ParseUnit verifies the unit u (UnitSize bytes).
func ParseUnit(u []byte) (Unit, bool) {
	le := binary.LittleEndian
	if le.Uint32(u[0:]) != UnitMagic || le.Uint32(u[UnitSize-4:]) != base.CRC32C(u[:UnitSize-4]) {
		return Unit{}, false
	}
	su := Unit{Seq: le.Uint64(u[4:]), Index: int(le.Uint32(u[12:])), Count: int(le.Uint32(u[16:]))}
	n := int(le.Uint16(u[20:]))
	if n > UnitPayload || su.Index >= su.Count {
		return Unit{}, false
	}
	su.Payload = u[UnitHeader : UnitHeader+n]
	return su, true
}

// Merge says how a state record was assembled from its copies.
type Merge struct {
	// damagedCopies counts copies that were missing, short, damaged or
	// stale for the record picked: the next save rewrites them.
	DamagedCopies int
	// unitsMerged counts units that did not verify in at least one copy
	// of the record picked (taken from another copy, or voted).
	UnitsMerged int
	// unitsVoted counts units rebuilt by a bit-by-bit majority vote
	// because no copy of them verified.
	UnitsVoted int
}

// Assemble rebuilds the newest state record that can be assembled from
// the copies, unit by unit. It returns nil when no copy holds any unit.
// For the newest sequence number seen, a unit that verifies in no copy is
// rebuilt by a bit-by-bit majority vote over three copies of its slot and
// used only if the vote verifies; a record that still misses a unit falls
// back to the previous sequence number (the copies a crashed save had not
// reached yet).
func Assemble(copies [][]byte) ([]byte, Merge, error) {
	type key struct {
		seq   uint64
		index int
	}
	units := map[key][]byte{}
	counts := map[uint64]int{}
	for _, c := range copies {
		for off := 0; off+UnitSize <= len(c); off += UnitSize {
			u, ok := ParseUnit(c[off : off+UnitSize])
			if !ok || u.Index != off/UnitSize {
				continue
			}
			if n, seen := counts[u.Seq]; seen && n != u.Count {
				continue // a unit that disagrees on the record's size: ignore
			}
			counts[u.Seq] = u.Count
			units[key{u.Seq, u.Index}] = u.Payload
		}
	}
	if len(counts) == 0 {
		// No unit verifies anywhere. A record of one unit damaged in
		// every copy (at different bits) is still voted back; the vote
		// below finds it once its sequence number is known, so learn it
		// from the vote of the first slot.
		if v := majority(copies, 0); v != nil && voted(v) {
			u, _ := ParseUnit(v)
			counts[u.Seq] = u.Count
		} else if written(copies) {
			// Units were written here and none can be read back: that is
			// a lost record, never "no record".
			return nil, Merge{}, base.CorruptionErrorf("flash: state record: no unit verifies in any copy, and no vote does")
		} else {
			return nil, Merge{}, nil
		}
	}
	seqs := make([]uint64, 0, len(counts))
	for s := range counts {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(a, b int) bool { return seqs[a] > seqs[b] })
	var lastErr error
	for _, seq := range seqs {
		count := counts[seq]
		var rec []byte
		var m Merge
		complete := true
		for i := 0; i < count; i++ {
			p, ok := units[key{seq, i}]
			if !ok {
				if p, ok = voteUnit(copies, seq, i, count); ok {
					m.UnitsVoted++
				}
			}
			if !ok {
				complete = false
				lastErr = base.CorruptionErrorf("flash: state record %d: unit %d of %d verifies in no copy", seq, i, count)
				break
			}
			rec = append(rec, p...)
		}
		if !complete {
			continue
		}
		// Count what the next save must rewrite.
		for _, c := range copies {
			whole := len(c) == count*UnitSize
			for i := 0; whole && i < count; i++ {
				u, ok := ParseUnit(c[i*UnitSize : (i+1)*UnitSize])
				whole = ok && u.Seq == seq
			}
			if !whole {
				m.DamagedCopies++
			}
		}
		for i := 0; i < count; i++ {
			for _, c := range copies {
				if (i+1)*UnitSize > len(c) {
					m.UnitsMerged++
					break
				}
				if u, ok := ParseUnit(c[i*UnitSize : (i+1)*UnitSize]); !ok || u.Seq != seq {
					m.UnitsMerged++
					break
				}
			}
		}
		m.DamagedCopies += Copies - len(copies)
		return rec, m, nil
	}
	return nil, Merge{}, lastErr
}

// voteUnit rebuilds unit i of record seq by a bit-by-bit majority
// vote over the copies that hold its slot; the result must verify.
// majority is the bit-by-bit majority of slot i over the first three
// copies that hold it (nil when fewer than three do).
func majority(copies [][]byte, i int) []byte {
	var slots [][]byte
	for _, c := range copies {
		if (i+1)*UnitSize <= len(c) {
			slots = append(slots, c[i*UnitSize:(i+1)*UnitSize])
		}
	}
	if len(slots) < 3 {
		return nil
	}
	out := make([]byte, UnitSize)
	for b := range out {
		x, y, z := slots[0][b], slots[1][b], slots[2][b]
		out[b] = (x & y) | (x & z) | (y & z)
	}
	return out
}

// voted says whether a voted slot is a verified unit 0.
func voted(v []byte) bool {
	u, ok := ParseUnit(v)
	return ok && u.Index == 0
}

// written says whether some copy holds a unit's magic at the start of a
// slot: units were saved there (an erased or never-written area holds
// none).
func written(copies [][]byte) bool {
	for _, c := range copies {
		for off := 0; off+UnitSize <= len(c); off += UnitSize {
			if binary.LittleEndian.Uint32(c[off:]) == UnitMagic {
				return true
			}
		}
	}
	return false
}

func voteUnit(copies [][]byte, seq uint64, i, count int) ([]byte, bool) {
	out := majority(copies, i)
	if out == nil {
		return nil, false
	}
	u, ok := ParseUnit(out)
	if !ok || u.Seq != seq || u.Index != i || u.Count != count {
		return nil, false
	}
	return u.Payload, true
}
