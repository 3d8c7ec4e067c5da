package flipfs

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

// FS is the injector: see the package comment.
type FS struct {
	vfs.FS
	persistent  bool
	protectMeta sdfvfs.RangesFunc // nil: metadata is not protected

	enabled atomic.Bool
	mu      sync.Mutex
	rng     *rand.Rand                // guarded by mu
	uber    float64                   // guarded by mu
	gap     int64                     // bits still to read before the next flip; guarded by mu
	stats   Stats                     // guarded by mu
	meta    map[string][]sdfvfs.Range // metadata ranges by path; guarded by mu
}

// Stats counts what an FS read and injected.
type Stats struct {
	SSTBitsRead int64
	Flips       int64
	// MetaAbsorbed counts flips that landed in protected metadata blocks
	// (not applied: the local duplicate serves those bytes).
	MetaAbsorbed int64
	// PerNode counts flips by the node directory they landed in ("n1", ...).
	PerNode map[string]int64
}

func (s Stats) String() string {
	return fmt.Sprintf("sstBitsRead=%d flips=%d metaAbsorbed=%d perNode=%v", s.SSTBitsRead, s.Flips, s.MetaAbsorbed, s.PerNode)
}

var _ vfs.FS = (*FS)(nil)

// Options configures an FS.
type Options struct {
	// UBER is the probability that a bit read flips, in [0, 1e-2).
	UBER float64
	// Persistent writes each flip back into the stored file; otherwise
	// only the caller's buffer changes (a re-read is clean).
	Persistent bool
	// ProtectMeta, if set, finds each sstable's locally duplicated
	// metadata ranges: flips there are counted and not applied.
	ProtectMeta sdfvfs.RangesFunc
	// Seed seeds the flip positions.
	Seed int64
}

// New wraps inner. Flips start disabled (loading a store is usually not
// part of a measurement); SetUBER and Enable control them.
func New(inner vfs.FS, opts Options) (*FS, error) {
	f := &FS{FS: inner, persistent: opts.Persistent, protectMeta: opts.ProtectMeta, rng: rand.New(rand.NewSource(opts.Seed)),
		meta: map[string][]sdfvfs.Range{}}
	if err := f.SetUBER(opts.UBER); err != nil {
		return nil, err
	}
	return f, nil
}

// SetUBER changes the flip probability per bit read.
func (f *FS) SetUBER(uber float64) error {
	if !(uber >= 0 && uber < 1e-2) {
		return base.InvalidArgumentf("flipfs: UBER %g outside [0, 1e-2)", uber)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uber = uber
	f.gap = f.nextGapLocked()
	return nil
}

// Enable turns the flips on or off (a new FS starts with them off).
func (f *FS) Enable(on bool) { f.enabled.Store(on) }

// nextGapLocked draws the number of clean bits before the next flip:
// geometric with success probability uber (inverse transform sampling).
func (f *FS) nextGapLocked() int64 {
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
func (f *FS) Stats() Stats {
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
func (f *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.Open(name, opts...)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return file, err
	}
	return &flipFile{File: file, fs: f, name: name}, nil
}

// Unwrap returns the wrapped file system.
func (f *FS) Unwrap() vfs.FS { return f.FS }

// flipOffsets decides which bits of a read of n bytes flip, and counts them.
// It returns bit offsets within the read.
func (f *FS) flipOffsets(name string, file vfs.File, off int64, n int) []int64 {
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
func (f *FS) metaRangesLocked(name string, file vfs.File) []sdfvfs.Range {
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

// nodeDirOf finds the "nN" element of a kvcluster path
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
	fs   *FS
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
func (f *FS) writeBack(name string, at int64, b byte) error {
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
