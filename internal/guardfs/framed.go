package guardfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/guardfs/frames"
)

// ---- writing ----

// createFramed creates (or replaces) a framed file: its primary at name and
// Copies-1 copies in the ReservedDir, all under a new identity. The old
// copies go first: a crash in between leaves the old file with fewer
// copies (restored later), never copies of the new file under the old
// file's identity.
func (fs *FS) createFramed(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dir, b := fs.split(name)
	idx := fs.loadIndex(dir, false)
	for _, r := range idx.copies[b] {
		if err := removeIgnoringMissing(fs.inner, r.path); err != nil {
			return nil, pathErr("create", name, err)
		}
	}
	delete(idx.copies, b)
	if fs.opts.Copies > 1 {
		if err := fs.ensureReserved(dir); err != nil {
			return nil, pathErr("create", name, err)
		}
	}
	id := fs.opts.NewID()
	primary, err := fs.inner.Create(name, category)
	if err != nil {
		return nil, err
	}
	w := &framedWriter{fs: fs, path: name, key: fs.key(name), dir: dir, id: id,
		files: []vfs.File{primary}, names: []string{name}}
	var refs []copyRef
	for k := 1; k < fs.opts.Copies; k++ {
		p := fs.inner.PathJoin(fs.reserved(dir), reservedName(kindCopy, k, id, b))
		f, err := fs.inner.Create(p, category)
		if err != nil {
			// The file is written with fewer copies; Close restores them.
			fs.ctr.copyErrors.Add(1)
			w.dropped = true
			continue
		}
		w.files = append(w.files, f)
		w.names = append(w.names, p)
		refs = append(refs, copyRef{k: k, id: id, path: p})
	}
	if len(refs) > 0 {
		idx.copies[b] = refs
	}
	fs.writers[w.key] = w
	return w, nil
}

// framedWriter appends to every copy of a framed file. Write and Sync are
// sequential (the vfs.File contract); Stat may run concurrently.
type framedWriter struct {
	fs   *FS
	path string
	key  string
	dir  string
	id   uint64

	files []vfs.File // [0] the primary, then copies; nil once dropped
	names []string

	size       atomic.Int64 // logical bytes written
	dirsSynced bool
	dropped    bool // some copy failed: restored at Close
	closed     bool
	enc        []byte
	scratch    []byte
}

var _ vfs.File = (*framedWriter)(nil)

func (w *framedWriter) String() string { return "guardfs.framed(" + w.path + ")" }

// drop gives up copy i after a failed write or sync: the file goes on in
// the others and the copy is restored from them at Close.
func (w *framedWriter) drop(i int) {
	_ = w.files[i].Close()
	w.files[i] = nil
	w.dropped = true
	w.fs.ctr.copyErrors.Add(1)
}

// each applies op to every live copy, dropping the ones that fail; it
// fails only when no copy is left.
func (w *framedWriter) each(opName string, op func(f vfs.File) error) error {
	var errs []error
	live := 0
	for i, f := range w.files {
		if f == nil {
			continue
		}
		if err := op(f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", w.names[i], err))
			w.drop(i)
			continue
		}
		live++
	}
	if live == 0 {
		return pathErr(opName, w.path, fmt.Errorf("guardfs: every copy failed: %w", errors.Join(errs...)))
	}
	return nil
}

// Write appends p as frames to every copy. It succeeds when at least one
// copy took it.
func (w *framedWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, pathErr("write", w.path, os.ErrClosed)
	}
	if len(p) == 0 {
		return 0, nil
	}
	off := w.size.Load()
	w.enc = frames.Append(w.enc[:0], w.id, off, p, w.fs.opts.FrameBytes)
	err := w.each("write", func(f vfs.File) error {
		// vfs.File.Write may modify its argument: each copy gets its own.
		w.scratch = append(w.scratch[:0], w.enc...)
		_, err := f.Write(w.scratch)
		return err
	})
	if err != nil {
		return 0, err
	}
	w.size.Store(off + int64(len(p)))
	return len(p), nil
}

// WriteAt appends when off is the end; framed files are append-only.
func (w *framedWriter) WriteAt(p []byte, off int64) (int, error) {
	if off != w.size.Load() {
		return 0, pathErr("writeat", w.path, base.InvalidArgumentf("guardfs: framed files are append-only (write at %d, size %d)", off, w.size.Load()))
	}
	return w.Write(p)
}

// Sync makes every copy durable, and the first time the directories that
// name them.
func (w *framedWriter) Sync() error {
	if w.closed {
		return pathErr("sync", w.path, os.ErrClosed)
	}
	if err := w.each("sync", func(f vfs.File) error { return f.Sync() }); err != nil {
		return err
	}
	if !w.dirsSynced {
		if err := errors.Join(w.fs.syncReserved(w.dir), w.fs.syncDir(w.dir)); err != nil {
			return pathErr("sync", w.path, err)
		}
		w.dirsSynced = true
	}
	return nil
}

func (w *framedWriter) SyncData() error { return w.Sync() }

// SyncTo syncs everything (a framed file is small).
func (w *framedWriter) SyncTo(int64) (bool, error) { return true, w.Sync() }

func (w *framedWriter) Preallocate(int64, int64) error { return nil }
func (w *framedWriter) Prefetch(int64, int64) error    { return nil }
func (w *framedWriter) Fd() uintptr                    { return vfs.InvalidFd }

func (w *framedWriter) Stat() (vfs.FileInfo, error) {
	return fileInfo{name: w.fs.inner.PathBase(w.path), size: w.size.Load(), mtime: time.Now()}, nil
}

var errWriteOnly = errors.New("guardfs: a framed file being written is not readable through its writer; open it")

func (w *framedWriter) Read([]byte) (int, error) { return 0, pathErr("read", w.path, errWriteOnly) }
func (w *framedWriter) ReadAt([]byte, int64) (int, error) {
	return 0, pathErr("read", w.path, errWriteOnly)
}

// Close seals every copy (a seal frame with the final size), syncs and
// closes them; copies dropped on the way are restored from the others.
func (w *framedWriter) Close() error {
	if w.closed {
		return pathErr("close", w.path, os.ErrClosed)
	}
	seal := frames.AppendSeal(nil, w.id, w.size.Load())
	err := w.each("close", func(f vfs.File) error {
		_, err := f.Write(append([]byte(nil), seal...))
		return errors.Join(err, f.Sync())
	})
	for i, f := range w.files {
		if f != nil {
			if cerr := f.Close(); cerr != nil {
				w.fs.ctr.copyErrors.Add(1)
				w.dropped = true
			}
			w.files[i] = nil
		}
	}
	w.closed = true
	fs := w.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.writers[w.key] == w {
		delete(fs.writers, w.key)
	}
	if w.dropped && err == nil {
		fs.restoreFramedLocked(w.path, true)
	}
	return err
}

// ---- merging and restoring ----

// framedState is a framed file as its copies hold it.
type framedState struct {
	m       frames.Merged
	exists  bool      // some copy is present
	refs    []copyRef // copies 1.. as listed (states[1:] in this order)
	states  []frames.CopyState
	readErr []error // per state
	mtime   time.Time
}

// unreadable reports a file whose copies hold bytes but no frame of its
// identity: its content (even its size) is lost in every copy, or belongs
// to another identity (a crash inside Rename, then damage to every copy of
// the renamed file). It is not an empty file: Open returns a corruption
// error and nothing is restored over the copies.
func (st *framedState) unreadable() bool {
	if st.m.Sealed || st.m.Size > 0 {
		return false
	}
	for _, s := range st.states {
		if s.Physical > 0 {
			return true
		}
	}
	return false
}

// loadFramedLocked reads every copy of the framed file at p and merges
// them. The caller holds fs.mu.
func (fs *FS) loadFramedLocked(p string) framedState {
	dir, b := fs.split(p)
	st := framedState{refs: fs.loadIndex(dir, false).copies[b]}
	paths := append([]string{p}, make([]string, len(st.refs))...)
	for i, r := range st.refs {
		paths[i+1] = r.path
	}
	var named []uint64 // identities of the copies that are there
	for i, path := range paths {
		data, present, rerr := fs.readAll(path)
		st.readErr = append(st.readErr, rerr)
		cs := frames.CopyState{Present: present, Physical: int64(len(data))}
		if present {
			st.exists = true
			cs.Frames = frames.Parse(data)
			if i > 0 {
				named = append(named, st.refs[i-1].id)
			}
			if st.mtime.IsZero() {
				if fi, err := fs.inner.Stat(path); err == nil {
					st.mtime = fi.ModTime()
				}
			}
		}
		st.states = append(st.states, cs)
	}
	st.m = frames.Merge(frames.ResolveID(named, st.states), st.states)
	return st
}

// restoreFramedLocked rewrites, from the merged content, every copy of the
// framed file at p that is missing, damaged, torn or of another identity
// (the primary included), and removes copies that do not belong. A copy
// that could not be read is replaced only when the merge lost nothing (its
// unread bytes may hold what the others lack). force restores even with
// Options.NoRepair. It reports whether the file exists. The caller holds
// fs.mu.
func (fs *FS) restoreFramedLocked(p string, force bool) (framedState, bool) {
	st := fs.loadFramedLocked(p)
	fs.countMerge(p, st.m)
	if !st.exists {
		return st, false
	}
	if _, writing := fs.writers[fs.key(p)]; writing || fs.opts.NoRepair && !force {
		return st, true
	}
	fs.restoreStateLocked(p, &st)
	return st, true
}

func (fs *FS) countMerge(p string, m frames.Merged) {
	fs.ctr.framesRepaired.Add(int64(m.Gaps))
}

func (fs *FS) restoreStateLocked(p string, st *framedState) {
	dir, b := fs.split(p)
	m := &st.m
	if st.unreadable() {
		return // nothing to restore from; Open and Verify report it
	}
	if m.ID == 0 && m.Size == 0 && !m.Sealed {
		m.ID = fs.opts.NewID() // an empty file that never got frames
	}
	complete := len(m.Lost) == 0
	replaceable := func(i int) bool { return st.readErr[i] == nil || complete }
	var enc []byte
	content := func() []byte {
		if enc == nil {
			enc = frames.Encode(*m, fs.opts.FrameBytes, true)
		}
		return enc
	}
	// Keep one copy per k of the resolved identity.
	keep := map[int]int{} // k -> index into states
	var drop []copyRef
	for i, r := range st.refs {
		if r.id != m.ID || r.k < 1 || r.k >= fs.opts.Copies {
			drop = append(drop, r)
			continue
		}
		if _, dup := keep[r.k]; dup {
			drop = append(drop, r)
			continue
		}
		keep[r.k] = i + 1
	}
	changed := false
	primaryChanged := false
	if !st.states[0].Present && st.readErr[0] == nil || st.states[0].Present && !m.Perfect[0] && replaceable(0) {
		if err := fs.writeReplace(dir, p, content()); err != nil {
			fs.ctr.copyErrors.Add(1)
		} else {
			fs.ctr.filesRestored.Add(1)
			changed, primaryChanged = true, true
		}
	}
	var refs []copyRef
	for k := 1; k < fs.opts.Copies; k++ {
		target := fs.inner.PathJoin(fs.reserved(dir), reservedName(kindCopy, k, m.ID, b))
		i, ok := keep[k]
		if ok && (m.Perfect[i] || !replaceable(i)) {
			refs = append(refs, st.refs[i-1])
			continue
		}
		if ok && st.refs[i-1].path != target {
			drop = append(drop, st.refs[i-1])
		}
		if err := fs.writeReplace(dir, target, content()); err != nil {
			fs.ctr.copyErrors.Add(1)
			if ok {
				refs = append(refs, st.refs[i-1])
			}
			continue
		}
		fs.ctr.copiesRestored.Add(1)
		changed = true
		refs = append(refs, copyRef{k: k, id: m.ID, path: target})
	}
	for _, r := range drop {
		if err := removeIgnoringMissing(fs.inner, r.path); err == nil {
			changed = true
		}
	}
	idx := fs.loadIndex(dir, false)
	if len(refs) > 0 {
		idx.copies[b] = refs
	} else {
		delete(idx.copies, b)
	}
	if changed {
		err := fs.syncReserved(dir)
		if primaryChanged {
			err = errors.Join(err, fs.syncDir(dir))
		}
		if err != nil {
			fs.ctr.copyErrors.Add(1)
		}
	}
}

// ---- reading ----

// openFramed merges the copies of a framed file and returns a handle on
// the merged content, restoring damaged or missing copies first.
func (fs *FS) openFramed(name string) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	st, ok := fs.restoreFramedLocked(name, false)
	if !ok {
		return nil, pathErr("open", name, os.ErrNotExist)
	}
	if st.unreadable() {
		fs.ctr.unrecoverable.Add(1)
		return nil, markCorruption(pathErr("open", name, base.CorruptionErrorf(
			"guardfs: no frame of %s verifies in any copy", name)))
	}
	return &framedReader{fs: fs, path: name, m: st.m, mtime: st.mtime}, nil
}

func (fs *FS) statFramed(name string) (vfs.FileInfo, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if w, ok := fs.writers[fs.key(name)].(*framedWriter); ok {
		return w.Stat()
	}
	st, ok := fs.restoreFramedLocked(name, false)
	if !ok {
		return nil, pathErr("stat", name, os.ErrNotExist)
	}
	return fileInfo{name: fs.inner.PathBase(name), size: st.m.Size, mtime: st.mtime}, nil
}

// framedReader reads the merged content of a framed file as of its Open.
type framedReader struct {
	fs    *FS
	path  string
	m     frames.Merged
	mtime time.Time

	mu  sync.Mutex
	pos int64
}

var _ vfs.File = (*framedReader)(nil)

func (r *framedReader) String() string { return "guardfs.framed(" + r.path + ")" }

// ReadAt returns the merged bytes; bytes lost in every copy are a
// corruption error naming the file and the range, never data.
func (r *framedReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", r.path, base.InvalidArgumentf("guardfs: negative offset %d", off))
	}
	if off >= r.m.Size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.m.Size-off))
	want := Range{Off: off, Len: int64(n)}
	for _, l := range r.m.Lost {
		if l.Overlaps(want) {
			good := int(max(0, l.Off-off))
			copy(p[:good], r.m.Data[off:])
			r.fs.ctr.unrecoverable.Add(1)
			return good, markCorruption(pathErr("read", r.path, base.CorruptionErrorf(
				"guardfs: bytes %s of %s lost in every copy", l, r.path)))
		}
	}
	copy(p[:n], r.m.Data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (r *framedReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.ReadAt(p, r.pos)
	r.pos += int64(n)
	if n > 0 && err == io.EOF {
		err = nil
	}
	return n, err
}

var errReadOnly = errors.New("guardfs: framed files are written only through Create")

func (r *framedReader) Write([]byte) (int, error) { return 0, pathErr("write", r.path, errReadOnly) }
func (r *framedReader) WriteAt([]byte, int64) (int, error) {
	return 0, pathErr("write", r.path, errReadOnly)
}
func (r *framedReader) Close() error                   { return nil }
func (r *framedReader) Preallocate(int64, int64) error { return nil }
func (r *framedReader) Sync() error                    { return nil }
func (r *framedReader) SyncData() error                { return nil }
func (r *framedReader) SyncTo(int64) (bool, error)     { return true, nil }
func (r *framedReader) Prefetch(int64, int64) error    { return nil }
func (r *framedReader) Fd() uintptr                    { return vfs.InvalidFd }
func (r *framedReader) Stat() (vfs.FileInfo, error) {
	return fileInfo{name: r.fs.inner.PathBase(r.path), size: r.m.Size, mtime: r.mtime}, nil
}
