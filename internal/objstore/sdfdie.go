package objstore

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf"
)

// DieReporter is a store on flash whose dies can fail: it reports each
// failure (Reparo's Detector event) and what the die held (its Identifier),
// so that the cluster repairs exactly that.
type DieReporter interface {
	// DieEvents delivers each die the flash layer declares failed.
	DieEvents() <-chan sdf.DieFailure
	// FailedDies lists the dies known failed (journaled before this open
	// included).
	FailedDies() []flash.DieAddr
	// LostOnDie identifies what the die held and the store still maps.
	LostOnDie(d flash.DieAddr, m reparo.Method) (DieLoss, error)
	// FlashBytes is the bytes programmed on the device so far (data, P2L
	// and metadata pages): a repair's flash cost is its difference.
	FlashBytes() int64
}

var _ DieReporter = (*SDFStore)(nil)

// LossRetirer is a store on a device that can retire lost ranges: ranges a
// failed die held whose content a layer above has restored from elsewhere
// and no longer needs from this file (see SDFStore.RetireLost).
type LossRetirer interface {
	RetireLost(d flash.DieAddr, m reparo.Method, keep func(name string) bool, fill RetireFill) (ranges int, bytes int64, err error)
}

// RetireFill, when not nil, writes into buf (bytes [off, off+len(buf)) of
// the file name, zeros when called) the bytes a layer above still holds
// elsewhere, in a copy it checks: RetireLost writes them back in place of
// the zeros. For the metadata a file keeps a partial copy of (an sstable's
// footer and index blocks in sdfvfs's range copy): the die's page held
// them with other bytes, the copy holds only them, so the read path serves
// them but cannot rewrite the page, and zeros would take them for good.
type RetireFill func(name string, off int64, buf []byte)

var _ LossRetirer = (*SDFStore)(nil)

// BlobRef names one blob (object version) of the chunk store.
type BlobRef struct {
	Object, Version uint64
}

// DieLoss is what a failed die held: the store's file ranges on it, the
// blobs those files belong to, and the other files (node metadata copies).
type DieLoss struct {
	Die    flash.DieAddr
	Method reparo.Method
	Ranges int
	Bytes  int64
	Files  int
	Blobs  []BlobRef
	// Chunks are the chunks of Blobs with data or a sums record on the
	// die, sorted by ID: what a repair at sector granularity re-creates.
	Chunks []ChunkLoss
	// MetaFiles are triplicated metadata files (MetaFiles: local index
	// entries, identity, history) with a copy on the die; the node
	// rewrites that copy from the others.
	MetaFiles  []string
	OtherFiles []string
	Windows    int
	PagesRead  int
	Elapsed    time.Duration
}

// ChunkLoss is what a failed die took of one chunk: byte ranges of its
// data (as the identifier gives them: whole flash pages, clipped to the
// file) and whether its sums record was there.
type ChunkLoss struct {
	ID       direct.ChunkID
	Lost     []direct.Span
	SumsLost bool
}

func (l ChunkLoss) String() string {
	s := fmt.Sprintf("%s lost %v", l.ID, l.Lost)
	if l.SumsLost {
		s += " +sums"
	}
	return s
}

// chunkLosses adds what the file range [off, off+n) of name takes from
// chunks: a chunk's data file, or the records of a sums file. Other files
// add nothing.
func chunkLosses(chunks map[direct.ChunkID]*ChunkLoss, name string, off, n int64) {
	at := func(id direct.ChunkID) *ChunkLoss {
		l := chunks[id]
		if l == nil {
			l = &ChunkLoss{ID: id}
			chunks[id] = l
		}
		return l
	}
	var id direct.ChunkID
	var group uint32
	switch {
	case n <= 0 || off < 0:
	case strings.HasPrefix(name, "d/"):
		if _, err := fmt.Sscanf(name, "d/%016x.%d/%d.%d", &id.Object, &id.Version, &id.Shard, &id.Index); err == nil && name == DataName(id) && off < direct.ChunkSize {
			l := at(id)
			l.Lost = append(l.Lost, direct.Span{Off: int(off), Len: int(min(n, direct.ChunkSize-off))})
		}
	case strings.HasPrefix(name, "k/"):
		if _, err := fmt.Sscanf(name, "k/%016x.%d/%d.g%d", &id.Object, &id.Version, &id.Shard, &group); err == nil {
			for slot := off / sumsrec.Size; slot <= (off+n-1)/sumsrec.Size && slot < sumsrec.PerFile; slot++ {
				id.Index = group*sumsrec.PerFile + uint32(slot)
				if SumsName(id) == name {
					at(id).SumsLost = true
				}
			}
		}
	}
}

// Geometry is the emulated device's geometry.
func (s *SDFStore) Geometry() flash.Geometry { return s.dev.Geometry() }

// HealthReporter is a store on a device that can lose dies and say whether
// it can still absorb the losses.
type HealthReporter interface {
	Health() sdf.Health
}

var _ HealthReporter = (*SDFStore)(nil)

// Health is the device's health after its die failures (sdf.FS.Health).
func (s *SDFStore) Health() sdf.Health { return s.fs.Health() }

// FlashBytes implements DieReporter.
func (s *SDFStore) FlashBytes() int64 { return s.fs.Stats().FlashBytes }

// DieEvents implements DieReporter.
func (s *SDFStore) DieEvents() <-chan sdf.DieFailure { return s.dies }

// FailedDies implements DieReporter.
func (s *SDFStore) FailedDies() []flash.DieAddr { return s.fs.FailedDies() }

// identifyWindowFiles is how many file IDs one identifier query covers: a
// bounded window, so no single call walks a whole large device's map.
const identifyWindowFiles = 4096

// LostOnDie implements DieReporter: it asks the flash layer's identifier,
// window by window over the file IDs, for the live ranges on the die, and
// names the blobs (object, version) whose chunk, sums or index files they
// are in. Files being written (temporary names) are left out: their writer
// sees the failure.
func (s *SDFStore) LostOnDie(d flash.DieAddr, m reparo.Method) (DieLoss, error) {
	start := time.Now()
	loss := DieLoss{Die: d, Method: m}
	blobs := map[BlobRef]bool{}
	chunks := map[direct.ChunkID]*ChunkLoss{}
	files := map[string]bool{}
	metas := map[string]bool{}
	for _, w := range reparo.Windows(s.fs.MaxFileID(), identifyWindowFiles) {
		rs, st, err := s.fs.Identify(d, m, w)
		if err != nil {
			return loss, err
		}
		loss.Windows++
		loss.PagesRead += st.PagesRead
		for _, r := range rs {
			if strings.Contains(r.Name, ".tmp") {
				continue
			}
			loss.Ranges++
			loss.Bytes += r.Len
			chunkLosses(chunks, r.Name, r.Off, r.Len)
			if files[r.Name] {
				continue
			}
			files[r.Name] = true
			if logical, ok := metaCopyOf(r.Name); ok {
				if !metas[logical] {
					metas[logical] = true
					loss.MetaFiles = append(loss.MetaFiles, logical)
				}
			} else if b, ok := BlobOfFile(r.Name); ok {
				blobs[b] = true
			} else {
				loss.OtherFiles = append(loss.OtherFiles, r.Name)
			}
		}
	}
	loss.Files = len(files)
	for b := range blobs {
		loss.Blobs = append(loss.Blobs, b)
	}
	for _, c := range chunks {
		loss.Chunks = append(loss.Chunks, *c)
	}
	sort.Slice(loss.Chunks, func(a, b int) bool { return chunkLess(loss.Chunks[a].ID, loss.Chunks[b].ID) })
	loss.Elapsed = time.Since(start)
	return loss, nil
}

func chunkLess(a, b direct.ChunkID) bool {
	if a.Object != b.Object {
		return a.Object < b.Object
	}
	if a.Version != b.Version {
		return a.Version < b.Version
	}
	if a.Shard != b.Shard {
		return a.Shard < b.Shard
	}
	return a.Index < b.Index
}

// metaCopyOf returns the logical name of a MetaFiles copy (metaCopyName).
func metaCopyOf(name string) (string, bool) {
	i := strings.LastIndex(name, ".m")
	if i <= 0 || i+2 == len(name) {
		return "", false
	}
	if _, err := strconv.Atoi(name[i+2:]); err != nil {
		return "", false
	}
	return name[:i], true
}

// BlobOfFile parses the blob directory of a chunk-store file name
// ("d/<object hex>.<version>/..." and the like, see blobDir).
func BlobOfFile(name string) (BlobRef, bool) {
	parts := strings.Split(name, "/")
	if len(parts) < 3 {
		return BlobRef{}, false
	}
	obj, ver, ok := strings.Cut(parts[1], ".")
	if !ok || len(obj) != 16 {
		return BlobRef{}, false
	}
	o, err := strconv.ParseUint(obj, 16, 64)
	if err != nil {
		return BlobRef{}, false
	}
	v, err := strconv.ParseUint(ver, 10, 64)
	if err != nil {
		return BlobRef{}, false
	}
	return BlobRef{Object: o, Version: v}, true
}

// RetireLost moves the ranges the failed die d held in the files keep
// selects off the die: each is rewritten, whole pages, on healthy dies with
// zeros, so that the die holds nothing of them and the die's repair can
// close (Reparo 6: nothing stays mapped to a dead die). Only for files
// whose layer above has already restored what the die took (a KV replica
// patched the key ranges of its lost sstable blocks from its peers; a raft
// log copy is whole in its other copy or in the peers' logs): their own
// checksums (Pebble's block checksums, the raft log's fragment checksums,
// guardfs's framing) refuse the zeros if they are ever read, exactly as
// they refused the dead die's pages, and no layer takes them for data.
// fill (may be nil) puts back in the zeros what a copy elsewhere still
// holds of a range. It returns the ranges and bytes it retired.
func (s *SDFStore) RetireLost(d flash.DieAddr, m reparo.Method, keep func(name string) bool, fill RetireFill) (ranges int, bytes int64, err error) {
	for _, w := range reparo.Windows(s.fs.MaxFileID(), identifyWindowFiles) {
		rs, _, err := s.fs.Identify(d, m, w)
		if err != nil {
			return ranges, bytes, err
		}
		for _, r := range rs {
			if strings.Contains(r.Name, ".tmp") || !keep(r.Name) {
				continue
			}
			fi, err := s.fs.Stat(r.Name)
			if err != nil {
				continue // removed meanwhile: nothing left on the die
			}
			end := min(r.Off+r.Len, fi.Size)
			if end <= r.Off {
				continue
			}
			buf := make([]byte, end-r.Off)
			if fill != nil {
				fill(r.Name, r.Off, buf)
			}
			if err := s.fs.RewriteRange(r.Name, r.Off, buf); err != nil {
				if errors.Is(err, sdf.ErrNotExist) {
					continue
				}
				return ranges, bytes, fmt.Errorf("objstore: retire %s on failed die %s: %w", r, d, err)
			}
			ranges++
			bytes += end - r.Off
		}
	}
	return ranges, bytes, nil
}
