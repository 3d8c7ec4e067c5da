package guardfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	crerrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
)

// ReservedDir is the subdirectory, in every directory holding guarded
// files, where guardfs keeps copies and sidecars. It is hidden from List
// and refused as a user path.
const ReservedDir = ".guardfs"

// Names in ReservedDir: "<kind>.<k>.<id as 16 hex digits>.<file name>".
// Kind "m": copy k (1..Copies-1) of a framed file (the file itself is copy
// 0). Kind "s": copy k (0..Copies-1) of an sstable's sidecar. "t.*" are
// temporary files of a restore in progress.
const (
	kindCopy    = "m"
	kindSidecar = "s"
	kindTemp    = "t"
)

// FS is a Pebble vfs.FS over any vfs.FS that protects Pebble's own files:
// framed copies of MANIFEST/OPTIONS/markers/CURRENT, sidecars for
// sstables. Safe for concurrent use. See the package documentation.
type FS struct {
	inner vfs.FS
	opts  Options

	// mu serializes namespace changes of guarded files with their copies
	// and sidecars, restores and sealing, and guards the maps below.
	mu       sync.Mutex
	writers  map[string]any           // open writers by path key (*framedWriter, *sealedWriter)
	index    map[string]*dirIndex     // reserved-dir listing by directory
	sidecars map[string]*sidecarState // loaded sidecars by path key

	repairing base.InFlight[string] // sstable ranges being rewritten now

	ctr counters
}

var _ vfs.FS = (*FS)(nil)

// New returns a guardfs over inner.
func New(inner vfs.FS, opts Options) (*FS, error) {
	if inner == nil {
		return nil, base.InvalidArgumentf("guardfs: nil inner FS")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &FS{inner: inner, opts: opts, writers: map[string]any{}, index: map[string]*dirIndex{},
		sidecars: map[string]*sidecarState{}}, nil
}

func (fs *FS) String() string { return "guardfs" }

// Unwrap implements vfs.FS: the underlying FS.
func (fs *FS) Unwrap() vfs.FS { return fs.inner }

// Options returns the options in effect (defaults filled in).
func (fs *FS) Options() Options { return fs.opts }

type counters struct {
	framesRepaired  atomic.Int64
	copiesRestored  atomic.Int64
	filesRestored   atomic.Int64
	rangeCopyReads  atomic.Int64
	rangeRepairs    atomic.Int64
	zeroFilledBytes atomic.Int64
	unrecoverable   atomic.Int64
	sidecarsWritten atomic.Int64
	sealsFromWrites atomic.Int64
	sealErrors      atomic.Int64
	copyErrors      atomic.Int64
	readErrors      atomic.Int64
}

// Stats counts what guardfs did about damage.
type Stats struct {
	FramesRepaired  int64 // ranges missing or damaged in one copy of a framed file, served from another
	CopiesRestored  int64 // copies (of framed files and sidecars) rewritten from the merged content
	FilesRestored   int64 // framed files themselves rewritten (deleted, damaged or torn)
	RangeCopyReads  int64 // sstable metadata reads served from the sidecar because the file's bytes differed or were gone
	RangeRepairs    int64 // sstable metadata ranges rewritten in place from the sidecar
	ZeroFilledBytes int64 // bytes past a sealed sstable's physical end served as zeros
	Unrecoverable   int64 // ranges lost in every copy, returned as corruption
	SidecarsWritten int64 // sidecars written (at close, lazily at open, by Verify)
	SealsFromWrites int64 // sidecars whose copies came from the bytes written, not from a read of the new table
	SealErrors      int64 // sstables that could not be sealed (their metadata did not verify)
	CopyErrors      int64 // copy writes, syncs or restores that failed (the file itself is fine)
	ReadErrors      int64 // underlying read errors met while merging or reading
}

func (s Stats) String() string {
	return fmt.Sprintf("frames repaired %d, copies restored %d, files restored %d, range copy reads %d, range repairs %d, zero-filled %d B, unrecoverable %d, sidecars %d (%d from writes), seal errors %d, copy errors %d, read errors %d",
		s.FramesRepaired, s.CopiesRestored, s.FilesRestored, s.RangeCopyReads, s.RangeRepairs, s.ZeroFilledBytes,
		s.Unrecoverable, s.SidecarsWritten, s.SealsFromWrites, s.SealErrors, s.CopyErrors, s.ReadErrors)
}

// Stats returns a snapshot of the counters.
func (fs *FS) Stats() Stats {
	c := &fs.ctr
	return Stats{FramesRepaired: c.framesRepaired.Load(), CopiesRestored: c.copiesRestored.Load(),
		FilesRestored: c.filesRestored.Load(), RangeCopyReads: c.rangeCopyReads.Load(), RangeRepairs: c.rangeRepairs.Load(),
		ZeroFilledBytes: c.zeroFilledBytes.Load(), Unrecoverable: c.unrecoverable.Load(),
		SidecarsWritten: c.sidecarsWritten.Load(), SealsFromWrites: c.sealsFromWrites.Load(), SealErrors: c.sealErrors.Load(), CopyErrors: c.copyErrors.Load(),
		ReadErrors: c.readErrors.Load()}
}

// markCorruption makes err a corruption for Pebble (errors.Is(err,
// pebble.ErrCorruption): pebble.IsCorruptionError, DataCorruption events)
// while keeping base.ErrCorruption in its chain.
func markCorruption(err error) error { return crerrors.Mark(err, pebble.ErrCorruption) }

func pathErr(op, name string, err error) error { return &os.PathError{Op: op, Path: name, Err: err} }

func isNotExist(err error) bool { return err != nil && crerrors.Is(err, os.ErrNotExist) }

// ---- paths ----

func (fs *FS) key(p string) string {
	return fs.inner.PathJoin(fs.inner.PathDir(p), fs.inner.PathBase(p))
}
func (fs *FS) split(p string) (string, string) {
	return fs.inner.PathDir(p), fs.inner.PathBase(p)
}
func (fs *FS) reserved(dir string) string { return fs.inner.PathJoin(dir, ReservedDir) }
func (fs *FS) class(p string) Class {
	return fs.opts.Classify(fs.inner.PathBase(p))
}

// isReservedPath reports a path naming ReservedDir or something in it.
func (fs *FS) isReservedPath(p string) bool {
	return fs.inner.PathBase(p) == ReservedDir || fs.inner.PathBase(fs.inner.PathDir(p)) == ReservedDir
}

func (fs *FS) refuseReserved(op, name string) error {
	if fs.isReservedPath(name) {
		return pathErr(op, name, base.InvalidArgumentf("guardfs: %q is reserved", ReservedDir))
	}
	return nil
}

func reservedName(kind string, k int, id uint64, name string) string {
	return fmt.Sprintf("%s.%d.%016x.%s", kind, k, id, name)
}

// copyRef is one file in a reserved directory.
type copyRef struct {
	k    int
	id   uint64
	path string // underlying path
}

// dirIndex is the parsed listing of one directory's ReservedDir.
type dirIndex struct {
	copies   map[string][]copyRef // framed file name -> its copies 1..
	sidecars map[string][]copyRef // sstable name -> its sidecar copies
	temps    []string
}

// CopyOf recognizes the files guardfs keeps as copies of one another, for
// a layer below that places copies apart (internal/sdfvfs pins them to
// different channels, so that one failed flash die cannot hold every copy
// of a byte): the copies ReservedDir/m.<k>.<id>.<name> of framed file
// <name> are copies k of group <dir>/<name> (the file itself is copy 0;
// as a duplicated file it also has copy 1 below guardfs, so the copies
// here count from 2), and the sidecars ReservedDir/s.<k>.<id>.<name> of
// sstable <name> are copies k of group <dir>/<ReservedDir>/s.<name>. A
// restore's temporary file (ReservedDir/t.<random>.<target>.tmp) belongs
// where its target does: it is renamed over it. ok is false for any
// other path. p uses '/' separators (sdfvfs's paths).
func CopyOf(p string) (group string, index int, ok bool) {
	dir, n := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, n = p[:i], p[i+1:]
	}
	if dir != ReservedDir && !strings.HasSuffix(dir, "/"+ReservedDir) {
		return "", 0, false
	}
	parent := strings.TrimSuffix(strings.TrimSuffix(dir, ReservedDir), "/")
	if strings.HasPrefix(n, kindTemp+".") && strings.HasSuffix(n, ".tmp") {
		rest := strings.TrimSuffix(strings.TrimPrefix(n, kindTemp+"."), ".tmp")
		// <random 16 hex>.<target base>
		if len(rest) < 18 || rest[16] != '.' {
			return "", 0, false
		}
		target := rest[17:]
		if _, _, _, _, isCopy := parseReserved(target); !isCopy {
			// The file itself, restored: copy 0 of its group.
			return joinSlash(parent, target), 0, true
		}
		return CopyOf(joinSlash(dir, target))
	}
	kind, k, _, name, ok := parseReserved(n)
	if !ok {
		return "", 0, false
	}
	switch kind {
	case kindCopy:
		return joinSlash(parent, name), k + 1, true
	case kindSidecar:
		return joinSlash(dir, kindSidecar+"."+name), k, true
	}
	return "", 0, false
}

func joinSlash(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func parseReserved(n string) (kind string, k int, id uint64, name string, ok bool) {
	parts := strings.SplitN(n, ".", 4)
	if len(parts) != 4 || len(parts[2]) != 16 || parts[3] == "" {
		return "", 0, 0, "", false
	}
	k, err := strconv.Atoi(parts[1])
	if err != nil || k < 0 || k > 9 {
		return "", 0, 0, "", false
	}
	id, err = strconv.ParseUint(parts[2], 16, 64)
	if err != nil {
		return "", 0, 0, "", false
	}
	return parts[0], k, id, parts[3], true
}

// loadIndex returns dir's reserved-directory index, listing it if it is
// not cached or refresh is set. The caller holds fs.mu.
func (fs *FS) loadIndex(dir string, refresh bool) *dirIndex {
	dk := fs.inner.PathJoin(dir)
	if idx, ok := fs.index[dk]; ok && !refresh {
		return idx
	}
	idx := &dirIndex{copies: map[string][]copyRef{}, sidecars: map[string][]copyRef{}}
	rd := fs.reserved(dir)
	names, err := fs.inner.List(rd)
	if err == nil {
		sort.Strings(names)
		for _, n := range names {
			if strings.HasPrefix(n, kindTemp+".") {
				idx.temps = append(idx.temps, fs.inner.PathJoin(rd, n))
				continue
			}
			kind, k, id, name, ok := parseReserved(n)
			if !ok {
				continue
			}
			ref := copyRef{k: k, id: id, path: fs.inner.PathJoin(rd, n)}
			switch kind {
			case kindCopy:
				idx.copies[name] = append(idx.copies[name], ref)
			case kindSidecar:
				idx.sidecars[name] = append(idx.sidecars[name], ref)
			}
		}
	}
	fs.index[dk] = idx
	return idx
}

// ensureReserved creates dir's ReservedDir if needed, making its entry
// durable (the parent is synced after a creation). The caller holds fs.mu.
func (fs *FS) ensureReserved(dir string) error {
	rd := fs.reserved(dir)
	if _, err := fs.inner.Stat(rd); err == nil {
		return nil
	}
	if err := fs.inner.MkdirAll(rd, 0o755); err != nil {
		return err
	}
	return fs.syncDir(dir)
}

func (fs *FS) syncDir(dir string) error {
	d, err := fs.inner.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// syncReserved syncs dir's ReservedDir if it exists.
func (fs *FS) syncReserved(dir string) error {
	d, err := fs.inner.OpenDir(fs.reserved(dir))
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

func removeIgnoringMissing(fs vfs.FS, p string) error {
	if err := fs.Remove(p); err != nil && !isNotExist(err) {
		return err
	}
	return nil
}

// ---- reading whole files tolerantly ----

// readChunkBytes and readSectorBytes: whole files are read in chunks; a
// chunk that fails is read again sector by sector, so an unreadable sector
// costs only its own bytes (left zero, which never verifies as a frame).
const (
	readChunkBytes  = 64 << 10
	readSectorBytes = 4 << 10
)

// readAll reads the underlying file at p. present is false when it does
// not exist; readErr reports bytes that could not be read (left zero).
func (fs *FS) readAll(p string) (data []byte, present bool, readErr error) {
	f, err := fs.inner.Open(p)
	if err != nil {
		if isNotExist(err) {
			return nil, false, nil
		}
		fs.ctr.readErrors.Add(1)
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		fs.ctr.readErrors.Add(1)
		return nil, false, err
	}
	size := st.Size()
	buf := make([]byte, size)
	for off := int64(0); off < size; off += readChunkBytes {
		end := min(size, off+readChunkBytes)
		if n, err := f.ReadAt(buf[off:end], off); int64(n) == end-off && (err == nil || err == io.EOF) {
			continue
		}
		for s := off; s < end; s += readSectorBytes {
			e := min(end, s+readSectorBytes)
			if n, err := f.ReadAt(buf[s:e], s); int64(n) != e-s || (err != nil && err != io.EOF) {
				clear(buf[s:e])
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				readErr = errors.Join(readErr, fmt.Errorf("guardfs: reading %s at %d: %w", p, s, err))
				fs.ctr.readErrors.Add(1)
			}
		}
	}
	return buf, true, readErr
}

// writeReplace writes data to a temporary file in dir's ReservedDir, syncs
// it and renames it over target: target ends up either as it was or with
// all of data. The caller holds fs.mu and syncs the directories.
func (fs *FS) writeReplace(dir, target string, data []byte) error {
	if err := fs.ensureReserved(dir); err != nil {
		return err
	}
	// The temporary's name carries its target's (CopyOf), so that a layer
	// below that places copies apart places it where the target belongs.
	tmp := fs.inner.PathJoin(fs.reserved(dir), fmt.Sprintf("%s.%016x.%s.tmp", kindTemp, fs.opts.NewID(), fs.inner.PathBase(target)))
	f, err := fs.inner.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, werr := f.Write(append([]byte(nil), data...))
	err = errors.Join(werr, f.Sync(), f.Close())
	if err == nil {
		err = fs.inner.Rename(tmp, target)
	}
	if err != nil {
		_ = removeIgnoringMissing(fs.inner, tmp)
	}
	return err
}

// ---- vfs.FS ----

// Create implements vfs.FS.
func (fs *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.refuseReserved("create", name); err != nil {
		return nil, err
	}
	switch fs.class(name) {
	case ClassFramed:
		return fs.createFramed(name, category)
	case ClassSealed:
		return fs.createSealed(name, category)
	}
	return fs.inner.Create(name, category)
}

// Open implements vfs.FS.
func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if fs.isReservedPath(name) {
		return nil, pathErr("open", name, os.ErrNotExist)
	}
	var f vfs.File
	var err error
	switch fs.class(name) {
	case ClassFramed:
		f, err = fs.openFramed(name)
	case ClassSealed:
		f, err = fs.openSealed(name, false)
	default:
		return fs.inner.Open(name, opts...)
	}
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		o.Apply(f)
	}
	return f, nil
}

// OpenReadWrite implements vfs.FS. A framed file that exists opens
// read-only (its writes fail: framed files are appended only through
// Create); a sealed sstable opens with WriteAt passed through (and its
// sidecar made again if the write touches its metadata or size).
func (fs *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := fs.refuseReserved("open", name); err != nil {
		return nil, err
	}
	var f vfs.File
	var err error
	switch fs.class(name) {
	case ClassFramed:
		if f, err = fs.openFramed(name); isNotExist(err) {
			f, err = fs.createFramed(name, category)
		}
	case ClassSealed:
		if f, err = fs.openSealed(name, true); isNotExist(err) {
			f, err = fs.createSealed(name, category)
		}
	default:
		return fs.inner.OpenReadWrite(name, category, opts...)
	}
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		o.Apply(f)
	}
	return f, nil
}

// OpenDir implements vfs.FS: syncing the directory also syncs its
// ReservedDir (first), so copies and sidecars made in it are durable
// whenever Pebble makes the directory durable.
func (fs *FS) OpenDir(name string) (vfs.File, error) {
	if fs.isReservedPath(name) {
		return nil, pathErr("open", name, os.ErrNotExist)
	}
	d, err := fs.inner.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &dirFile{File: d, fs: fs, path: name}, nil
}

// dirFile is an open directory.
type dirFile struct {
	vfs.File
	fs   *FS
	path string
}

func (d *dirFile) Sync() error {
	if err := d.fs.syncReserved(d.path); err != nil {
		return err
	}
	return d.File.Sync()
}

func (d *dirFile) SyncData() error { return d.Sync() }

// Remove implements vfs.FS. A guarded file goes with its copies or
// sidecar; the copies go first, so a crash never leaves copies of a file
// that was being removed (which would bring it back).
func (fs *FS) Remove(name string) error {
	if err := fs.refuseReserved("remove", name); err != nil {
		return err
	}
	switch c := fs.class(name); c {
	case ClassFramed, ClassSealed:
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return fs.removeGuardedLocked(name, c)
	}
	err := fs.inner.Remove(name)
	if err != nil && !isNotExist(err) {
		// A directory whose only entry is our ReservedDir is empty to Pebble.
		if names, lerr := fs.inner.List(name); lerr == nil && len(names) == 1 && names[0] == ReservedDir {
			fs.mu.Lock()
			defer fs.mu.Unlock()
			if rerr := fs.inner.RemoveAll(fs.reserved(name)); rerr != nil {
				return rerr
			}
			fs.forgetUnder(name)
			return fs.inner.Remove(name)
		}
	}
	return err
}

func (fs *FS) removeGuardedLocked(name string, c Class) error {
	dir, b := fs.split(name)
	idx := fs.loadIndex(dir, false)
	refs := idx.copies[b]
	if c == ClassSealed {
		refs = idx.sidecars[b]
	}
	for _, r := range refs {
		if err := removeIgnoringMissing(fs.inner, r.path); err != nil {
			return pathErr("remove", name, err)
		}
	}
	if c == ClassSealed {
		delete(idx.sidecars, b)
		delete(fs.sidecars, fs.key(name))
	} else {
		delete(idx.copies, b)
	}
	err := fs.inner.Remove(name)
	if isNotExist(err) && len(refs) > 0 {
		return nil // only its copies were left
	}
	return err
}

// forgetUnder drops cached state of paths under dir. The caller holds fs.mu.
func (fs *FS) forgetUnder(dir string) {
	d := fs.inner.PathJoin(dir)
	under := func(p string) bool {
		return p == d || strings.HasPrefix(p, d+"/") || strings.HasPrefix(p, d+string(os.PathSeparator))
	}
	for k := range fs.index {
		if under(k) {
			delete(fs.index, k)
		}
	}
	for k := range fs.sidecars {
		if under(k) {
			delete(fs.sidecars, k)
		}
	}
}

// RemoveAll implements vfs.FS.
func (fs *FS) RemoveAll(name string) error {
	if err := fs.refuseReserved("removeall", name); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch c := fs.class(name); c {
	case ClassFramed, ClassSealed:
		if err := fs.removeGuardedLocked(name, c); err != nil && !isNotExist(err) {
			// Not a file of that class after all (a directory so named).
			if rerr := fs.inner.RemoveAll(name); rerr != nil {
				return rerr
			}
		}
		fs.forgetUnder(name)
		return nil
	}
	err := fs.inner.RemoveAll(name)
	fs.forgetUnder(name)
	return err
}

// Rename implements vfs.FS. A guarded file's copies (or sidecar) follow it;
// a file renamed across classes is rewritten in its new class. Crash
// cases are in the package documentation.
func (fs *FS) Rename(oldname, newname string) error {
	if err := fs.refuseReserved("rename", oldname); err != nil {
		return err
	}
	if err := fs.refuseReserved("rename", newname); err != nil {
		return err
	}
	co, cn := fs.class(oldname), fs.class(newname)
	switch {
	case co == ClassPass && cn == ClassPass:
		return fs.inner.Rename(oldname, newname)
	case co != cn:
		return fs.convert(oldname, newname)
	case fs.key(oldname) == fs.key(newname):
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if co == ClassFramed {
		return fs.renameFramedLocked(oldname, newname)
	}
	return fs.renameSealedLocked(oldname, newname)
}

// convert moves a file between classes by copying its content as guardfs
// presents it.
func (fs *FS) convert(oldname, newname string) error {
	src, err := fs.Open(oldname)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := fs.Create(newname, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, io.NewSectionReader(src, 0, 1<<62)); err != nil {
		_ = dst.Close()
		return err
	}
	if err := errors.Join(dst.Sync(), dst.Close()); err != nil {
		return err
	}
	return fs.Remove(oldname)
}

func (fs *FS) renameFramedLocked(oldname, newname string) error {
	odir, ob := fs.split(oldname)
	ndir, nb := fs.split(newname)
	oidx, nidx := fs.loadIndex(odir, false), fs.loadIndex(ndir, false)
	orefs := oidx.copies[ob]
	_, serr := fs.inner.Stat(oldname)
	oldPresent := serr == nil
	if !oldPresent && len(orefs) == 0 {
		return pathErr("rename", oldname, os.ErrNotExist)
	}
	// 1. The replaced file's copies go.
	for _, r := range nidx.copies[nb] {
		if err := removeIgnoringMissing(fs.inner, r.path); err != nil {
			return pathErr("rename", newname, err)
		}
	}
	delete(nidx.copies, nb)
	// 2. The copies move (they name the identity; from here on the new name
	// resolves to the renamed file's content even if its primary has not
	// moved yet).
	moved, err := fs.moveRefs(kindCopy, orefs, oldname, newname)
	if err != nil {
		return err
	}
	delete(oidx.copies, ob)
	if len(moved) > 0 {
		nidx.copies[nb] = moved
	}
	// 3. The file itself moves; a file whose primary was lost is restored
	// at its new name from the copies.
	if oldPresent {
		if err := fs.inner.Rename(oldname, newname); err != nil {
			return err
		}
		return nil
	}
	if err := removeIgnoringMissing(fs.inner, newname); err != nil {
		return err
	}
	fs.restoreFramedLocked(newname, true)
	return nil
}

// moveRefs renames the reserved files refs of oldname (copies or sidecars,
// as kind says) to newname's, in newname's reserved directory, and returns
// where they now are; a ref already gone is skipped.
func (fs *FS) moveRefs(kind string, refs []copyRef, oldname, newname string) ([]copyRef, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	ndir, nb := fs.split(newname)
	if err := fs.ensureReserved(ndir); err != nil {
		return nil, pathErr("rename", newname, err)
	}
	var moved []copyRef
	for _, r := range refs {
		np := fs.inner.PathJoin(fs.reserved(ndir), reservedName(kind, r.k, r.id, nb))
		if err := fs.inner.Rename(r.path, np); err != nil {
			if isNotExist(err) {
				continue
			}
			return nil, pathErr("rename", oldname, err)
		}
		moved = append(moved, copyRef{k: r.k, id: r.id, path: np})
	}
	return moved, nil
}

func (fs *FS) renameSealedLocked(oldname, newname string) error {
	odir, ob := fs.split(oldname)
	ndir, nb := fs.split(newname)
	oidx, nidx := fs.loadIndex(odir, false), fs.loadIndex(ndir, false)
	orefs := oidx.sidecars[ob]
	for _, r := range nidx.sidecars[nb] {
		if err := removeIgnoringMissing(fs.inner, r.path); err != nil {
			return pathErr("rename", newname, err)
		}
	}
	delete(nidx.sidecars, nb)
	delete(fs.sidecars, fs.key(newname))
	err := fs.inner.Rename(oldname, newname)
	switch {
	case isNotExist(err) && len(orefs) > 0:
		// Only the sidecar is left (the sstable was deleted): it moves,
		// and the file is presented at its new name.
		_ = removeIgnoringMissing(fs.inner, newname)
	case err != nil:
		return err
	}
	moved, err := fs.moveRefs(kindSidecar, orefs, oldname, newname)
	if err != nil {
		return err
	}
	delete(oidx.sidecars, ob)
	if sc, ok := fs.sidecars[fs.key(oldname)]; ok {
		fs.sidecars[fs.key(newname)] = sc
		delete(fs.sidecars, fs.key(oldname))
	}
	if len(moved) > 0 {
		nidx.sidecars[nb] = moved
	}
	return nil
}

// errNoLink is neither "exists", "not exist" nor "permission", so
// vfs.LinkOrCopy falls back to a copy.
var errNoLink = errors.New("guardfs: cannot link across protection classes")

// Link implements vfs.FS (Pebble's ingestion links sstables with
// vfs.LinkOrCopy). Copies and sidecars are linked (or copied) along.
func (fs *FS) Link(oldname, newname string) error {
	if err := fs.refuseReserved("link", oldname); err != nil {
		return err
	}
	if err := fs.refuseReserved("link", newname); err != nil {
		return err
	}
	co, cn := fs.class(oldname), fs.class(newname)
	if co == ClassPass && cn == ClassPass {
		return fs.inner.Link(oldname, newname)
	}
	if co != cn {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: errNoLink}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	odir, ob := fs.split(oldname)
	ndir, nb := fs.split(newname)
	kind := kindCopy
	orefs := fs.loadIndex(odir, false).copies[ob]
	if co == ClassSealed {
		kind = kindSidecar
		orefs = fs.loadIndex(odir, false).sidecars[ob]
	}
	if err := fs.inner.Link(oldname, newname); err != nil {
		return err
	}
	if len(orefs) == 0 {
		return nil
	}
	if err := fs.ensureReserved(ndir); err != nil {
		return err
	}
	nidx := fs.loadIndex(ndir, false)
	var linked []copyRef
	for _, r := range orefs {
		np := fs.inner.PathJoin(fs.reserved(ndir), reservedName(kind, r.k, r.id, nb))
		if err := fs.inner.Link(r.path, np); err != nil {
			data, present, rerr := fs.readAll(r.path)
			if !present || rerr != nil {
				continue // the copy is restored by the next merge
			}
			if err := fs.writeReplace(ndir, np, data); err != nil {
				fs.ctr.copyErrors.Add(1)
				continue
			}
		}
		linked = append(linked, copyRef{k: r.k, id: r.id, path: np})
	}
	if kind == kindSidecar {
		nidx.sidecars[nb] = linked
		delete(fs.sidecars, fs.key(newname))
	} else {
		nidx.copies[nb] = linked
	}
	return fs.syncReserved(ndir)
}

// ReuseForWrite implements vfs.FS: only pass-through files (WALs) are
// reused; a guarded file is removed and created afresh.
func (fs *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.refuseReserved("reuseforwrite", newname); err != nil {
		return nil, err
	}
	if fs.class(oldname) == ClassPass && fs.class(newname) == ClassPass {
		return fs.inner.ReuseForWrite(oldname, newname, category)
	}
	if err := fs.Remove(oldname); err != nil && !isNotExist(err) {
		return nil, err
	}
	return fs.Create(newname, category)
}

// MkdirAll implements vfs.FS, durably: the parent of every directory it
// creates is synced, so that the new directories survive a power loss
// (a process crash keeps them anyway; after a power loss a directory
// entry lives only once its parent was synced, and a replica whose
// directory vanished would restart empty: TestPowerLossKeepsAcknowledgedWrites
// in internal/kv lost every acknowledged write that way).
func (fs *FS) MkdirAll(dir string, perm os.FileMode) error {
	if err := fs.refuseReserved("mkdir", dir); err != nil {
		return err
	}
	exists := func(d string) bool { _, err := fs.inner.Stat(d); return err == nil }
	missing := base.MissingDirs(dir, exists, fs.inner.PathDir)
	if err := fs.inner.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range missing {
		parent := fs.inner.PathDir(d)
		if parent == "" {
			parent = "."
		}
		if err := fs.syncDir(parent); err != nil {
			return fmt.Errorf("guardfs: mkdir %s: sync %s: %w", dir, parent, err)
		}
	}
	return nil
}

// Lock implements vfs.FS.
func (fs *FS) Lock(name string) (io.Closer, error) { return fs.inner.Lock(name) }

// List implements vfs.FS: ReservedDir is hidden; a guarded file whose
// primary is gone but whose copies or sidecar survive is listed (and a
// framed one restored, with any missing copies).
func (fs *FS) List(dir string) ([]string, error) {
	if fs.isReservedPath(dir) {
		return nil, pathErr("list", dir, os.ErrNotExist)
	}
	names, err := fs.inner.List(dir)
	if err != nil {
		return nil, err
	}
	out := names[:0]
	present := map[string]bool{}
	for _, n := range names {
		if n != ReservedDir {
			out = append(out, n)
			present[n] = true
		}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	idx := fs.loadIndex(dir, true)
	for n := range idx.copies {
		if !present[n] && fs.opts.Classify(n) == ClassFramed {
			out = append(out, n)
			present[n] = true
		}
	}
	for n := range idx.sidecars {
		if !present[n] && fs.opts.Classify(n) == ClassSealed {
			out = append(out, n)
			present[n] = true
		}
	}
	sort.Strings(out)
	if !fs.opts.NoRepair {
		for _, n := range out {
			p := fs.inner.PathJoin(dir, n)
			switch fs.opts.Classify(n) {
			case ClassFramed:
				if fs.framedIncompleteLocked(p) {
					fs.restoreFramedLocked(p, false)
				}
			case ClassSealed:
				if refs := idx.sidecars[n]; len(refs) > 0 && len(refs) < fs.sidecarCopies() {
					_, _ = fs.loadSidecarLocked(p, true)
				}
			}
		}
	}
	return out, nil
}

// framedIncompleteLocked reports, from names alone, whether a framed file
// lacks its primary or a copy (and has no open writer).
func (fs *FS) framedIncompleteLocked(p string) bool {
	if _, ok := fs.writers[fs.key(p)]; ok {
		return false
	}
	dir, b := fs.split(p)
	refs := fs.loadIndex(dir, false).copies[b]
	ks := map[int]bool{}
	for _, r := range refs {
		ks[r.k] = true
	}
	for k := 1; k < fs.opts.Copies; k++ {
		if !ks[k] {
			return true
		}
	}
	_, err := fs.inner.Stat(p)
	return isNotExist(err)
}

// Stat implements vfs.FS: a framed file at its logical size, a sealed
// sstable at its recorded size.
func (fs *FS) Stat(name string) (vfs.FileInfo, error) {
	if fs.isReservedPath(name) {
		return nil, pathErr("stat", name, os.ErrNotExist)
	}
	switch fs.class(name) {
	case ClassFramed:
		return fs.statFramed(name)
	case ClassSealed:
		return fs.statSealed(name)
	}
	return fs.inner.Stat(name)
}

// PathBase implements vfs.FS.
func (fs *FS) PathBase(p string) string { return fs.inner.PathBase(p) }

// PathJoin implements vfs.FS.
func (fs *FS) PathJoin(elem ...string) string { return fs.inner.PathJoin(elem...) }

// PathDir implements vfs.FS.
func (fs *FS) PathDir(p string) string { return fs.inner.PathDir(p) }

// GetDiskUsage implements vfs.FS.
func (fs *FS) GetDiskUsage(p string) (vfs.DiskUsage, error) { return fs.inner.GetDiskUsage(p) }

// ParseReserved names the file a ReservedDir entry protects: for
// "m.<k>.<id>.<name>" (copy k of a framed file) and "s.<k>.<id>.<name>"
// (copy k of an sstable's sidecar) it returns name and whether it is a
// sidecar; ok is false for anything else (temporary files of a restore).
// For tools that classify stored files.
func ParseReserved(entry string) (name string, sidecar bool, ok bool) {
	kind, _, _, name, ok := parseReserved(entry)
	if !ok || kind != kindCopy && kind != kindSidecar {
		return "", false, false
	}
	return name, kind == kindSidecar, true
}
