package guardfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashmend/flashmend/internal/guardfs/frames"
	"github.com/flashmend/flashmend/internal/guardfs/sstmeta"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
)

// Sidecar content (the logical bytes of a framed file, so every unit of it
// is a frame bound to the sidecar's identity), little endian:
//
//	header: magic u32 | version u32 | sstable size u64 | range count u32 | data offset u32
//	table:  count x (offset u64 | length u64), sorted, disjoint
//	pad:    zeros up to the data offset, a multiple of the frame size
//	data:   the bytes of each range, in table order
//
// The data starts on a frame boundary, so no frame holds both structure and
// copied bytes: a frame of copied bytes lost in every sidecar copy costs
// only its own bytes (the sstable's are served there), and a lost header
// costs no copied bytes' frame.
const sidecarMagic uint32 = 0x43534647 // "GFSC"

const (
	sidecarVersion     = 1
	sidecarHeaderBytes = 24
	sidecarEntryBytes  = 16
	// maxSidecarRanges and maxSidecarBytes bound what a sidecar's header
	// may claim, so a header that verified but lies cannot make guardfs
	// allocate without limit.
	maxSidecarRanges = 1 << 20
	maxSidecarBytes  = 1 << 30
)

// rangeCopy is a copied range of an sstable.
type rangeCopy struct {
	Range
	data []byte
}

// sidecarState is a parsed sidecar.
type sidecarState struct {
	size   int64       // the sstable's size when sealed
	ranges []rangeCopy // copies that survived, sorted by offset
	lost   []Range     // recorded ranges whose copy is lost in every sidecar copy
}

// encodeSidecar lays out the sidecar content of an sstable of size bytes,
// its copied data starting at a multiple of frameBytes.
func encodeSidecar(size int64, ranges []rangeCopy, frameBytes int) []byte {
	structBytes := sidecarHeaderBytes + len(ranges)*sidecarEntryBytes
	dataOff := (structBytes + frameBytes - 1) / frameBytes * frameBytes
	n := dataOff
	for _, r := range ranges {
		n += len(r.data)
	}
	out := make([]byte, sidecarHeaderBytes, n)
	binary.LittleEndian.PutUint32(out[0:], sidecarMagic)
	binary.LittleEndian.PutUint32(out[4:], sidecarVersion)
	binary.LittleEndian.PutUint64(out[8:], uint64(size))
	binary.LittleEndian.PutUint32(out[16:], uint32(len(ranges)))
	binary.LittleEndian.PutUint32(out[20:], uint32(dataOff))
	for _, r := range ranges {
		out = binary.LittleEndian.AppendUint64(out, uint64(r.Off))
		out = binary.LittleEndian.AppendUint64(out, uint64(r.Len))
	}
	out = append(out, make([]byte, dataOff-structBytes)...)
	for _, r := range ranges {
		out = append(out, r.data...)
	}
	return out
}

// decodeSidecar parses merged sidecar content. The parts of ranges whose
// copied bytes are lost in every copy are listed in lost (the rest of the
// range keeps its copy); a lost header or table is an error.
func decodeSidecar(m frames.Merged) (*sidecarState, error) {
	held := frames.Subtract(m.Size, m.Lost) // sorted, disjoint
	heldAll := func(r Range) bool {
		for _, h := range held {
			if h.Off <= r.Off && r.End() <= h.End() {
				return true
			}
		}
		return false
	}
	if !heldAll(Range{Off: 0, Len: sidecarHeaderBytes}) {
		return nil, base.CorruptionErrorf("guardfs: sidecar header lost in every copy")
	}
	d := m.Data
	if binary.LittleEndian.Uint32(d[0:]) != sidecarMagic {
		return nil, base.CorruptionErrorf("guardfs: sidecar has magic %#x", binary.LittleEndian.Uint32(d[0:]))
	}
	if v := binary.LittleEndian.Uint32(d[4:]); v != sidecarVersion {
		return nil, base.CorruptionErrorf("guardfs: sidecar version %d unknown", v)
	}
	size := int64(binary.LittleEndian.Uint64(d[8:]))
	count := int64(binary.LittleEndian.Uint32(d[16:]))
	dataOff := int64(binary.LittleEndian.Uint32(d[20:]))
	table := Range{Off: sidecarHeaderBytes, Len: count * sidecarEntryBytes}
	if size < 0 || count > maxSidecarRanges || dataOff < table.End() {
		return nil, base.CorruptionErrorf("guardfs: sidecar header claims size %d, %d ranges, data at %d", size, count, dataOff)
	}
	if !heldAll(table) {
		return nil, base.CorruptionErrorf("guardfs: sidecar range table lost in every copy")
	}
	sc := &sidecarState{size: size}
	at := dataOff
	prevEnd := int64(0)
	for i := int64(0); i < count; i++ {
		e := d[table.Off+i*sidecarEntryBytes:]
		r := Range{Off: int64(binary.LittleEndian.Uint64(e)), Len: int64(binary.LittleEndian.Uint64(e[8:]))}
		// NB: r.Len > size-r.Off, not r.End() > size: an offset near the
		// top of int64 would make End overflow to a negative number.
		if r.Off < prevEnd || r.Len <= 0 || r.Off > size || r.Len > size-r.Off || at+r.Len > maxSidecarBytes {
			return nil, base.CorruptionErrorf("guardfs: sidecar range %d %s is not valid", i, r)
		}
		prevEnd = r.End()
		// Keep the held parts of the copy; the lost parts are served from
		// the sstable itself.
		src := Range{Off: at, Len: r.Len}
		covered := src.Off
		for _, h := range held {
			lo, hi := max(h.Off, src.Off), min(h.End(), src.End())
			if lo >= hi {
				continue
			}
			if lo > covered {
				sc.lost = append(sc.lost, Range{Off: r.Off + covered - src.Off, Len: lo - covered})
			}
			sc.ranges = append(sc.ranges, rangeCopy{Range: Range{Off: r.Off + lo - src.Off, Len: hi - lo}, data: d[lo:hi]})
			covered = hi
		}
		if covered < src.End() {
			sc.lost = append(sc.lost, Range{Off: r.Off + covered - src.Off, Len: src.End() - covered})
		}
		at = src.End()
	}
	return sc, nil
}

// ---- writing sstables ----

// createSealed creates an sstable: the data goes to the underlying FS; the
// sidecar is written when the writer closes.
func (fs *FS) createSealed(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.dropSidecarLocked(name); err != nil {
		return nil, pathErr("create", name, err)
	}
	f, err := fs.inner.Create(name, category)
	if err != nil {
		return nil, err
	}
	w := &sealedWriter{File: f, fs: fs, path: name, key: fs.key(name)}
	fs.writers[w.key] = w
	return w, nil
}

// dropSidecarLocked removes the sidecar of the sstable at p.
func (fs *FS) dropSidecarLocked(p string) error {
	dir, b := fs.split(p)
	idx := fs.loadIndex(dir, false)
	for _, r := range idx.sidecars[b] {
		if err := removeIgnoringMissing(fs.inner, r.path); err != nil {
			return err
		}
	}
	delete(idx.sidecars, b)
	delete(fs.sidecars, fs.key(p))
	return nil
}

// sealedWriter passes an sstable's writes through and seals it on Close.
//
// It keeps the last sealTailBytes it wrote (Pebble writes an sstable
// front to back, its metadata last), and Close takes the sidecar's copies
// from those bytes when they hold every metadata range: the copies are
// what Pebble wrote, not what the device gives back. A read of the new
// table at Close could meet damage the write did not make (a flip on
// read, persisted by the device); then the sidecar could not be written
// at all and the table's metadata would have no copy for the rest of its
// life (every damaged index or filter block a whole-table repair).
type sealedWriter struct {
	vfs.File
	fs     *FS
	path   string
	key    string
	closed bool
	// tail holds the written bytes from offset tailAt on (at most about
	// 2 x sealTailBytes); written counts every byte; noTail is set by a
	// write that is not an append (the tail no longer mirrors the file).
	tail    []byte
	tailAt  int64
	written int64
	noTail  bool
}

// sealTailBytes bounds what a sealedWriter keeps of an sstable's end: an
// sstable's metadata (index, filter, properties, meta-index, footer) is a
// few percent of it, so this covers tables of tens of MiB; larger ones are
// sealed from a read of the file.
const sealTailBytes = 2 << 20

func (w *sealedWriter) Write(p []byte) (int, error) {
	// Kept before the write: a file may change p once it has taken it
	// (Pebble's MemFS does in invariants builds).
	w.keep(p)
	n, err := w.File.Write(p)
	if n < len(p) && !w.noTail {
		// What was not written is not in the file either.
		short := len(p) - n
		w.written -= int64(short)
		if short > len(w.tail) {
			w.noTail, w.tail = true, nil
		} else {
			w.tail = w.tail[:len(w.tail)-short]
		}
	}
	return n, err
}

// WriteAt passes through; the tail stops mirroring the file.
func (w *sealedWriter) WriteAt(p []byte, off int64) (int, error) {
	w.noTail, w.tail = true, nil
	return w.File.WriteAt(p, off)
}

// keep appends written bytes to the tail, dropping its front past
// sealTailBytes.
func (w *sealedWriter) keep(p []byte) {
	w.written += int64(len(p))
	if w.noTail {
		return
	}
	w.tail = append(w.tail, p...)
	if len(w.tail) > 2*sealTailBytes {
		drop := len(w.tail) - sealTailBytes
		w.tail = append(w.tail[:0], w.tail[drop:]...)
		w.tailAt += int64(drop)
	}
}

// tailReader reads the bytes a sealedWriter kept; a read before them
// fails (the seal then reads the file).
type tailReader struct {
	at   int64
	data []byte
}

var errBeforeTail = errors.New("guardfs: read before the kept tail")

func (t tailReader) ReadAt(p []byte, off int64) (int, error) {
	if off < t.at {
		return 0, errBeforeTail
	}
	i := off - t.at
	if i >= int64(len(t.data)) {
		return 0, io.EOF
	}
	n := copy(p, t.data[i:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (w *sealedWriter) String() string { return "guardfs.sealed(" + w.path + ")" }

// Close closes the sstable and writes its sidecar. The table itself is
// complete and durable (Pebble synced it): a sidecar that cannot be made is
// counted (Stats.SealErrors, CopyErrors), not returned.
func (w *sealedWriter) Close() error {
	if w.closed {
		return pathErr("close", w.path, os.ErrClosed)
	}
	w.closed = true
	err := w.File.Close()
	fs := w.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.writers[w.key] == w {
		delete(fs.writers, w.key)
	}
	if err != nil {
		return err
	}
	var kept *tailReader
	if !w.noTail {
		kept = &tailReader{at: w.tailAt, data: w.tail}
	}
	w.tail = nil
	_, _ = fs.sealFromLocked(w.path, kept, w.written)
	return nil
}

// sealLocked writes the sidecar of the sstable at p from its current
// content: its size and verified copies of its metadata ranges, in
// Options.Copies copies under a new identity; then removes any older
// sidecar. The caller holds fs.mu.
func (fs *FS) sealLocked(p string) (*sidecarState, error) {
	return fs.sealFromLocked(p, nil, 0)
}

// sealFromLocked is sealLocked taking the metadata from kept, the last
// bytes written of the sstable's size bytes, when they hold all of it
// (otherwise, or with kept nil, from a read of the file).
func (fs *FS) sealFromLocked(p string, kept *tailReader, size int64) (*sidecarState, error) {
	var sc *sidecarState
	err := errBeforeTail
	if kept != nil {
		sc, err = readSeal(fs.opts.SSTReaderOptions, *kept, size, fs.inner.PathBase(p))
		if err == nil {
			fs.ctr.sealsFromWrites.Add(1)
		}
	}
	if err != nil {
		sc, err = fs.readSealLocked(p)
	}
	if err != nil {
		fs.ctr.sealErrors.Add(1)
		return nil, err
	}
	dir, b := fs.split(p)
	if err := fs.ensureReserved(dir); err != nil {
		fs.ctr.copyErrors.Add(1)
		return nil, err
	}
	id := fs.opts.NewID()
	m := frames.Merged{ID: id, Size: 0, Sealed: true}
	m.Data = encodeSidecar(sc.size, sc.ranges, fs.opts.FrameBytes)
	m.Size = int64(len(m.Data))
	enc := frames.Encode(m, fs.opts.FrameBytes, true)
	var refs []copyRef
	var errs []error
	for k := 0; k < fs.sidecarCopies(); k++ {
		target := fs.inner.PathJoin(fs.reserved(dir), reservedName(kindSidecar, k, id, b))
		if err := writeNew(fs.inner, target, enc); err != nil {
			fs.ctr.copyErrors.Add(1)
			errs = append(errs, err)
			continue
		}
		refs = append(refs, copyRef{k: k, id: id, path: target})
	}
	if len(refs) == 0 {
		fs.ctr.sealErrors.Add(1)
		return nil, fmt.Errorf("guardfs: no sidecar copy of %s could be written: %w", p, errors.Join(errs...))
	}
	if err := fs.syncReserved(dir); err != nil {
		fs.ctr.copyErrors.Add(1)
	}
	idx := fs.loadIndex(dir, false)
	for _, r := range idx.sidecars[b] {
		_ = removeIgnoringMissing(fs.inner, r.path)
	}
	idx.sidecars[b] = refs
	fs.sidecars[fs.key(p)] = sc
	fs.ctr.sidecarsWritten.Add(1)
	return sc, nil
}

// readSealLocked reads what a sidecar of the sstable at p would hold.
func (fs *FS) readSealLocked(p string) (*sidecarState, error) {
	f, err := fs.inner.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	sc, err := readSeal(fs.opts.SSTReaderOptions, f, st.Size(), fs.inner.PathBase(p))
	if err != nil {
		return nil, fmt.Errorf("guardfs: sealing %s: %w", p, err)
	}
	return sc, nil
}

// readSeal reads what a sidecar of the sstable in r (of size bytes) would
// hold: its metadata ranges, each verified.
func readSeal(ro sstable.ReaderOptions, r io.ReaderAt, size int64, name string) (*sidecarState, error) {
	layout, err := sstmeta.ReadLayout(ro, readableFile{r: r, size: size, name: name}, size)
	if err != nil {
		return nil, err
	}
	sc := &sidecarState{size: size}
	for _, reg := range layout.Regions {
		data, err := layout.VerifiedBytes(r, reg)
		if err != nil {
			return nil, err
		}
		sc.ranges = append(sc.ranges, rangeCopy{Range: Range{Off: reg.Off, Len: reg.Len}, data: data})
	}
	return sc, nil
}

// writeNew creates target with data, synced.
func writeNew(inner vfs.FS, target string, data []byte) error {
	f, err := inner.Create(target, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, werr := f.Write(append([]byte(nil), data...))
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = removeIgnoringMissing(inner, target)
		return err
	}
	return nil
}

// loadSidecarLocked returns the sidecar of the sstable at p (nil if it has
// none or it is unusable), merging its copies and, with restore (or when
// it was not loaded before and Options.NoRepair is off), rewriting the
// copies that are missing or damaged. The caller holds fs.mu.
func (fs *FS) loadSidecarLocked(p string, restore bool) (*sidecarState, error) {
	key := fs.key(p)
	if sc, ok := fs.sidecars[key]; ok && !restore {
		return sc, nil
	}
	dir, b := fs.split(p)
	refs := fs.loadIndex(dir, false).sidecars[b]
	if len(refs) == 0 {
		fs.sidecars[key] = nil
		return nil, nil
	}
	var named []uint64
	states := make([]frames.CopyState, len(refs))
	readErrs := make([]error, len(refs))
	for i, r := range refs {
		data, present, rerr := fs.readAll(r.path)
		readErrs[i] = rerr
		states[i] = frames.CopyState{Present: present, Physical: int64(len(data))}
		if present {
			states[i].Frames = frames.Parse(data)
			named = append(named, r.id)
		}
	}
	if len(named) == 0 {
		fs.sidecars[key] = nil
		return nil, nil
	}
	m := frames.Merge(frames.ResolveID(named, states), states)
	fs.countMerge(p, m)
	sc, err := decodeSidecar(m)
	if err != nil {
		fs.ctr.unrecoverable.Add(1)
		fs.sidecars[key] = nil
		return nil, fmt.Errorf("guardfs: sidecar of %s: %w", p, err)
	}
	if len(sc.lost) > 0 {
		fs.ctr.unrecoverable.Add(int64(len(sc.lost)))
	}
	fs.sidecars[key] = sc
	if _, writing := fs.writers[key]; !writing && (restore || !fs.opts.NoRepair) {
		fs.restoreSidecarLocked(p, m, refs, states, readErrs)
	}
	return sc, nil
}

// restoreSidecarLocked rewrites the sidecar copies that are missing,
// damaged or of another identity from the merged content m.
func (fs *FS) restoreSidecarLocked(p string, m frames.Merged, refs []copyRef, states []frames.CopyState, readErrs []error) {
	dir, b := fs.split(p)
	complete := len(m.Lost) == 0
	keep := map[int]int{}
	var drop []copyRef
	for i, r := range refs {
		if _, dup := keep[r.k]; dup || r.id != m.ID || r.k >= fs.sidecarCopies() || !states[i].Present {
			drop = append(drop, r)
			continue
		}
		keep[r.k] = i
	}
	var enc []byte
	var out []copyRef
	changed := false
	for k := 0; k < fs.sidecarCopies(); k++ {
		i, ok := keep[k]
		if ok && (m.Perfect[i] || readErrs[i] != nil && !complete) {
			out = append(out, refs[i])
			continue
		}
		if enc == nil {
			enc = frames.Encode(m, fs.opts.FrameBytes, true)
		}
		target := fs.inner.PathJoin(fs.reserved(dir), reservedName(kindSidecar, k, m.ID, b))
		if err := fs.writeReplace(dir, target, enc); err != nil {
			fs.ctr.copyErrors.Add(1)
			if ok {
				out = append(out, refs[i])
			}
			continue
		}
		fs.ctr.copiesRestored.Add(1)
		changed = true
		out = append(out, copyRef{k: k, id: m.ID, path: target})
	}
	for _, r := range drop {
		if err := removeIgnoringMissing(fs.inner, r.path); err == nil {
			changed = true
		}
	}
	fs.loadIndex(dir, false).sidecars[b] = out
	if changed {
		if err := fs.syncReserved(dir); err != nil {
			fs.ctr.copyErrors.Add(1)
		}
	}
}

// ---- reading sstables ----

// openSealed opens an sstable as guardfs presents it. An sstable without a
// sidecar gets one now (if its metadata verifies); a deleted sstable whose
// sidecar survives opens as a file of its recorded size.
func (fs *FS) openSealed(name string, rw bool) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fi, serr := fs.inner.Stat(name)
	if serr != nil && !isNotExist(serr) {
		return nil, serr
	}
	exists := serr == nil
	sc, _ := fs.loadSidecarLocked(name, false)
	_, writing := fs.writers[fs.key(name)]
	if exists && sc == nil && !writing {
		sc, _ = fs.sealLocked(name)
	}
	if !exists && sc == nil {
		return nil, pathErr("open", name, os.ErrNotExist)
	}
	var f vfs.File
	var physical int64
	var mtime time.Time
	if exists {
		var err error
		if rw {
			f, err = fs.inner.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
		} else {
			f, err = fs.inner.Open(name)
		}
		if err != nil {
			return nil, err
		}
		physical, mtime = fi.Size(), fi.ModTime()
	}
	return newSealedFile(fs, name, f, sc, physical, mtime, rw), nil
}

func (fs *FS) statSealed(name string) (vfs.FileInfo, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fi, serr := fs.inner.Stat(name)
	if serr != nil && !isNotExist(serr) {
		return nil, serr
	}
	if _, writing := fs.writers[fs.key(name)]; writing && serr == nil {
		return fi, nil
	}
	sc, _ := fs.loadSidecarLocked(name, false)
	switch {
	case sc != nil:
		var mtime time.Time
		if serr == nil {
			mtime = fi.ModTime()
		}
		return fileInfo{name: fs.inner.PathBase(name), size: sc.size, mtime: mtime}, nil
	case serr == nil:
		return fi, nil
	}
	return nil, pathErr("stat", name, os.ErrNotExist)
}

// sealedFile reads an sstable: its bytes from the underlying file, metadata
// ranges checked against the sidecar (the copy is served where they
// differ), bytes past the physical end (up to the recorded size) as zeros.
type sealedFile struct {
	fs       *FS
	path     string
	f        vfs.File // nil when the sstable itself is gone
	mtime    time.Time
	writable bool
	// view is replaced whole by WriteAt (which may seal the file again);
	// reads load it once.
	view atomic.Pointer[sealedView]

	mu  sync.Mutex
	pos int64
}

// sealedView is what a sealed sstable looks like to readers.
type sealedView struct {
	sc       *sidecarState // nil: no sidecar
	physical int64         // bytes the underlying file has
	size     int64         // bytes presented: the recorded size, else physical
}

func newSealedFile(fs *FS, path string, f vfs.File, sc *sidecarState, physical int64, mtime time.Time, rw bool) *sealedFile {
	h := &sealedFile{fs: fs, path: path, f: f, mtime: mtime, writable: rw}
	h.setView(sc, physical)
	return h
}

func (h *sealedFile) setView(sc *sidecarState, physical int64) {
	v := &sealedView{sc: sc, physical: physical, size: physical}
	if sc != nil {
		v.size = sc.size
	}
	h.view.Store(v)
}

var _ vfs.File = (*sealedFile)(nil)

func (h *sealedFile) String() string { return "guardfs.sealed(" + h.path + ")" }

func (h *sealedFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", h.path, base.InvalidArgumentf("guardfs: negative offset %d", off))
	}
	v := h.view.Load()
	if off >= v.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), v.size-off)
	buf := p[:n]
	want := Range{Off: off, Len: n}
	phys := int64(0)
	var readErr error
	if h.f != nil && off < v.physical {
		phys = min(n, v.physical-off)
		k, err := h.f.ReadAt(buf[:phys], off)
		if err != nil && err != io.EOF {
			readErr = err
			h.fs.ctr.readErrors.Add(1)
		} else if int64(k) < phys {
			phys = int64(k) // the file shrank since it was opened
		}
	}
	if readErr != nil {
		// Unreadable bytes are served from copies where they cover them;
		// otherwise the read is a corruption (the KV store patches the
		// range) rather than an I/O error that would stop the store.
		if !v.coveredByCopies(want) {
			h.fs.ctr.unrecoverable.Add(1)
			return 0, markCorruption(pathErr("read", h.path, base.CorruptionErrorf(
				"guardfs: %s of %s unreadable: %v", want, h.path, readErr)))
		}
		phys = 0
	}
	if phys < n {
		clear(buf[phys:])
		if readErr == nil {
			h.fs.ctr.zeroFilledBytes.Add(n - phys)
		}
	}
	if v.sc != nil {
		h.overlay(v, buf, off, phys)
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// coveredByCopies reports whether the sidecar holds every byte of r.
func (v *sealedView) coveredByCopies(r Range) bool {
	if v.sc == nil {
		return false
	}
	at := r.Off
	for _, c := range v.sc.ranges {
		if c.Off <= at && at < c.End() {
			at = c.End()
		}
	}
	return at >= r.End()
}

// overlay replaces the bytes of buf (the file at off; the first phys came
// from the file itself) that a sidecar copy holds differently, and repairs
// the file's differing bytes in place.
func (h *sealedFile) overlay(v *sealedView, buf []byte, off, phys int64) {
	want := Range{Off: off, Len: int64(len(buf))}
	rs := v.sc.ranges
	i := sort.Search(len(rs), func(i int) bool { return rs[i].End() > off })
	for ; i < len(rs) && rs[i].Off < want.End(); i++ {
		c := rs[i]
		lo, hi := max(c.Off, off), min(c.End(), want.End())
		dst := buf[lo-off : hi-off]
		src := c.data[lo-c.Off : hi-c.Off]
		if bytes.Equal(dst, src) {
			continue
		}
		copy(dst, src)
		h.fs.ctr.rangeCopyReads.Add(1)
		if !h.fs.opts.NoRepair && lo < off+phys && c.End() <= v.physical {
			h.fs.repairRange(h.path, c)
		}
	}
}

// repairRange rewrites a metadata range of the sstable at p from its copy,
// if the underlying FS lets it write in place, and counts it once read
// back intact. One repair per range at a time.
func (fs *FS) repairRange(p string, c rangeCopy) {
	k := fmt.Sprintf("%s@%d", fs.key(p), c.Off)
	if !fs.repairing.Begin(k) {
		return
	}
	defer fs.repairing.End(k)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.repairRangeLocked(p, c)
}

// repairRangeLocked is repairRange with fs.mu held.
func (fs *FS) repairRangeLocked(p string, c rangeCopy) {
	fi, err := fs.inner.Stat(p)
	if err != nil || fi.Size() < c.End() || fs.sidecars[fs.key(p)] == nil {
		return // gone or replaced meanwhile
	}
	f, err := fs.inner.OpenReadWrite(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.WriteAt(append([]byte(nil), c.data...), c.Off); err != nil {
		return
	}
	if err := f.Sync(); err != nil {
		return
	}
	check := make([]byte, c.Len)
	if n, err := f.ReadAt(check, c.Off); int64(n) == c.Len && (err == nil || err == io.EOF) && bytes.Equal(check, c.data) {
		fs.ctr.rangeRepairs.Add(1)
	}
}

func (h *sealedFile) Read(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.ReadAt(p, h.pos)
	h.pos += int64(n)
	if n > 0 && err == io.EOF {
		err = nil
	}
	return n, err
}

// WriteAt passes through (OpenReadWrite only: tools plant damage this
// way); a write over copied metadata or past the recorded size seals the
// file again from its new bytes, or drops the sidecar if they no longer
// verify, so a copy never undoes a write made through guardfs.
func (h *sealedFile) WriteAt(p []byte, off int64) (int, error) {
	if !h.writable || h.f == nil {
		return 0, pathErr("write", h.path, errors.New("guardfs: sstable not open for writing"))
	}
	n, err := h.f.WriteAt(p, off)
	if err != nil {
		return n, err
	}
	w := Range{Off: off, Len: int64(n)}
	v := h.view.Load()
	touches := v.sc != nil && w.End() > v.sc.size
	if v.sc != nil {
		for _, c := range v.sc.ranges {
			touches = touches || c.Overlaps(w)
		}
	}
	if touches {
		fs := h.fs
		fs.mu.Lock()
		if _, err := fs.sealLocked(h.path); err != nil {
			_ = fs.dropSidecarLocked(h.path)
		}
		sc := fs.sidecars[fs.key(h.path)]
		fs.mu.Unlock()
		physical := max(v.physical, w.End())
		if fi, err := h.f.Stat(); err == nil {
			physical = fi.Size()
		}
		h.setView(sc, physical)
	}
	return n, nil
}

func (h *sealedFile) Write([]byte) (int, error) {
	return 0, pathErr("write", h.path, errors.New("guardfs: sealed sstables are not appended to"))
}

func (h *sealedFile) Close() error {
	if h.f == nil {
		return nil
	}
	return h.f.Close()
}

func (h *sealedFile) Stat() (vfs.FileInfo, error) {
	return fileInfo{name: h.fs.inner.PathBase(h.path), size: h.view.Load().size, mtime: h.mtime}, nil
}

func (h *sealedFile) Sync() error {
	if h.f == nil {
		return nil
	}
	return h.f.Sync()
}
func (h *sealedFile) SyncData() error                { return h.Sync() }
func (h *sealedFile) SyncTo(int64) (bool, error)     { return true, h.Sync() }
func (h *sealedFile) Preallocate(int64, int64) error { return nil }
func (h *sealedFile) Prefetch(off, n int64) error {
	v := h.view.Load()
	if h.f == nil || off >= v.physical {
		return nil
	}
	return h.f.Prefetch(off, min(n, v.physical-off))
}
func (h *sealedFile) Fd() uintptr {
	if h.f == nil {
		return vfs.InvalidFd
	}
	return h.f.Fd()
}

// sidecarCopies is how many copies of a sidecar are kept: Copies-1 (at
// least 1), so each metadata range of an sstable exists Copies times, the
// sstable's own bytes counting as one.
func (fs *FS) sidecarCopies() int { return max(1, fs.opts.Copies-1) }
