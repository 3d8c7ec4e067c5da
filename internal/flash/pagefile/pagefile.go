package pagefile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash/stateunit"
	"github.com/flashmend/flashmend/internal/fsys"
)

// Store is an open device directory (the layout is in the package doc).
//
// Concurrency: calls on different pages may run concurrently; the caller
// serializes calls that touch one page and calls to LoadState and
// SaveState.
type Store struct {
	// fs is the file system the directory is on (fsys.OS but in
	// power-loss tests).
	fs       fsys.FS
	dir      string
	slotSize int64
	pages    fsys.File
	lock     *os.File  // nil on a file system other than the os's
	bufs     sync.Pool // *[]byte of slotSize
	stateIO  StateIO   // nil: the file system's
}

// StateIO is the boundary the state copies are read and written through:
// the os (nil), or a fault injector wrapping it (the torture harness's
// CORDS sweep: read errors, write errors and lost writes of the state
// files while the device runs).
type StateIO interface {
	// ReadFile returns the file's content (os.ReadFile).
	ReadFile(path string) ([]byte, error)
	// WriteFileSync overwrites the file in place with b and syncs it.
	WriteFileSync(path string, b []byte) error
}

// OSStateIO is the os's StateIO (what a nil StateIO means).
type OSStateIO struct{}

func (OSStateIO) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }
func (OSStateIO) WriteFileSync(path string, b []byte) error {
	return writeFileSync(fsys.OS{}, path, b)
}

// fsStateIO is a file system's StateIO.
type fsStateIO struct{ fs fsys.FS }

func (f fsStateIO) ReadFile(path string) ([]byte, error) { return fsys.ReadFile(f.fs, path) }
func (f fsStateIO) WriteFileSync(path string, b []byte) error {
	return writeFileSync(f.fs, path, b)
}

// SetStateIO routes the state copies' reads and writes through io (nil:
// the store's file system). Call it before LoadState.
func (s *Store) SetStateIO(io StateIO) { s.stateIO = io }

func (s *Store) state() StateIO {
	if s.stateIO == nil {
		return fsStateIO{s.fs}
	}
	return s.stateIO
}

const (
	pageMagic = 0x47504d46 // "FMPG" little endian
	// HeaderBytes is the length of a slot's header; the page's bytes
	// follow it.
	HeaderBytes = 8
)

// StateName is the file name of state copy i in the directory.
func StateName(i int) string { return fmt.Sprintf("state.%d", i) }

// Open opens (or creates) the device directory dir for pages pages of
// pageBytes bytes each (data and OOB), taking its lock. The page file is
// grown, sparse, to hold every slot.
func Open(dir string, pageBytes int, pages int64) (*Store, error) {
	return OpenFS(fsys.OS{}, dir, pageBytes, pages)
}

// OpenFS is Open on the file system files (fsys.OS: the operating
// system's, with the directory's LOCK taken; an fsys.Mem in power-loss
// tests, where there is no other process to lock out and no LOCK file).
func OpenFS(files fsys.FS, dir string, pageBytes int, pages int64) (*Store, error) {
	if files == nil {
		return nil, base.InvalidArgumentf("pagefile: no file system")
	}
	if err := fsys.MkdirAllDurable(files, dir, 0o755, nil); err != nil {
		return nil, err
	}
	var lock *os.File
	if _, ok := files.(fsys.OS); ok {
		var err error
		lock, err = os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := lockFile(lock); err != nil {
			_ = lock.Close()
			return nil, fmt.Errorf("flash: device %s is in use: %w", dir, err)
		}
	}
	s := &Store{
		fs:       files,
		dir:      dir,
		slotSize: int64(HeaderBytes + pageBytes),
		lock:     lock,
	}
	s.bufs.New = func() any { b := make([]byte, s.slotSize); return &b }
	var err error
	s.pages, err = files.OpenFile(filepath.Join(dir, "pages"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	size := pages * s.slotSize
	fi, err := s.pages.Stat()
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	if fi.Size() < size {
		// Sparse: unwritten slots cost no disk space.
		if err := s.pages.Truncate(size); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *Store) slotCRC(page int64, content []byte) uint32 {
	var idx [8]byte
	binary.LittleEndian.PutUint64(idx[:], uint64(page))
	return base.CRC32CUpdate(base.CRC32C(idx[:]), content)
}

// ReadPage fills buf (the page's bytes) from page's slot. A slot that
// holds no programmed page or does not verify is a corruption error; buf
// holds the slot's content all the same.
func (s *Store) ReadPage(page int64, buf []byte) error {
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	slot := *bp
	if _, err := s.pages.ReadAt(slot, page*s.slotSize); err != nil {
		return err
	}
	// NB: the content is copied out even when it does not verify: the
	// device returns an uncorrectable page's corrupt content.
	copy(buf, slot[HeaderBytes:])
	le := binary.LittleEndian
	if m := le.Uint32(slot); m != pageMagic {
		return base.CorruptionErrorf("flash: page slot %d: no programmed page (magic %08x)", page, m)
	}
	if got, want := s.slotCRC(page, slot[HeaderBytes:]), le.Uint32(slot[4:]); got != want {
		return base.CorruptionErrorf("flash: page slot %d: crc32c %08x, stored %08x", page, got, want)
	}
	return nil
}

// WritePage stores buf (the page's bytes) in page's slot, with its header.
func (s *Store) WritePage(page int64, buf []byte) error {
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	slot := *bp
	le := binary.LittleEndian
	le.PutUint32(slot, pageMagic)
	le.PutUint32(slot[4:], s.slotCRC(page, buf))
	copy(slot[HeaderBytes:], buf)
	_, err := s.pages.WriteAt(slot, page*s.slotSize)
	return err
}

// EraseBlock forgets the pages [first, first+n).
func (s *Store) EraseBlock(first int64, n int) error {
	off, length := first*s.slotSize, int64(n)*s.slotSize
	if f, ok := s.pages.(*os.File); ok && punchHole(f, off, length) == nil {
		return nil
	}
	// No hole punching here: zero the headers, which is what marks a
	// slot erased.
	var zero [HeaderBytes]byte
	for i := int64(0); i < int64(n); i++ {
		if _, err := s.pages.WriteAt(zero[:], off+i*s.slotSize); err != nil {
			return err
		}
	}
	return nil
}

// Programmed reports whether page's slot holds a programmed page (its
// header has the magic; the content is not verified).
func (s *Store) Programmed(page int64) (bool, error) {
	var hdr [4]byte
	if _, err := s.pages.ReadAt(hdr[:], page*s.slotSize); err != nil {
		return false, err
	}
	return binary.LittleEndian.Uint32(hdr[:]) == pageMagic, nil
}

// StateNames lists the state copies' file names.
func (s *Store) StateNames() []string {
	var out []string
	for i := 0; i < stateunit.Copies; i++ {
		out = append(out, StateName(i))
	}
	return out
}

func (s *Store) statePath(i int) string { return filepath.Join(s.dir, StateName(i)) }

// LoadState returns the content of every state copy that exists, as it is
// on disk. A copy that cannot be read (an I/O error: a bad sector under
// it) is returned empty: a damaged copy, which the others make up for and
// the next save rewrites (found by the torture harness's CORDS sweep: an
// EIO read of one of the three copies kept the device from opening).
func (s *Store) LoadState() ([][]byte, error) {
	var copies [][]byte
	for i := 0; i < stateunit.Copies; i++ {
		b, err := s.state().ReadFile(s.statePath(i))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			b = []byte{}
		}
		copies = append(copies, b)
	}
	return copies, nil
}

// SaveState writes the framed record to every copy in turn, each synced
// before the next is touched: a crash tears at most one copy.
func (s *Store) SaveState(framed []byte) error {
	created := false
	for i := 0; i < stateunit.Copies; i++ {
		path := s.statePath(i)
		if _, err := s.fs.Stat(path); errors.Is(err, fs.ErrNotExist) {
			created = true
		}
		if err := s.state().WriteFileSync(path, framed); err != nil {
			return fmt.Errorf("flash: save state copy %s: %w", path, err)
		}
	}
	if created {
		return s.fs.SyncDir(s.dir)
	}
	return nil
}

// writeFileSync overwrites path with b in place (no truncation first, so a
// torn write leaves old units after the new ones) and syncs it.
func writeFileSync(files fsys.FS, path string, b []byte) error {
	f, err := files.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
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

// Sync makes every completed WritePage and EraseBlock durable.
func (s *Store) Sync() error { return s.pages.Sync() }

// Close closes the files and releases the lock.
func (s *Store) Close() error {
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
