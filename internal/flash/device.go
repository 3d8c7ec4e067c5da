package flash

import (
	"errors"
	"fmt"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// Geometry is the shape of a NAND device: Channels x DiesPerChannel dies, each
// with BlocksPerDie erase blocks of PagesPerBlock pages. Every page holds
// PageSize data bytes and OOBSize spare (out-of-band) bytes.
type Geometry struct {
	Channels       int
	DiesPerChannel int
	BlocksPerDie   int
	PagesPerBlock  int
	PageSize       int // bytes of data per page
	OOBSize        int // bytes of spare area per page
}

// Validate reports whether every dimension is positive and within the limits
// below, so that every byte offset of the device fits an int64.
func (g Geometry) Validate() error {
	if g.Channels <= 0 || g.DiesPerChannel <= 0 || g.BlocksPerDie <= 0 ||
		g.PagesPerBlock <= 0 || g.PageSize <= 0 || g.OOBSize < 0 {
		return base.InvalidArgumentf("flash: bad geometry %s", g)
	}
	if g.PageSize%512 != 0 {
		return base.InvalidArgumentf("flash: page size %d is not a multiple of 512", g.PageSize)
	}
	if g.Channels > maxChannels || g.DiesPerChannel > maxDiesPerChannel || g.BlocksPerDie > maxBlocksPerDie ||
		g.PagesPerBlock > maxPagesPerBlock || g.PageSize > maxPageSize || g.OOBSize > g.PageSize {
		return base.InvalidArgumentf("flash: geometry %s exceeds the limits (%d channels, %d dies per channel, "+
			"%d blocks per die, %d pages per block, %d-byte pages, OOB at most the page size)", g,
			maxChannels, maxDiesPerChannel, maxBlocksPerDie, maxPagesPerBlock, maxPageSize)
	}
	if pages := int64(g.Dies()) * int64(g.BlocksPerDie) * int64(g.PagesPerBlock); pages > maxPages {
		return base.InvalidArgumentf("flash: geometry %s has %d pages, more than %d", g, pages, int64(maxPages))
	}
	return nil
}

// Geometry limits: generous for real devices (a 128 TB drive has well under
// 2^36 pages), and small enough that every byte offset of the device,
// spare areas and backend headers included, fits an int64: at most 2^36
// pages of at most 2^21 bytes. The per-dimension limits keep the product
// itself from overflowing before it is compared.
const (
	maxChannels       = 1 << 10
	maxDiesPerChannel = 1 << 8
	maxBlocksPerDie   = 1 << 20
	maxPagesPerBlock  = 1 << 12
	maxPageSize       = 1 << 20
	maxPages          = 1 << 36
)

// Dies is the number of dies in the device.
func (g Geometry) Dies() int { return g.Channels * g.DiesPerChannel }

// BlockSize is the data bytes in one erase block.
func (g Geometry) BlockSize() base.Bytes {
	return base.Bytes(g.PagesPerBlock) * base.Bytes(g.PageSize)
}

// RawCapacity is the data bytes of the whole device (spare areas excluded).
func (g Geometry) RawCapacity() base.Bytes {
	return base.Bytes(g.Dies()) * base.Bytes(g.BlocksPerDie) * g.BlockSize()
}

func (g Geometry) String() string {
	return fmt.Sprintf("%dch x %ddie x %dblk x %dpg x (%d+%d)B",
		g.Channels, g.DiesPerChannel, g.BlocksPerDie, g.PagesPerBlock, g.PageSize, g.OOBSize)
}

// DieAddr names one die: Die is the die's index within its channel.
type DieAddr struct {
	Channel, Die int
}

func (a DieAddr) String() string { return fmt.Sprintf("ch%d/d%d", a.Channel, a.Die) }

// Index is the die's flat index, channel-major: Channel*DiesPerChannel + Die.
func (a DieAddr) Index(g Geometry) int { return a.Channel*g.DiesPerChannel + a.Die }

// BlockAddr names one erase block.
type BlockAddr struct {
	Channel, Die, Block int
}

func (a BlockAddr) String() string { return fmt.Sprintf("ch%d/d%d/b%d", a.Channel, a.Die, a.Block) }

// DieAddr is the die holding the block.
func (a BlockAddr) DieAddr() DieAddr { return DieAddr{a.Channel, a.Die} }

// PageAddr names one page.
type PageAddr struct {
	Channel, Die, Block, Page int
}

func (a PageAddr) String() string {
	return fmt.Sprintf("ch%d/d%d/b%d/p%d", a.Channel, a.Die, a.Block, a.Page)
}

// Flat is the page's index in a file-backed device's page file
// (internal/flash/pagefile): channel-major, then die, block, page.
func (a PageAddr) Flat(g Geometry) int64 {
	return ((int64(a.Channel*g.DiesPerChannel+a.Die)*int64(g.BlocksPerDie))+int64(a.Block))*int64(g.PagesPerBlock) + int64(a.Page)
}

// PageOfFlat is the page whose flat index is i (the inverse of Flat); ok
// is false when i is outside the device.
func (g Geometry) PageOfFlat(i int64) (a PageAddr, ok bool) {
	if i < 0 || i >= int64(g.Dies())*int64(g.BlocksPerDie)*int64(g.PagesPerBlock) {
		return PageAddr{}, false
	}
	a.Page = int(i % int64(g.PagesPerBlock))
	i /= int64(g.PagesPerBlock)
	a.Block = int(i % int64(g.BlocksPerDie))
	i /= int64(g.BlocksPerDie)
	a.Die = int(i % int64(g.DiesPerChannel))
	a.Channel = int(i / int64(g.DiesPerChannel))
	return a, true
}

// BlockAddr is the block holding the page.
func (a PageAddr) BlockAddr() BlockAddr { return BlockAddr{a.Channel, a.Die, a.Block} }

// DieAddr is the die holding the page.
func (a PageAddr) DieAddr() DieAddr { return DieAddr{a.Channel, a.Die} }

// Contains reports whether the address lies inside the geometry.
func (g Geometry) Contains(a PageAddr) bool {
	return a.Channel >= 0 && a.Channel < g.Channels &&
		a.Die >= 0 && a.Die < g.DiesPerChannel &&
		a.Block >= 0 && a.Block < g.BlocksPerDie &&
		a.Page >= 0 && a.Page < g.PagesPerBlock
}

// ReadStatus is what the device's ECC engine reports with every page read.
type ReadStatus struct {
	// CorrectedBits is the number of raw bit errors ECC found and corrected in
	// the page (summed over its codewords). The returned data is clean.
	CorrectedBits int
	// Uncorrectable is set when at least one codeword had more raw errors than
	// ECC corrects. Read then also returns ErrUncorrectable.
	Uncorrectable bool
}

// Errors returned by Device operations (wrapped in *OpError). ErrUncorrectable
// and ErrDieFailed on reads are corruptions in the sense of base.ErrCorruption:
// the data of the page cannot be trusted.
var (
	ErrOutOfRange    = fmt.Errorf("flash: address out of range: %w", base.ErrInvalidArgument)
	ErrBadSize       = fmt.Errorf("flash: buffer size does not match geometry: %w", base.ErrInvalidArgument)
	ErrNotErased     = errors.New("flash: page already programmed (erase the block first)")
	ErrProgramOrder  = errors.New("flash: pages of a block must be programmed in order")
	ErrBadBlock      = errors.New("flash: bad block")
	ErrDieFailed     = fmt.Errorf("flash: die failed: %w", base.ErrCorruption)
	ErrUncorrectable = fmt.Errorf("flash: uncorrectable page: %w", base.ErrCorruption)
	ErrClosed        = errors.New("flash: device closed")

	// ErrProgramFailed and ErrEraseFailed report a program or erase that
	// failed in the cells (a grown bad block). The device retires the block,
	// so both wrap ErrBadBlock; a failed program leaves the page unwritten.
	ErrProgramFailed = fmt.Errorf("flash: program failed, block retired: %w", ErrBadBlock)
	ErrEraseFailed   = fmt.Errorf("flash: erase failed, block retired: %w", ErrBadBlock)
)

// OpError describes a failed device operation and where it happened.
type OpError struct {
	Op   string   // "read", "program" or "erase"
	Addr PageAddr // for erase, Page is 0
	Err  error
}

func (e *OpError) Error() string {
	if e.Op == "erase" {
		return e.Op + " " + e.Addr.BlockAddr().String() + ": " + e.Err.Error()
	}
	return e.Op + " " + e.Addr.String() + ": " + e.Err.Error()
}
func (e *OpError) Unwrap() error { return e.Err }

// Device is a raw NAND device as a host-managed (SDF / open-channel) SSD
// exposes it: no FTL, no over-provisioning, no parity. The host programs whole
// pages in order within a block, reads pages, and erases blocks explicitly.
//
// Implementations are safe for concurrent use. Operations on different dies
// may proceed in parallel; with real timing each operation takes the time the
// timing model gives it.
type Device interface {
	// Geometry returns the device's fixed shape.
	Geometry() Geometry

	// Program writes one page: len(data) == PageSize and len(oob) <= OOBSize
	// (a shorter oob is zero-padded). The page must be erased and must be the
	// block's next unwritten page.
	Program(addr PageAddr, data, oob []byte) error

	// Read reads one page into data (len PageSize) and oob (len OOBSize, or
	// nil to skip). Reading an erased page returns 0xFF bytes. On an
	// uncorrectable page the status says so, the error wraps ErrUncorrectable,
	// and data holds the corrupt content unless the device was configured not
	// to return it.
	Read(addr PageAddr, data, oob []byte) (ReadStatus, error)

	// Erase erases a block, making all its pages programmable again.
	Erase(addr BlockAddr) error

	// Block returns the state of one block.
	Block(addr BlockAddr) (BlockInfo, error)

	// Close releases the device; persistent backends flush their state.
	Close() error
}

// BlockInfo is the host-visible state of one erase block.
type BlockInfo struct {
	EraseCount  int  // program/erase cycles so far
	WrittenPage int  // number of pages programmed since the last erase
	Bad         bool // retired: every operation fails with ErrBadBlock

	// Reads is the number of page reads of the block over its life.
	Reads int64
	// ReadsSinceErase is the number of reads of programmed pages since the
	// last erase (read disturb grows with it).
	ReadsSinceErase int64
	// ProgramTime is when the first page after the last erase was
	// programmed (retention is measured from it); zero while erased.
	ProgramTime time.Time
}

func (b BlockInfo) String() string {
	s := fmt.Sprintf("pe=%d written=%d reads=%d sinceErase=%d", b.EraseCount, b.WrittenPage, b.Reads, b.ReadsSinceErase)
	if b.Bad {
		s += " bad"
	}
	return s
}

// SmallGeometry is a test device: 2 channels x 2 dies x 16 blocks x 16 pages
// of 4 KiB + 128 B (4 MiB).
func SmallGeometry() Geometry {
	return Geometry{Channels: 2, DiesPerChannel: 2, BlocksPerDie: 16, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
}

// SDFGeometry is the Baidu SDF of SDF 002 Table 3 with blocksPerDie blocks per
// die: 44 channels, 2 flash chips per channel, 2 MB blocks of 8 KB pages
// (256 pages). The real device has 16 GB per channel, i.e. 4096 blocks per
// die; emulations scale that down. The 25 nm MLC page carries 448 spare bytes
// (8640-byte pages are the common 25 nm MLC layout). The 2 planes per chip
// are not modelled as such: their parallelism is folded into the timing.
func SDFGeometry(blocksPerDie int) Geometry {
	return Geometry{Channels: 44, DiesPerChannel: 2, BlocksPerDie: blocksPerDie, PagesPerBlock: 256,
		PageSize: 8192, OOBSize: 448}
}
