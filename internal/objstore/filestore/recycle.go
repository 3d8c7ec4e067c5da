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
// deletes in a pool (recycleDir) and makes a new pack file or blob
// directory by renaming a pooled one into place instead of creating it.
// A PUT that replaces an object version costs each node two new
// directories and two new pack files and the deletion of as many: on ext4
// without a journal (this project's test machine) allocating an inode scans
// past every inode freed in the last seconds to minutes, which made inode
// allocation about a tenth of a PUT's CPU (BenchmarkPut$/REP under perf:
// __ext4_new_inode 11.4%, nearly all of it find_inode_bit and
// recently_deleted). A rename allocates and frees nothing. A pooled file
// also keeps its pages (up to recycleMaxBytes for the whole pool): the new
// pack's records are written over them, where a new file's cost a page
// allocation and a delayed-allocation reservation each (ext4_da_write_begin,
// 11.6%) and the deleted file's pages were freed (truncate_inode_pages,
// 5.5%).
//
// Invariants: a pooled file has no name but its pool name and holds either
// nothing or the records of one pack, whose key the pool keeps; it is never
// taken for a pack of that key (whose header checksums, seeded with the
// key, that pack's records would pass), and a pack of any other key reads
// them as bytes that hold no record: a crash that leaves them past the new
// pack's records (stale) costs a torn tail cut off at the next load. The
// stale bytes are cut off when the batch that writes the pack commits, by
// a write outside a batch, and when the file is closed. A pooled directory
// is empty. Only this process's pool is trusted: Open empties the pool
// directory left by an earlier process (it removes names only). With sync
// the store neither pools nor takes from the pool: a power loss may keep a
// rename's new name and not the removal of its old one (fsys.Mem models
// that), and the old name of a file reused for a new pack could then bring
// back that pack's file under a deleted pack's name, whose load would reset
// it.

// recycleDir is the pool's directory under the root. Its files are named
// "<n>.tmp", which List and the walks of the store's names skip.
const recycleDir = "recycle.tmp"

// recycleMax bounds the pooled files and, apart, the pooled directories;
// recycleMaxBytes the bytes the pooled files keep (a file that would go
// past it is emptied before it is pooled: its inode is reused, not its
// pages), so that the pool holds little of the device's room.
const (
	recycleMax      = 64
	recycleMaxBytes = 64 << 20
)

// recycler is a Store's pool of emptied pack files and directories.
type recycler struct {
	mu    sync.Mutex
	files []pooledFile
	dirs  []string
	// bytes is the pooled files' size.
	bytes int64
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

// pooledFile is a file in the pool: its path there, the key of the pack
// whose records it holds ("": none, it is empty) and its size.
type pooledFile struct {
	path, key string
	size      int64
}

// recycleFile removes p's file by moving it into the pool; the caller
// holds p.mu exclusively and forgets p after. It reports false, having
// changed nothing, when the file is not pooled (the caller removes it).
//
// A file is pooled as it is, its pages kept for the pack that reuses it
// (createPackLocked writes over them instead of freeing them and allocating
// new ones), when it is known to hold p's records only: a pack loaded in
// this process and not broken, cut to its size when it ran on (stale). Any
// other is emptied.
func (s *Store) recycleFile(p *pack) bool {
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
	if err != nil || s.fs.Rename(p.path, dst) != nil {
		return false
	}
	// The pack's name is gone, as a Remove would have made it.
	key, size := p.key, int64(0)
	if p.loaded && !p.broken && p.exists && p.f != nil {
		p.trimStaleLocked()
		s.recycle.mu.Lock()
		keep := !p.stale && s.recycle.bytes+p.size <= recycleMaxBytes
		if keep {
			s.recycle.bytes += p.size
			size = p.size
		}
		s.recycle.mu.Unlock()
		if !keep {
			err = p.f.Truncate(0)
			key = ""
		}
	} else {
		key = ""
		var f fsys.File
		f, err = s.fs.OpenFile(dst, os.O_RDWR|os.O_TRUNC, 0)
		if err == nil {
			err = f.Close()
		}
	}
	s.recycle.mu.Lock()
	if err != nil {
		s.recycle.bytes -= size
		s.recycle.mu.Unlock()
		_ = s.fs.Remove(dst) // best effort: Open empties the pool anyway
		return true
	}
	s.recycle.files = append(s.recycle.files, pooledFile{dst, key, size})
	s.recycle.mu.Unlock()
	s.packs.count(func(c *PackStats) { c.PooledFiles++ })
	return true
}

// takeFile moves a pooled file to path (unless a file is there) for the
// new pack key, which the caller then opens as it is and writes over from
// its start. The file taken holds no record of key (a stale record of the
// pack's own key past its end would verify; another pack's do not): one
// that held the records of the same kind of pack (data, sums) when there
// is one, so that its pages are of the size the new pack needs. It reports
// false when it did not (no such pooled file, or the rename failed: the
// pooled file is then dropped).
func (s *Store) takeFile(path, key string) bool {
	if !s.recycling() {
		return false
	}
	s.recycle.mu.Lock()
	pick := -1
	for i := len(s.recycle.files) - 1; i >= 0; i-- {
		k := s.recycle.files[i].key
		if k == key {
			continue
		}
		if pick < 0 {
			pick = i
		}
		if k != "" && k[:min(2, len(k))] == key[:min(2, len(key))] {
			pick = i
			break
		}
	}
	if pick < 0 {
		s.recycle.mu.Unlock()
		return false
	}
	src := s.recycle.files[pick].path
	s.recycle.bytes -= s.recycle.files[pick].size
	s.recycle.files = append(s.recycle.files[:pick], s.recycle.files[pick+1:]...)
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
