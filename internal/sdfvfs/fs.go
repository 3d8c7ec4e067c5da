package sdfvfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/sdf"
)

// reservedDir holds this layer's own files (shadow copies, range copies). It
// is hidden from List of the root and refused as a user path.
const reservedDir = ".sdfvfs"

const (
	shadowPrefix = reservedDir + "/dup/"
	rangesPrefix = reservedDir + "/ranges/"
)

// copyLifetime is the hint of shadow and range copies: no Pebble file uses
// it, so copies fill zones of their own, apart from the zones of their
// primaries.
const copyLifetime = sdf.LifetimeExtreme

// FS is a Pebble vfs.FS over the extent files of an sdf.FS. Paths are
// slash-separated; a leading slash, "." and ".." are cleaned away, so "/db",
// "db" and "./db/" name the same directory. Safe for concurrent use.
type FS struct {
	sfs      *sdf.FS
	opts     Options
	channels int // channels of the device (from sdf's zone table)

	// mu serializes namespace changes so a file and its copies change
	// together (a shadow never outlives or misses its primary's rename).
	mu sync.Mutex

	lockMu sync.Mutex
	locks  map[string]bool // paths locked by Lock, in this process

	repairing base.InFlight[repairKey] // damaged ranges being rewritten now

	ctr counters
}

var _ vfs.FS = (*FS)(nil)

type counters struct {
	copyReads      atomic.Int64
	repairs        atomic.Int64
	repairErrors   atomic.Int64
	corruptions    atomic.Int64
	shadowBytes    atomic.Int64
	rangeCopyBytes atomic.Int64
	rangeCopies    atomic.Int64
	copyErrors     atomic.Int64
	orphans        atomic.Int64
	failovers      atomic.Int64
}

// Stats counts what the layer did about corruption and duplication.
type Stats struct {
	CopyReads      int64 // damaged ranges served from a second copy
	Repairs        int64 // damaged primary ranges rewritten from a good copy
	RepairErrors   int64 // rewrites that failed (the read still succeeded)
	Corruptions    int64 // corruption errors returned (no good copy)
	ShadowBytes    int64 // bytes appended to whole-file shadow copies
	RangeCopyBytes int64 // bytes kept by range duplication
	RangeCopies    int64 // range-copy files written
	CopyErrors     int64 // copies that could not be made (source did not verify, no space)
	Orphans        int64 // copies without a file, removed by New
	Failovers      int64 // files whose shadow replaced a primary that failed to write
}

func (s Stats) String() string {
	return fmt.Sprintf("copy reads %d, repairs %d (failed %d), corruptions returned %d, shadow bytes %d, range copies %d (%d B), copy errors %d, orphans %d, failovers %d",
		s.CopyReads, s.Repairs, s.RepairErrors, s.Corruptions, s.ShadowBytes, s.RangeCopies, s.RangeCopyBytes, s.CopyErrors, s.Orphans,
		s.Failovers)
}

// New returns a vfs.FS over sfs. The sdf.FS stays owned by the caller.
func New(sfs *sdf.FS, opts Options) (*FS, error) {
	if sfs == nil {
		return nil, base.InvalidArgumentf("sdfvfs: nil sdf.FS")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	fs := &FS{sfs: sfs, opts: opts, locks: map[string]bool{}}
	for _, z := range sfs.Zones() {
		fs.channels = max(fs.channels, z.Channel+1)
	}
	if err := fs.removeOrphans(); err != nil {
		return nil, err
	}
	return fs, nil
}

// removeOrphans removes copies whose file is gone: a crash between removing
// (or renaming) a file and its copies leaves them behind.
func (fs *FS) removeOrphans() error {
	for _, n := range fs.sfs.List() {
		var p string
		switch {
		case strings.HasPrefix(n, shadowPrefix):
			p = strings.TrimPrefix(n, shadowPrefix)
		case strings.HasPrefix(n, rangesPrefix):
			p = strings.TrimPrefix(n, rangesPrefix)
		default:
			continue
		}
		if _, err := fs.sfs.Stat(p); !isNotExist(err) {
			continue
		}
		if err := fs.sfs.Remove(n); err != nil && !isNotExist(err) {
			return fmt.Errorf("sdfvfs: removing orphaned copy %q: %w", n, err)
		}
		fs.ctr.orphans.Add(1)
	}
	return nil
}

// SDF returns the underlying sdf.FS.
func (fs *FS) SDF() *sdf.FS { return fs.sfs }

// Stats returns a snapshot of the counters.
func (fs *FS) Stats() Stats {
	c := &fs.ctr
	return Stats{CopyReads: c.copyReads.Load(), Repairs: c.repairs.Load(), RepairErrors: c.repairErrors.Load(),
		Corruptions: c.corruptions.Load(), ShadowBytes: c.shadowBytes.Load(),
		RangeCopyBytes: c.rangeCopyBytes.Load(), RangeCopies: c.rangeCopies.Load(), CopyErrors: c.copyErrors.Load(),
		Orphans: c.orphans.Load(), Failovers: c.failovers.Load()}
}

func (fs *FS) String() string { return "sdfvfs" }

// clean maps a path onto the sdf namespace: slash-separated, no leading
// slash, the root is "".
func clean(name string) string {
	p := path.Clean("/" + strings.ReplaceAll(name, "\\", "/"))
	return strings.TrimPrefix(p, "/")
}

func isReserved(p string) bool { return p == reservedDir || strings.HasPrefix(p, reservedDir+"/") }

func dirMarker(p string) string  { return p + "/" }
func shadowName(p string) string { return shadowPrefix + p }
func rangesName(p string) string { return rangesPrefix + p }

func pathErr(op, name string, err error) error { return &os.PathError{Op: op, Path: name, Err: err} }

// filePath validates a path that names a file.
func (fs *FS) filePath(op, name string) (string, error) {
	p := clean(name)
	if p == "" {
		return "", pathErr(op, name, base.InvalidArgumentf("sdfvfs: the root is a directory"))
	}
	if isReserved(p) {
		return "", pathErr(op, name, base.InvalidArgumentf("sdfvfs: %q is reserved", reservedDir))
	}
	return p, nil
}

// entry is what a path names.
type entry uint8

const (
	entryNone entry = iota
	entryFile
	entryDir
)

// lookup says whether p is a file, a directory (the root, a marker, or the
// prefix of some file) or nothing.
func (fs *FS) lookup(p string) entry {
	if p == "" {
		return entryDir
	}
	if _, err := fs.sfs.Stat(p); err == nil {
		return entryFile
	}
	pre := dirMarker(p)
	if _, err := fs.sfs.Stat(pre); err == nil {
		return entryDir // the common case: a directory made by MkdirAll
	}
	for _, n := range fs.sfs.List() {
		if strings.HasPrefix(n, pre) {
			return entryDir
		}
	}
	return entryNone
}

func (fs *FS) checkParent(op, name, p string) error {
	dir := path.Dir(p)
	if dir == "." {
		return nil
	}
	if fs.lookup(dir) != entryDir {
		return pathErr(op, name, os.ErrNotExist)
	}
	return nil
}

// Create implements vfs.FS: it creates (or replaces) the file at name, with
// the lifetime hint of opts.Lifetime, and its shadow copy if
// opts.DuplicateFile selects it.
func (fs *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	p, err := fs.filePath("create", name)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.checkParent("create", name, p); err != nil {
		return nil, err
	}
	if fs.lookup(p) == entryDir {
		return nil, pathErr("create", name, base.InvalidArgumentf("sdfvfs: is a directory"))
	}
	dup := !fs.opts.NoDuplication && fs.opts.DuplicateFile(p)
	// Copies of a previous file of that name describe other bytes.
	if err := fs.removeCopies(p, !dup); err != nil {
		return nil, pathErr("create", name, err)
	}
	primaryCh, shadowCh := -1, -1
	if dup && !fs.opts.UnpinnedCopies {
		primaryCh, shadowCh = fs.channelPair(p)
	}
	create := fs.sfs.CreateOn
	if group, i, ok := fs.opts.SiblingCopy(p); ok && !dup && !fs.opts.UnpinnedCopies && !fs.opts.NoDuplication {
		// One of the copies the caller keeps: the group's channels, as
		// for a file and its shadow, but as a preference: a raft log
		// that cannot append stops its replica, where one that spills
		// onto another channel under space pressure only loses the
		// separation for those zones (Placement shows it). It spills
		// onto a channel no other copy of the group is meant for first.
		var avoid []int
		primaryCh, avoid = fs.siblingChannel(group, i)
		create = func(name string, hint sdf.Lifetime, ch int) (*sdf.File, error) {
			return fs.sfs.CreateApart(name, hint, ch, avoid)
		}
	}
	f, err := create(p, fs.opts.Lifetime(p, category), primaryCh)
	if err != nil {
		return nil, pathErr("create", name, err)
	}
	h := &file{fs: fs, path: p, f: f, writable: true, hook: !fs.opts.NoDuplication && fs.opts.MetadataRanges != nil && !dup}
	if dup {
		if h.shadow, err = fs.sfs.CreateOn(shadowName(p), copyLifetime, shadowCh); err != nil {
			_ = f.Close()
			return nil, pathErr("create", name, fmt.Errorf("sdfvfs: shadow copy: %w", err))
		}
	}
	return h, nil
}

// channelPair picks the channels of a duplicated file and its shadow: the
// file's by a hash of its path (so MANIFEST, OPTIONS and markers spread over
// the channels), the shadow's half the device away. A zone spans every die
// of its channel, so different channels mean different dies. On a
// one-channel device both are on channel 0 (Placement reports it).
func (fs *FS) channelPair(p string) (primary, shadow int) {
	hs := fs.healthyChannels()
	if len(hs) < 2 {
		return -1, -1 // no two channels to pin apart: sdf places them
	}
	i := int(base.CRC32C([]byte(p)) % uint32(len(hs)))
	return hs[i], hs[(i+len(hs)/2)%len(hs)]
}

// siblingChannel picks the channel of copy k of a group of copies
// (Options.SiblingCopy) among the n healthy channels, from h, a hash of
// the group: copies 0 and 1 on channelPair's two channels (h and h+n/2),
// the next copies on the channels left in turn (h+1, h+2, ... skipping
// h+n/2), so that up to n copies of a group sit on n different channels.
//
// avoid lists the channels of the group's copies before k (and of copy 1
// for copy 0: a pair's other half), for sdf.CreateApart: where a copy
// must not spill to. NB: not every index's channel: a pair would then
// avoid every channel but its own, and spill anywhere.
func (fs *FS) siblingChannel(group string, k int) (ch int, avoid []int) {
	hs := fs.liveChannels()
	n := len(hs)
	if n < 2 {
		return -1, nil // no two channels to pin apart: sdf places them
	}
	h := int(base.CRC32C([]byte(group)) % uint32(n))
	at := func(k int) int {
		var off int
		switch k %= n; {
		case k == 0:
			off = 0
		case k == 1:
			off = n / 2
		default:
			off = k - 1 // the k-1'th of 1, 2, ... n-1 without n/2
			if off >= n/2 {
				off++
			}
		}
		return hs[(h+off)%n]
	}
	for j := 0; j < min(n, max(k+1, 2)); j++ {
		if j != k%n {
			avoid = append(avoid, at(j))
		}
	}
	return at(k), avoid
}

// liveChannels lists the channels with no failed die. NB: not
// healthyChannels: copies pinned as a preference (sdf.CreatePreferring)
// need not wait for a free zone, and a group's copies created at different
// times must see the same list, or two of them may land on one channel.
func (fs *FS) liveChannels() []int {
	bad := make([]bool, fs.channels)
	for _, d := range fs.sfs.FailedDies() {
		if d.Channel < fs.channels {
			bad[d.Channel] = true
		}
	}
	var out []int
	for c := 0; c < fs.channels; c++ {
		if !bad[c] {
			out = append(out, c)
		}
	}
	return out
}

// healthyChannels lists the channels with no failed die and a zone that
// takes writes (a file pinned elsewhere would fail to write).
func (fs *FS) healthyChannels() []int {
	free := make([]bool, fs.channels)
	for _, z := range fs.sfs.Zones() {
		if !z.Meta && (z.State == sdf.ZoneEmpty || z.State == sdf.ZoneOpen) && len(z.Dies) > 0 &&
			z.WritePointer < z.Capacity {
			free[z.Channel] = true
		}
	}
	var out []int
	for _, c := range fs.liveChannels() {
		if free[c] {
			out = append(out, c)
		}
	}
	return out
}

// removeCopies removes the range copy of p and, with shadowToo, its shadow.
func (fs *FS) removeCopies(p string, shadowToo bool) error {
	names := []string{rangesName(p)}
	if shadowToo {
		names = append(names, shadowName(p))
	}
	for _, n := range names {
		if err := fs.sfs.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Link implements vfs.FS. sdf has no hard links; the error is neither
// "exists", "not exist" nor "permission", so vfs.LinkOrCopy (ingestion,
// checkpoints) falls back to a copy.
func (fs *FS) Link(oldname, newname string) error {
	return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: errors.New("sdfvfs: hard links are not supported")}
}

// Open implements vfs.FS: the file opens for reading (a directory opens as
// with OpenDir).
func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	p := clean(name)
	if isReserved(p) {
		return nil, pathErr("open", name, base.InvalidArgumentf("sdfvfs: %q is reserved", reservedDir))
	}
	var h vfs.File
	switch fs.lookup(p) {
	case entryNone:
		return nil, pathErr("open", name, os.ErrNotExist)
	case entryDir:
		h = &dirFile{fs: fs, path: p}
	case entryFile:
		f, err := fs.sfs.OpenFile(p)
		if err != nil {
			return nil, pathErr("open", name, err)
		}
		h = &file{fs: fs, path: p, f: f}
	}
	for _, o := range opts {
		o.Apply(h)
	}
	return h, nil
}

// OpenReadWrite implements vfs.FS. sdf files are append-only and written
// once, so an existing file opens readable (WriteAt and Write fail) and a
// missing one is created for appending. Pebble uses it only for its shared
// cache, which flashmend does not configure.
func (fs *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	p, err := fs.filePath("open", name)
	if err != nil {
		return nil, err
	}
	if fs.lookup(p) == entryFile {
		return fs.Open(name, opts...)
	}
	h, err := fs.Create(name, category)
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		o.Apply(h)
	}
	return h, nil
}

// OpenDir implements vfs.FS; syncing the directory makes the sdf journal
// (every create, rename and remove) durable.
func (fs *FS) OpenDir(name string) (vfs.File, error) {
	p := clean(name)
	if isReserved(p) || fs.lookup(p) != entryDir {
		return nil, pathErr("open", name, os.ErrNotExist)
	}
	return &dirFile{fs: fs, path: p}, nil
}

// Remove implements vfs.FS: a file (with its copies) or an empty directory.
func (fs *FS) Remove(name string) error {
	p, err := fs.filePath("remove", name)
	if err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch fs.lookup(p) {
	case entryNone:
		return pathErr("remove", name, os.ErrNotExist)
	case entryFile:
		if err := fs.sfs.Remove(p); err != nil {
			return pathErr("remove", name, err)
		}
		if err := fs.removeCopies(p, true); err != nil {
			return pathErr("remove", name, err)
		}
		return nil
	}
	pre := dirMarker(p)
	for _, n := range fs.sfs.List() {
		if strings.HasPrefix(n, pre) && n != pre {
			return pathErr("remove", name, errors.New("sdfvfs: directory not empty"))
		}
	}
	if err := fs.sfs.Remove(pre); err != nil && !errors.Is(err, os.ErrNotExist) {
		return pathErr("remove", name, err)
	}
	return nil
}

// RemoveAll implements vfs.FS: the path and everything under it; a missing
// path is not an error.
func (fs *FS) RemoveAll(name string) error {
	p := clean(name)
	if isReserved(p) {
		return pathErr("removeall", name, base.InvalidArgumentf("sdfvfs: %q is reserved", reservedDir))
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var first error
	for _, n := range fs.sfs.List() {
		under := p == "" || n == p || strings.HasPrefix(n, dirMarker(p))
		if !under || isReserved(n) {
			continue
		}
		err := fs.sfs.Remove(n)
		if err == nil && !strings.HasSuffix(n, "/") {
			err = fs.removeCopies(n, true)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = pathErr("removeall", n, err)
		}
	}
	return first
}

// Rename implements vfs.FS for files (Pebble never renames directories); it
// replaces newname, and the file's copies follow it.
func (fs *FS) Rename(oldname, newname string) error {
	op, err := fs.filePath("rename", oldname)
	if err != nil {
		return err
	}
	np, err := fs.filePath("rename", newname)
	if err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch fs.lookup(op) {
	case entryNone:
		return pathErr("rename", oldname, os.ErrNotExist)
	case entryDir:
		return pathErr("rename", oldname, base.InvalidArgumentf("sdfvfs: renaming directories is not supported"))
	}
	if err := fs.checkParent("rename", newname, np); err != nil {
		return err
	}
	if fs.lookup(np) == entryDir {
		return pathErr("rename", newname, base.InvalidArgumentf("sdfvfs: is a directory"))
	}
	if op == np {
		return nil
	}
	if err := fs.sfs.Rename(op, np); err != nil {
		return pathErr("rename", oldname, err)
	}
	for _, cp := range []func(string) string{shadowName, rangesName} {
		err := fs.sfs.Rename(cp(op), cp(np))
		if errors.Is(err, os.ErrNotExist) {
			// The old file had no such copy: drop the replaced file's.
			err = fs.sfs.Remove(cp(np))
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return pathErr("rename", oldname, err)
		}
	}
	// A file renamed to a duplicated name gets its shadow now. The rename
	// is done and durable either way, so a failed copy (its content no
	// longer verifies) is counted, not returned.
	if !fs.opts.NoDuplication && fs.opts.DuplicateFile(np) {
		if _, err := fs.sfs.Stat(shadowName(np)); isNotExist(err) {
			if err := fs.copyToShadowLocked(np); err != nil {
				fs.ctr.copyErrors.Add(1)
			}
		}
	}
	return nil
}

// copyToShadowLocked writes the shadow of the (complete) file at p from its
// verified content, on a channel the file does not use. Files larger than
// MaxRangeCopyBytes are left without one. The caller holds fs.mu.
func (fs *FS) copyToShadowLocked(p string) error {
	f, err := fs.sfs.OpenFile(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Size() > int64(fs.opts.MaxRangeCopyBytes) {
		return nil
	}
	data := make([]byte, f.Size())
	if n, err := fs.readAt(f, data, 0); n != len(data) {
		return fmt.Errorf("sdfvfs: reading %q to copy it: %w", p, err)
	}
	ch := -1
	if !fs.opts.UnpinnedCopies {
		ch = fs.channelApart(f.Stat().Zones)
	}
	w, err := fs.sfs.CreateOn(shadowName(p), copyLifetime, ch)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	fs.ctr.shadowBytes.Add(int64(len(data)))
	return nil
}

// ReuseForWrite implements vfs.FS. Extent files are never overwritten in
// place, so the old file is removed and a new one created (which the vfs.FS
// contract allows); Pebble's recycled-WAL reader handles either.
func (fs *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.Remove(oldname); err != nil {
		return nil, err
	}
	return fs.Create(newname, category)
}

// MkdirAll implements vfs.FS. Directories are emulated: a directory exists
// when it is the root, has a marker file (its path with a trailing slash,
// written here so an empty directory survives a reopen), or holds a file.
func (fs *FS) MkdirAll(dir string, perm os.FileMode) error {
	p := clean(dir)
	if isReserved(p) {
		return pathErr("mkdir", dir, base.InvalidArgumentf("sdfvfs: %q is reserved", reservedDir))
	}
	if p == "" {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	parts := strings.Split(p, "/")
	for i := range parts {
		q := strings.Join(parts[:i+1], "/")
		switch fs.lookup(q) {
		case entryFile:
			return pathErr("mkdir", q, errors.New("sdfvfs: not a directory"))
		case entryDir:
			if _, err := fs.sfs.Stat(dirMarker(q)); err == nil {
				continue
			}
		}
		f, err := fs.sfs.Create(dirMarker(q), sdf.LifetimeLong)
		if err != nil {
			return pathErr("mkdir", q, err)
		}
		if err := f.Close(); err != nil {
			return pathErr("mkdir", q, err)
		}
	}
	return nil
}

// Lock implements vfs.FS with an in-process lock: the emulated device
// belongs to one process, so there is no other process to exclude. The file
// is created if missing.
func (fs *FS) Lock(name string) (io.Closer, error) {
	p, err := fs.filePath("lock", name)
	if err != nil {
		return nil, err
	}
	fs.lockMu.Lock()
	defer fs.lockMu.Unlock()
	if fs.locks[p] {
		return nil, pathErr("lock", name, errors.New("sdfvfs: already locked by this process"))
	}
	if fs.lookup(p) != entryFile {
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	}
	fs.locks[p] = true
	return &lockCloser{fs: fs, path: p}, nil
}

type lockCloser struct {
	fs     *FS
	path   string
	closed atomic.Bool
}

func (l *lockCloser) Close() error {
	if l.closed.Swap(true) {
		return errors.New("sdfvfs: lock already released")
	}
	l.fs.lockMu.Lock()
	defer l.fs.lockMu.Unlock()
	delete(l.fs.locks, l.path)
	return nil
}

// List implements vfs.FS: the names of the files and directories in dir.
func (fs *FS) List(dir string) ([]string, error) {
	p := clean(dir)
	if isReserved(p) || fs.lookup(p) != entryDir {
		return nil, pathErr("list", dir, os.ErrNotExist)
	}
	pre := ""
	if p != "" {
		pre = dirMarker(p)
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range fs.sfs.List() {
		if !strings.HasPrefix(n, pre) || n == pre || isReserved(n) {
			continue
		}
		child := n[len(pre):]
		if i := strings.IndexByte(child, '/'); i >= 0 {
			child = child[:i]
		}
		if !seen[child] {
			seen[child] = true
			out = append(out, child)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Stat implements vfs.FS.
func (fs *FS) Stat(name string) (vfs.FileInfo, error) {
	p := clean(name)
	if isReserved(p) {
		return nil, pathErr("stat", name, os.ErrNotExist)
	}
	if p != "" {
		if fi, err := fs.sfs.Stat(p); err == nil {
			return fileInfo{name: path.Base(p), size: fi.Size, mtime: fi.ModTime}, nil
		}
	}
	if fs.lookup(p) == entryDir {
		return fileInfo{name: path.Base("/" + p), dir: true}, nil
	}
	return nil, pathErr("stat", name, os.ErrNotExist)
}

// PathBase implements vfs.FS.
func (fs *FS) PathBase(p string) string { return path.Base(p) }

// PathJoin implements vfs.FS.
func (fs *FS) PathJoin(elem ...string) string { return path.Join(elem...) }

// PathDir implements vfs.FS.
func (fs *FS) PathDir(p string) string { return path.Dir(p) }

// GetDiskUsage implements vfs.FS from the sdf capacity: total is the usable
// data capacity, used the pages files map; pages that are written but dead
// count as available, since host GC reclaims them.
func (fs *FS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	s := fs.sfs.Stats()
	total, used := uint64(max(s.Usable, 0)), uint64(max(s.Live, 0))
	return vfs.DiskUsage{TotalBytes: total, UsedBytes: used, AvailBytes: total - min(used, total)}, nil
}

// Unwrap implements vfs.FS: FS wraps no other vfs.FS.
func (fs *FS) Unwrap() vfs.FS { return nil }

// fileInfo is a vfs.FileInfo.
type fileInfo struct {
	name  string
	size  int64
	mtime time.Time
	dir   bool
}

var _ vfs.FileInfo = fileInfo{}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return fi.size }
func (fi fileInfo) ModTime() time.Time { return fi.mtime }
func (fi fileInfo) IsDir() bool        { return fi.dir }
func (fi fileInfo) Sys() any           { return nil }
func (fi fileInfo) Mode() os.FileMode {
	if fi.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (fi fileInfo) DeviceID() vfs.DeviceID { return vfs.DeviceID{} }
func (fi fileInfo) String() string {
	if fi.dir {
		return fi.name + "/"
	}
	return fmt.Sprintf("%s (%d B)", fi.name, fi.size)
}
