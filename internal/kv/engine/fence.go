package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fenceFS is the file system an engine's Pebble runs on: the host's, until
// the engine fails (failState). From then on nothing Pebble does reaches
// the files: creating, writing, syncing, renaming, linking and removing
// files succeed without touching the device (writes go nowhere), while
// reads of what is there still work.
//
// Why succeed rather than fail: Pebble treats a fatal error as the end of
// the process, and its files are consistent at any point where the process
// could die (a crash), but not after it goes on: a MANIFEST whose marker
// could not be moved is still the one Pebble appends to, and a compaction
// recorded only there would delete tables the marked MANIFEST still lists.
// Refusing the changes instead keeps the files right but leaves Pebble
// retrying its flush without end (a flush that fails is rescheduled at
// once), which hangs pebble.Open (it waits for its first flush) and any
// write stalled behind a full memtable, so the engine could never be
// closed. Swallowed, every later flush "succeeds": Pebble goes on in
// memory, nothing waits forever, and the files stay exactly as a crash at
// the failure would have left them. The engine is never trusted after the
// failure (its replica serves nothing from it and is replaced); the files
// can be reopened, as after a crash.
//
// While pebble.Open runs (opening), a change that fails (a create, write,
// sync, rename or link) fails the engine the same way instead of returning
// its error: Pebble's Open can have started a compaction (after a flush of
// the replayed WAL) when a later step fails, and its error path then
// closes the file cache under that compaction, which divides by zero in a
// goroutine nothing can recover (torture KV CORDS "pebble WAL / write
// error", 1 run in 10 under load). Swallowed, the open goes on to the end,
// and the engine closes the DB it returned, which waits for its work.
type fenceFS struct {
	vfs.FS
	f       *failState
	opening atomic.Bool
}

func (fs *fenceFS) fenced() bool { return fs.f.failed() != nil }

// failsAtOpen says whether err, from op on name, fails the engine because
// Pebble is opening (then it is swallowed). A missing or existing file is
// an answer Pebble expects, not a failure.
func (fs *fenceFS) failsAtOpen(op, name string, err error) bool {
	if err == nil || !fs.opening.Load() || errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrExist) {
		return false
	}
	fs.f.set(fmt.Errorf("%s %s while opening: %w", op, name, err))
	return true
}

func (fs *fenceFS) wrap(op, name string) func(vfs.File, error) (vfs.File, error) {
	return func(file vfs.File, err error) (vfs.File, error) {
		if fs.failsAtOpen(op, name, err) {
			return &voidFile{}, nil
		}
		if err != nil {
			return nil, err
		}
		return &fenceFile{File: file, fs: fs, name: name}, nil
	}
}

func (fs *fenceFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.fenced() {
		return &voidFile{}, nil
	}
	return fs.wrap("create", name)(fs.FS.Create(name, c))
}

func (fs *fenceFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if fs.fenced() {
		return &voidFile{}, nil
	}
	return fs.wrap("open", name)(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs *fenceFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.fenced() {
		return &voidFile{}, nil
	}
	return fs.wrap("reuse", newname)(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs *fenceFS) Link(oldname, newname string) error {
	if fs.fenced() {
		return nil
	}
	if err := fs.FS.Link(oldname, newname); !fs.failsAtOpen("link", newname, err) {
		return err
	}
	return nil
}

func (fs *fenceFS) Remove(name string) error {
	if fs.fenced() {
		return nil
	}
	return fs.FS.Remove(name)
}

func (fs *fenceFS) RemoveAll(name string) error {
	if fs.fenced() {
		return nil
	}
	return fs.FS.RemoveAll(name)
}

func (fs *fenceFS) Rename(oldname, newname string) error {
	if fs.fenced() {
		return nil
	}
	if err := fs.FS.Rename(oldname, newname); !fs.failsAtOpen("rename", newname, err) {
		return err
	}
	return nil
}

func (fs *fenceFS) MkdirAll(dir string, perm os.FileMode) error {
	if fs.fenced() {
		return nil
	}
	return fs.FS.MkdirAll(dir, perm)
}

// OpenDir opens a directory whose Sync failing fails the engine (and is
// swallowed). Pebble cannot go on after a directory sync it needs fails
// (atomicfs.Marker.Move panics on one: the marker's move may or may not be
// durable), and the panic came from pebble.Open or a background flush,
// where nothing above can recover it: a replica replaced on a device with
// no space left (torture nemesis-sdf, seed 1795570229166824762) took its
// whole node down this way. As with a fatal error, the engine fails at
// that instant and its files stay as a crash there would leave them.
func (fs *fenceFS) OpenDir(name string) (vfs.File, error) {
	if fs.fenced() {
		return &voidFile{}, nil
	}
	d, err := fs.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &fenceDir{File: d, fs: fs, name: name}, nil
}

// fenceDir is a directory of a fenceFS.
type fenceDir struct {
	vfs.File
	fs   *fenceFS
	name string
}

func (d *fenceDir) Sync() error {
	if d.fs.fenced() {
		return nil
	}
	if err := d.File.Sync(); err != nil {
		d.fs.f.set(fmt.Errorf("sync directory %s: %w", d.name, err))
	}
	return nil
}

// Unwrap returns the host's file system.
func (fs *fenceFS) Unwrap() vfs.FS { return fs.FS }

// fenceFile drops writes and syncs once the engine failed.
type fenceFile struct {
	vfs.File
	fs   *fenceFS
	name string
}

// check passes err on, unless it fails the engine while Pebble opens.
func (f *fenceFile) check(op string, err error) error {
	if f.fs.failsAtOpen(op, f.name, err) {
		return nil
	}
	return err
}

func (f *fenceFile) Write(p []byte) (int, error) {
	if f.fs.fenced() {
		return len(p), nil
	}
	n, err := f.File.Write(p)
	if err = f.check("write", err); err == nil {
		n = len(p)
	}
	return n, err
}

func (f *fenceFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.fenced() {
		return len(p), nil
	}
	n, err := f.File.WriteAt(p, off)
	if err = f.check("write", err); err == nil {
		n = len(p)
	}
	return n, err
}

func (f *fenceFile) Preallocate(off, n int64) error {
	if f.fs.fenced() {
		return nil
	}
	return f.check("preallocate", f.File.Preallocate(off, n))
}

func (f *fenceFile) Sync() error {
	if f.fs.fenced() {
		return nil
	}
	return f.check("sync", f.File.Sync())
}

func (f *fenceFile) SyncData() error {
	if f.fs.fenced() {
		return nil
	}
	return f.check("sync", f.File.SyncData())
}

func (f *fenceFile) SyncTo(n int64) (bool, error) {
	if f.fs.fenced() {
		return true, nil
	}
	full, err := f.File.SyncTo(n)
	if err = f.check("sync", err); err == nil && !full {
		full = f.fs.fenced()
	}
	return full, err
}

// voidFile is a file created after the engine failed: what is written to
// it goes nowhere; it reads as empty.
type voidFile struct{ size int64 }

func (v *voidFile) Close() error                      { return nil }
func (v *voidFile) Read([]byte) (int, error)          { return 0, io.EOF }
func (v *voidFile) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }
func (v *voidFile) Write(p []byte) (int, error)       { v.size += int64(len(p)); return len(p), nil }
func (v *voidFile) WriteAt(p []byte, off int64) (int, error) {
	v.size = max(v.size, off+int64(len(p)))
	return len(p), nil
}
func (v *voidFile) Preallocate(int64, int64) error  { return nil }
func (v *voidFile) Stat() (vfs.FileInfo, error)     { return voidInfo{v.size}, nil }
func (v *voidFile) Sync() error                     { return nil }
func (v *voidFile) SyncTo(int64) (bool, error)      { return true, nil }
func (v *voidFile) SyncData() error                 { return nil }
func (v *voidFile) Prefetch(int64, int64) error     { return nil }
func (v *voidFile) Fd() uintptr                     { return vfs.InvalidFd }
func (v *voidFile) Unwrap() vfs.File                { return nil }
func (v *voidFile) WriteApproximate(p []byte) error { _, err := v.Write(p); return err }

type voidInfo struct{ size int64 }

func (i voidInfo) Name() string           { return "void" }
func (i voidInfo) Size() int64            { return i.size }
func (i voidInfo) Mode() os.FileMode      { return 0o644 }
func (i voidInfo) ModTime() time.Time     { return time.Time{} }
func (i voidInfo) IsDir() bool            { return false }
func (i voidInfo) Sys() any               { return nil }
func (i voidInfo) DeviceID() vfs.DeviceID { return vfs.DeviceID{} }
