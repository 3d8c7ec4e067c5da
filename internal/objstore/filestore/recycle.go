package filestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/flashmend/flashmend/internal/fsys"
)

// Recycling: a store that does not sync (its writes survive a process
// crash, not a power loss) keeps the pack files and blob directories it
// deletes, emptied, in a pool (recycleDir) and takes a new pack file or
// directory from there by a rename instead of creating it. A PUT that
// replaces an object version costs each node two new directories and two
// new pack files and the deletion of as many: on ext4 without a journal
// (this project's test machine) allocating an inode scans past every inode
// freed in the last seconds to minutes, which made inode allocation about a
// tenth of a PUT's CPU (BenchmarkPut$/REP under perf: __ext4_new_inode
// 11.4%, nearly all of it find_inode_bit and recently_deleted). A rename
// allocates and frees nothing.
//
// Invariants: a pooled file is empty (truncated before it is pooled) and
// has no name but its pool name; a pooled directory is empty. Only this
// process's pool is trusted: Open empties the pool directory left by an
// earlier process (it removes names only). With sync the store neither
// pools nor takes from the pool: a power loss may keep a rename's new name
// and not the removal of its old one (fsys.Mem models that), and the old
// name of a file reused for a new pack could then bring back that pack's
// inode under a deleted pack's name, whose load would reset it.

// recycleDir is the pool's directory under the root. Its files are named
// "<n>.tmp", which List and the walks of the store's names skip.
const recycleDir = "recycle.tmp"

// recycleMax bounds the pooled files and, apart, the pooled directories.
const recycleMax = 64

// recycler is a Store's pool of emptied pack files and directories.
type recycler struct {
	mu    sync.Mutex
	files []string
	dirs  []string
	// on: the store pools (set by Open: without sync, on the operating
	// system's file system, where renameNoReplace works); cleared when a
	// rename without replacement turns out not to be supported.
	on bool
}

// clearRecycled empties a pool directory an earlier process left (its
// entries are names of nothing live: see the invariants above).
func (s *Store) clearRecycled() error {
	pool := filepath.Join(s.root, recycleDir)
	ents, err := s.fs.ReadDir(pool)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("filestore: %w", err)
	}
	for _, e := range ents {
		if err := s.fs.Remove(filepath.Join(pool, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("filestore: %w", err)
		}
	}
	return nil
}

func (s *Store) recycling() bool {
	s.recycle.mu.Lock()
	defer s.recycle.mu.Unlock()
	return s.recycle.on
}

// takeRename renames a pooled src to dst unless dst exists; false: not
// renamed (src is dropped from the pool).
func (s *Store) takeRename(src, dst string) bool {
	ok, err := renameNoReplace(src, dst)
	if !ok {
		s.recycle.mu.Lock()
		s.recycle.on = false
		s.recycle.mu.Unlock()
	}
	if !ok || err != nil {
		_ = s.fs.Remove(src) // best effort: Open empties the pool anyway
		return false
	}
	return true
}

// poolName returns a new name in the pool directory (made when missing).
func (s *Store) poolName(suffix string) (string, error) {
	pool := filepath.Join(s.root, recycleDir)
	if err := s.ensureDir(pool); err != nil {
		return "", err
	}
	return filepath.Join(pool, fmt.Sprintf("%d%s.tmp", s.seq.Add(1), suffix)), nil
}

// recycleFile removes the pack file at path, whose open file is f (nil:
// not open), by moving it, emptied, into the pool. It reports false, having
// changed nothing, when the file is not pooled (the caller removes it).
func (s *Store) recycleFile(path string, f fsys.File) bool {
	if !s.recycling() {
		return false
	}
	s.recycle.mu.Lock()
	full := len(s.recycle.files) >= recycleMax
	s.recycle.mu.Unlock()
	if full {
		return false
	}
	dst, err := s.poolName("")
	if err != nil || s.fs.Rename(path, dst) != nil {
		return false
	}
	// The pack's name is gone, as a Remove would have made it; what is
	// left is to empty the file (its pages and blocks are freed here, as
	// the removal of its last name would have freed them).
	if f != nil {
		err = f.Truncate(0)
	} else {
		f, err = s.fs.OpenFile(dst, os.O_RDWR|os.O_TRUNC, 0)
		if err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		_ = s.fs.Remove(dst) // best effort: Open empties the pool anyway
		return true
	}
	s.recycle.mu.Lock()
	s.recycle.files = append(s.recycle.files, dst)
	s.recycle.mu.Unlock()
	s.packs.count(func(c *PackStats) { c.PooledFiles++ })
	return true
}

// takeFile moves a pooled file to path (unless a file is there), where
// the caller then opens it with O_TRUNC as a new file. It reports false
// when it did not (no pooled file, or the rename failed: the pooled file is
// then dropped).
func (s *Store) takeFile(path string) bool {
	if !s.recycling() {
		return false
	}
	s.recycle.mu.Lock()
	n := len(s.recycle.files)
	if n == 0 {
		s.recycle.mu.Unlock()
		return false
	}
	src := s.recycle.files[n-1]
	s.recycle.files = s.recycle.files[:n-1]
	s.recycle.mu.Unlock()
	if !s.takeRename(src, path) {
		return false
	}
	s.packs.count(func(c *PackStats) { c.ReusedFiles++ })
	return true
}

// recycleDirLocked removes the directory dir when it is empty, by moving
// it into the pool; it reports false when it did not pool it (the caller
// removes it as it would have). The caller holds s.mu exclusively, so no
// file is being created in dir meanwhile.
func (s *Store) recycleDirLocked(dir string) bool {
	if !s.recycling() {
		return false
	}
	s.recycle.mu.Lock()
	full := len(s.recycle.dirs) >= recycleMax
	s.recycle.mu.Unlock()
	if full {
		return false
	}
	ents, err := s.fs.ReadDir(dir)
	if err != nil || len(ents) > 0 {
		return false
	}
	dst, err := s.poolName(".d")
	if err != nil || s.fs.Rename(dir, dst) != nil {
		return false
	}
	s.recycle.mu.Lock()
	s.recycle.dirs = append(s.recycle.dirs, dst)
	s.recycle.mu.Unlock()
	s.packs.count(func(c *PackStats) { c.PooledDirs++ })
	return true
}

// takeDir makes the directory dir, whose parent exists, from a pooled
// one. It reports false when it did not.
func (s *Store) takeDir(dir string) bool {
	if !s.recycling() {
		return false
	}
	s.recycle.mu.Lock()
	n := len(s.recycle.dirs)
	if n == 0 {
		s.recycle.mu.Unlock()
		return false
	}
	src := s.recycle.dirs[n-1]
	s.recycle.dirs = s.recycle.dirs[:n-1]
	s.recycle.mu.Unlock()
	// NB: without replacement: a plain rename onto an existing empty
	// directory would replace it, one that a concurrent writer may just
	// have made and be about to create a file in.
	if !s.takeRename(src, dir) {
		return false
	}
	s.packs.count(func(c *PackStats) { c.ReusedDirs++ })
	return true
}
