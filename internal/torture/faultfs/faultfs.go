// Package faultfs is a fault-injecting Pebble vfs.FS for the torture
// harness's CORDS sweep (internal/torture): it makes the I/O faults a
// device returns, as opposed to the damage at rest that internal/bitrot
// applies to a stopped store.
//
// # What it owns
//
//   - A read error (EIO) on a 4 KiB block of one file: every read that
//     touches [Off, Off+Len) of a file the rule matches fails, as a bad
//     sector would, until the rule is cleared.
//   - A write error: every write, sync or create of a file the rule matches
//     fails (the device refuses the file's kind of write), with EIO, or
//     with "no space" as a full device refuses (Rule.NoSpace).
//   - Counters of the faults injected, so a cell whose fault never fired is
//     reported as such rather than as a pass.
//
// # Invariants
//
//   - Faults fire only while a rule is set, only on paths Match accepts.
//   - Bytes are never changed: a faulted operation fails whole, the stored
//     file stays as it was.
//
// # Failure model
//
// Files opened while a rule is set keep checking the current rule on every
// operation, so clearing it (the fault "healed", or the device replaced)
// takes effect at once.
package faultfs

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
)

// ErrInjected is wrapped by every injected error (with syscall.EIO).
var ErrInjected = errors.New("faultfs: injected I/O error")

// Kind is a kind of I/O fault.
type Kind int

const (
	// ReadError fails reads that touch the rule's range.
	ReadError Kind = iota + 1
	// WriteError fails writes, syncs and creates.
	WriteError
)

func (k Kind) String() string {
	switch k {
	case ReadError:
		return "read error"
	case WriteError:
		return "write error"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Rule says which operations fail.
type Rule struct {
	Kind  Kind
	Match func(path string) bool
	// Off and Len bound a ReadError (Len 0: the whole file).
	Off, Len int64
	// NoSpace makes a WriteError the refusal of a full device: the error
	// wraps base.ErrNoSpace and syscall.ENOSPC instead of syscall.EIO.
	NoSpace bool
}

// FS wraps a vfs.FS with one fault rule at a time.
type FS struct {
	vfs.FS
	mu       sync.Mutex
	rule     *Rule
	injected atomic.Int64
}

// New wraps inner.
func New(inner vfs.FS) *FS { return &FS{FS: inner} }

// Set installs r (replacing any rule); nil clears it.
func (f *FS) Set(r *Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rule = r
}

// Injected returns how many operations failed by a rule.
func (f *FS) Injected() int64 { return f.injected.Load() }

// Unwrap returns the wrapped file system.
func (f *FS) Unwrap() vfs.FS { return f.FS }

func (f *FS) current(path string, k Kind) *Rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rule == nil || f.rule.Kind != k || !f.rule.Match(path) {
		return nil
	}
	return f.rule
}

func (f *FS) fail(r *Rule, op, path string) error {
	f.injected.Add(1)
	if r.NoSpace {
		return fmt.Errorf("%s %s: %w: %w: %w", op, path, ErrInjected, base.ErrNoSpace, syscall.ENOSPC)
	}
	return fmt.Errorf("%s %s: %w: %w", op, path, ErrInjected, syscall.EIO)
}

func (f *FS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

// Create fails under a write rule.
func (f *FS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if r := f.current(name, WriteError); r != nil {
		return nil, f.fail(r, "create", name)
	}
	file, err := f.FS.Create(name, c)
	return f.wrap(name, file, err)
}

// Open wraps the file.
func (f *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.Open(name, opts...)
	return f.wrap(name, file, err)
}

// OpenReadWrite wraps the file.
func (f *FS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	return f.wrap(name, file, err)
}

// OpenDir wraps the directory: under a write rule that matches the
// directory's own path its Sync fails (a directory sync is how a create,
// rename or remove in it becomes durable).
func (f *FS) OpenDir(name string) (vfs.File, error) {
	file, err := f.FS.OpenDir(name)
	return f.wrap(name, file, err)
}

// ReuseForWrite fails under a write rule.
func (f *FS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if r := f.current(newname, WriteError); r != nil {
		return nil, f.fail(r, "reuse", newname)
	}
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	return f.wrap(newname, file, err)
}

type faultFile struct {
	vfs.File
	fs   *FS
	name string
	pos  int64 // for Read
}

func (ff *faultFile) readFails(off, n int64) bool {
	r := ff.fs.current(ff.name, ReadError)
	if r == nil || n == 0 {
		return false
	}
	if r.Len == 0 {
		return true
	}
	return off < r.Off+r.Len && r.Off < off+n
}

func (ff *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if ff.readFails(off, int64(len(p))) {
		return 0, ff.fs.fail(&Rule{Kind: ReadError}, "read", ff.name)
	}
	return ff.File.ReadAt(p, off)
}

func (ff *faultFile) Read(p []byte) (int, error) {
	if ff.readFails(ff.pos, int64(len(p))) {
		return 0, ff.fs.fail(&Rule{Kind: ReadError}, "read", ff.name)
	}
	n, err := ff.File.Read(p)
	ff.pos += int64(n)
	return n, err
}

func (ff *faultFile) Write(p []byte) (int, error) {
	if r := ff.fs.current(ff.name, WriteError); r != nil {
		return 0, ff.fs.fail(r, "write", ff.name)
	}
	return ff.File.Write(p)
}

func (ff *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if r := ff.fs.current(ff.name, WriteError); r != nil {
		return 0, ff.fs.fail(r, "write", ff.name)
	}
	return ff.File.WriteAt(p, off)
}

func (ff *faultFile) Sync() error {
	if r := ff.fs.current(ff.name, WriteError); r != nil {
		return ff.fs.fail(r, "sync", ff.name)
	}
	return ff.File.Sync()
}

func (ff *faultFile) SyncData() error {
	if r := ff.fs.current(ff.name, WriteError); r != nil {
		return ff.fs.fail(r, "sync", ff.name)
	}
	return ff.File.SyncData()
}

func (ff *faultFile) SyncTo(n int64) (bool, error) {
	if r := ff.fs.current(ff.name, WriteError); r != nil {
		return false, ff.fs.fail(r, "sync", ff.name)
	}
	return ff.File.SyncTo(n)
}
