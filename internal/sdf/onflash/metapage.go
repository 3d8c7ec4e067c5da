package onflash

import (
	"encoding/binary"

	"github.com/flashmend/flashmend/internal/base"
)

// Metadata page Layout (data area; the OOB holds KindMeta and a CRC of data,
// informational only): the page is cut into MetaUnitSize-byte units, each
// verified on its own, so that a flip costs one unit of one copy and the
// copies of a page are merged unit by unit (the journal's twin of the chunk
// sector merge). Unit k of a page:
//
//	[0:4]   magic
//	[4:12]  epoch: the checkpoint generation the page belongs to
//	[12:16] seq: the page's index in the epoch's record stream (filler: ^0)
//	[16]    k
//	[17]    units: how many units the page uses (1..PageSize/MetaUnitSize)
//	[18:20] payload bytes in this unit
//	[20:508] payload: the unit's slice of the page's slice of the stream
//	[508:512] CRC32C of [0:508]
//
// Units past `units` are zero. A unit names its page (epoch, seq) and its
// place in it, so a stale or misplaced unit never verifies as another's.
const (
	MetaMagic       = 0x464D_4A32 // "FMJ2"
	MetaMagicV1     = 0x464D_4A31 // "FMJ1": the format before units
	MetaUnitSize    = 512
	MetaUnitHeader  = 20
	MetaUnitPayload = MetaUnitSize - MetaUnitHeader - 4
	FillerSeq       = ^uint32(0)
)

// MetaCopies is how many copies of every metadata page are programmed, each
// in its own metadata zone (on different channels where the device has
// them): DIRECT policy 2's duplicated metadata, with a third copy so that a
// unit damaged in two copies is still read from the third, and one damaged
// in all three is voted bit by bit.
const MetaCopies = 3

// MetaUnitsPerPage is the number of units a metadata page holds.
func MetaUnitsPerPage(pageSize int) int { return min(pageSize/MetaUnitSize, 255) }

// FillMetaPage encodes payload (at most payloadPerPage bytes) as the units
// of metadata page seq of epoch.
func FillMetaPage(data []byte, epoch uint64, seq uint32, payload []byte) {
	clear(data)
	units := max(1, (len(payload)+MetaUnitPayload-1)/MetaUnitPayload)
	le := binary.LittleEndian
	for k := 0; k < units; k++ {
		u := data[k*MetaUnitSize : (k+1)*MetaUnitSize]
		part := payload[min(len(payload), k*MetaUnitPayload):min(len(payload), (k+1)*MetaUnitPayload)]
		le.PutUint32(u[0:], MetaMagic)
		le.PutUint64(u[4:], epoch)
		le.PutUint32(u[12:], seq)
		u[16] = byte(k)
		u[17] = byte(units)
		le.PutUint16(u[18:], uint16(len(part)))
		copy(u[MetaUnitHeader:], part)
		le.PutUint32(u[MetaUnitSize-4:], base.CRC32C(u[:MetaUnitSize-4]))
	}
}

// MetaUnit is a metadata page unit that verifies.
type MetaUnit struct {
	Epoch   uint64
	Seq     uint32
	Index   int
	Units   int
	Payload []byte
}

// ParseMetaUnit verifies one unit (MetaUnitSize bytes).
func ParseMetaUnit(u []byte) (MetaUnit, bool) {
	le := binary.LittleEndian
	if le.Uint32(u[0:]) != MetaMagic || le.Uint32(u[MetaUnitSize-4:]) != base.CRC32C(u[:MetaUnitSize-4]) {
		return MetaUnit{}, false
	}
	mu := MetaUnit{Epoch: le.Uint64(u[4:]), Seq: le.Uint32(u[12:]), Index: int(u[16]), Units: int(u[17])}
	n := int(le.Uint16(u[18:]))
	if n > MetaUnitPayload || mu.Index >= mu.Units {
		return MetaUnit{}, false
	}
	mu.Payload = u[MetaUnitHeader : MetaUnitHeader+n]
	return mu, true
}

// ParseMetaPage verifies a whole metadata page copy (every unit it uses).
func ParseMetaPage(data []byte) (epoch uint64, seq uint32, payload []byte, ok bool) {
	first, ok := ParseMetaUnit(data[:MetaUnitSize])
	if !ok || first.Index != 0 || first.Units > MetaUnitsPerPage(len(data)) {
		return 0, 0, nil, false
	}
	for k := 0; k < first.Units; k++ {
		u, ok := ParseMetaUnit(data[k*MetaUnitSize : (k+1)*MetaUnitSize])
		if !ok || u.Index != k || u.Epoch != first.Epoch || u.Seq != first.Seq || u.Units != first.Units {
			return 0, 0, nil, false
		}
		payload = append(payload, u.Payload...)
	}
	return first.Epoch, first.Seq, payload, true
}

// VoteMetaUnit rebuilds unit k of page (epoch, seq) by a bit-by-bit
// majority vote over three of the candidate copies of the page (every
// triple of the first maxVoteCandidates is tried); only a result that
// verifies as that very unit is used.
func VoteMetaUnit(raws [][]byte, epoch uint64, seq uint32, k, units int) ([]byte, bool) {
	const maxVoteCandidates = 6
	raws = raws[:min(len(raws), maxVoteCandidates)]
	out := make([]byte, MetaUnitSize)
	for x := 0; x < len(raws); x++ {
		for y := x + 1; y < len(raws); y++ {
			for z := y + 1; z < len(raws); z++ {
				a := raws[x][k*MetaUnitSize : (k+1)*MetaUnitSize]
				b := raws[y][k*MetaUnitSize : (k+1)*MetaUnitSize]
				c := raws[z][k*MetaUnitSize : (k+1)*MetaUnitSize]
				for i := range out {
					out[i] = (a[i] & b[i]) | (a[i] & c[i]) | (b[i] & c[i])
				}
				u, ok := ParseMetaUnit(out)
				if ok && u.Epoch == epoch && u.Seq == seq && u.Index == k && u.Units == units {
					return append([]byte(nil), u.Payload...), true
				}
			}
		}
	}
	return nil, false
}

// CheckpointComplete reports whether stream holds a complete checkpoint
// (its RecCheckpointDone record).
func CheckpointComplete(stream []byte) bool {
	for {
		typ, _, rest, ok := NextRecord(stream)
		if !ok {
			return false
		}
		if typ == RecCheckpointDone {
			return true
		}
		stream = rest
	}
}
