package guardtest

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BlockBytes is the size of the block ZeroBlock and JunkBlock damage.
const BlockBytes = 4096

// Fault is one kind of damage to a stored file.
type Fault int

const (
	ZeroBlock    Fault = iota // a 4 KiB-aligned block (or what the file has of it) zeroed
	JunkBlock                 // the same, random bytes
	FlipBit                   // one bit flipped
	TruncateHalf              // the file cut to half its size
	Delete                    // the file removed
)

// Faults lists every Fault.
var Faults = []Fault{ZeroBlock, JunkBlock, FlipBit, TruncateHalf, Delete}

func (f Fault) String() string {
	switch f {
	case ZeroBlock:
		return "zero-4k"
	case JunkBlock:
		return "junk-4k"
	case FlipBit:
		return "flip-bit"
	case TruncateHalf:
		return "truncate-half"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Apply damages the file at path in fs (the raw FS, below any protection
// layer), at a position drawn from rng, and describes what it did. A
// block fault on an empty file, or a flip in one, does nothing (and says
// so).
func Apply(fs vfs.FS, path string, f Fault, rng *rand.Rand) (string, error) {
	if f == Delete {
		return "deleted", fs.Remove(path)
	}
	data, err := ReadFile(fs, path)
	if err != nil {
		return "", err
	}
	size := int64(len(data))
	switch f {
	case TruncateHalf:
		return fmt.Sprintf("truncated %d -> %d", size, size/2), writeFile(fs, path, data[:size/2], false)
	case FlipBit:
		if size == 0 {
			return "empty: no bit to flip", nil
		}
		bit := rng.Int63n(size * 8)
		data[bit/8] ^= 1 << (bit % 8)
		return fmt.Sprintf("bit %d flipped", bit), writeFile(fs, path, data, false)
	case ZeroBlock, JunkBlock:
		if size == 0 {
			return "empty: no block", nil
		}
		blocks := (size + BlockBytes - 1) / BlockBytes
		b := rng.Int63n(blocks)
		lo, hi := b*BlockBytes, min(size, (b+1)*BlockBytes)
		if f == ZeroBlock {
			clear(data[lo:hi])
		} else {
			rng.Read(data[lo:hi])
		}
		return fmt.Sprintf("%s [%d,%d)", f, lo, hi), writeFile(fs, path, data, false)
	}
	return "", fmt.Errorf("guardtest: unknown fault %d", int(f))
}

// ReadFile reads the whole file at path.
func ReadFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFile replaces the file at path with data (synced).
func WriteFile(fs vfs.FS, path string, data []byte) error { return writeFile(fs, path, data, true) }

// MustWriteFile replaces the file at path with data, creating its
// directory, and fails t on error.
func MustWriteFile(t testing.TB, fs vfs.FS, path string, data []byte) {
	t.Helper()
	if err := errors.Join(fs.MkdirAll(fs.PathDir(path), 0o755), WriteFile(fs, path, data)); err != nil {
		t.Fatal(err)
	}
}

// MustReadFile reads the whole file at path and fails t on error.
func MustReadFile(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	b, err := ReadFile(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile replaces the file at path with data; damage and clones need
// no durability (a test reads them back in the same process), so they
// skip the sync.
func writeFile(fs vfs.FS, path string, data []byte, sync bool) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, werr := f.Write(append([]byte(nil), data...))
	if sync {
		werr = errors.Join(werr, f.Sync())
	}
	return errors.Join(werr, f.Close())
}

// Walk returns every file under dir, recursively, sorted (directories
// themselves are not listed).
func Walk(fs vfs.FS, dir string) ([]string, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		fi, err := fs.Stat(p)
		if err != nil {
			return nil, err
		}
		if fi.IsDir() {
			sub, err := Walk(fs, p)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// Clone copies everything under srcDir in src to dstDir in dst (not
// synced).
func Clone(src vfs.FS, srcDir string, dst vfs.FS, dstDir string) error {
	if err := dst.MkdirAll(dstDir, 0o755); err != nil {
		return err
	}
	names, err := src.List(srcDir)
	if err != nil {
		return err
	}
	for _, n := range names {
		sp, dp := src.PathJoin(srcDir, n), dst.PathJoin(dstDir, n)
		fi, err := src.Stat(sp)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if err := Clone(src, sp, dst, dp); err != nil {
				return err
			}
			continue
		}
		data, err := ReadFile(src, sp)
		if err != nil {
			return err
		}
		if err := writeFile(dst, dp, data, false); err != nil {
			return err
		}
	}
	return nil
}

// Rule selects files and the faults their I/O gets.
type Rule struct {
	Match      func(path string) bool
	ReadError  bool // ReadAt and Read fail
	WriteError bool // Write and WriteAt fail
	SyncError  bool // Sync fails
	LoseWrites bool // Write reports success and stores nothing
}

// ErrInjected is the error injected faults return (wrapped in an
// *os.PathError).
var ErrInjected = errors.New("guardtest: injected I/O error")

// FS wraps a vfs.FS and injects the faults of its rules into the files
// they match (at open time: a handle keeps the rules it was opened with).
// Safe for concurrent use.
type FS struct {
	vfs.FS
	mu    sync.Mutex
	rules []Rule
}

// NewFS returns an FS over inner with no rules.
func NewFS(inner vfs.FS) *FS { return &FS{FS: inner} }

// SetRules replaces the rules.
func (fs *FS) SetRules(rules ...Rule) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.rules = rules
}

func (fs *FS) rule(path string) Rule {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var r Rule
	for _, x := range fs.rules {
		if x.Match(path) {
			r.ReadError = r.ReadError || x.ReadError
			r.WriteError = r.WriteError || x.WriteError
			r.SyncError = r.SyncError || x.SyncError
			r.LoseWrites = r.LoseWrites || x.LoseWrites
		}
	}
	return r
}

func (fs *FS) wrap(f vfs.File, path string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	r := fs.rule(path)
	if !r.ReadError && !r.WriteError && !r.SyncError && !r.LoseWrites {
		return f, nil
	}
	return &file{File: f, path: path, rule: r}, nil
}

func (fs *FS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(f, name, err)
}

func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	return fs.wrap(f, name, err)
}

func (fs *FS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(f, name, err)
}

func (fs *FS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(f, newname, err)
}

// Unwrap returns the inner FS.
func (fs *FS) Unwrap() vfs.FS { return fs.FS }

type file struct {
	vfs.File
	path string
	rule Rule
}

func (f *file) err(op string) error { return &os.PathError{Op: op, Path: f.path, Err: ErrInjected} }

func (f *file) Read(p []byte) (int, error) {
	if f.rule.ReadError {
		return 0, f.err("read")
	}
	return f.File.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if f.rule.ReadError {
		return 0, f.err("read")
	}
	return f.File.ReadAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	switch {
	case f.rule.WriteError:
		return 0, f.err("write")
	case f.rule.LoseWrites:
		return len(p), nil
	}
	return f.File.Write(p)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	switch {
	case f.rule.WriteError:
		return 0, f.err("write")
	case f.rule.LoseWrites:
		return len(p), nil
	}
	return f.File.WriteAt(p, off)
}

func (f *file) Sync() error {
	if f.rule.SyncError {
		return f.err("sync")
	}
	return f.File.Sync()
}

func (f *file) SyncData() error { return f.Sync() }
