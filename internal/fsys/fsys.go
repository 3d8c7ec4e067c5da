package fsys

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/flashmend/flashmend/internal/base"
)

// File is an open file of an FS: what the plain-file store does with one.
// *os.File satisfies it.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	io.Closer
	// Sync makes the file's content and size durable (fsync); not its
	// directory entry (FS.SyncDir of its directory does that).
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
}

// FS is the file system the plain-file store keeps its directory tree on.
// Names are OS paths (filepath separators).
type FS interface {
	// OpenFile is os.OpenFile for the flags O_RDONLY, O_WRONLY, O_RDWR,
	// O_CREATE, O_EXCL and O_TRUNC (others are refused by Mem).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Rename is os.Rename (atomic; it replaces a file at newpath).
	Rename(oldpath, newpath string) error
	// Remove is os.Remove (a file, or an empty directory).
	Remove(name string) error
	// Mkdir is os.Mkdir.
	Mkdir(name string, perm fs.FileMode) error
	// ReadDir is os.ReadDir: the entries sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Stat is os.Stat.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the entries of directory name (files and directories
	// created, renamed or removed in it) durable.
	SyncDir(name string) error
	// Space returns the size of the file system holding path and the bytes
	// an unprivileged writer may still use (statfs).
	Space(path string) (capacity, free base.Bytes, err error)
}

// OS is the operating system's file system.
type OS struct{}

var _ FS = OS{}

// OpenFile implements FS.
func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // NB: not a nil *os.File in a non-nil File
	}
	return f, nil
}

// Rename implements FS.
func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// Mkdir implements FS.
func (OS) Mkdir(name string, perm fs.FileMode) error { return os.Mkdir(name, perm) }

// ReadDir implements FS.
func (OS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// Stat implements FS.
func (OS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// SyncDir implements FS.
func (OS) SyncDir(name string) error { return base.SyncDir(name) }

// Space implements FS with statfs.
func (OS) Space(path string) (capacity, free base.Bytes, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	bsize := int64(st.Bsize) // int64 on linux/amd64, int32 on 32-bit linux, uint32 on darwin
	return base.Bytes(int64(st.Blocks) * bsize), base.Bytes(int64(st.Bavail) * bsize), nil
}

// MkdirAll is os.MkdirAll on fsys.
func MkdirAll(fsys FS, dir string, perm fs.FileMode) error {
	_, err := mkdirAll(fsys, dir, perm)
	return err
}

// mkdirAll creates dir and its missing parents, outermost first, and
// returns the directories it created.
func mkdirAll(fsys FS, dir string, perm fs.FileMode) ([]string, error) {
	exists := func(d string) bool { _, err := fsys.Stat(d); return err == nil }
	missing := base.MissingDirs(filepath.Clean(dir), exists, filepath.Dir)
	var made []string
	for _, d := range missing {
		if err := fsys.Mkdir(d, perm); err != nil {
			if errors.Is(err, fs.ErrExist) {
				if st, serr := fsys.Stat(d); serr == nil && st.IsDir() {
					continue // made by a concurrent caller
				}
			}
			return made, err
		}
		made = append(made, d)
	}
	if len(missing) == 0 {
		if st, err := fsys.Stat(dir); err != nil {
			return nil, err
		} else if !st.IsDir() {
			return nil, &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
	}
	return made, nil
}

// MkdirAllDurable is base.MkdirAllDurable on fsys: the parent of every
// directory it creates is synced, top-down, so that the new directories
// survive a power loss. synced, if not nil, sees each directory synced.
func MkdirAllDurable(fsys FS, dir string, perm fs.FileMode, synced func(dir string)) error {
	made, err := mkdirAll(fsys, dir, perm)
	if err != nil {
		return err
	}
	for _, d := range made {
		parent := filepath.Dir(d)
		if synced != nil {
			synced(parent)
		}
		if err := fsys.SyncDir(parent); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile is os.ReadFile on fsys.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, st.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// WriteFile is os.WriteFile on fsys (in place, not synced).
func WriteFile(fsys FS, name string, data []byte, perm fs.FileMode) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WalkDir is filepath.WalkDir on fsys: fn sees root, then every file and
// directory under it in lexical order; fs.SkipDir and fs.SkipAll work as
// there. An error reading a directory is passed to fn a second time for
// that directory, as filepath.WalkDir does.
func WalkDir(fsys FS, root string, fn fs.WalkDirFunc) error {
	info, err := fsys.Stat(root)
	if err != nil {
		err = fn(root, nil, err)
	} else {
		err = walkDir(fsys, root, fs.FileInfoToDirEntry(info), fn)
	}
	if errors.Is(err, fs.SkipDir) || errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

func walkDir(fsys FS, path string, d fs.DirEntry, fn fs.WalkDirFunc) error {
	if err := fn(path, d, nil); err != nil || !d.IsDir() {
		if errors.Is(err, fs.SkipDir) && d.IsDir() {
			err = nil
		}
		return err
	}
	ents, err := fsys.ReadDir(path)
	if err != nil {
		if err = fn(path, d, err); err != nil {
			if errors.Is(err, fs.SkipDir) && d.IsDir() {
				err = nil
			}
			return err
		}
	}
	for _, e := range ents {
		if err := walkDir(fsys, filepath.Join(path, e.Name()), e, fn); err != nil {
			if errors.Is(err, fs.SkipDir) {
				break
			}
			return err
		}
	}
	return nil
}

// sortedEntries sorts directory entries by name (ReadDir's order).
func sortedEntries(ents []fs.DirEntry) []fs.DirEntry {
	slices.SortFunc(ents, func(a, b fs.DirEntry) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	return ents
}

// pathError is the *fs.PathError os returns.
func pathError(op, path string, err error) error {
	return &fs.PathError{Op: op, Path: path, Err: err}
}
