package sdf

import (
	"encoding/binary"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

// Page kinds, stored in the first OOB byte of every page this layer programs.
const (
	kindData byte = 0xD1 // a file data page
	kindP2L  byte = 0xE2 // a block's entrusted P2L page (last page of a block)
	kindMeta byte = 0x3A // a metadata journal page
)

// metaZoneCount is the number of reserved metadata zones: the journal is
// written to metaCopies (three) of them at once (a copy of every page in
// each), the next checkpoint goes to three others, and one is spare (DIRECT
// policy 2).
const metaZoneCount = 7

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
// The CRC covers the owner identity, so a page programmed at the wrong place
// or a stale copy fails verification (Reparo 6.2's per-page owner; DIRECT's
// "checksums cover a block's identity").
const oobSize = 36

// p2lEntrySize is the bytes per entry in a P2L page: file ID (8), file page
// (4). An entry of file ID 0 names a page that holds no file data.
const p2lEntrySize = 12

// p2lHeaderSize: magic(4) zone(4) die(4) entries(4) crc(4) reserved(12).
const p2lHeaderSize = 32

const p2lMagic = 0x5032_4C21 // "P2L!"

// pageID is the identity stored in a data page's OOB.
type pageID struct {
	valid  uint32 // valid data bytes (<= PageSize)
	fileID uint64
	page   uint64 // page index within the file
	seq    uint64
}

// layout is the fixed mapping between zones and the flash geometry.
//
// Zone z is the block z/Channels on every die of channel z%Channels, so
// consecutive zone IDs fall on consecutive channels (SDF's round-robin by
// ID). A data zone's page i lives on die dies[i%w] at page i/w of that die's
// block (w = len(dies)): the zone is striped over the channel's dies. The
// last page of every block of a data zone is reserved for P2L entrustment.
type layout struct {
	g flash.Geometry
}

func (l layout) zones() int             { return l.g.Channels * l.g.BlocksPerDie }
func (l layout) zoneChannel(z int) int  { return z % l.g.Channels }
func (l layout) zoneBlock(z int) int    { return z / l.g.Channels }
func (l layout) isMeta(z int) bool      { return z < metaZoneCount }
func (l layout) dataPagesPerBlock() int { return l.g.PagesPerBlock - 1 }
func (l layout) fullDieMask() uint64    { return (uint64(1) << l.g.DiesPerChannel) - 1 }
func (l layout) p2lPage() int           { return l.g.PagesPerBlock - 1 }
func (l layout) zoneBlockAddr(z, die int) flash.BlockAddr {
	return flash.BlockAddr{Channel: l.zoneChannel(z), Die: die, Block: l.zoneBlock(z)}
}

// validate checks that the geometry can hold this layout.
func (l layout) validate() error {
	g := l.g
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
	case l.zones() < metaZoneCount+4:
		return base.InvalidArgumentf("sdf: %d zones (need at least %d)", l.zones(), metaZoneCount+4)
	case g.PageSize < 512:
		return base.InvalidArgumentf("sdf: page size %d too small", g.PageSize)
	}
	return nil
}

// dataPageAddr maps page i of a data zone striped over dies.
func (l layout) dataPageAddr(z int, dies []int, i int) flash.PageAddr {
	w := len(dies)
	return flash.PageAddr{Channel: l.zoneChannel(z), Die: dies[i%w], Block: l.zoneBlock(z), Page: i / w}
}

// metaPageAddr maps page i of a metadata zone (no reserved P2L page).
func (l layout) metaPageAddr(z int, dies []int, i int) flash.PageAddr {
	return l.dataPageAddr(z, dies, i)
}

// diesOf lists the dies set in mask, ascending.
func diesOf(mask uint64) []int {
	var dies []int
	for d := 0; d < 64; d++ {
		if mask&(1<<d) != 0 {
			dies = append(dies, d)
		}
	}
	return dies
}

// maskOf is the inverse of diesOf.
func maskOf(dies []int) uint64 {
	var m uint64
	for _, d := range dies {
		m |= 1 << d
	}
	return m
}

// encodeOOB fills oob (len >= oobSize) for a data page and returns it.
func encodeOOB(oob, data []byte, id pageID) {
	clear(oob)
	oob[0] = kindData
	binary.LittleEndian.PutUint32(oob[4:], id.valid)
	binary.LittleEndian.PutUint64(oob[8:], id.fileID)
	binary.LittleEndian.PutUint64(oob[16:], id.page)
	binary.LittleEndian.PutUint64(oob[24:], id.seq)
	c := base.CRC32C(data)
	c = base.CRC32CUpdate(c, oob[:32])
	binary.LittleEndian.PutUint32(oob[32:], c)
}

// decodeOOB returns the identity stored in a data page's OOB and whether the
// checksum over data and identity holds.
func decodeOOB(oob, data []byte) (pageID, bool) {
	id := pageID{
		valid:  binary.LittleEndian.Uint32(oob[4:]),
		fileID: binary.LittleEndian.Uint64(oob[8:]),
		page:   binary.LittleEndian.Uint64(oob[16:]),
		seq:    binary.LittleEndian.Uint64(oob[24:]),
	}
	if oob[0] != kindData {
		return id, false
	}
	c := base.CRC32C(data)
	c = base.CRC32CUpdate(c, oob[:32])
	return id, c == binary.LittleEndian.Uint32(oob[32:])
}

// owner is one P2L entry: which file page a physical page holds.
type owner struct {
	fileID uint64
	page   uint32
}

// encodeP2L builds the P2L page that the block on die `host` stores about the
// block on die `about` of zone z.
func encodeP2L(data []byte, z, about int, owners []owner) {
	clear(data)
	binary.LittleEndian.PutUint32(data[0:], p2lMagic)
	binary.LittleEndian.PutUint32(data[4:], uint32(z))
	binary.LittleEndian.PutUint32(data[8:], uint32(about))
	binary.LittleEndian.PutUint32(data[12:], uint32(len(owners)))
	p := data[p2lHeaderSize:]
	for i, o := range owners {
		binary.LittleEndian.PutUint64(p[i*p2lEntrySize:], o.fileID)
		binary.LittleEndian.PutUint32(p[i*p2lEntrySize+8:], o.page)
	}
	n := p2lHeaderSize + len(owners)*p2lEntrySize
	binary.LittleEndian.PutUint32(data[16:], base.CRC32C(data[p2lHeaderSize:n])^
		base.CRC32C(data[0:16]))
}

// decodeP2L parses a P2L page written by encodeP2L for zone z about die
// `about`; ok is false if it does not verify.
func decodeP2L(data []byte, z, about int) (owners []owner, ok bool) {
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
	owners = make([]owner, cnt)
	p := data[p2lHeaderSize:]
	for i := range owners {
		owners[i] = owner{
			fileID: binary.LittleEndian.Uint64(p[i*p2lEntrySize:]),
			page:   binary.LittleEndian.Uint32(p[i*p2lEntrySize+8:]),
		}
	}
	return owners, true
}

// p2lOOB fills the OOB of a P2L or metadata page: kind and a CRC of data.
func kindOOB(oob []byte, kind byte, data []byte) {
	clear(oob)
	oob[0] = kind
	binary.LittleEndian.PutUint32(oob[32:], base.CRC32C(data))
}
