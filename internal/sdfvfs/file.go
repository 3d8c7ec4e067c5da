package sdfvfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	crerrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/sdf"
)

// file is a vfs.File over one sdf extent file and, for a duplicated file
// being written, its shadow copy.
type file struct {
	fs       *FS
	path     string // as opened (the file may be renamed since)
	writable bool
	hook     bool // run Options.MetadataRanges on Close

	// fmu guards f and shadow, which a failover swaps (Write and Sync are
	// sequential by the vfs.File contract; readers only load f).
	fmu    sync.RWMutex
	f      *sdf.File
	shadow *sdf.File // writer of the whole-file copy, nil if none

	mu  sync.Mutex // guards pos
	pos int64      // Read's position
}

var _ vfs.File = (*file)(nil)

func (h *file) primary() *sdf.File {
	h.fmu.RLock()
	defer h.fmu.RUnlock()
	return h.f
}

func (h *file) String() string { return "sdfvfs.file(" + h.primary().Name() + ")" }

// Write appends p (to the shadow as well). A shadow that cannot be written
// is dropped (Stats.CopyErrors); a primary that cannot be written while its
// shadow can is replaced by the shadow (failover).
func (h *file) Write(p []byte) (int, error) {
	if !h.writable {
		return 0, pathErr("write", h.path, sdf.ErrReadOnly)
	}
	n, err := h.f.Write(p)
	if err != nil {
		if h.shadow != nil && h.fs.failover(h, p, false) {
			return len(p), nil
		}
		return n, pathErr("write", h.path, err)
	}
	if h.shadow != nil {
		if _, err := h.shadow.Write(p); err != nil {
			h.fs.dropShadow(h)
		} else {
			h.fs.ctr.shadowBytes.Add(int64(len(p)))
		}
	}
	return n, nil
}

// failover replaces h's failing primary by its shadow: appends pending
// (the bytes the primary refused) to the shadow, syncs it if sync, removes
// the primary and renames the shadow to the file's name. The shadow was
// written in lockstep, so it holds every byte the primary acknowledged. The
// file is then no longer duplicated. Reports whether it succeeded.
func (fs *FS) failover(h *file, pending []byte, sync bool) bool {
	if pending != nil {
		if _, err := h.shadow.Write(pending); err != nil {
			return false
		}
	}
	if sync {
		if err := h.shadow.Sync(); err != nil {
			return false
		}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	name := h.f.Name()
	// The failed primary's buffered bytes may fail again: ignored, the file
	// is removed.
	_ = h.f.Close()
	if err := fs.sfs.Remove(name); err != nil && !isNotExist(err) {
		return false
	}
	if err := fs.sfs.Rename(shadowName(name), name); err != nil {
		return false
	}
	h.fmu.Lock()
	h.f, h.shadow = h.shadow, nil
	h.fmu.Unlock()
	fs.ctr.failovers.Add(1)
	return true
}

// dropShadow gives up h's shadow after a failed write or sync: the file
// goes on without a copy (counted in Stats.CopyErrors).
func (fs *FS) dropShadow(h *file) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	name := shadowName(h.f.Name())
	_ = h.shadow.Close()
	h.fmu.Lock()
	h.shadow = nil
	h.fmu.Unlock()
	_ = fs.sfs.Remove(name)
	fs.ctr.copyErrors.Add(1)
}

// WriteAt overwrites bytes inside the file (sdf.RewriteRange: the pages
// are programmed again out of place, so a damaged page must be rewritten
// whole), or appends at the end of a file this handle writes. Pebble itself
// only needs it for its shared cache; tools use it to plant logical
// corruption. Copies follow: the shadow is rewritten too and an
// overlapping range copy is made again from the new bytes.
func (h *file) WriteAt(p []byte, off int64) (int, error) {
	size := h.f.Size()
	switch {
	case off < 0:
		return 0, pathErr("writeat", h.path, base.InvalidArgumentf("sdfvfs: negative offset %d", off))
	case h.writable && off == size:
		return h.Write(p)
	case off+int64(len(p)) > size:
		return 0, pathErr("writeat", h.path, base.InvalidArgumentf(
			"sdfvfs: WriteAt [%d,%d) past the end (%d B): files grow only by appending", off, off+int64(len(p)), size))
	}
	if err := h.fs.overwrite(h.f.Name(), p, off); err != nil {
		return 0, pathErr("writeat", h.path, err)
	}
	return len(p), nil
}

// ReadAt reads at off; damaged pages are served from a good copy if the
// file has one, and otherwise fail with an error Pebble classifies as
// corruption. Never returns unverified bytes.
func (h *file) ReadAt(p []byte, off int64) (int, error) {
	return h.fs.readAt(h.primary(), p, off)
}

// Read reads at the handle's position (Pebble reads WALs and the MANIFEST
// sequentially).
func (h *file) Read(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.fs.readAt(h.primary(), p, h.pos)
	h.pos += int64(n)
	if n > 0 && err == io.EOF {
		err = nil
	}
	return n, err
}

// Preallocate is a no-op: zones are allocated as the file grows.
func (h *file) Preallocate(offset, length int64) error { return nil }

// Stat describes the file (under its current name).
func (h *file) Stat() (vfs.FileInfo, error) {
	fi := h.primary().Stat()
	return fileInfo{name: baseName(fi.Name), size: fi.Size, mtime: fi.ModTime}, nil
}

// Sync makes the file (and its shadow) durable. Failures of either copy are
// handled as in Write.
func (h *file) Sync() error {
	if err := h.f.Sync(); err != nil {
		if h.shadow != nil && h.fs.failover(h, nil, true) {
			return nil
		}
		return pathErr("sync", h.path, err)
	}
	if h.shadow != nil {
		if err := h.shadow.Sync(); err != nil {
			h.fs.dropShadow(h)
		}
	}
	return nil
}

// SyncTo is a hint (Pebble's bytes-per-sync write-back of sstables) and does
// nothing: sdf already programs whole pages as its write buffer fills, and
// an early sync would only program a zero-padded partial page to be
// programmed again. fullSync=false promises nothing, as vfs.File allows;
// Sync still makes everything durable.
func (h *file) SyncTo(length int64) (fullSync bool, err error) {
	if !h.writable {
		return false, pathErr("sync", h.path, sdf.ErrReadOnly)
	}
	return false, nil
}

// SyncData is Sync.
func (h *file) SyncData() error { return h.Sync() }

// Prefetch is a no-op.
func (h *file) Prefetch(offset, length int64) error { return nil }

// Fd returns vfs.InvalidFd: there is no OS file.
func (h *file) Fd() uintptr { return vfs.InvalidFd }

// Close closes the file and its shadow; a writable file selected by
// Options.MetadataRanges gets its range copy written.
func (h *file) Close() error {
	var name string
	if h.hook {
		name = h.f.Name()
	}
	err := h.f.Close()
	if h.shadow != nil {
		err = errors.Join(err, h.shadow.Close())
	}
	if err != nil {
		return pathErr("close", h.path, err)
	}
	if h.hook {
		// The file itself is complete and durable: failing its Close
		// because its copy could not be made would fail a good flush or
		// compaction, so the failure is counted (Stats.CopyErrors).
		if err := h.fs.runRangesHook(name); err != nil {
			h.fs.ctr.copyErrors.Add(1)
		}
	}
	return nil
}

// dirFile is an open directory: Sync makes the namespace durable.
type dirFile struct {
	fs   *FS
	path string
}

var _ vfs.File = (*dirFile)(nil)

func (d *dirFile) errDir(op string) error {
	return pathErr(op, d.path, errors.New("sdfvfs: is a directory"))
}

func (d *dirFile) Close() error                       { return nil }
func (d *dirFile) Read([]byte) (int, error)           { return 0, d.errDir("read") }
func (d *dirFile) ReadAt([]byte, int64) (int, error)  { return 0, d.errDir("read") }
func (d *dirFile) Write([]byte) (int, error)          { return 0, d.errDir("write") }
func (d *dirFile) WriteAt([]byte, int64) (int, error) { return 0, d.errDir("write") }
func (d *dirFile) Preallocate(int64, int64) error     { return nil }
func (d *dirFile) SyncTo(int64) (bool, error)         { return false, nil }
func (d *dirFile) SyncData() error                    { return d.Sync() }
func (d *dirFile) Prefetch(int64, int64) error        { return nil }
func (d *dirFile) Fd() uintptr                        { return vfs.InvalidFd }
func (d *dirFile) Stat() (vfs.FileInfo, error)        { return d.fs.Stat(d.path) }
func (d *dirFile) String() string                     { return "sdfvfs.dir(" + d.path + ")" }
func (d *dirFile) Sync() error {
	if err := d.fs.sfs.Sync(); err != nil {
		return pathErr("sync", d.path, err)
	}
	return nil
}

// markCorruption makes err a corruption for Pebble (errors.Is(err,
// pebble.ErrCorruption), so DataCorruption and BackgroundError fire) while
// keeping base.ErrCorruption and the *sdf.CorruptionError in its chain.
func markCorruption(err error) error { return crerrors.Mark(err, pebble.ErrCorruption) }

// readAt reads f at off, serving damaged pages from a second copy when the
// file has one (and repairing the primary from it), else returning a
// corruption.
func (fs *FS) readAt(f *sdf.File, p []byte, off int64) (int, error) {
	n, err := f.ReadAt(p, off)
	for err != nil && err != io.EOF {
		if !base.IsCorruption(err) {
			return n, pathErr("read", f.Name(), err)
		}
		var ce *sdf.CorruptionError
		name := f.Name()
		if fs.opts.NoDuplication || !errors.As(err, &ce) || ce.Len <= 0 || ce.Off+ce.Len <= off+int64(n) {
			fs.ctr.corruptions.Add(1)
			return n, markCorruption(pathErr("read", name, err))
		}
		// Bytes [off+n, badEnd) of p lie in the damaged page.
		badEnd := min(ce.Off+ce.Len, off+int64(len(p)))
		if !fs.fillFromCopy(name, p[n:badEnd-off], off+int64(n)) {
			fs.ctr.corruptions.Add(1)
			return n, markCorruption(pathErr("read", name, fmt.Errorf("%w (no good copy)", err)))
		}
		fs.ctr.copyReads.Add(1)
		if !fs.opts.NoRepair {
			fs.repair(name, ce)
		}
		n = int(badEnd - off)
		if n == len(p) {
			return n, nil
		}
		var m int
		m, err = f.ReadAt(p[n:], off+int64(n))
		n += m
	}
	return n, err
}

// repairKey names a damaged range being repaired.
type repairKey struct {
	name string
	off  int64
}

// repair rewrites the damaged range of the primary from a good copy if a
// copy holds all of it (sdf rewrites whole pages out of place). Readers that
// hit the same damage while it is being rewritten do not rewrite it again.
func (fs *FS) repair(name string, ce *sdf.CorruptionError) {
	k := repairKey{name: name, off: ce.Off}
	if !fs.repairing.Begin(k) {
		return
	}
	defer fs.repairing.End(k)
	buf := make([]byte, ce.Len)
	if !fs.fillFromCopy(name, buf, ce.Off) {
		return
	}
	if err := fs.sfs.RewriteRange(name, ce.Off, buf); err != nil {
		fs.ctr.repairErrors.Add(1)
		return
	}
	// Verify the repair by reading it back (a write is trusted only once
	// read back intact).
	check := make([]byte, len(buf))
	f, err := fs.sfs.OpenFile(name)
	if err != nil {
		fs.ctr.repairErrors.Add(1)
		return
	}
	n, err := f.ReadAt(check, ce.Off)
	_ = f.Close()
	if n != len(check) || (err != nil && err != io.EOF) || !bytes.Equal(check, buf) {
		fs.ctr.repairErrors.Add(1)
		return
	}
	fs.ctr.repairs.Add(1)
}

// fillFromCopy fills dst with bytes [off, off+len(dst)) of the file at name
// from its shadow or its range copy, reporting whether a copy held all of
// them intact.
func (fs *FS) fillFromCopy(name string, dst []byte, off int64) bool {
	for attempt := 0; attempt < fs.opts.CopyReadAttempts; attempt++ {
		if s, err := fs.sfs.OpenFile(shadowName(name)); err == nil {
			n, rerr := s.ReadAt(dst, off)
			_ = s.Close()
			if n == len(dst) && (rerr == nil || rerr == io.EOF) {
				return true
			}
		}
		if fs.fillFromRanges(name, dst, off) {
			return true
		}
	}
	return false
}

// isNotExist reports a missing file.
func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
