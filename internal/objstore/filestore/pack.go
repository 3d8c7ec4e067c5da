package filestore

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/fsys"
	"github.com/flashmend/flashmend/internal/invariants"
	"github.com/flashmend/flashmend/internal/objstore"
)

// PackStats are the plain-file store's pack counters.
type PackStats struct {
	// Loaded counts pack index scans (a pack's first use after opening).
	Loaded int64
	// TornTails counts packs whose scan found a torn last record and
	// truncated it.
	TornTails int64
	// DamagedRegions counts runs of bytes in the middle of a pack whose
	// record header did not verify and that the scan skipped.
	DamagedRegions int64
	// Compactions counts packs rewritten without their dead records;
	// ReclaimedBytes the bytes they freed.
	Compactions, ReclaimedBytes int64
	// Removed counts packs deleted because no member was left.
	Removed int64
	// Pooled counts pack files and directories removed into the pool of
	// recycle.go; Reused those taken from it for a new pack or directory.
	PooledFiles, PooledDirs, ReusedFiles, ReusedDirs int64
}

func (s PackStats) String() string {
	return fmt.Sprintf("loaded %d, torn tails %d, damaged regions %d, compactions %d (%s reclaimed), removed %d, pooled %d files %d directories, reused %d files %d directories",
		s.Loaded, s.TornTails, s.DamagedRegions, s.Compactions, base.Bytes(s.ReclaimedBytes), s.Removed,
		s.PooledFiles, s.PooledDirs, s.ReusedFiles, s.ReusedDirs)
}

// packEntry locates a member's latest content in its pack file.
type packEntry struct {
	off int64 // of the content
	n   int64
}

// recordBytes is the size of the record holding member's content e.
func recordBytes(member string, e packEntry) int64 {
	return recordHeaderSize + int64(len(member)) + e.n
}

// deadBytes is the bytes of p's records no member points into.
func (p *pack) deadBytes() int64 { return max(p.size-packHeaderSize-p.liveBytes, 0) }

// use records member's new latest record (ok false: deleted).
func (p *pack) use(member string, e packEntry, ok bool) {
	if old, had := p.live[member]; had {
		p.liveBytes -= recordBytes(member, old)
		delete(p.live, member)
	}
	if ok {
		p.live[member] = e
		p.liveBytes += recordBytes(member, e)
	}
}

// pack is one pack file's state. Invariant: when loaded, live maps every
// member whose latest record is a put to that record's content, size is the
// offset the next record goes to (the end of the last verified record), and
// liveBytes is the bytes of the records live points into (headers, names
// and content): the rest after the file header is dead.
type pack struct {
	key, path string
	// mu is held shared by readers of f and entries, exclusively by
	// writers, loads, compaction and the closing of f.
	mu     sync.RWMutex
	loaded bool
	// exists reports whether the file exists (meaningful when loaded).
	exists bool
	// broken is set when an append failed in a way that may have left
	// bytes behind (a torn write): the pack is loaded again from the file
	// before its next use, as a restart would.
	broken bool
	// gone is set when the pack was removed from the store's map: a holder
	// of this pointer must look the pack up again.
	gone bool
	// unsynced is set while records appended for a batch (with sync)
	// await the batch's Commit: the file is then kept open (touch does
	// not close it) until a sync of the file clears it.
	unsynced bool
	// stale is set while the file may run on past size with the bytes of
	// the pack whose file it was before (recycle.go: a pooled file reused
	// as it is); trimStaleLocked cuts them off.
	stale     bool
	f         fsys.File
	size      int64
	live      map[string]packEntry
	liveBytes int64
	elem      *list.Element // in packs.open while f is open
}

// packs is a Store's pack table.
type packs struct {
	mu    sync.Mutex
	byKey map[string]*pack
	open  *list.List // of *pack with an open file, most recently used first
	stats PackStats
	// compactMinDead overrides packCompactMinDead, maxOpen packMaxOpen
	// (tests).
	compactMinDead int64
	maxOpen        int
	// logf receives what a load found damaged or cut and a compaction
	// that failed (SetLogf); nil discards.
	logf func(format string, args ...any)
}

func (t *packs) log(format string, args ...any) {
	t.mu.Lock()
	logf := t.logf
	t.mu.Unlock()
	if logf != nil {
		logf(format, args...)
	}
}

func (t *packs) get(root, key string) *pack {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byKey == nil {
		t.byKey = map[string]*pack{}
		t.open = list.New()
	}
	p := t.byKey[key]
	if p == nil {
		p = &pack{key: key, path: filepath.Join(root, filepath.FromSlash(key)) + packSuffix}
		t.byKey[key] = p
	}
	return p
}

func (t *packs) count(f func(s *PackStats)) {
	t.mu.Lock()
	f(&t.stats)
	t.mu.Unlock()
}

// touch records that p's file is open and used, closing the least recently
// used other pack files beyond packMaxOpen (those not in use right now).
func (t *packs) touch(p *pack) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.elem != nil {
		t.open.MoveToFront(p.elem)
		return
	}
	p.elem = t.open.PushFront(p)
	limit := packMaxOpen
	if t.maxOpen > 0 {
		limit = t.maxOpen
	}
	for e := t.open.Back(); e != nil && t.open.Len() > limit; {
		prev := e.Prev()
		q := e.Value.(*pack)
		if q != p && q.mu.TryLock() {
			// NB: a pack awaiting its batch's sync stays open, so that
			// the commit syncs the file the records went to.
			if !q.unsynced {
				q.closeFileLocked(t)
			}
			q.mu.Unlock()
		}
		e = prev
	}
}

// closeFileLocked closes p's file; the caller holds p.mu and t.mu.
func (p *pack) closeFileLocked(t *packs) {
	if p.f != nil {
		p.trimStaleLocked()
		p.f.Close()
		p.f = nil
	}
	if p.elem != nil {
		t.open.Remove(p.elem)
		p.elem = nil
	}
}

func (t *packs) forget(p *pack) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.f != nil {
		p.f.Close()
		p.f = nil
	}
	if p.elem != nil {
		t.open.Remove(p.elem)
		p.elem = nil
	}
	p.gone = true
	if t.byKey[p.key] == p {
		delete(t.byKey, p.key)
	}
}

func (t *packs) closeAll() {
	t.mu.Lock()
	all := make([]*pack, 0, len(t.byKey))
	for _, p := range t.byKey {
		all = append(all, p)
	}
	t.mu.Unlock()
	for _, p := range all {
		p.mu.Lock()
		t.mu.Lock()
		p.closeFileLocked(t)
		t.mu.Unlock()
		p.loaded = false
		p.mu.Unlock()
	}
}

// trimStaleLocked cuts off what p's file holds past size when it was a
// pooled file reused as it was (stale); the caller holds p.mu exclusively.
// A failed truncate leaves it to the next try, or to a load's scan (the
// bytes are records of another pack, which do not verify in this one).
func (p *pack) trimStaleLocked() {
	if p.stale && p.f != nil && p.f.Truncate(p.size) == nil {
		p.stale = false
	}
}

// readyLocked makes p usable: loaded from its file (when not yet, or after a
// failed append) and its file open. With create, a missing file is created;
// without, a missing pack is reported by p.exists false. The caller holds
// p.mu exclusively.
func (s *Store) readyLocked(p *pack, create bool) error {
	if p.broken {
		s.packs.mu.Lock()
		p.closeFileLocked(&s.packs)
		s.packs.mu.Unlock()
		p.loaded, p.broken = false, false
	}
	if p.loaded && p.exists && p.f == nil {
		f, err := s.fs.OpenFile(p.path, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			// Removed behind the store's back: load it again.
			p.loaded = false
		} else if err != nil {
			return fmt.Errorf("filestore: open pack %s: %w", p.key, err)
		} else {
			p.f = f
		}
	}
	if !p.loaded {
		if err := s.loadLocked(p); err != nil {
			return err
		}
	}
	if !p.exists && create {
		if err := s.createPackLocked(p); err != nil {
			return err
		}
	}
	if p.f != nil {
		s.packs.touch(p)
	}
	return nil
}

// createPackLocked creates p's file with its header.
func (s *Store) createPackLocked(p *pack) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir := filepath.Dir(p.path)
	if err := s.ensureDir(dir); err != nil {
		return err
	}
	// A pooled file (recycle.go) has no other name; it holds records of
	// another pack only, which do not verify in this one, and its pages
	// are written over (not freed and allocated anew) by this pack's
	// records. What it holds past them is cut off when the batch writing
	// this pack commits (stale).
	flags := os.O_CREATE | os.O_RDWR | os.O_TRUNC
	reused := s.takeFile(p.path, p.key)
	if reused {
		flags = os.O_RDWR
	}
	f, err := s.fs.OpenFile(p.path, flags, 0o644)
	if err != nil {
		if noSpace(err) {
			return base.NoSpaceErrorf("filestore: create pack %s: %w", p.key, err)
		}
		return fmt.Errorf("filestore: create pack %s: %w", p.key, err)
	}
	err = s.writeAt(f, p.key, packHeader(p.key), 0)
	if err == nil && s.sync {
		err = f.Sync()
	}
	if err == nil && s.sync {
		err = s.syncDir(dir)
	}
	if err != nil {
		f.Close()
		if err == errTorn {
			return err // the crash leaves the file as it is
		}
		_ = s.fs.Remove(p.path) // best effort: a leftover is loaded as a torn pack
		if noSpace(err) {
			return base.NoSpaceErrorf("filestore: create pack %s: %w", p.key, err)
		}
		return fmt.Errorf("filestore: create pack %s: %w", p.key, err)
	}
	p.f, p.exists, p.loaded = f, true, true
	p.size, p.liveBytes = packHeaderSize, 0
	p.live = map[string]packEntry{}
	p.stale = reused
	return nil
}

// loadLocked scans p's file and builds its index, truncating a torn tail.
func (s *Store) loadLocked(p *pack) error {
	p.stale = false // a load cuts the file at its last verified record
	p.live = map[string]packEntry{}
	p.size, p.liveBytes = 0, 0
	f, err := s.fs.OpenFile(p.path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		p.loaded, p.exists = true, false
		return nil
	}
	if err != nil {
		return fmt.Errorf("filestore: open pack %s: %w", p.key, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("filestore: pack %s: %w", p.key, err)
	}
	size := st.Size()
	s.packs.count(func(c *PackStats) { c.Loaded++ })
	if size < packHeaderSize {
		// Torn while being created: no record was ever acknowledged.
		if err := s.resetPack(f, p); err != nil {
			f.Close()
			return err
		}
		s.packs.count(func(c *PackStats) { c.TornTails++ })
		p.f, p.loaded, p.exists = f, true, true
		return nil
	}
	// A damaged file header is reported, not fatal: the records carry
	// their own checksums, seeded with the key the file name gives.
	hdr := make([]byte, packHeaderSize)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		f.Close()
		return fmt.Errorf("filestore: pack %s: %w", p.key, err)
	}
	headerOK := bytes.Equal(hdr, packHeader(p.key))
	// A cut tail makes an earlier record the last one, whose content is
	// then checked too: scan again until the end holds (at most once more
	// but for damage piled up at the end), so that loading what a load
	// left finds the same.
	end := size
	var damaged [][2]int64
	for {
		p.live, p.liveBytes = map[string]packEntry{}, 0
		e, d, err := s.scan(f, p, end)
		if err != nil {
			f.Close()
			return err
		}
		damaged = d
		if e == end {
			break
		}
		end = e
	}
	for _, d := range damaged {
		s.packs.count(func(c *PackStats) { c.DamagedRegions++ })
		s.packs.log("filestore: pack %s: bytes [%d, %d) do not hold a verified record header: skipped; a member whose latest record was there reads as missing and is repaired from the other copies", p.key, d[0], d[1])
	}
	if end < size {
		if err := f.Truncate(end); err != nil {
			f.Close()
			return fmt.Errorf("filestore: pack %s: truncating its torn tail at %d: %w", p.key, end, err)
		}
		if s.sync {
			if err := f.Sync(); err != nil {
				f.Close()
				return fmt.Errorf("filestore: pack %s: %w", p.key, err)
			}
		}
		s.packs.count(func(c *PackStats) { c.TornTails++ })
		s.packs.log("filestore: pack %s: %d bytes after offset %d do not hold a verified record (a write torn by a crash, or damage): cut off; members whose latest record was there read as missing and are repaired from the other copies", p.key, size-end, end)
	}
	switch {
	case !headerOK && end == packHeaderSize:
		// No verified record follows a header that does not verify: the
		// pack was torn while being created (a power loss between its
		// header's write and its sync can leave the size and not the
		// bytes; its first record is synced with it), as a pack shorter
		// than its header is. Its header is written anew, not reported
		// as damage at every load.
		if err := s.resetPack(f, p); err != nil {
			f.Close()
			return err
		}
		if s.sync {
			if err := f.Sync(); err != nil {
				f.Close()
				return fmt.Errorf("filestore: pack %s: %w", p.key, err)
			}
		}
		if end == size {
			s.packs.count(func(c *PackStats) { c.TornTails++ })
		}
	case !headerOK:
		s.packs.count(func(c *PackStats) { c.DamagedRegions++ })
		s.packs.log("filestore: pack %s: file header damaged (the records carry their own checksums: read on)", p.key)
	}
	p.size = end
	p.f, p.loaded, p.exists = f, true, true
	return nil
}

func (s *Store) resetPack(f fsys.File, p *pack) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("filestore: pack %s: %w", p.key, err)
	}
	if _, err := f.WriteAt(packHeader(p.key), 0); err != nil {
		return fmt.Errorf("filestore: pack %s: %w", p.key, err)
	}
	p.size = packHeaderSize
	return nil
}

// scan reads the record headers of p's file of size bytes into p.live and
// returns where the verified records end and the damaged ranges it skipped.
func (s *Store) scan(f fsys.File, p *pack, size int64) (int64, [][2]int64, error) {
	var damaged [][2]int64
	buf := make([]byte, recordHeaderSize+255)
	off := int64(packHeaderSize)
	for off < size {
		h, ok, err := readRecordHeader(f, p.key, buf, off, size)
		if err != nil {
			return 0, nil, fmt.Errorf("filestore: pack %s: %w", p.key, err)
		}
		if ok && off+h.size() == size {
			// The last record: a torn append may have left its header and
			// not all of its content.
			ok, err = contentVerifies(f, h, off)
			if err != nil {
				return 0, nil, fmt.Errorf("filestore: pack %s: %w", p.key, err)
			}
		}
		if !ok {
			next, err := resync(f, p.key, buf, off+1, size)
			if err != nil {
				return 0, nil, fmt.Errorf("filestore: pack %s: %w", p.key, err)
			}
			if next < 0 {
				return off, damaged, nil // a torn tail
			}
			damaged = append(damaged, [2]int64{off, next})
			off = next
			continue
		}
		p.use(h.member, packEntry{off: off + recordHeaderSize + int64(len(h.member)), n: h.n}, h.kind == recordPut)
		off += h.size()
	}
	return off, damaged, nil
}

// readRecordHeader reads and verifies the header at off; ok is false when it
// does not verify or its record runs past size.
func readRecordHeader(f fsys.File, key string, buf []byte, off, size int64) (recordHeader, bool, error) {
	n := min(int64(len(buf)), size-off)
	got, err := f.ReadAt(buf[:n], off)
	if err != nil && !errors.Is(err, io.EOF) {
		return recordHeader{}, false, err
	}
	h, ok := decodeRecordHeader(key, buf[:got])
	if !ok || off+h.size() > size {
		return recordHeader{}, false, nil
	}
	return h, true, nil
}

func contentVerifies(f fsys.File, h recordHeader, off int64) (bool, error) {
	data := make([]byte, h.n)
	if _, err := f.ReadAt(data, off+recordHeaderSize+int64(len(h.member))); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return base.CRC32C(data) == h.dataCRC, nil
}

// resync returns the offset of the first verified record at or after from
// (whose content, when it is the last record, verifies too), or -1.
func resync(f fsys.File, key string, buf []byte, from, size int64) (int64, error) {
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], recordMagic)
	const window = 1 << 20
	chunk := make([]byte, window+3)
	for at := from; at < size; at += window {
		n, err := f.ReadAt(chunk[:min(int64(len(chunk)), size-at)], at)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		b := chunk[:n]
		for i := 0; i < min(n, window); {
			j := bytes.Index(b[i:], magic[:])
			if j < 0 || i+j >= window {
				break
			}
			cand := at + int64(i+j)
			h, ok, err := readRecordHeader(f, key, buf, cand, size)
			if err != nil {
				return 0, err
			}
			if ok && cand+h.size() == size {
				ok, err = contentVerifies(f, h, cand)
				if err != nil {
					return 0, err
				}
			}
			if ok {
				return cand, nil
			}
			i += j + 1
		}
	}
	return -1, nil
}

// lockedPack returns key's pack locked exclusively and ready (see
// readyLocked). The caller unlocks p.mu.
func (s *Store) lockedPack(key string, create bool) (*pack, error) {
	for {
		p := s.packs.get(s.root, key)
		p.mu.Lock()
		if p.gone {
			p.mu.Unlock()
			continue
		}
		if err := s.readyLocked(p, create); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		return p, nil
	}
}

// readPack runs read with key's pack locked shared and ready (not
// created). read is not called when the pack does not exist.
func (s *Store) readPack(key string, read func(p *pack) error) (bool, error) {
	for {
		p := s.packs.get(s.root, key)
		p.mu.RLock()
		if p.gone {
			p.mu.RUnlock()
			continue
		}
		if p.loaded && !p.broken && (!p.exists || p.f != nil) {
			if !p.exists {
				p.mu.RUnlock()
				return false, nil
			}
			s.packs.touch(p)
			err := read(p)
			p.mu.RUnlock()
			return true, err
		}
		p.mu.RUnlock()
		p.mu.Lock()
		err := error(nil)
		if !p.gone {
			err = s.readyLocked(p, false)
		}
		p.mu.Unlock()
		if err != nil {
			return false, err
		}
	}
}

// packGet returns [off, off+n) of a member's content (n < 0: all of it).
func (s *Store) packGet(name, key, member string, off, n int64) ([]byte, error) {
	var out []byte
	found, err := s.readPack(key, func(p *pack) error {
		e, ok := p.live[member]
		if !ok {
			return fmt.Errorf("filestore: %s: %w", name, fs.ErrNotExist)
		}
		if n < 0 {
			off, n = 0, e.n
		}
		if off >= e.n {
			out = []byte{}
			return nil
		}
		n = min(n, e.n-off)
		out = make([]byte, n)
		if _, err := p.f.ReadAt(out, e.off+off); err != nil {
			return fmt.Errorf("filestore: read %s: %w", name, err)
		}
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("filestore: %s: %w", name, fs.ErrNotExist)
	}
	return out, err
}

// packAppendLocked appends one record to p (ready, existing) and updates the
// index. A failed append is cut off again; a torn one (crash injected)
// leaves the file as it is and the pack is loaded again before its next use.
// With sync the record is fsynced before it returns, or, with a batch b,
// when b commits.
func (s *Store) packAppendLocked(p *pack, name string, kind byte, member string, data []byte, b *batch) error {
	size, err := s.writeRecordLocked(p, name, kind, member, data)
	switch {
	case err != nil || !s.sync:
	case b != nil:
		p.unsynced = true
		b.add(p)
	default:
		if err = p.f.Sync(); err == nil {
			p.unsynced = false // the earlier records of a batch too
		}
	}
	if err != nil {
		p.broken = true
		if err == errTorn {
			return err
		}
		if terr := p.f.Truncate(p.size); terr == nil {
			p.broken = false
		}
		if noSpace(err) {
			return base.NoSpaceErrorf("filestore: write %s: %w", name, err)
		}
		return fmt.Errorf("filestore: write %s: %w", name, err)
	}
	p.use(member, packEntry{off: p.size + recordHeaderSize + int64(len(member)), n: int64(len(data))}, kind == recordPut)
	p.size += size
	switch {
	case p.stale && b != nil:
		b.add(p) // its Commit cuts the stale bytes off
	case p.stale:
		p.trimStaleLocked()
	}
	return nil
}

// vectoredMin is the smallest content writeRecordLocked writes after its
// header with one vectored write instead of copying both into one buffer.
const vectoredMin = 16 << 10

// writeRecordLocked writes the record of data at the end of p (size) and
// returns its size. A chunk's content goes out from the caller's buffer
// with its header in one pwritev: copying the 64 KiB into a record buffer
// first was a memmove per chunk and replica of a PUT.
func (s *Store) writeRecordLocked(p *pack, name string, kind byte, member string, data []byte) (int64, error) {
	if len(data) >= vectoredMin && s.torn == nil {
		var hbuf [recordHeaderSize + 255]byte
		head := appendRecordHead(hbuf[:0], p.key, kind, member, data)
		if invariants.Enabled {
			checkRecord(p.key, append(head[:len(head):len(head)], data...), kind, member, data)
		}
		if ok, err := writeAt2(p.f, head, data, p.size); ok {
			return int64(len(head) + len(data)), err
		}
	}
	buf, _ := recordBufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	defer recordBufs.Put(buf)
	rec := appendRecord((*buf)[:0], p.key, kind, member, data)
	*buf = rec
	checkRecord(p.key, rec, kind, member, data)
	return int64(len(rec)), s.writeAt(p.f, name, rec, p.size)
}

// packPut stores a member's whole content as a new record (synced with
// batch b when not nil).
func (s *Store) packPut(name, key, member string, data []byte, b *batch) error {
	p, err := s.lockedPack(key, true)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	if err := s.packAppendLocked(p, name, recordPut, member, data, b); err != nil {
		return err
	}
	return s.maybeCompactLocked(p)
}

// packWriteFresh writes data at off of a member whose bytes there are zero
// or past its end, as a new record of the member's whole new content
// (synced with batch b when not nil).
func (s *Store) packWriteFresh(name, key, member string, off int64, data []byte, b *batch) error {
	p, err := s.lockedPack(key, true)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	var cur []byte
	if e, ok := p.live[member]; ok {
		cur = make([]byte, e.n)
		if _, err := p.f.ReadAt(cur, e.off); err != nil {
			return fmt.Errorf("filestore: read %s: %w", name, err)
		}
	}
	if end := min(off+int64(len(data)), int64(len(cur))); off < end && !isZero(cur[off:end]) {
		return fmt.Errorf("filestore: %s [%d, +%d) already written: %w", name, off, len(data), objstore.ErrRangeUnsupported)
	}
	next := cur
	if need := off + int64(len(data)); need > int64(len(next)) {
		next = append(next, make([]byte, need-int64(len(next)))...)
	}
	copy(next[off:], data)
	if err := s.packAppendLocked(p, name, recordPut, member, next, b); err != nil {
		return err
	}
	return s.maybeCompactLocked(p)
}

// packDelete ends a member; the last one removes the pack file.
func (s *Store) packDelete(name, key, member string) error {
	p, err := s.lockedPack(key, false)
	if err != nil {
		return err
	}
	if _, ok := p.live[member]; !ok || !p.exists {
		p.mu.Unlock()
		return nil
	}
	if len(p.live) == 1 {
		err := s.removePackFileLocked(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.mu.Unlock()
			return fmt.Errorf("filestore: remove pack %s: %w", p.key, err)
		}
		s.packs.forget(p)
		s.packs.count(func(c *PackStats) { c.Removed++ })
		p.mu.Unlock()
		s.removeEmptyDir(filepath.Dir(p.path))
		return nil
	}
	defer p.mu.Unlock()
	if err := s.packAppendLocked(p, name, recordDelete, member, nil, nil); err != nil {
		return err
	}
	return s.maybeCompactLocked(p)
}

// packFlipBits flips bits of a member's stored content in place (the fault,
// not a repair).
func (s *Store) packFlipBits(name, key, member string, bitOffset int64, count int) error {
	p, err := s.lockedPack(key, false)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	e, ok := p.live[member]
	if !ok || !p.exists {
		return fmt.Errorf("filestore: %s: %w", name, fs.ErrNotExist)
	}
	b := make([]byte, e.n)
	if _, err := p.f.ReadAt(b, e.off); err != nil {
		return fmt.Errorf("filestore: %w", err)
	}
	if err := objstore.InvertBits(b, bitOffset, count); err != nil {
		return err
	}
	if _, err := p.f.WriteAt(b, e.off); err != nil {
		return fmt.Errorf("filestore: %w", err)
	}
	return nil
}

func (s *Store) compactMinDead() int64 {
	s.packs.mu.Lock()
	defer s.packs.mu.Unlock()
	if s.packs.compactMinDead > 0 {
		return s.packs.compactMinDead
	}
	return packCompactMinDead
}

func (s *Store) maybeCompactLocked(p *pack) error {
	if dead := p.deadBytes(); dead <= p.liveBytes || dead < s.compactMinDead() {
		return nil
	}
	// A failed compaction leaves the old pack as it was: the write that
	// triggered it succeeded, and the next write tries again.
	if err := s.compactLocked(p); err != nil && !errors.Is(err, errTorn) {
		s.packs.log("%v (the pack stays as it was)", err)
	}
	return nil
}

// compactLocked rewrites p with only its live records, out of place: a new
// file, synced when the store syncs, renamed over the old one.
func (s *Store) compactLocked(p *pack) error {
	type member struct {
		name string
		e    packEntry
	}
	members := make([]member, 0, len(p.live))
	for m, e := range p.live {
		members = append(members, member{m, e})
	}
	sort.Slice(members, func(i, j int) bool { return members[i].e.off < members[j].e.off })
	tmp := fmt.Sprintf("%s.tmp%d", p.path, s.seq.Add(1))
	f, err := s.fs.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("filestore: compact %s: %w", p.key, err)
	}
	fail := func(err error) error {
		f.Close()
		if err != errTorn {
			_ = s.fs.Remove(tmp) // best effort: List skips temporary files
		}
		return fmt.Errorf("filestore: compact %s: %w", p.key, err)
	}
	live := make(map[string]packEntry, len(members))
	off := int64(packHeaderSize)
	if err := s.writeAt(f, p.key, packHeader(p.key), 0); err != nil {
		return fail(err)
	}
	for _, m := range members {
		data := make([]byte, m.e.n)
		if _, err := p.f.ReadAt(data, m.e.off); err != nil {
			return fail(err)
		}
		rec := encodeRecord(p.key, recordPut, m.name, data)
		checkRecord(p.key, rec, recordPut, m.name, data)
		if err := s.writeAt(f, memberName(p.key, m.name), rec, off); err != nil {
			return fail(err)
		}
		live[m.name] = packEntry{off: off + recordHeaderSize + int64(len(m.name)), n: m.e.n}
		off += int64(len(rec))
	}
	if s.sync {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	if err := s.fs.Rename(tmp, p.path); err != nil {
		return fail(err)
	}
	if s.sync {
		if err := s.syncDir(filepath.Dir(p.path)); err != nil {
			// The rename happened: the new file is the pack now.
			err = fmt.Errorf("filestore: compact %s: %w", p.key, err)
			defer func() { p.broken = true }()
			s.swapPackFile(p, f, live, off)
			return err
		}
	}
	reclaimed := p.size - off
	s.swapPackFile(p, f, live, off)
	s.packs.count(func(c *PackStats) { c.Compactions++; c.ReclaimedBytes += reclaimed })
	return nil
}

func (s *Store) swapPackFile(p *pack, f fsys.File, live map[string]packEntry, size int64) {
	s.packs.mu.Lock()
	p.closeFileLocked(&s.packs)
	s.packs.mu.Unlock()
	p.f, p.live, p.size = f, live, size
	p.liveBytes = size - packHeaderSize
	p.stale = false
	if s.sync {
		p.unsynced = false // the new file was synced before its rename
	}
	s.packs.touch(p)
}

// Compact compacts every pack this store has used whose dead bytes exceed
// min (0: every pack with any dead record).
func (s *Store) Compact(minDead int64) error {
	s.packs.mu.Lock()
	keys := make([]string, 0, len(s.packs.byKey))
	for k := range s.packs.byKey {
		keys = append(keys, k)
	}
	s.packs.mu.Unlock()
	sort.Strings(keys)
	for _, k := range keys {
		p, err := s.lockedPack(k, false)
		if err != nil {
			return err
		}
		if p.exists && p.deadBytes() > max(minDead, 0) {
			err = s.compactLocked(p)
		}
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// SetLogf sends what loading a pack found damaged or cut off, and a
// compaction that failed, to logf (nil: discarded).
func (s *Store) SetLogf(logf func(format string, args ...any)) {
	s.packs.mu.Lock()
	defer s.packs.mu.Unlock()
	s.packs.logf = logf
}

// PackStats returns the pack counters.
func (s *Store) PackStats() PackStats {
	s.packs.mu.Lock()
	defer s.packs.mu.Unlock()
	return s.packs.stats
}

// packMembers lists the member names of the pack stored in file path (a
// ".pack" file under root) as store names.
func (s *Store) packMembers(rel string) ([]string, error) {
	key := strings.TrimSuffix(rel, packSuffix)
	var names []string
	_, err := s.readPack(key, func(p *pack) error {
		for m := range p.live {
			names = append(names, memberName(key, m))
		}
		return nil
	})
	return names, err
}

func (s *Store) removeEmptyDir(dir string) {
	if dir == s.root {
		return
	}
	s.mu.Lock()
	if s.recycleDirLocked(dir) || s.fs.Remove(dir) == nil {
		s.dirs.Delete(dir)
	}
	s.mu.Unlock()
}

// removePackFileLocked removes p's file (into the pool of recycle.go when
// it can). The caller holds p.mu exclusively and forgets p after.
func (s *Store) removePackFileLocked(p *pack) error {
	if s.recycleFile(p) {
		return nil
	}
	return s.fs.Remove(p.path)
}

var _ objstore.DirDeleter = (*Store)(nil)

// DeleteDir implements objstore.DirDeleter: the directory's pack files and plain
// files are removed, then the directory.
func (s *Store) DeleteDir(prefix string) error {
	rel, ok := strings.CutSuffix(prefix, "/")
	if !ok {
		return base.InvalidArgumentf("filestore: delete of %q: not a directory prefix", prefix)
	}
	if err := objstore.ValidName(rel); err != nil {
		return err
	}
	if rest, ok := strings.CutPrefix(prefix, "i/"); ok {
		// The index entries' copies in the sums packs (a blob's sums
		// pack removed whole before, as ChunkStore.DeleteBlob does,
		// leaves none); then the directory of the format before.
		names, err := s.list("k/"+rest, prefix)
		if err != nil {
			return err
		}
		for _, n := range names {
			key, member, _ := packedName(n)
			if err := s.packDelete(n, key, member); err != nil {
				return err
			}
		}
	}
	dir := filepath.Join(s.root, filepath.FromSlash(rel))
	ents, err := s.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("filestore: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := s.DeleteDir(prefix + e.Name() + "/"); err != nil {
				return err
			}
			continue
		}
		name := rel + "/" + e.Name()
		if _, _, packed := packedName(name); packed && !isIndexName(name) && strings.HasSuffix(name, packSuffix) {
			if err := s.removePack(strings.TrimSuffix(name, packSuffix)); err != nil {
				return err
			}
			continue
		}
		if err := s.fs.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("filestore: %w", err)
		}
	}
	s.removeEmptyDir(dir)
	return nil
}

// removePack removes key's pack file whole.
func (s *Store) removePack(key string) error {
	for {
		p := s.packs.get(s.root, key)
		p.mu.Lock()
		if p.gone {
			p.mu.Unlock()
			continue
		}
		err := s.removePackFileLocked(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.mu.Unlock()
			return fmt.Errorf("filestore: remove pack %s: %w", key, err)
		}
		s.packs.forget(p)
		s.packs.count(func(c *PackStats) { c.Removed++ })
		p.mu.Unlock()
		return nil
	}
}
