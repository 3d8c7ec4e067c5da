package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/fsys"
	"github.com/flashmend/flashmend/internal/objstore"
)

// Store is the plain-file objstore.Store: the names of a blob's chunk data
// (d/...) and sums files (k/...) are members of one append-only pack file
// per blob and kind (pack.go: a write is one record appended, a repair a
// new record, never an overwrite); every other name is one real file under
// the directory, which Put writes to a temporary file renamed over the old
// one, and Create (a file that does not exist yet) and WriteFresh (bytes no
// file holds yet) write in place, for content whose checksum is kept and
// checked apart (see objstore.Creator, objstore.FreshWriter).
type Store struct {
	// fs is the file system the directory is on (fsys.OS but in tests).
	fs   fsys.FS
	root string
	sync bool
	seq  atomic.Uint64
	// torn, when set (crash tests), is asked before each in-place write of
	// Create and WriteFresh: with ok it writes only the first keep bytes
	// and fails, as a process that died in the middle of the write leaves
	// the file.
	torn func(name string, n int) (keep int, ok bool)
	// synced, when set (tests), sees every directory synced.
	synced func(dir string)
	// mu is held shared by Put and exclusively by FlipBits (a
	// read-modify-write) and by the removal of emptied directories.
	mu sync.RWMutex

	dirs sync.Map // directories known to exist: saves MkdirAll's stats

	// packs holds the packed names' files (see pack.go).
	packs packs

	// recycle is the pool of emptied pack files and directories (see
	// recycle.go).
	recycle recycler

	usageMu sync.Mutex
	usage   objstore.Usage
	usageAt time.Time
}

// usageRefresh bounds how often Usage walks the directory tree: heartbeats
// ask every second, and a walk of a full store is not free.
const usageRefresh = 10 * time.Second

var _ objstore.Store = (*Store)(nil)

// Open opens (creating) a file store in dir. With syncWrites every
// Put is fsynced (file and directory) before it returns.
func Open(dir string, syncWrites bool) (*Store, error) {
	return OpenFS(fsys.OS{}, dir, syncWrites)
}

// OpenFS is Open on the file system files (fsys.OS: the operating
// system's; an fsys.Mem in power-loss tests).
func OpenFS(files fsys.FS, dir string, syncWrites bool) (*Store, error) {
	if files == nil {
		return nil, base.InvalidArgumentf("filestore: no file system")
	}
	if dir == "" {
		return nil, base.InvalidArgumentf("filestore: empty directory")
	}
	s := &Store{fs: files, root: dir, sync: syncWrites}
	if err := s.ensureDir(dir); err != nil {
		return nil, err
	}
	if err := s.clearRecycled(); err != nil {
		return nil, err
	}
	_, isOS := files.(fsys.OS)
	s.recycle.on = !syncWrites && isOS
	return s, nil
}

// Name implements objstore.Store.
func (s *Store) Name() string { return "file:" + s.root }

func (s *Store) path(name string) (string, error) {
	if err := objstore.ValidName(name); err != nil {
		return "", err
	}
	return filepath.Join(s.root, filepath.FromSlash(name)), nil
}

// Put implements objstore.Store.
func (s *Store) Put(name string, data []byte) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if key, member, ok := packedName(name); ok {
		return s.packPut(name, key, member, data, nil)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.putLocked(p, data)
}

func (s *Store) putLocked(p string, data []byte) error {
	dir := filepath.Dir(p)
	if err := s.ensureDir(dir); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp%d", p, s.seq.Add(1))
	f, err := s.fs.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return base.NoSpaceErrorf("filestore: %w", err)
		}
		return fmt.Errorf("filestore: %w", err)
	}
	_, err = f.Write(data)
	if err == nil && s.sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, p)
	}
	if err != nil {
		_ = s.fs.Remove(tmp) // best effort: List skips temporary files
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return base.NoSpaceErrorf("filestore: put %s: %w", p, err)
		}
		return fmt.Errorf("filestore: put %s: %w", p, err)
	}
	if s.sync {
		if err := s.fs.SyncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("filestore: sync %s: %w", dir, err)
		}
	}
	return nil
}

var (
	_ objstore.Creator     = (*Store)(nil)
	_ objstore.FreshWriter = (*Store)(nil)
)

// errTorn is the error of a write cut short by the torn hook.
var errTorn = errors.New("filestore: write torn (crash injected)")

// ensureDir makes dir exist; with sync, durably: the parent of every
// directory it creates is synced, or a power loss could take a new blob's
// directory with every chunk synced into it (a process crash keeps it; a
// power loss keeps a directory entry only once its parent was synced).
func (s *Store) ensureDir(dir string) error {
	if _, ok := s.dirs.Load(dir); ok {
		return nil
	}
	if _, ok := s.dirs.Load(filepath.Dir(dir)); ok && s.takeDir(dir) {
		s.dirs.Store(dir, true)
		return nil
	}
	var err error
	if s.sync {
		err = fsys.MkdirAllDurable(s.fs, dir, 0o755, s.synced)
	} else {
		err = fsys.MkdirAll(s.fs, dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("filestore: %w", err)
	}
	// Its parents exist too (up to the root): a blob directory's parent
	// then lets the next one come from the pool (takeDir).
	for d := dir; strings.HasPrefix(d, s.root); d = filepath.Dir(d) {
		if _, had := s.dirs.LoadOrStore(d, true); had || d == s.root {
			break
		}
	}
	return nil
}

func (s *Store) syncDir(dir string) error {
	if s.synced != nil {
		s.synced(dir)
	}
	if err := s.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("filestore: sync %s: %w", dir, err)
	}
	return nil
}

// writeAt writes data at off of f, cut short when the torn hook says so.
func (s *Store) writeAt(f fsys.File, name string, data []byte, off int64) error {
	if s.torn != nil {
		if keep, ok := s.torn(name, len(data)); ok {
			// The torn prefix's own outcome does not matter: the caller
			// sees errTorn either way.
			_, _ = f.WriteAt(data[:min(max(keep, 0), len(data))], off)
			return errTorn
		}
	}
	_, err := f.WriteAt(data, off)
	return err
}

func noSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) }

// Create implements objstore.Creator: a new file is written in place (one create,
// one write; with sync, the file and its directory are fsynced); a name
// that exists is replaced out of place as Put does.
func (s *Store) Create(name string, data []byte) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if key, member, ok := packedName(name); ok {
		return s.packPut(name, key, member, data, nil)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir := filepath.Dir(p)
	if err := s.ensureDir(dir); err != nil {
		return err
	}
	f, err := s.fs.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return s.putLocked(p, data)
	}
	if err != nil {
		if noSpace(err) {
			return base.NoSpaceErrorf("filestore: create %s: %w", p, err)
		}
		return fmt.Errorf("filestore: create %s: %w", p, err)
	}
	err = s.writeAt(f, name, data, 0)
	if err == nil && s.sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == errTorn {
		return err // the crash leaves the file as it is
	}
	if err != nil {
		_ = s.fs.Remove(p) // best effort: a torn leftover is replaced by the next Create
		if noSpace(err) {
			return base.NoSpaceErrorf("filestore: create %s: %w", p, err)
		}
		return fmt.Errorf("filestore: create %s: %w", p, err)
	}
	if s.sync {
		return s.syncDir(dir)
	}
	return nil
}

// WriteFresh implements objstore.FreshWriter: the range is written in place (one
// pread of the range to check it holds nothing, one pwrite; with sync the
// file, and the directory when the file is new, are fsynced).
func (s *Store) WriteFresh(name string, off int64, data []byte) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if off < 0 {
		return base.InvalidArgumentf("filestore: write at %d of %s", off, name)
	}
	if key, member, ok := packedName(name); ok {
		return s.packWriteFresh(name, key, member, off, data, nil)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir := filepath.Dir(p)
	if err := s.ensureDir(dir); err != nil {
		return err
	}
	created := false
	f, err := s.fs.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = s.fs.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
		created = err == nil
	}
	if err != nil {
		if noSpace(err) {
			return base.NoSpaceErrorf("filestore: %w", err)
		}
		return fmt.Errorf("filestore: %w", err)
	}
	defer f.Close()
	cur := make([]byte, len(data))
	k, err := f.ReadAt(cur, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("filestore: %w", err)
	}
	if !isZero(cur[:k]) {
		return fmt.Errorf("filestore: %s [%d, +%d) already written: %w", name, off, len(data), objstore.ErrRangeUnsupported)
	}
	err = s.writeAt(f, name, data, off)
	if err == nil && s.sync {
		err = f.Sync()
	}
	if err == errTorn {
		return err
	}
	if err != nil {
		if noSpace(err) {
			return base.NoSpaceErrorf("filestore: write %s: %w", p, err)
		}
		return fmt.Errorf("filestore: write %s: %w", p, err)
	}
	if s.sync && created {
		return s.syncDir(dir)
	}
	return nil
}

// Get implements objstore.Store.
func (s *Store) Get(name string) ([]byte, error) {
	p, err := s.path(name)
	if err != nil {
		return nil, err
	}
	if key, member, ok := packedName(name); ok {
		b, err := s.packGet(name, key, member, 0, -1)
		if isIndexName(name) && errors.Is(err, fs.ErrNotExist) {
			if old, lerr := fsys.ReadFile(s.fs, p); lerr == nil {
				return old, nil // the format before index members
			}
		}
		return b, err
	}
	b, err := fsys.ReadFile(s.fs, p)
	if err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	return b, nil
}

// Delete implements objstore.Store.
func (s *Store) Delete(name string) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if key, member, ok := packedName(name); ok {
		if err := s.packDelete(name, key, member); err != nil || !isIndexName(name) {
			return err
		}
		// And the copy of the format before index members, if any.
	}
	if err := s.fs.Remove(p); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("filestore: %w", err)
	}
	// Drop the directory when this was its last file, so deleted object
	// versions leave nothing behind (a non-empty directory stays).
	if dir := filepath.Dir(p); dir != s.root {
		s.removeEmptyDir(dir)
	}
	return nil
}

// List implements objstore.Store. The copies of local index entries
// (i/...) are members of the sums packs (k/...): the walk of the directory
// that can hold prefix finds those of the format before (plain files), a
// walk of the sums packs' the others.
func (s *Store) List(prefix string) ([]string, error) {
	names, err := s.list(prefix, prefix)
	if err != nil {
		return nil, err
	}
	if rest, ok := strings.CutPrefix(prefix, "i/"); ok {
		more, err := s.list("k/"+rest, prefix)
		if err != nil {
			return nil, err
		}
		names = append(names, more...)
	}
	sort.Strings(names)
	return slices.Compact(names), nil
}

// list returns the names that start with prefix (pack members by their
// store names, memberName) of the files a walk of the directory that can
// hold the names starting with walk finds.
func (s *Store) list(walk, prefix string) ([]string, error) {
	// Walk only the directory that can hold the prefix.
	start := s.root
	if i := strings.LastIndex(walk, "/"); i >= 0 {
		start = filepath.Join(s.root, filepath.FromSlash(walk[:i]))
	}
	var names []string
	err := fsys.WalkDir(s.fs, start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() || strings.Contains(d.Name(), ".tmp") {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if _, _, packed := packedName(name); packed && !isIndexName(name) {
			// A pack file (or a file of the format before packs, which
			// this version does not read).
			if !strings.HasSuffix(name, packSuffix) || !strings.HasPrefix(name, walk[:min(len(walk), strings.LastIndexByte(name, '/')+1)]) {
				return nil
			}
			members, err := s.packMembers(name)
			if err != nil {
				return err
			}
			for _, m := range members {
				if strings.HasPrefix(m, prefix) {
					names = append(names, m)
				}
			}
			return nil
		}
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("filestore: list %q: %w", prefix, err)
	}
	return names, nil
}

// FlipBits implements objstore.Store. The damaged file is rewritten in place on
// purpose: this is the fault, not a repair.
func (s *Store) FlipBits(name string, bitOffset int64, count int) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if key, member, ok := packedName(name); ok {
		err := s.packFlipBits(name, key, member, bitOffset, count)
		if !isIndexName(name) || !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// The copy of the format before index members, if any.
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := fsys.ReadFile(s.fs, p)
	if err != nil {
		return fmt.Errorf("filestore: %w", err)
	}
	if err := objstore.InvertBits(b, bitOffset, count); err != nil {
		return err
	}
	return fsys.WriteFile(s.fs, p, b, 0o644)
}

// Usage implements objstore.Store. The used bytes are recounted at most every
// usageRefresh.
func (s *Store) Usage() (objstore.Usage, error) {
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	if !s.usageAt.IsZero() && time.Since(s.usageAt) < usageRefresh {
		return s.usage, nil
	}
	capacity, _, err := s.fs.Space(s.root)
	if err != nil {
		return objstore.Usage{}, fmt.Errorf("filestore: statfs: %w", err)
	}
	var used int64
	// The walk skips what it cannot read (a file deleted meanwhile) rather
	// than failing: usage is an estimate refreshed every usageRefresh.
	_ = fsys.WalkDir(s.fs, s.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				used += info.Size()
			}
		}
		return nil
	})
	s.usage = objstore.Usage{CapacityBytes: capacity, UsedBytes: base.Bytes(used)}
	s.usageAt = time.Now()
	return s.usage, nil
}

// Close implements objstore.Store: the open pack files are closed (the store may be
// used again: they are opened and loaded anew).
func (s *Store) Close() error {
	s.packs.closeAll()
	return nil
}

func isZero(b []byte) bool { return len(bytes.TrimLeft(b, "\x00")) == 0 }
