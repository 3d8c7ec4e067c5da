package experiments

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/sdfvfs"
)

// flipFS is the KV experiments' error injector: a vfs.FS that flips bits in
// the bytes Pebble reads from sstables, one flip per 1/UBER bits read on
// average (DIRECT 000 section 5, "Error Injection": ZippyDB's custom RocksDB
// environment "flips bits as they are read from a file"). Every bit read from
// a file whose name ends in ".sst" flips independently with probability UBER;
// the gaps between flips are geometric, so the cost is per read, not per bit.
//
// Transient flips change only the caller's buffer (a re-read is clean);
// persistent flips are also written back into the stored file, as a flash
// page that decayed would be. WAL, MANIFEST and raft log reads are never
// touched: those have their own duplication (internal/raftlog, sdfvfs) and
// are not what the ZippyDB experiments measure.
//
// With protectMeta, an sstable's metadata blocks (index, filter,
// properties, footer: sdfvfs.SSTMetadataRanges) are taken to be duplicated
// locally (DIRECT policy 2, as internal/sdfvfs does on flash): a flip that
// lands there is repaired from the local copy before Pebble sees it, so it
// is counted (MetaAbsorbed) and not applied. Only data blocks then reach
// the KV store's repair, as in ZippyDB-DIRECT.
//
// NB: internal/flash's UBERModel injects the same flips at the device; under
// internal/sdfvfs the SDF layer re-reads a page that fails its checksum and
// absorbs a transient flip before Pebble sees it. The KV experiments measure
// what happens above that layer (a flip the device could not hide), so they
// inject at the Pebble file boundary instead.
type flipFS struct {
	vfs.FS
	persistent  bool
	protectMeta sdfvfs.RangesFunc // nil: metadata is not protected

	enabled atomic.Bool
	mu      sync.Mutex
	rng     *rand.Rand                // guarded by mu
	uber    float64                   // guarded by mu
	gap     int64                     // bits still to read before the next flip; guarded by mu
	stats   flipStats                 // guarded by mu
	meta    map[string][]sdfvfs.Range // metadata ranges by path; guarded by mu
}

// flipStats counts what a flipFS read and injected.
type flipStats struct {
	SSTBitsRead int64
	Flips       int64
	// MetaAbsorbed counts flips that landed in protected metadata blocks
	// (not applied: the local duplicate serves those bytes).
	MetaAbsorbed int64
	// PerNode counts flips by the node directory they landed in ("n1", ...).
	PerNode map[string]int64
}

func (s flipStats) String() string {
	return fmt.Sprintf("sstBitsRead=%d flips=%d metaAbsorbed=%d perNode=%v", s.SSTBitsRead, s.Flips, s.MetaAbsorbed, s.PerNode)
}

var _ vfs.FS = (*flipFS)(nil)

// newFlipFS wraps inner. Flips start disabled (loading a store is not part of
// the measurement); setUBER and enable control them. protectMeta, if not
// nil, finds each sstable's locally duplicated metadata ranges.
func newFlipFS(inner vfs.FS, uber float64, persistent bool, protectMeta sdfvfs.RangesFunc, seed int64) (*flipFS, error) {
	f := &flipFS{FS: inner, persistent: persistent, protectMeta: protectMeta, rng: rand.New(rand.NewSource(seed)),
		meta: map[string][]sdfvfs.Range{}}
	if err := f.setUBER(uber); err != nil {
		return nil, err
	}
	return f, nil
}

// setUBER changes the flip probability per bit read.
func (f *flipFS) setUBER(uber float64) error {
	if !(uber >= 0 && uber < 1e-2) {
		return base.InvalidArgumentf("flipfs: UBER %g outside [0, 1e-2)", uber)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uber = uber
	f.gap = f.nextGapLocked()
	return nil
}

func (f *flipFS) enable(on bool) { f.enabled.Store(on) }

// nextGapLocked draws the number of clean bits before the next flip:
// geometric with success probability uber (inverse transform sampling).
func (f *flipFS) nextGapLocked() int64 {
	if f.uber == 0 {
		return math.MaxInt64
	}
	u := f.rng.Float64()
	g := math.Floor(math.Log1p(-u) / math.Log1p(-f.uber))
	if g > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(g)
}

// Stats returns a copy of the counters.
func (f *flipFS) Stats() flipStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.stats
	out.PerNode = map[string]int64{}
	for k, v := range f.stats.PerNode {
		out.PerNode[k] = v
	}
	return out
}

// Open wraps sstables so their reads go through the injector.
func (f *flipFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.Open(name, opts...)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return file, err
	}
	return &flipFile{File: file, fs: f, name: name}, nil
}

// Unwrap returns the wrapped file system.
func (f *flipFS) Unwrap() vfs.FS { return f.FS }

// flipOffsets decides which bits of a read of n bytes flip, and counts them.
// It returns bit offsets within the read.
func (f *flipFS) flipOffsets(name string, file vfs.File, off int64, n int) []int64 {
	if n <= 0 || !f.enabled.Load() {
		return nil
	}
	bits := int64(n) * 8
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.SSTBitsRead += bits
	var offs []int64
	pos := int64(0)
	for pos+f.gap < bits {
		pos += f.gap
		offs = append(offs, pos)
		pos++
		f.gap = f.nextGapLocked()
	}
	f.gap -= bits - pos
	if len(offs) > 0 && f.protectMeta != nil {
		meta := f.metaRangesLocked(name, file)
		kept := offs[:0]
		for _, bit := range offs {
			at := off + bit/8
			if inRanges(meta, at) {
				f.stats.MetaAbsorbed++
				continue
			}
			kept = append(kept, bit)
		}
		offs = kept
	}
	if len(offs) > 0 {
		f.stats.Flips += int64(len(offs))
		if f.stats.PerNode == nil {
			f.stats.PerNode = map[string]int64{}
		}
		f.stats.PerNode[nodeDirOf(name)] += int64(len(offs))
	}
	return offs
}

// metaRangesLocked returns (and caches) the metadata ranges of an sstable.
// A table that does not parse (being written, or damaged) is treated as
// having none: every flip in it applies.
func (f *flipFS) metaRangesLocked(name string, file vfs.File) []sdfvfs.Range {
	if rs, ok := f.meta[name]; ok {
		return rs
	}
	var rs []sdfvfs.Range
	if st, err := file.Stat(); err == nil {
		if got, ok, err := f.protectMeta(name, file, st.Size()); err == nil && ok {
			rs = got
		}
	}
	f.meta[name] = rs
	return rs
}

func inRanges(rs []sdfvfs.Range, at int64) bool {
	for _, r := range rs {
		if at >= r.Off && at < r.Off+r.Len {
			return true
		}
	}
	return false
}

// nodeDirOf finds the "nN" element of a LocalCluster path
// ("cluster/n2/shard-1/pebble/000005.sst" -> "n2").
func nodeDirOf(path string) string {
	for _, el := range strings.Split(path, "/") {
		if len(el) > 1 && el[0] == 'n' && strings.Trim(el[1:], "0123456789") == "" {
			return el
		}
	}
	return "?"
}

type flipFile struct {
	vfs.File
	fs   *flipFS
	name string
	pos  int64 // for Read
}

func (ff *flipFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := ff.File.ReadAt(p, off)
	ff.inject(p[:n], off)
	return n, err
}

func (ff *flipFile) Read(p []byte) (int, error) {
	n, err := ff.File.Read(p)
	ff.inject(p[:n], ff.pos)
	ff.pos += int64(n)
	return n, err
}

func (ff *flipFile) inject(p []byte, off int64) {
	for _, bit := range ff.fs.flipOffsets(ff.name, ff.File, off, len(p)) {
		i := bit / 8
		p[i] ^= 1 << uint(bit%8)
		if ff.fs.persistent {
			// Best effort: the file may be gone (compacted away) by now, in
			// which case the flip stays transient.
			_ = ff.fs.writeBack(ff.name, off+i, p[i])
		}
	}
}

// writeBack stores a flipped byte in the file itself (persistent flips).
func (f *flipFS) writeBack(name string, at int64, b byte) error {
	w, err := f.FS.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer w.Close()
	if _, err := w.WriteAt([]byte{b}, at); err != nil {
		return err
	}
	return w.Sync()
}
