package onflash

import (
	"encoding/binary"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

// Page kinds, stored in the first OOB byte of every page this layer programs.
const (
	kindData byte = 0xD1 // a file data page
	KindP2L  byte = 0xE2 // a block's entrusted P2L page (last page of a block)
	KindMeta byte = 0x3A // a metadata journal page
)

// MetaZoneCount is the number of reserved metadata zones: the journal is
// written to MetaCopies (three) of them at once (a copy of every page in
// each), the next checkpoint goes to three others, and one is spare (DIRECT
// policy 2).
const MetaZoneCount = 7

// oobSize is the OOB bytes this layer uses per page:
//
//	[0]     kind
//	[1:4]   zero
//	[4:8]   valid data bytes in the page (padding after them), little endian
//	[8:16]  file ID
//	[16:24] file page index (offset / PageSize)
//	[24:32] write sequence number (unique per programmed page)
//	[32:36] CRC32C over data[0:PageSize] and oob[0:32]
//
// The CRC covers the Owner identity, so a page programmed at the wrong place
// or a stale copy fails verification (Reparo 6.2's per-page Owner; DIRECT's
// "checksums cover a block's identity").
const oobSize = 36

// p2lEntrySize is the bytes per entry in a P2L page: file ID (8), file page
// (4). An entry of file ID 0 names a page that holds no file data.
const p2lEntrySize = 12

// p2lHeaderSize: magic(4) zone(4) die(4) entries(4) crc(4) reserved(12).
const p2lHeaderSize = 32

const p2lMagic = 0x5032_4C21 // "P2L!"

// PageID is the identity stored in a data page's OOB.
type PageID struct {
	Valid  uint32 // valid data bytes (<= PageSize)
	FileID uint64
	Page   uint64 // page index within the file
	Seq    uint64
}

// Layout is the fixed mapping between zones and the flash geometry.
//
// Zone z is the block z/Channels on every die of channel z%Channels, so
// consecutive zone IDs fall on consecutive channels (SDF's round-robin by
// ID). A data zone's page i lives on die dies[i%w] at page i/w of that die's
// block (w = len(dies)): the zone is striped over the channel's dies. The
// last page of every block of a data zone is reserved for P2L entrustment.
type Layout struct {
	Geometry flash.Geometry
}

func (l Layout) Zones() int             { return l.Geometry.Channels * l.Geometry.BlocksPerDie }
func (l Layout) ZoneChannel(z int) int  { return z % l.Geometry.Channels }
func (l Layout) ZoneBlock(z int) int    { return z / l.Geometry.Channels }
func (l Layout) IsMeta(z int) bool      { return z < MetaZoneCount }
func (l Layout) DataPagesPerBlock() int { return l.Geometry.PagesPerBlock - 1 }
func (l Layout) FullDieMask() uint64    { return (uint64(1) << l.Geometry.DiesPerChannel) - 1 }
func (l Layout) P2LPage() int           { return l.Geometry.PagesPerBlock - 1 }
func (l Layout) ZoneBlockAddr(z, die int) flash.BlockAddr {
	return flash.BlockAddr{Channel: l.ZoneChannel(z), Die: die, Block: l.ZoneBlock(z)}
}

// Validate checks that the geometry can hold this Layout.
func (l Layout) Validate() error {
	g := l.Geometry
	if err := g.Validate(); err != nil {
		return err
	}
	switch {
	case g.OOBSize < oobSize:
		return base.InvalidArgumentf("sdf: OOB of %d bytes is smaller than the %d the layer needs", g.OOBSize, oobSize)
	case g.DiesPerChannel > 64:
		return base.InvalidArgumentf("sdf: %d dies per channel (at most 64)", g.DiesPerChannel)
	case g.Dies() < 2:
		return base.InvalidArgumentf("sdf: need at least 2 dies to keep two metadata copies on different dies")
	case g.PagesPerBlock < 4:
		return base.InvalidArgumentf("sdf: %d pages per block (at least 4)", g.PagesPerBlock)
	case p2lHeaderSize+p2lEntrySize*(g.PagesPerBlock-1) > g.PageSize:
		return base.InvalidArgumentf("sdf: a %dB page cannot hold the P2L entries of a %d-page block", g.PageSize, g.PagesPerBlock)
	case l.Zones() < MetaZoneCount+4:
		return base.InvalidArgumentf("sdf: %d zones (need at least %d)", l.Zones(), MetaZoneCount+4)
	case g.PageSize < 512:
		return base.InvalidArgumentf("sdf: page size %d too small", g.PageSize)
	}
	return nil
}

// DataPageAddr maps page i of a data zone striped over dies.
func (l Layout) DataPageAddr(z int, dies []int, i int) flash.PageAddr {
	w := len(dies)
	return flash.PageAddr{Channel: l.ZoneChannel(z), Die: dies[i%w], Block: l.ZoneBlock(z), Page: i / w}
}

// MetaPageAddr maps page i of a metadata zone (no reserved P2L page).
func (l Layout) MetaPageAddr(z int, dies []int, i int) flash.PageAddr {
	return l.DataPageAddr(z, dies, i)
}

// DiesOf lists the dies set in mask, ascending.
func DiesOf(mask uint64) []int {
	var dies []int
	for d := 0; d < 64; d++ {
		if mask&(1<<d) != 0 {
			dies = append(dies, d)
		}
	}
	return dies
}

// MaskOf is the inverse of DiesOf.
func MaskOf(dies []int) uint64 {
	var m uint64
	for _, d := range dies {
		m |= 1 << d
	}
	return m
}

// EncodeOOB fills oob (len >= oobSize) for a data page and returns it.
func EncodeOOB(oob, data []byte, id PageID) {
	clear(oob)
	oob[0] = kindData
	binary.LittleEndian.PutUint32(oob[4:], id.Valid)
	binary.LittleEndian.PutUint64(oob[8:], id.FileID)
	binary.LittleEndian.PutUint64(oob[16:], id.Page)
	binary.LittleEndian.PutUint64(oob[24:], id.Seq)
	c := base.CRC32C(data)
	c = base.CRC32CUpdate(c, oob[:32])
	binary.LittleEndian.PutUint32(oob[32:], c)
}

// DecodeOOB returns the identity stored in a data page's OOB and whether the
// checksum over data and identity holds.
func DecodeOOB(oob, data []byte) (PageID, bool) {
	id := PageID{
		Valid:  binary.LittleEndian.Uint32(oob[4:]),
		FileID: binary.LittleEndian.Uint64(oob[8:]),
		Page:   binary.LittleEndian.Uint64(oob[16:]),
		Seq:    binary.LittleEndian.Uint64(oob[24:]),
	}
	if oob[0] != kindData {
		return id, false
	}
	c := base.CRC32C(data)
	c = base.CRC32CUpdate(c, oob[:32])
	return id, c == binary.LittleEndian.Uint32(oob[32:])
}

// Owner is one P2L entry: which file page a physical page holds.
type Owner struct {
	FileID uint64
	Page   uint32
}

// EncodeP2L builds the P2L page that the block on die `host` stores about the
// block on die `about` of zone z.
func EncodeP2L(data []byte, z, about int, owners []Owner) {
	clear(data)
	binary.LittleEndian.PutUint32(data[0:], p2lMagic)
	binary.LittleEndian.PutUint32(data[4:], uint32(z))
	binary.LittleEndian.PutUint32(data[8:], uint32(about))
	binary.LittleEndian.PutUint32(data[12:], uint32(len(owners)))
	p := data[p2lHeaderSize:]
	for i, o := range owners {
		binary.LittleEndian.PutUint64(p[i*p2lEntrySize:], o.FileID)
		binary.LittleEndian.PutUint32(p[i*p2lEntrySize+8:], o.Page)
	}
	n := p2lHeaderSize + len(owners)*p2lEntrySize
	binary.LittleEndian.PutUint32(data[16:], base.CRC32C(data[p2lHeaderSize:n])^
		base.CRC32C(data[0:16]))
}

// DecodeP2L parses a P2L page written by EncodeP2L for zone z about die
// `about`; ok is false if it does not verify.
func DecodeP2L(data []byte, z, about int) (owners []Owner, ok bool) {
	if binary.LittleEndian.Uint32(data[0:]) != p2lMagic ||
		binary.LittleEndian.Uint32(data[4:]) != uint32(z) ||
		binary.LittleEndian.Uint32(data[8:]) != uint32(about) {
		return nil, false
	}
	cnt := int(binary.LittleEndian.Uint32(data[12:]))
	n := p2lHeaderSize + cnt*p2lEntrySize
	if n > len(data) {
		return nil, false
	}
	if binary.LittleEndian.Uint32(data[16:]) != base.CRC32C(data[p2lHeaderSize:n])^
		base.CRC32C(data[0:16]) {
		return nil, false
	}
	owners = make([]Owner, cnt)
	p := data[p2lHeaderSize:]
	for i := range owners {
		owners[i] = Owner{
			FileID: binary.LittleEndian.Uint64(p[i*p2lEntrySize:]),
			Page:   binary.LittleEndian.Uint32(p[i*p2lEntrySize+8:]),
		}
	}
	return owners, true
}

// KindOOB fills the OOB of a P2L or metadata page: kind and a CRC of data.
func KindOOB(oob []byte, kind byte, data []byte) {
	clear(oob)
	oob[0] = kind
	binary.LittleEndian.PutUint32(oob[32:], base.CRC32C(data))
}
