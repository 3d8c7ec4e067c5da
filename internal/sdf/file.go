package sdf

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/invariants"
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
	if fs.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if channel >= fs.l.g.Channels {
		return nil, base.InvalidArgumentf("sdf: channel %d of %d", channel, fs.l.g.Channels)
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	if hint >= numLifetimes {
		return nil, base.InvalidArgumentf("sdf: bad lifetime hint %d", hint)
	}
	fs.mu.Lock()
	if fs.closed {
		fs.mu.Unlock()
		return nil, ErrClosed
	}
	if old := fs.files[name]; old != nil {
		fs.logLocked(deleteRecord(old.id))
		fs.unlinkLocked(old)
	}
	ino := &inode{id: fs.nextFileID, name: name, hint: hint, mtime: fs.opts.Clock.Now().UnixNano(),
		opens: 1, writing: true, channel: max(channel, -1)}
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

func deleteRecord(id uint64) []byte {
	var w recWriter
	w.u(id)
	return w.frame(recDelete)
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
	fs.logLocked(deleteRecord(ino.id))
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
	var w recWriter
	w.u(ino.id)
	w.s(newName)
	fs.logLocked(w.frame(recRename))
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
	for _, e := range ino.m.exts {
		zs[e.zone] = true
	}
	var zones []int
	for z := range zs {
		zones = append(zones, z)
	}
	sort.Ints(zones)
	return FileInfo{Name: ino.name, ID: ino.id, Size: ino.size, ModTime: time.Unix(0, ino.mtime),
		Hint: ino.hint, Extents: len(ino.m.exts), Zones: zones}
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

// Write appends p to the file. Data is buffered and programmed in whole
// pages; Sync makes it durable.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	if !f.writable {
		return 0, ErrReadOnly
	}
	fs := f.fs
	fs.mu.Lock()
	if fs.closed {
		fs.mu.Unlock()
		return 0, ErrClosed
	}
	ino := f.ino
	ino.buf = append(ino.buf, p...)
	ino.size += int64(len(p))
	ino.mtime = fs.opts.Clock.Now().UnixNano()
	full := len(ino.buf) >= int(fs.opts.WriteBufferBytes)
	fs.mu.Unlock()
	fs.ctr.userBytes.Add(int64(len(p)))
	if full {
		if err := fs.flushFile(ino, false); err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// Sync programs every buffered byte (padding a partial last page with
// zeros) and makes the file's data and size durable.
func (f *File) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if !f.writable {
		return f.fs.Sync()
	}
	if err := f.fs.flushFile(f.ino, true); err != nil {
		return err
	}
	// The pages are durable now. Their extents are found again on open by
	// scanning the unsealed zones' OOB (recoverUnsealed), so the journal
	// is flushed only if a zone was opened since its last flush.
	f.fs.mu.Lock()
	urgent := f.fs.jr.urgent
	f.fs.mu.Unlock()
	if urgent {
		if err := f.fs.flushJournal(); err != nil {
			return err
		}
	}
	return f.fs.reclaim()
}

// Close syncs a writable handle and releases the handle.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.closed = true
	fs := f.fs
	var err error
	if f.writable {
		err = fs.flushFile(f.ino, true)
		err = errors.Join(err, fs.flushJournal())
	}
	fs.mu.Lock()
	if f.writable {
		f.ino.writing = false
		f.ino.buf = nil
	}
	f.ino.opens--
	freed := f.ino.unlinked && f.ino.opens == 0
	if freed {
		fs.freeLocked(f.ino)
	}
	fs.mu.Unlock()
	if freed {
		err = errors.Join(err, fs.reclaim())
	}
	return err
}

// flushFile programs the whole pages of ino's buffer, and with pad also the
// partial last page padded with zeros (which stays buffered: the next flush
// programs it again, out of place, with the bytes appended since).
func (fs *FS) flushFile(ino *inode, pad bool) error {
	ps := fs.l.g.PageSize
	fs.mu.Lock()
	full := len(ino.buf) / ps
	partial := len(ino.buf) % ps
	n := full
	if pad && partial > 0 {
		n++
	}
	if n == 0 || ino.unlinked && ino.opens == 0 {
		fs.mu.Unlock()
		return nil
	}
	data := make([]byte, n*ps)
	copy(data, ino.buf)
	start := ino.bufPage
	lastValid := ps
	if n > full {
		lastValid = partial
	}
	hint := ino.hint
	fs.mu.Unlock()
	if n > full {
		fs.ctr.padBytes.Add(int64(ps - partial))
	}
	err := fs.writePages(ino, hint, start, data, lastValid, writeNormal, nil)
	if err != nil {
		return err
	}
	fs.mu.Lock()
	ino.buf = append([]byte(nil), ino.buf[full*ps:]...)
	ino.bufPage += uint64(full)
	if n > full {
		// The padded page will be programmed again with more bytes.
		fs.ctr.tailRewrites.Add(1)
	}
	fs.mu.Unlock()
	return nil
}

// writeKind says how writePages installs what it programmed.
type writeKind uint8

const (
	writeNormal  writeKind = iota // append or rewrite: replaces the mapping
	writeGC                       // relocation: only where the mapping is unchanged
	writeRewrite                  // repair rewrite: like normal, counted apart
)

// writePages programs data (whole pages) as the file pages from startPage on,
// over as many zones as needed, and installs the mapping piece by piece.
// lastValid is the valid bytes of the last page. For writeGC, expect[i] is
// the sequence number the mapping of page startPage+i must still have for
// the relocated copy to be installed.
func (fs *FS) writePages(ino *inode, hint Lifetime, startPage uint64, data []byte, lastValid int, kind writeKind, expect []uint64) error {
	ps := fs.l.g.PageSize
	total := len(data) / ps
	done := 0
	failures := 0
	for done < total {
		z, err := fs.acquireZone(hint, ino, kind == writeGC)
		if err != nil {
			return err
		}
		fs.mu.Lock()
		n := min(total-done, z.capacity(fs.l)-z.wp)
		first := z.wp
		z.wp += n
		seq := fs.nextSeq
		fs.nextSeq += uint64(n)
		fs.mu.Unlock()
		ops := make([]*pageOp, n)
		opSlab := make([]pageOp, n)
		o := fs.l.g.OOBSize
		oobSlab := make([]byte, n*o)
		for k := 0; k < n; k++ {
			i := done + k
			pd := data[i*ps : (i+1)*ps]
			valid := ps
			if i == total-1 {
				valid = lastValid
			}
			oob := oobSlab[k*o : (k+1)*o : (k+1)*o]
			encodeOOB(oob, pd, pageID{valid: uint32(valid), fileID: ino.id, page: startPage + uint64(i), seq: seq + uint64(k)})
			opSlab[k] = pageOp{kind: opProgram, addr: fs.l.dataPageAddr(z.id, z.dies, first+k), data: pd, oob: oob}
			ops[k] = &opSlab[k]
		}
		fs.chans[z.channel].do(ops...)
		fs.ctr.dataPages.Add(int64(n))
		var perr error
		for _, op := range ops {
			if op.err != nil {
				perr = op.err
				break
			}
		}
		if perr != nil {
			// A failed program retires the block: stop writing the zone
			// and program these pages again elsewhere.
			fs.ctr.programErrs.Add(1)
			fs.mu.Lock()
			if errors.Is(perr, flash.ErrDieFailed) {
				for _, op := range ops {
					if errors.Is(op.err, flash.ErrDieFailed) {
						fs.noteDieFailedLocked(op.addr.DieAddr())
					}
				}
			}
			if z.state == ZoneOpen || z.state == ZoneEmpty {
				z.state = ZoneReadOnly
				fs.logLocked(zoneStateRecord(z.id, ZoneReadOnly))
			}
			fs.mu.Unlock()
			for _, op := range ops {
				if op.err != nil {
					fs.det.observe(fs, op.addr, flash.ReadStatus{}, op.err)
				}
			}
			fs.releaseZone(z)
			failures++
			if failures > 8 || !isMediaError(perr) {
				return fmt.Errorf("sdf: programming %q: %w", ino.name, perr)
			}
			continue
		}
		fs.mu.Lock()
		now := fs.opts.Clock.Now()
		z.lastWrite = now
		if z.owners == nil {
			z.owners = make([]owner, z.capacity(fs.l))
			z.ownersKnown = make([]bool, z.capacity(fs.l))
		}
		for k := 0; k < n; k++ {
			z.owners[first+k] = owner{fileID: ino.id, page: uint32(startPage + uint64(done+k))}
			z.ownersKnown[first+k] = true
		}
		e := extent{filePage: startPage + uint64(done), zone: z.id, zonePage: first, n: n, seq: seq}
		fs.installLocked(ino, e, kind, expect[min(done, len(expect)):])
		ino.last = z
		full := z.wp == z.capacity(fs.l)
		fs.mu.Unlock()
		if full {
			fs.finishZone(z)
		}
		fs.releaseZone(z)
		done += n
	}
	return nil
}

// installLocked maps e into ino and logs it. For GC only the pages whose
// mapping still has the expected sequence number are installed.
func (fs *FS) installLocked(ino *inode, e extent, kind writeKind, expect []uint64) {
	if ino.unlinked && ino.opens == 0 || fs.byID[ino.id] != ino {
		return // deleted meanwhile: the pages are dead
	}
	var pieces []extent
	if kind == writeGC {
		start := -1
		for k := 0; k <= e.n; k++ {
			ok := false
			if k < e.n && k < len(expect) {
				cur, found := ino.m.find(e.filePage + uint64(k))
				ok = found && cur.seq+(e.filePage+uint64(k)-cur.filePage) == expect[k]
			}
			if ok && start < 0 {
				start = k
			}
			if !ok && start >= 0 {
				pieces = append(pieces, e.slice(e.filePage+uint64(start), e.filePage+uint64(k)))
				start = -1
			}
		}
	} else {
		pieces = []extent{e}
	}
	for _, p := range pieces {
		ino.m.put(p, fs.dropLocked)
		z := fs.zones[p.zone]
		z.live += p.n
		_ = invariants.Check(z.live <= z.wp, "sdf: zone %d has %d live pages above its write pointer %d", z.id, z.live, z.wp)
	}
	if len(pieces) > 0 && !ino.unlinked {
		fs.logLocked(extentsRecord(ino, pieces))
	}
}

// acquireZone picks a zone to append to and locks its program order.
// Preference: the file's last zone; an open zone of the same lifetime hint
// that nobody is writing; a new zone (round-robin over channels, least worn
// on the channel) while fewer than MaxOpenZones are open; any open zone.
// When empty zones run low, host GC runs first (not for GC's own writes).
func (fs *FS) acquireZone(hint Lifetime, ino *inode, forGC bool) (*zone, error) {
	reserve := forGC
	for attempt := 0; attempt < 16; attempt++ {
		fs.mu.Lock()
		if fs.closed {
			fs.mu.Unlock()
			return nil, ErrClosed
		}
		z, needGC := fs.pickZoneLocked(hint, ino, reserve)
		if z != nil {
			z.writers++
			if z.state == ZoneEmpty {
				z.state = ZoneOpen
				z.hint = hint
				z.unsealed = true
				fs.logLocked(zoneRecord(recZoneOpen, z.id))
				fs.jr.urgent = true
			}
			fs.mu.Unlock()
			z.wmu.Lock()
			fs.mu.Lock()
			ok := z.writable(fs.l)
			fs.mu.Unlock()
			if ok {
				return z, nil
			}
			fs.releaseZone(z)
			continue
		}
		fs.mu.Unlock()
		if !needGC || forGC {
			break
		}
		progressed, err := fs.gcOnce()
		if err != nil {
			return nil, err
		}
		if !progressed {
			// Nothing to collect: the reserve of empty zones is all
			// there is.
			reserve = true
		}
	}
	return nil, ErrNoSpace
}

func (fs *FS) releaseZone(z *zone) {
	z.wmu.Unlock()
	fs.mu.Lock()
	z.writers--
	fs.mu.Unlock()
}

// pickZoneLocked implements acquireZone's preference. needGC is set when the
// caller should collect garbage before a new zone is handed out.
func (fs *FS) pickZoneLocked(hint Lifetime, ino *inode, forGC bool) (z *zone, needGC bool) {
	if p := ino.last; p != nil && p.state == ZoneOpen && p.hint == hint && p.writable(fs.l) && p.writers == 0 &&
		(ino.channel < 0 || p.channel == ino.channel) && !fs.avoided(p.channel) {
		return p, false
	}
	open := 0
	var sameHint, anyIdle, anyOpen *zone
	for _, c := range fs.zones[metaZoneCount:] {
		if c.state != ZoneOpen {
			continue
		}
		open++
		if !c.writable(fs.l) || (ino.channel >= 0 && c.channel != ino.channel) || (ino.channel < 0 && fs.avoided(c.channel)) {
			continue
		}
		if c.writers == 0 && c.hint == hint && sameHint == nil {
			sameHint = c
		}
		if c.writers == 0 && (anyIdle == nil || absDiff(c.hint, hint) < absDiff(anyIdle.hint, hint)) {
			anyIdle = c
		}
		if anyOpen == nil || c.writers < anyOpen.writers {
			anyOpen = c
		}
	}
	if sameHint != nil {
		return sameHint, false
	}
	if open < fs.opts.MaxOpenZones {
		empty := fs.countStateLocked(ZoneEmpty)
		if empty > fs.opts.GCFreeZonesMin || forGC {
			if e := fs.allocEmptyLocked(ino.channel); e != nil {
				return e, false
			}
		} else if anyIdle == nil && anyOpen == nil {
			return nil, true
		}
	}
	if anyIdle != nil {
		return anyIdle, false
	}
	if anyOpen != nil {
		return anyOpen, false
	}
	if forGC && fs.countStateLocked(ZoneEmpty) > 0 {
		if e := fs.allocEmptyLocked(ino.channel); e != nil {
			return e, false
		}
	}
	return nil, true
}

func absDiff(a, b Lifetime) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

func (fs *FS) countStateLocked(s ZoneState) int {
	n := 0
	for _, z := range fs.zones[metaZoneCount:] {
		if z.state == s {
			n++
		}
	}
	return n
}

// allocEmptyLocked hands out an empty zone: channels in round-robin order
// (SDF places consecutive writes on consecutive channels), and on the
// channel the least-worn empty zone (dynamic wear leveling; ties to the
// lowest ID).
func (fs *FS) allocEmptyLocked(only int) *zone {
	C := fs.l.g.Channels
	if fs.alloc != nil && only < 0 {
		// A die failed: Reparo's Handler weights the channels.
		if ch := fs.alloc.Next(func(c int) bool { return !fs.avoided(c) && fs.emptyZoneOnLocked(c) != nil }); ch >= 0 {
			return fs.emptyZoneOnLocked(ch)
		}
		if fs.avoid == nil {
			return nil
		}
	}
	for i := 0; i < C; i++ {
		ch := (fs.rr + i) % C
		if (only >= 0 && ch != only) || (only < 0 && fs.avoided(ch)) {
			continue
		}
		var best *zone
		for b := 0; b < fs.l.g.BlocksPerDie; b++ {
			z := fs.zones[b*C+ch]
			if z.meta || z.state != ZoneEmpty || len(z.dies) == 0 {
				continue
			}
			if best == nil || z.erases < best.erases {
				best = z
			}
		}
		if best != nil {
			if only < 0 {
				fs.rr = ch + 1
			}
			return best
		}
	}
	return nil
}

// avoided reports whether Rebalance is moving data off channel c.
func (fs *FS) avoided(c int) bool { return c < len(fs.avoid) && fs.avoid[c] }

// emptyZoneOnLocked is the least-worn empty zone of channel c, or nil.
func (fs *FS) emptyZoneOnLocked(c int) *zone {
	var best *zone
	for b := 0; b < fs.l.g.BlocksPerDie; b++ {
		z := fs.zones[b*fs.l.g.Channels+c]
		if z.meta || z.state != ZoneEmpty || len(z.dies) == 0 {
			continue
		}
		if best == nil || z.erases < best.erases {
			best = z
		}
	}
	return best
}

// finishZone writes the zone's P2L entrustment pages (the last page of the
// block on each die records the owners of the next die's block, Reparo 6.2)
// and marks it full. The caller holds z.wmu.
func (fs *FS) finishZone(z *zone) {
	fs.mu.Lock()
	dies := append([]int(nil), z.dies...)
	owners := append([]owner(nil), z.owners...)
	known := append([]bool(nil), z.ownersKnown...)
	fs.mu.Unlock()
	w := len(dies)
	g := fs.l.g
	// Owners of pages programmed before a reopen are read back from OOB.
	var reads []*pageOp
	var idx []int
	for i := range owners {
		if !known[i] {
			reads = append(reads, &pageOp{kind: opRead, addr: fs.l.dataPageAddr(z.id, dies, i),
				data: make([]byte, g.PageSize), oob: make([]byte, g.OOBSize)})
			idx = append(idx, i)
		}
	}
	fs.chans[z.channel].do(reads...)
	for k, op := range reads {
		if op.err == nil {
			if id, ok := decodeOOB(op.oob, op.data); ok {
				owners[idx[k]] = owner{fileID: id.fileID, page: uint32(id.page)}
			}
		}
	}
	var ops []*pageOp
	if w >= 2 {
		for hi, host := range dies {
			about := dies[(hi+1)%w]
			ai := (hi + 1) % w
			var list []owner
			for p := 0; p < fs.l.dataPagesPerBlock(); p++ {
				list = append(list, owners[p*w+ai])
			}
			data := make([]byte, g.PageSize)
			encodeP2L(data, z.id, about, list)
			oob := make([]byte, g.OOBSize)
			kindOOB(oob, kindP2L, data)
			ops = append(ops, &pageOp{kind: opProgram,
				addr: flash.PageAddr{Channel: z.channel, Die: host, Block: z.block, Page: fs.l.p2lPage()}, data: data, oob: oob})
		}
		fs.chans[z.channel].do(ops...)
		fs.ctr.p2lPages.Add(int64(len(ops)))
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ok := w >= 2
	for _, op := range ops {
		if op.err != nil {
			ok = false
		}
	}
	z.p2l = ok
	if z.state == ZoneOpen {
		z.state = ZoneFull
	}
	if z.unsealed {
		// Every page of the zone is installed and its extents record
		// queued before this one, so once this is durable replay need not
		// scan the zone.
		z.unsealed = false
		fs.logLocked(zoneRecord(recZoneSealed, z.id))
	}
}

// ReadAt reads len(p) bytes at off (io.ReaderAt). Every page is verified
// against its checksum and identity; a page that fails is reported as a
// *CorruptionError naming the file range, and n counts the bytes before it.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, base.InvalidArgumentf("sdf: negative offset %d", off)
	}
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	n, err := f.fs.readAt(f.ino, p, off, false, nil)
	return n, err
}

// pageRead is one page of a read: from a buffer or from flash.
type pageRead struct {
	page     uint64
	dst      []byte // where its bytes go in the caller's buffer
	skip     int    // offset of dst's first byte within the page
	buffered bool
	e        extent // mapping when not buffered
	op       *pageOp
}

// readAt reads into p at off. With raw, pages that fail verification are
// returned as read (corrupt content) and listed in *bad instead of ending
// the read.
func (fs *FS) readAt(ino *inode, p []byte, off int64, raw bool, bad *[]*CorruptionError) (int, error) {
	ps := int64(fs.l.g.PageSize)
	for retry := 0; ; retry++ {
		fs.mu.Lock()
		if fs.closed {
			fs.mu.Unlock()
			return 0, ErrClosed
		}
		size := ino.size
		if off >= size {
			fs.mu.Unlock()
			if len(p) == 0 {
				return 0, nil
			}
			return 0, io.EOF
		}
		want := min(int64(len(p)), size-off)
		npages := int((off+want-1)/ps - off/ps + 1)
		// One allocation each for the page records, ops and OOB buffers.
		slab := make([]pageRead, npages)
		opSlab := make([]pageOp, npages)
		oobSlab := fs.getOOB(npages * fs.l.g.OOBSize)
		reads := make([]*pageRead, 0, npages)
		ops := make([]*pageOp, 0, npages)
		for pos := off; pos < off+want; {
			pg := uint64(pos / ps)
			skip := int(pos % ps)
			n := min(ps-int64(skip), off+want-pos)
			i := len(reads)
			r := &slab[i]
			*r = pageRead{page: pg, dst: p[pos-off : pos-off+n], skip: skip}
			if pg >= ino.bufPage && len(ino.buf) > 0 {
				bo := int64(pg-ino.bufPage)*ps + int64(skip)
				copy(r.dst, ino.buf[bo:])
				r.buffered = true
			} else {
				e, ok := ino.m.find(pg)
				if !ok {
					// A hole (never programmed): reads as zeros.
					clear(r.dst)
					r.buffered = true
				} else {
					r.e = e
					z := fs.zones[e.zone]
					d := int(pg - e.filePage)
					data := r.dst
					if skip != 0 || n != ps {
						data = make([]byte, ps)
					}
					o := fs.l.g.OOBSize
					r.op = &opSlab[i]
					*r.op = pageOp{kind: opRead, addr: fs.l.dataPageAddr(z.id, z.dies, e.zonePage+d),
						data: data, oob: oobSlab[i*o : (i+1)*o : (i+1)*o], decode: true}
					ops = append(ops, r.op)
				}
			}
			reads = append(reads, r)
			pos += n
		}
		name := ino.name
		fs.mu.Unlock()
		fs.doParallel(ops)
		defer fs.putOOB(oobSlab)
		stale := false
		for i, r := range reads {
			if r.buffered {
				continue
			}
			cerr := fs.verify(ino, name, r, ps)
			if cerr != nil && retry < 2 && fs.mappingChanged(ino, r) {
				stale = true
				break
			}
			if cerr != nil && r.op.err == nil {
				// A checksum failure with a clean device status may be a
				// transient flip on the way out: read once more before
				// reporting (DIRECT: tell transient flips from damage).
				fs.ctr.rereads.Add(1)
				fs.chans[r.op.addr.Channel].do(r.op)
				if cerr = fs.verify(ino, name, r, ps); cerr == nil {
					fs.ctr.transients.Add(1)
				}
			}
			if len(r.op.data) != len(r.dst) || &r.op.data[0] != &r.dst[0] {
				copy(r.dst, r.op.data[r.skip:])
			}
			if cerr != nil {
				fs.ctr.corruptions.Add(1)
				if !raw {
					done := 0
					for _, q := range reads[:i] {
						done += len(q.dst)
					}
					return done, cerr
				}
				if bad != nil {
					*bad = append(*bad, cerr)
				}
			}
		}
		if stale {
			continue
		}
		fs.ctr.readBytes.Add(want)
		if want < int64(len(p)) {
			return int(want), io.EOF
		}
		return int(want), nil
	}
}

// getOOB returns a scratch buffer of n bytes for OOB areas (the device
// overwrites them, so they need no clearing); putOOB recycles it.
func (fs *FS) getOOB(n int) []byte {
	if b, ok := fs.oobPool.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]byte, n)
}

func (fs *FS) putOOB(b []byte) {
	if cap(b) <= 4<<20 {
		fs.oobPool.Put(&b)
	}
}

// mappingChanged reports whether r's page is now mapped elsewhere (a
// concurrent GC, rewrite or reset made the read stale).
func (fs *FS) mappingChanged(ino *inode, r *pageRead) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	e, ok := ino.m.find(r.page)
	return !ok || e.zone != r.e.zone || e.seq+(r.page-e.filePage) != r.e.seq+(r.page-r.e.filePage)
}

// verify checks a page read from flash and returns the corruption, if any.
func (fs *FS) verify(ino *inode, name string, r *pageRead, ps int64) *CorruptionError {
	op := r.op
	wantSeq := r.e.seq + (r.page - r.e.filePage)
	var cause error
	if op.err != nil {
		cause = op.err
		fs.det.observe(fs, op.addr, op.status, op.err)
		switch {
		case errors.Is(op.err, flash.ErrDieFailed):
			fs.ctr.dieFailedReads.Add(1)
		case errors.Is(op.err, flash.ErrUncorrectable):
			fs.ctr.uncorrectables.Add(1)
		}
	} else {
		fs.det.observe(fs, op.addr, op.status, nil)
		id, ok := op.id, op.idOK
		if !op.decode {
			id, ok = decodeOOB(op.oob, op.data)
		}
		switch {
		case !ok:
			cause = errChecksum
			fs.ctr.checksumErrs.Add(1)
		case id.fileID != ino.id || id.page != r.page || id.seq != wantSeq:
			cause = errIdentity
			fs.ctr.checksumErrs.Add(1)
		}
	}
	if cause == nil {
		return nil
	}
	off := int64(r.page) * ps
	fs.mu.Lock()
	length := min(ps, ino.size-off)
	fs.mu.Unlock()
	return &CorruptionError{Addr: op.addr, Zone: r.e.zone, FileID: ino.id, Name: name, Off: off, Len: max(length, 0), Err: cause}
}
