package flash

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash/stateunit"
)

// fileStore keeps the device in a directory:
//
//	pages    one sparse file, a slot per page at flat page index * slotSize:
//	         header (magic u32, crc32c u32) then data and OOB. The CRC covers
//	         the flat page index and the content, so a page written to the
//	         wrong slot is caught as well as bit rot of the backing file.
//	         Erasing a block punches a hole over its slots (zero headers).
//	state.0  the device state record in three copies, each cut into
//	state.1  512-byte units with their own CRC32C (stateunit.Frame); every save
//	state.2  rewrites the copies one after the other.
//	LOCK     held with flock while the device is open.
type fileStore struct {
	dir       string
	pageBytes int
	slotSize  int64
	pages     *os.File
	lock      *os.File
	bufs      sync.Pool // *[]byte of slotSize
}

const (
	pageMagic     = 0x47504d46 // "FMPG" little endian
	pageHeaderLen = 8
)

var _ store = (*fileStore)(nil)

// OpenFile opens (or creates) a file-backed emulated device in dir. The
// device's state is assembled unit by unit from its three state copies; if
// the last run did not Close the device, the write pointers are rebuilt
// from the page file. A directory whose state files are all gone while its
// page file holds programmed pages is not a new device: its write pointers
// are rebuilt from the page file (erase and read counters, bad-block flags
// and failed dies are lost; OpenInfo.StateRebuilt). Opening with a geometry
// other than the one the device was created with is an invalid argument; a
// device whose state cannot be assembled from any copy does not open (a
// corruption error naming the directory and its state files).
func OpenFile(dir string, g Geometry, opts Options) (*Emulator, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if err := opts.validate(g); err != nil {
		return nil, err
	}
	_, pagesErr := os.Stat(filepath.Join(dir, "pages"))
	st, err := openFileStore(dir, g)
	if err != nil {
		return nil, err
	}
	copies, err := st.loadState()
	if err != nil {
		_ = st.close()
		return nil, err
	}
	saved, merge, err := pickState(g, copies)
	if err != nil {
		_ = st.close()
		return nil, fmt.Errorf("flash: open %s (state files %s): %w", dir, strings.Join(st.stateNames(), ", "), err)
	}
	if saved != nil && errors.Is(pagesErr, fs.ErrNotExist) && saved.anyWritten() {
		_ = st.close()
		return nil, base.CorruptionErrorf("flash: open %s: the page file (pages) is missing, but the device state says pages are programmed", dir)
	}
	rebuild := saved == nil
	if rebuild {
		// No state at all: a fresh device, or one whose state files were
		// lost. Restoring an unclean empty state rebuilds the write
		// pointers from the page file, which tells the two apart.
		saved = emptyState(g)
	}
	e, err := newEmulator(g, opts, st, saved)
	if err != nil {
		_ = st.close()
		return nil, err
	}
	e.openInfo = OpenInfo{
		RejectedStateCopies: merge.DamagedCopies, StateUnitsMerged: merge.UnitsMerged,
		StateUnitsVoted: merge.UnitsVoted, Clean: !rebuild && saved.clean,
	}
	if rebuild {
		e.openInfo.New = !e.anyProgrammed()
		e.openInfo.StateRebuilt = !e.openInfo.New
		e.openInfo.RejectedStateCopies = 0
	}
	// Mark the device open: a crash from here on is detected at the next
	// open by the clean flag being off. This also rewrites every damaged
	// copy.
	if err := e.saveState(false /* clean */); err != nil {
		_ = st.close()
		return nil, err
	}
	return e, nil
}

// emptyState is the state of a device whose every block is erased and
// unworn, marked unclean so that restore reads the write pointers from the
// backend.
func emptyState(g Geometry) *deviceState {
	st := &deviceState{}
	for d := 0; d < g.Dies(); d++ {
		st.failed = append(st.failed, false)
		st.silent = append(st.silent, false)
		st.blocks = append(st.blocks, make([]blockState, g.BlocksPerDie))
	}
	return st
}

// anyProgrammed reports whether any block holds a programmed page.
func (e *Emulator) anyProgrammed() bool {
	for _, d := range e.dies {
		d.mu.Lock()
		for _, b := range d.blocks {
			if b.written > 0 {
				d.mu.Unlock()
				return true
			}
		}
		d.mu.Unlock()
	}
	return false
}

// OpenInfo tells how a file-backed device was opened.
type OpenInfo struct {
	New   bool // no state record existed and no page is programmed: a fresh device
	Clean bool // the previous run closed the device
	// RejectedStateCopies counts state copies that were missing, short,
	// damaged or stale (all rewritten at open).
	RejectedStateCopies int
	// StateUnitsMerged counts state units that did not verify in some copy
	// and were taken from another; StateUnitsVoted those that verified in
	// no copy and were rebuilt by a bit-by-bit majority vote.
	StateUnitsMerged, StateUnitsVoted int
	// StateRebuilt: every state copy was gone but pages are programmed;
	// write pointers were rebuilt from the page file and the wear counters
	// restart at zero.
	StateRebuilt bool
}

func (o OpenInfo) String() string {
	s := fmt.Sprintf("new=%t clean=%t rejected=%d", o.New, o.Clean, o.RejectedStateCopies)
	if o.StateUnitsMerged > 0 || o.StateUnitsVoted > 0 {
		s += fmt.Sprintf(" units-merged=%d units-voted=%d", o.StateUnitsMerged, o.StateUnitsVoted)
	}
	if o.StateRebuilt {
		s += " state-rebuilt"
	}
	return s
}

// OpenInfo reports how the device was opened (zero for memory devices).
func (e *Emulator) OpenInfo() OpenInfo { return e.openInfo }

func openFileStore(dir string, g Geometry) (*fileStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(lock); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("flash: device %s is in use: %w", dir, err)
	}
	s := &fileStore{
		dir:       dir,
		pageBytes: g.PageSize + g.OOBSize,
		slotSize:  int64(pageHeaderLen + g.PageSize + g.OOBSize),
		lock:      lock,
	}
	s.bufs.New = func() any { b := make([]byte, s.slotSize); return &b }
	s.pages, err = os.OpenFile(filepath.Join(dir, "pages"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		_ = s.close()
		return nil, err
	}
	size := int64(g.Dies()) * int64(g.BlocksPerDie) * int64(g.PagesPerBlock) * s.slotSize
	fi, err := s.pages.Stat()
	if err != nil {
		_ = s.close()
		return nil, err
	}
	if fi.Size() < size {
		// Sparse: unwritten slots cost no disk space.
		if err := s.pages.Truncate(size); err != nil {
			_ = s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *fileStore) slotCRC(page int64, content []byte) uint32 {
	var idx [8]byte
	binary.LittleEndian.PutUint64(idx[:], uint64(page))
	return base.CRC32CUpdate(base.CRC32C(idx[:]), content)
}

func (s *fileStore) readPage(page int64, buf []byte) error {
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	slot := *bp
	if _, err := s.pages.ReadAt(slot, page*s.slotSize); err != nil {
		return err
	}
	// NB: the content is copied out even when it does not verify: the
	// device returns an uncorrectable page's corrupt content.
	copy(buf, slot[pageHeaderLen:])
	le := binary.LittleEndian
	if m := le.Uint32(slot); m != pageMagic {
		return base.CorruptionErrorf("flash: page slot %d: no programmed page (magic %08x)", page, m)
	}
	if got, want := s.slotCRC(page, slot[pageHeaderLen:]), le.Uint32(slot[4:]); got != want {
		return base.CorruptionErrorf("flash: page slot %d: crc32c %08x, stored %08x", page, got, want)
	}
	return nil
}

func (s *fileStore) writePage(page int64, buf []byte) error {
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	slot := *bp
	le := binary.LittleEndian
	le.PutUint32(slot, pageMagic)
	le.PutUint32(slot[4:], s.slotCRC(page, buf))
	copy(slot[pageHeaderLen:], buf)
	_, err := s.pages.WriteAt(slot, page*s.slotSize)
	return err
}

func (s *fileStore) eraseBlock(first int64, n int) error {
	off, length := first*s.slotSize, int64(n)*s.slotSize
	if err := punchHole(s.pages, off, length); err == nil {
		return nil
	}
	// No hole punching here: zero the headers, which is what marks a
	// slot erased.
	var zero [pageHeaderLen]byte
	for i := int64(0); i < int64(n); i++ {
		if _, err := s.pages.WriteAt(zero[:], off+i*s.slotSize); err != nil {
			return err
		}
	}
	return nil
}

func (s *fileStore) programmed(page int64) (bool, error) {
	var hdr [4]byte
	if _, err := s.pages.ReadAt(hdr[:], page*s.slotSize); err != nil {
		return false, err
	}
	return binary.LittleEndian.Uint32(hdr[:]) == pageMagic, nil
}

func (s *fileStore) stateNames() []string {
	var out []string
	for i := 0; i < stateunit.Copies; i++ {
		out = append(out, filepath.Base(s.statePath(i)))
	}
	return out
}

func (s *fileStore) statePath(i int) string {
	return filepath.Join(s.dir, fmt.Sprintf("state.%d", i))
}

func (s *fileStore) loadState() ([][]byte, error) {
	var copies [][]byte
	for i := 0; i < stateunit.Copies; i++ {
		b, err := os.ReadFile(s.statePath(i))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("flash: %s: %w", s.statePath(i), err)
		}
		copies = append(copies, b)
	}
	return copies, nil
}

// saveState writes the framed record to every copy in turn, each synced
// before the next is touched: a crash tears at most one copy.
func (s *fileStore) saveState(framed []byte) error {
	created := false
	for i := 0; i < stateunit.Copies; i++ {
		path := s.statePath(i)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			created = true
		}
		if err := writeFileSync(path, framed); err != nil {
			return fmt.Errorf("flash: save state copy %s: %w", path, err)
		}
	}
	if created {
		return syncDir(s.dir)
	}
	return nil
}

// writeFileSync overwrites path with b in place (no truncation first, so a
// torn write leaves old units after the new ones) and syncs it.
func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *fileStore) sync() error { return s.pages.Sync() }

func (s *fileStore) persistent() bool { return true }

func (s *fileStore) close() error {
	var err error
	if s.pages != nil {
		err = s.pages.Close()
	}
	if s.lock != nil {
		if cerr := s.lock.Close(); err == nil { // closing releases the flock
			err = cerr
		}
	}
	return err
}

// corruptStateCopy is for tests: it overwrites one byte of state copy i.
func (s *fileStore) corruptStateCopy(i int, off int64) error {
	f, err := os.OpenFile(s.statePath(i), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil && err != io.EOF {
		return err
	}
	b[0] ^= 0x5A
	_, err = f.WriteAt(b[:], off)
	return err
}
