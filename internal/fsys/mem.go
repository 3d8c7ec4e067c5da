package fsys

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// SectorBytes is the unit a power loss keeps or loses whole: an unsynced
// write survives a crash sector by sector (a sector is written atomically
// by the device; a write of several sectors may be torn between them).
const SectorBytes = 512

// ErrCrashed is returned by every operation of a Mem after its Crash: the
// process that used it is dead.
var ErrCrashed = errors.New("fsys: the file system crashed (power loss injected)")

// Op is one mutating operation of a Mem, as its hook sees it.
type Op struct {
	// N counts the mutating operations from 1.
	N int64
	// Kind is "create", "write", "truncate", "sync", "rename", "remove",
	// "mkdir" or "syncdir".
	Kind string
	Path string
}

func (o Op) String() string { return fmt.Sprintf("#%d %s %s", o.N, o.Kind, o.Path) }

// Mem is an in-memory FS that can lose power: Crash returns the image a
// power loss at that moment leaves (see the package comment for the
// model). Safe for concurrent use.
type Mem struct {
	mu   sync.Mutex
	root *node
	ops  int64
	dead bool
	// hook, when set, is called before each mutating operation is applied
	// (without Mem's lock: it may call Crash).
	hook          func(Op)
	capacityBytes int64
}

var _ FS = (*Mem)(nil)

// NewMem returns an empty Mem of 1 GiB.
func NewMem() *Mem { return &Mem{root: newDir(), capacityBytes: 1 << 30} }

// node is a file or a directory. A file's data is what reads see; synced
// is what its last Sync made durable. A directory's children are what
// lookups see; synced is the entries its last SyncDir made durable, and
// log the entry changes since, in order (each one atomic: a rename in one
// directory is one change).
type node struct {
	dir          bool
	data, synced []byte
	// dirty are the sectors written since the last Sync, when data and
	// synced have the same size and differ only there (allDirty: not
	// known, Sync copies the whole file).
	dirty      map[int]struct{}
	allDirty   bool
	children   map[string]*node
	syncedKids map[string]*node
	log        []dirChange
}

// dirChange sets names to nodes (nil: removed), atomically.
type dirChange []dirEntryChange

type dirEntryChange struct {
	name string
	to   *node
}

func newDir() *node {
	return &node{dir: true, children: map[string]*node{}, syncedKids: map[string]*node{}}
}

// SetHook makes hook see every mutating operation before it is applied
// (nil: none).
func (m *Mem) SetHook(hook func(Op)) {
	m.mu.Lock()
	m.hook = hook
	m.mu.Unlock()
}

// Ops returns how many mutating operations were applied or attempted.
func (m *Mem) Ops() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops
}

// CrashConfig says what of the unsynced state a crash image keeps.
type CrashConfig struct {
	// KeepPercent is the probability (0..100) that each unsynced sector
	// of a file, an unsynced file size and each unsynced directory change
	// (in order: the first one lost ends the directory's changes kept)
	// survives. 0: exactly what was synced; 100: everything.
	KeepPercent int
	// Rand draws what is kept; required when 0 < KeepPercent < 100.
	Rand *rand.Rand
}

// Crash returns the file system a power loss at this moment leaves, and
// kills m: every later operation on m (and its open files) fails with
// ErrCrashed, as the process that used it is dead.
func (m *Mem) Crash(cfg CrashConfig) *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	img := &Mem{capacityBytes: m.capacityBytes}
	keep := func() bool {
		switch {
		case cfg.KeepPercent <= 0:
			return false
		case cfg.KeepPercent >= 100:
			return true
		}
		return cfg.Rand.Intn(100) < cfg.KeepPercent
	}
	img.root = m.root.crashImage(keep)
	m.dead = true
	return img
}

// Image returns a copy of m as it is (every write and entry kept, as a
// process crash without power loss leaves the files); m lives on.
func (m *Mem) Image() *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	img := &Mem{capacityBytes: m.capacityBytes}
	img.root = m.root.crashImage(func() bool { return true })
	return img
}

func (n *node) crashImage(keep func() bool) *node {
	if !n.dir {
		data := tearFile(n.data, n.synced, keep)
		// The image's content is durable: a later crash of the image
		// keeps it.
		return &node{data: data, synced: bytes.Clone(data)}
	}
	kids := make(map[string]*node, len(n.syncedKids))
	for name, k := range n.syncedKids {
		kids[name] = k
	}
	for _, c := range n.log {
		if !keep() {
			break
		}
		for _, e := range c {
			if e.to == nil {
				delete(kids, e.name)
			} else {
				kids[e.name] = e.to
			}
		}
	}
	// In name order: the image is a function of the draws of keep.
	names := make([]string, 0, len(kids))
	for name := range kids {
		names = append(names, name)
	}
	sort.Strings(names)
	out := newDir()
	for _, name := range names {
		k := kids[name]
		img := k.crashImage(keep)
		out.children[name] = img
		out.syncedKids[name] = img
	}
	return out
}

// tearFile is a file's content after a power loss: its synced content,
// the unsynced size kept or not, and each unsynced sector kept or not.
func tearFile(data, synced []byte, keep func() bool) []byte {
	size := len(synced)
	if len(data) != len(synced) && keep() {
		size = len(data)
	}
	out := make([]byte, size)
	copy(out, synced)
	for off := 0; off < size; off += SectorBytes {
		end := min(off+SectorBytes, size)
		var want []byte
		if off < len(data) {
			want = data[off:min(end, len(data))]
		}
		cur := out[off:end]
		same := bytes.Equal(cur[:len(want)], want) && isZeros(cur[len(want):])
		if same || !keep() {
			continue
		}
		clear(cur)
		copy(cur, want)
	}
	return out
}

func isZeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// begin counts a mutating operation and calls the hook; it fails when m
// is dead (before or because of the hook's Crash).
func (m *Mem) begin(kind, path string) error {
	m.mu.Lock()
	if m.dead {
		m.mu.Unlock()
		return pathError(kind, path, ErrCrashed)
	}
	m.ops++
	op := Op{N: m.ops, Kind: kind, Path: path}
	hook := m.hook
	m.mu.Unlock()
	if hook != nil {
		hook(op)
	}
	m.mu.Lock()
	dead := m.dead
	m.mu.Unlock()
	if dead {
		return pathError(kind, path, ErrCrashed)
	}
	return nil
}

// split cleans name into its elements (the root is "/" or ".").
func split(name string) []string {
	c := filepath.ToSlash(filepath.Clean(name))
	c = strings.TrimLeft(c, "/")
	if c == "." || c == "" {
		return nil
	}
	return strings.Split(c, "/")
}

// lookupLocked returns the directory holding name and name's last element
// (the root itself: nil parent).
func (m *Mem) parentLocked(op, name string) (*node, string, error) {
	if m.dead {
		return nil, "", pathError(op, name, ErrCrashed)
	}
	elems := split(name)
	if len(elems) == 0 {
		return nil, "", nil
	}
	dir := m.root
	for _, e := range elems[:len(elems)-1] {
		k, ok := dir.children[e]
		if !ok {
			return nil, "", pathError(op, name, fs.ErrNotExist)
		}
		if !k.dir {
			return nil, "", pathError(op, name, syscall.ENOTDIR)
		}
		dir = k
	}
	return dir, elems[len(elems)-1], nil
}

func (m *Mem) lookupLocked(op, name string) (*node, error) {
	dir, base, err := m.parentLocked(op, name)
	if err != nil {
		return nil, err
	}
	if dir == nil {
		return m.root, nil
	}
	k, ok := dir.children[base]
	if !ok {
		return nil, pathError(op, name, fs.ErrNotExist)
	}
	return k, nil
}

// setLocked changes dir's entries (one atomic change, logged until the
// directory is synced).
func (dir *node) set(changes ...dirEntryChange) {
	for _, c := range changes {
		if c.to == nil {
			delete(dir.children, c.name)
		} else {
			dir.children[c.name] = c.to
		}
	}
	dir.log = append(dir.log, dirChange(changes))
}

const supportedFlags = os.O_RDONLY | os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_EXCL | os.O_TRUNC

// OpenFile implements FS.
func (m *Mem) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if flag&^supportedFlags != 0 {
		return nil, pathError("open", name, fmt.Errorf("fsys: flags %#x not supported", flag&^supportedFlags))
	}
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		if err := m.begin("create", name); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked("open", name)
	if err != nil {
		return nil, err
	}
	var n *node
	if dir == nil {
		n = m.root
	} else {
		n = dir.children[base]
	}
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathError("open", name, fs.ErrNotExist)
	case n == nil:
		n = &node{}
		dir.set(dirEntryChange{base, n})
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, pathError("open", name, fs.ErrExist)
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if n.dir && writable {
		return nil, pathError("open", name, syscall.EISDIR)
	}
	if flag&os.O_TRUNC != 0 && writable {
		n.data = nil
		n.allDirty = true
	}
	return &memFile{m: m, n: n, name: name, read: flag&os.O_WRONLY == 0, write: writable}, nil
}

// Rename implements FS.
func (m *Mem) Rename(oldpath, newpath string) error {
	if err := m.begin("rename", newpath); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob, err := m.parentLocked("rename", oldpath)
	if err != nil {
		return err
	}
	nd, nb, err := m.parentLocked("rename", newpath)
	if err != nil {
		return err
	}
	if od == nil || nd == nil {
		return pathError("rename", oldpath, syscall.EBUSY)
	}
	n, ok := od.children[ob]
	if !ok {
		return pathError("rename", oldpath, fs.ErrNotExist)
	}
	if old, ok := nd.children[nb]; ok && old.dir != n.dir {
		return pathError("rename", newpath, syscall.EISDIR)
	}
	if od == nd {
		if ob != nb {
			od.set(dirEntryChange{ob, nil}, dirEntryChange{nb, n})
		}
		return nil
	}
	// Across directories: two changes, each durable with its directory.
	nd.set(dirEntryChange{nb, n})
	od.set(dirEntryChange{ob, nil})
	return nil
}

// Remove implements FS.
func (m *Mem) Remove(name string) error {
	if err := m.begin("remove", name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked("remove", name)
	if err != nil {
		return err
	}
	if dir == nil {
		return pathError("remove", name, syscall.EBUSY)
	}
	n, ok := dir.children[base]
	if !ok {
		return pathError("remove", name, fs.ErrNotExist)
	}
	if n.dir && len(n.children) > 0 {
		return pathError("remove", name, syscall.ENOTEMPTY)
	}
	dir.set(dirEntryChange{base, nil})
	return nil
}

// Mkdir implements FS.
func (m *Mem) Mkdir(name string, perm fs.FileMode) error {
	if err := m.begin("mkdir", name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked("mkdir", name)
	if err != nil {
		return err
	}
	if dir == nil {
		return pathError("mkdir", name, fs.ErrExist)
	}
	if _, ok := dir.children[base]; ok {
		return pathError("mkdir", name, fs.ErrExist)
	}
	dir.set(dirEntryChange{base, newDir()})
	return nil
}

// ReadDir implements FS.
func (m *Mem) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, pathError("readdir", name, syscall.ENOTDIR)
	}
	out := make([]fs.DirEntry, 0, len(n.children))
	for k, c := range n.children {
		out = append(out, fs.FileInfoToDirEntry(c.info(k)))
	}
	return sortedEntries(out), nil
}

// Stat implements FS.
func (m *Mem) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(filepath.Base(name)), nil
}

// SyncDir implements FS.
func (m *Mem) SyncDir(name string) error {
	if err := m.begin("syncdir", name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked("syncdir", name)
	if err != nil {
		return err
	}
	if !n.dir {
		return pathError("syncdir", name, syscall.ENOTDIR)
	}
	n.syncedKids = make(map[string]*node, len(n.children))
	for k, c := range n.children {
		n.syncedKids[k] = c
	}
	n.log = nil
	return nil
}

// Space implements FS: the Mem's capacity and what its files leave free.
func (m *Mem) Space(path string) (capacity, free base.Bytes, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead {
		return 0, 0, pathError("statfs", path, ErrCrashed)
	}
	used := m.root.bytes()
	return base.Bytes(m.capacityBytes), base.Bytes(max(m.capacityBytes-used, 0)), nil
}

func (n *node) bytes() int64 {
	if !n.dir {
		return int64(len(n.data))
	}
	var t int64
	for _, c := range n.children {
		t += c.bytes()
	}
	return t
}

func (n *node) info(name string) fs.FileInfo {
	return memInfo{name: name, size: int64(len(n.data)), dir: n.dir}
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

// memFile is an open file of a Mem.
type memFile struct {
	m           *Mem
	n           *node
	name        string
	read, write bool
	pos         int64 // of Write
	closed      bool
}

func (f *memFile) check(op string, write bool) error {
	switch {
	case f.closed:
		return pathError(op, f.name, fs.ErrClosed)
	case f.m.dead:
		return pathError(op, f.name, ErrCrashed)
	case write && !f.write, !write && !f.read:
		return pathError(op, f.name, fs.ErrPermission)
	case f.n.dir && op != "sync" && op != "stat":
		return pathError(op, f.name, syscall.EISDIR)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathError("read", f.name, syscall.EINVAL)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.m.begin("write", f.name); err != nil {
		return 0, err
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathError("write", f.name, syscall.EINVAL)
	}
	if end := off + int64(len(p)); end > int64(len(f.n.data)) {
		grown := make([]byte, end)
		copy(grown, f.n.data)
		f.n.data = grown
		f.n.allDirty = true
	}
	copy(f.n.data[off:], p)
	if !f.n.allDirty && len(p) > 0 {
		if f.n.dirty == nil {
			f.n.dirty = map[int]struct{}{}
		}
		for s := int(off / SectorBytes); s <= int((off+int64(len(p))-1)/SectorBytes); s++ {
			f.n.dirty[s] = struct{}{}
		}
	}
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	n, err := f.WriteAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) Truncate(size int64) error {
	if err := f.m.begin("truncate", f.name); err != nil {
		return err
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathError("truncate", f.name, syscall.EINVAL)
	}
	next := make([]byte, size)
	copy(next, f.n.data)
	f.n.data = next
	f.n.allDirty = true
	return nil
}

func (f *memFile) Sync() error {
	if err := f.m.begin("sync", f.name); err != nil {
		return err
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("sync", false); err != nil && !errors.Is(err, fs.ErrPermission) {
		return err
	}
	n := f.n
	if n.allDirty || len(n.synced) != len(n.data) || n.synced == nil {
		n.synced = bytes.Clone(n.data)
		if n.synced == nil {
			n.synced = []byte{}
		}
	} else {
		// Only the sectors written since the last Sync differ (the
		// page file of a flash device: megabytes, synced at every SDF
		// sync).
		for s := range n.dirty {
			off := s * SectorBytes
			copy(n.synced[off:min(off+SectorBytes, len(n.data))], n.data[off:])
		}
	}
	clear(n.dirty)
	n.allDirty = false
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("stat", false); err != nil && !errors.Is(err, fs.ErrPermission) {
		return nil, err
	}
	return f.n.info(filepath.Base(f.name)), nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return pathError("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}
