package sdf

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
)

var (
	_ io.ReaderAt = (*File)(nil)
	_ io.Writer   = (*File)(nil)
	_ io.Closer   = (*File)(nil)
)

// maxNameBytes bounds file names.
const maxNameBytes = 1024

// File is a handle on an extent file. A writable handle (from Create)
// appends; any handle reads at offsets. Write and Sync must not be called
// concurrently with each other; ReadAt may be called concurrently with
// anything.
type File struct {
	fs       *FS
	ino      *inode
	writable bool

	mu     sync.Mutex // serializes Write, Sync and Close
	closed bool

	ra readAhead
}

// FileInfo describes a file.
type FileInfo struct {
	Name    string
	ID      uint64
	Size    int64
	ModTime time.Time
	Hint    Lifetime
	Extents int
	Zones   []int // zones holding the file's pages, ascending
}

func (fi FileInfo) String() string {
	return fmt.Sprintf("%s id=%d size=%d extents=%d zones=%v", fi.Name, fi.ID, fi.Size, fi.Extents, fi.Zones)
}

func validName(name string) error {
	if name == "" || len(name) > maxNameBytes || strings.ContainsRune(name, 0) {
		return base.InvalidArgumentf("sdf: bad file name %q", name)
	}
	return nil
}

// Create creates the named file for appending (replacing any file of that
// name, like vfs.FS.Create) with a lifetime hint, and makes the creation
// durable.
func (fs *FS) Create(name string, hint Lifetime) (*File, error) {
	return fs.CreateOn(name, hint, -1)
}

// CreateOn is Create with the file's zones confined to one channel
// (channel < 0: any). SDF exposes every channel as a device of its own
// (section 2.3) so that software can match its threads to the channels;
// this is that interface.
func (fs *FS) CreateOn(name string, hint Lifetime, channel int) (*File, error) {
	return fs.create(name, hint, channel, false, nil)
}

// CreatePreferring is CreateOn with channel a preference, not a confinement:
// when the channel has no zone to give (full, or its open zones busy), the
// file's next zone is on another channel rather than the write failing with
// no space. For copies that should sit apart but must not stop for it.
func (fs *FS) CreatePreferring(name string, hint Lifetime, channel int) (*File, error) {
	return fs.create(name, hint, channel, true, nil)
}

// CreateApart is CreatePreferring that, when channel has no zone to give,
// tries the channels not in avoid before any other: for a copy that must
// not share a channel (and so a die) with the bytes it copies, even under
// space pressure, as long as one channel it may use has room.
func (fs *FS) CreateApart(name string, hint Lifetime, channel int, avoid []int) (*File, error) {
	return fs.create(name, hint, channel, true, avoid)
}

func (fs *FS) create(name string, hint Lifetime, channel int, prefer bool, avoid []int) (*File, error) {
	if fs.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if channel >= fs.l.Geometry.Channels {
		return nil, base.InvalidArgumentf("sdf: channel %d of %d", channel, fs.l.Geometry.Channels)
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	if hint >= numLifetimes {
		return nil, base.InvalidArgumentf("sdf: bad lifetime hint %d", hint)
	}
	var avoidMask uint64
	for _, c := range avoid {
		if c < 0 || c >= fs.l.Geometry.Channels || c >= 64 {
			return nil, base.InvalidArgumentf("sdf: channel %d to avoid, of %d", c, fs.l.Geometry.Channels)
		}
		avoidMask |= 1 << c
	}
	fs.mu.Lock()
	if fs.closed {
		fs.mu.Unlock()
		return nil, ErrClosed
	}
	if old := fs.files[name]; old != nil {
		fs.logLocked(metalog.Delete{ID: old.id}.Record())
		fs.unlinkLocked(old)
	}
	ino := &inode{id: fs.nextFileID, name: name, hint: hint, mtime: fs.opts.Clock.Now().UnixNano(),
		opens: 1, writing: true, channel: max(channel, -1), prefer: prefer, avoid: avoidMask}
	fs.nextFileID++
	fs.files[name], fs.byID[ino.id] = ino, ino
	fs.logLocked(createRecord(ino))
	fs.mu.Unlock()
	if err := fs.flushJournal(); err != nil {
		return nil, err
	}
	if err := fs.reclaim(); err != nil {
		return nil, err
	}
	return &File{fs: fs, ino: ino, writable: true}, nil
}

// OpenFile opens the named file for reading.
func (fs *FS) OpenFile(name string) (*File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.closed {
		return nil, ErrClosed
	}
	ino := fs.files[name]
	if ino == nil {
		return nil, fmt.Errorf("open %q: %w", name, ErrNotExist)
	}
	ino.opens++
	return &File{fs: fs, ino: ino}, nil
}

// Remove deletes the named file durably. Handles that have it open keep
// reading it; its pages are freed when the last one closes.
func (fs *FS) Remove(name string) error {
	if fs.opts.ReadOnly {
		return ErrReadOnly
	}
	fs.mu.Lock()
	if fs.closed {
		fs.mu.Unlock()
		return ErrClosed
	}
	ino := fs.files[name]
	if ino == nil {
		fs.mu.Unlock()
		return fmt.Errorf("remove %q: %w", name, ErrNotExist)
	}
	fs.logLocked(metalog.Delete{ID: ino.id}.Record())
	fs.unlinkLocked(ino)
	fs.mu.Unlock()
	if err := fs.flushJournal(); err != nil {
		return err
	}
	return fs.reclaim()
}

// Rename renames a file durably, replacing any file named newName.
func (fs *FS) Rename(oldName, newName string) error {
	if fs.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := validName(newName); err != nil {
		return err
	}
	fs.mu.Lock()
	if fs.closed {
		fs.mu.Unlock()
		return ErrClosed
	}
	ino := fs.files[oldName]
	if ino == nil {
		fs.mu.Unlock()
		return fmt.Errorf("rename %q: %w", oldName, ErrNotExist)
	}
	if oldName == newName {
		fs.mu.Unlock()
		return nil
	}
	if old := fs.files[newName]; old != nil {
		fs.unlinkLocked(old)
	}
	delete(fs.files, oldName)
	ino.name = newName
	fs.files[newName] = ino
	fs.logLocked(metalog.Rename{ID: ino.id, Name: newName}.Record())
	fs.mu.Unlock()
	if err := fs.flushJournal(); err != nil {
		return err
	}
	return fs.reclaim()
}

// List returns the names of all files, sorted.
func (fs *FS) List() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	names := make([]string, 0, len(fs.files))
	for n := range fs.files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Stat describes the named file.
func (fs *FS) Stat(name string) (FileInfo, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ino := fs.files[name]
	if ino == nil {
		return FileInfo{}, fmt.Errorf("stat %q: %w", name, ErrNotExist)
	}
	return fs.statLocked(ino), nil
}

func (fs *FS) statLocked(ino *inode) FileInfo {
	zs := map[int]bool{}
	for _, e := range ino.m.Exts {
		zs[e.Zone] = true
	}
	var zones []int
	for z := range zs {
		zones = append(zones, z)
	}
	sort.Ints(zones)
	return FileInfo{Name: ino.name, ID: ino.id, Size: ino.size, ModTime: time.Unix(0, ino.mtime),
		Hint: ino.hint, Extents: len(ino.m.Exts), Zones: zones}
}

// Name is the file's current name.
func (f *File) Name() string {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.ino.name
}

// Size is the file's size, including bytes not yet synced.
func (f *File) Size() int64 {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.ino.size
}

// Stat describes the file.
func (f *File) Stat() FileInfo {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.fs.statLocked(f.ino)
}
