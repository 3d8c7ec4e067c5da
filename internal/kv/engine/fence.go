package engine

import (
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fenceFS is the file system an engine's Pebble runs on: the host's, until
// the engine fails (failState). From then on it refuses every change:
// creating, writing, syncing, renaming, linking and removing files. Pebble
// treats a fatal error as the end of the process, and its files are
// consistent at any point where the process could die (a crash), but not
// after it goes on: a MANIFEST whose marker could not be moved is still
// the one Pebble appends to, and a compaction recorded only there would
// delete tables the marked MANIFEST still lists (seen: a reopen found
// sstables "unknown to the objstorage provider"). Fenced, the files stay
// as a crash at the failure would have left them; reads still work.
//
// The fence is armed once pebble.Open returned: Open waits for a flush
// that Pebble retries until it succeeds, so a fence up during Open would
// hang it. An engine that failed during Open is closed and Open returns
// the error; its host never reopens those files (internal/kv/kvserver sets
// a replica that cannot open aside and starts a fresh one).
type fenceFS struct {
	vfs.FS
	f *failState
}

func (fs *fenceFS) refuse(op, name string) error {
	if !fs.f.armed.Load() {
		return nil
	}
	if err := fs.f.failed(); err != nil {
		return fmt.Errorf("%s %s: refused after the engine failed: %w", op, name, err)
	}
	return nil
}

func (fs *fenceFS) wrap(name string) func(vfs.File, error) (vfs.File, error) {
	return func(file vfs.File, err error) (vfs.File, error) { return fs.wrapFile(name, file, err) }
}

func (fs *fenceFS) wrapFile(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &fenceFile{File: file, fs: fs, name: name}, nil
}

func (fs *fenceFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.refuse("create", name); err != nil {
		return nil, err
	}
	return fs.wrap(name)(fs.FS.Create(name, c))
}

func (fs *fenceFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := fs.refuse("open for writing", name); err != nil {
		return nil, err
	}
	return fs.wrap(name)(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs *fenceFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.refuse("reuse", oldname); err != nil {
		return nil, err
	}
	return fs.wrap(newname)(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs *fenceFS) Link(oldname, newname string) error {
	if err := fs.refuse("link", newname); err != nil {
		return err
	}
	return fs.FS.Link(oldname, newname)
}

func (fs *fenceFS) Remove(name string) error {
	if err := fs.refuse("remove", name); err != nil {
		return err
	}
	return fs.FS.Remove(name)
}

func (fs *fenceFS) RemoveAll(name string) error {
	if err := fs.refuse("remove", name); err != nil {
		return err
	}
	return fs.FS.RemoveAll(name)
}

func (fs *fenceFS) Rename(oldname, newname string) error {
	if err := fs.refuse("rename", oldname); err != nil {
		return err
	}
	return fs.FS.Rename(oldname, newname)
}

func (fs *fenceFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := fs.refuse("mkdir", dir); err != nil {
		return err
	}
	return fs.FS.MkdirAll(dir, perm)
}

func (fs *fenceFS) Lock(name string) (io.Closer, error) {
	if err := fs.refuse("lock", name); err != nil {
		return nil, err
	}
	return fs.FS.Lock(name)
}

// Unwrap returns the host's file system.
func (fs *fenceFS) Unwrap() vfs.FS { return fs.FS }

// fenceFile refuses writes and syncs once the engine failed.
type fenceFile struct {
	vfs.File
	fs   *fenceFS
	name string
}

func (f *fenceFile) Write(p []byte) (int, error) {
	if err := f.fs.refuse("write", f.name); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *fenceFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.refuse("write", f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *fenceFile) Preallocate(off, n int64) error {
	if err := f.fs.refuse("preallocate", f.name); err != nil {
		return err
	}
	return f.File.Preallocate(off, n)
}

func (f *fenceFile) Sync() error {
	if err := f.fs.refuse("sync", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *fenceFile) SyncData() error {
	if err := f.fs.refuse("sync", f.name); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f *fenceFile) SyncTo(n int64) (bool, error) {
	if err := f.fs.refuse("sync", f.name); err != nil {
		return false, err
	}
	return f.File.SyncTo(n)
}
