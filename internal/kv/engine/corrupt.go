package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
)

// corruptBlock damages, on purpose, the sstable data block that holds user
// key key (a test and operator tool: `flashmend ctl kv corrupt`). It flushes
// the memtable first so the key is in an sstable, flips one byte in the
// middle of the data block and returns the file and the block's offset.
// Pebble's block cache may still hold a clean copy of the block; callers that
// need the damage seen use a replica with a small cache.
func (sm *StateMachine) CorruptBlock(key []byte) (string, uint64, error) {
	return sm.CorruptBlockAt(key, 0.5)
}

// CorruptBlockAt is CorruptBlock flipping the byte at fraction frac (in
// [0, 1)) of the block instead of its middle: replicas damaged at
// different bytes of the same block (block merge's case).
func (sm *StateMachine) CorruptBlockAt(key []byte, frac float64) (string, uint64, error) {
	if frac < 0 || frac >= 1 {
		return "", 0, base.InvalidArgumentf("kv: corrupt at fraction %v of a block, want [0, 1)", frac)
	}
	// The replica's own flushes and compactions run concurrently and may
	// replace the table between the listing and the damage (the file is
	// gone, or read short while it goes): try again on a fresh listing, and
	// only report a table that is still live after the damage.
	var lastErr error
	damaged := map[string]uint64{} // files this call already damaged: never flip one back
	for attempt := 0; attempt < 10; attempt++ {
		path, off, err := sm.corruptBlockOnce(key, frac, damaged)
		switch {
		case err == nil && sm.liveTable(path):
			return path, off, nil
		case err == nil:
			lastErr = fmt.Errorf("kv: %s was compacted away while it was damaged", path)
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			lastErr = err
		default:
			return "", 0, err
		}
	}
	return "", 0, lastErr
}

// liveTable reports whether path is one of the engine's current tables once
// the compactions under way (which may have read it before it was damaged
// and be about to replace it) are done. NB: it waits on the wall clock on
// purpose: Pebble's compactions run on Pebble's goroutines in real time,
// which no injected clock drives, and this is a fault-injection tool that
// neither the simulator nor a deterministic test steps through.
func (sm *StateMachine) liveTable(path string) bool {
	for deadline := time.Now().Add(10 * time.Second); sm.db.Metrics().Compact.NumInProgress > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	levels, err := sm.db.SSTables()
	if err != nil {
		return false
	}
	for _, level := range levels {
		for _, t := range level {
			if sm.fs.PathJoin(sm.dir, fmt.Sprintf("%06d.sst", uint64(t.BackingSSTNum))) == path {
				return true
			}
		}
	}
	return false
}

func (sm *StateMachine) corruptBlockOnce(key []byte, frac float64, damaged map[string]uint64) (string, uint64, error) {
	if err := sm.Flush(); err != nil {
		return "", 0, Classify(err)
	}
	// Compact everything (the replica's own keys too) into one level, so
	// no compaction the flush started is still copying the table being
	// damaged into a new, undamaged one.
	if err := sm.db.Compact(context.Background(), []byte{0}, UserEnd, false); err != nil {
		return "", 0, Classify(err)
	}
	pk := UserKey(key)
	levels, err := sm.db.SSTables()
	if err != nil {
		return "", 0, Classify(err)
	}
	for _, level := range levels {
		for _, t := range level {
			if bytes.Compare(pk, t.Smallest.UserKey) < 0 || bytes.Compare(pk, t.Largest.UserKey) > 0 {
				continue
			}
			path := sm.fs.PathJoin(sm.dir, fmt.Sprintf("%06d.sst", uint64(t.BackingSSTNum)))
			if off, ok := damaged[path]; ok {
				return path, off, nil
			}
			off, err := sm.corruptBlockInFile(path, pk, frac)
			if err != nil {
				return "", 0, err
			}
			damaged[path] = off
			return path, off, nil
		}
	}
	return "", 0, base.InvalidArgumentf("kv: no sstable holds key %q", key)
}

// CorruptSmallTable flips a byte in the middle of the data block holding
// key of the engine's newest table of at most maxBytes that holds it (a
// small L0 table from a flush, which CorruptBlock, compacting everything
// first, cannot reach) and returns the table and the block's offset. A test
// tool.
func (sm *StateMachine) CorruptSmallTable(key []byte, maxBytes uint64) (string, uint64, error) {
	levels, err := sm.db.SSTables()
	if err != nil {
		return "", 0, Classify(err)
	}
	pk := UserKey(key)
	var newest uint64
	for _, level := range levels {
		for _, t := range level {
			if t.Size <= maxBytes && bytes.Compare(pk, t.Smallest.UserKey) >= 0 && bytes.Compare(pk, t.Largest.UserKey) <= 0 {
				newest = max(newest, uint64(t.BackingSSTNum))
			}
		}
	}
	if newest == 0 {
		return "", 0, base.InvalidArgumentf("kv: no table of at most %d bytes holds key %q", maxBytes, key)
	}
	path := sm.fs.PathJoin(sm.dir, fmt.Sprintf("%06d.sst", newest))
	off, err := sm.corruptBlockInFile(path, pk, 0.5)
	if err == nil && !sm.liveTable(path) {
		err = fmt.Errorf("kv: %s was compacted away while it was damaged", path)
	}
	return path, off, err
}

// CorruptBlockInTable flips a byte in the middle of the data block of the
// sstable at path that holds user key key, without flushing or compacting
// first (a test tool: a table an excise cut keeps its backing file, which
// CorruptBlock, compacting everything first, would rewrite).
func (sm *StateMachine) CorruptBlockInTable(path string, key []byte) (uint64, error) {
	return sm.corruptBlockInFile(path, UserKey(key), 0.5)
}

func (sm *StateMachine) corruptBlockInFile(path string, pk []byte, frac float64) (uint64, error) {
	return corruptBlockInFile(sm.fs, sm.opts.MakeReaderOptions(), path, pk, frac)
}

// BlockDamage is one data block CorruptBlocksAtRest damaged.
type BlockDamage struct {
	Path   string
	Offset uint64
}

// CorruptBlocksAtRest damages, in the sstables of a closed engine in dir
// on fs, the data block holding each of keys (user keys) at fraction
// fracs[i] (in [0, 1)) of its bytes: bit rot at rest, with no compaction
// in between that could run into the damage already done (which the
// running engine's CorruptBlockAt cannot rule out: its own flush and
// compaction may read a block it damaged before). Every key must be in
// one of the tables; the tables holding them are found before anything is
// damaged (the newest table holding a key takes its damage). A test and
// fault-injection tool (internal/torture/helix).
func CorruptBlocksAtRest(fs vfs.FS, dir string, keys [][]byte, fracs []float64) ([]BlockDamage, error) {
	if len(keys) != len(fracs) {
		return nil, base.InvalidArgumentf("kv: %d keys and %d fractions", len(keys), len(fracs))
	}
	for _, f := range fracs {
		if !(f >= 0 && f < 1) {
			return nil, base.InvalidArgumentf("kv: corrupt at fraction %v of a block, want [0, 1)", f)
		}
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	// Newest first: a table a compaction replaced and not yet deleted
	// must not take the damage meant for the live one.
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	ro := SSTReaderOptions()
	paths := make([]string, len(keys))
	for _, name := range names {
		if !strings.HasSuffix(name, ".sst") {
			continue
		}
		path := fs.PathJoin(dir, name)
		r, err := openTable(fs, path, ro)
		if err != nil {
			return nil, Classify(err)
		}
		for i, k := range keys {
			if paths[i] != "" {
				continue
			}
			holds, err := tableHolds(r, UserKey(k))
			if err != nil {
				r.Close()
				return nil, Classify(err)
			}
			if holds {
				paths[i] = path
			}
		}
		r.Close()
	}
	for i, k := range keys {
		if paths[i] == "" {
			return nil, base.InvalidArgumentf("kv: no sstable in %s holds key %q", dir, k)
		}
	}
	out := make([]BlockDamage, len(keys))
	for i, k := range keys {
		off, err := corruptBlockInFile(fs, ro, paths[i], UserKey(k), fracs[i])
		if err != nil {
			return nil, err
		}
		out[i] = BlockDamage{Path: paths[i], Offset: off}
	}
	return out, nil
}

// tableHolds reports whether the table r holds a point key of user key pk.
func tableHolds(r *sstable.Reader, pk []byte) (bool, error) {
	it, err := r.NewIter(block.NoTransforms, pk, append(bytes.Clone(pk), 0), sstable.AssertNoBlobHandles)
	if err != nil {
		return false, err
	}
	kv := it.First()
	holds := kv != nil && bytes.Equal(kv.K.UserKey, pk)
	return holds, errors.Join(it.Error(), it.Close())
}

// corruptBlockInFile damages the data block of the sstable at path that
// holds pk at fraction frac of its bytes, and returns the block's offset.
func corruptBlockInFile(fs vfs.FS, ro sstable.ReaderOptions, path string, pk []byte, frac float64) (uint64, error) {
	// Find the block on a private copy of the file (in memory), so the
	// trials never show in the live file where reads, compactions and the
	// scrubber would see (and repair) them; then damage the live file once.
	probe := vfs.NewMem()
	if err := vfs.CopyAcrossFS(fs, path, probe, "probe.sst"); err != nil {
		return 0, fmt.Errorf("kv: copy %s: %w", path, err)
	}
	f, err := probe.Open("probe.sst")
	if err != nil {
		return 0, err
	}
	readable, err := objstorageprovider.NewFileReadable(f, probe, objstorageprovider.NewReadaheadConfig(), "probe.sst")
	if err != nil {
		f.Close()
		return 0, err
	}
	r, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		readable.Close()
		return 0, Classify(err)
	}
	blocks, err := SSTDataBlocks(r)
	r.Close()
	if err != nil {
		return 0, Classify(err)
	}
	// The key's data block is the first whose index separator is at or
	// above it (a separator is at least its block's last key and below the
	// next block's first).
	for _, b := range blocks {
		if bytes.Compare(b.sep, pk) < 0 {
			continue
		}
		at := int64(b.h.Offset + uint64(frac*float64(b.h.Length)))
		if err := FlipByteAt(probe, "probe.sst", at); err != nil {
			return 0, err
		}
		// Check on the copy that the damage is where the key is (the
		// file may be damaged elsewhere already: a span of it then).
		spans, _, err := IsolateBlocks(probe, "probe.sst", ro, nil, nil)
		isolated := false
		for _, sp := range spans {
			isolated = isolated || ((sp.Start == nil || bytes.Compare(pk, sp.Start) >= 0) && (sp.End == nil || bytes.Compare(pk, sp.End) < 0))
		}
		if err != nil || !isolated {
			return 0, base.AssertionFailedf("kv: damaging block %d of %s does not isolate key %q: %v %v", b.h.Offset, path, pk, spans, err)
		}
		return b.h.Offset, FlipByteAt(fs, path, at)
	}
	return 0, base.InvalidArgumentf("kv: no data block of %s holds the key", path)
}

func FlipByteAt(fs vfs.FS, path string, at int64) error {
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		return err
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, at); err != nil {
		return err
	}
	return f.Sync()
}

// Separators compacts the engine into one level and returns the index
// separators (user keys) of every data block of its live tables: where a
// test can damage the blocks on either side of one boundary.
func (sm *StateMachine) Separators() ([][]byte, error) {
	if err := sm.Flush(); err != nil {
		return nil, Classify(err)
	}
	if err := sm.db.Compact(context.Background(), []byte{0}, UserEnd, false); err != nil {
		return nil, Classify(err)
	}
	levels, err := sm.db.SSTables()
	if err != nil {
		return nil, Classify(err)
	}
	var out [][]byte
	for _, level := range levels {
		for _, t := range level {
			path := sm.fs.PathJoin(sm.dir, fmt.Sprintf("%06d.sst", uint64(t.BackingSSTNum)))
			rd, err := openTable(sm.fs, path, sm.opts.MakeReaderOptions())
			if err != nil {
				return nil, err
			}
			blocks, err := SSTDataBlocks(rd)
			rd.Close()
			if err != nil {
				return nil, Classify(err)
			}
			for _, b := range blocks {
				if k, ok := FromUserKey(b.sep); ok {
					out = append(out, k)
				}
			}
		}
	}
	return out, nil
}
