package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/sstable/block/blockkind"
	"github.com/cockroachdb/pebble/v2/sstable/colblk"
	"github.com/cockroachdb/pebble/v2/sstable/rowblk"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Isolation is what IsolateCorruption found in one sstable: the Pebble key
// span [Start, End) (End exclusive) that holds the corrupt data block(s).
type Isolation struct {
	Start, End []byte
	// Blocks is the number of data blocks in the file, for reporting error
	// amplification (one block of Blocks, not the file).
	Blocks int
	// WholeFile is set when the corruption is not in a data block (index,
	// properties, footer): the span is then the file's bounds.
	WholeFile bool
}

func (i Isolation) String() string {
	return fmt.Sprintf("[%q, %q) of %d blocks whole=%t", i.Start, i.End, i.Blocks, i.WholeFile)
}

// IsolateCorruption opens the sstable at path and finds the key span of its
// corrupt data blocks (DIRECT 000 section 4.1.3): iterating forward stops at
// the first unreadable block, just after the last key L of the healthy block
// before it; iterating backward stops just before the first key F of the
// healthy block after it. The span [L, F] holds exactly the corrupt block's
// keys plus L and F themselves, which are included because versions of one
// key may straddle a block boundary. With several corrupt blocks the span
// covers all of them and the healthy blocks in between (conservative).
// fileStart and fileEnd (exclusive) bound the answer when the first or last
// block is the corrupt one.
func IsolateCorruption(fs vfs.FS, path string, readerOpts sstable.ReaderOptions, fileStart, fileEnd []byte) (Isolation, error) {
	f, err := fs.Open(path)
	if err != nil {
		return Isolation{}, fmt.Errorf("kv: isolate: open %s: %w", path, err)
	}
	readable, err := objstorageprovider.NewFileReadable(f, fs, objstorageprovider.NewReadaheadConfig(), path)
	if err != nil {
		f.Close()
		return Isolation{}, fmt.Errorf("kv: isolate: %w", err)
	}
	r, err := sstable.NewReader(context.Background(), readable, readerOpts)
	if err != nil {
		readable.Close()
		// The footer, metaindex or properties are damaged: the whole file.
		return Isolation{Start: fileStart, End: fileEnd, WholeFile: true}, nil
	}
	defer r.Close()
	res := Isolation{Start: fileStart, End: fileEnd}
	layout, err := r.Layout()
	if err != nil {
		res.WholeFile = true
		return res, nil
	}
	res.Blocks = len(layout.Data)

	last, forwardErr := isolationPass(r, true)
	if forwardErr == errIterOpen {
		res.WholeFile = true
		return res, nil
	}
	if forwardErr == nil {
		// Every data block reads back: the damage is elsewhere (an index
		// block the iterator did not need, a filter): report the file.
		res.WholeFile = true
		return res, nil
	}
	if last != nil {
		res.Start = last
	}

	first, backwardErr := isolationPass(r, false)
	if backwardErr == errIterOpen {
		res.WholeFile = true
		return res, nil
	}
	if first != nil && (res.Start == nil || bytes.Compare(first, res.Start) >= 0) {
		// Exclusive end just past F.
		res.End = append(bytes.Clone(first), 0)
	}
	return res, nil
}

// errIterOpen is isolationPass's answer when no iterator opens.
var errIterOpen = errors.New("kv: isolate: iterator does not open")

// isolationPass iterates the table forward (returning the last user key
// read) or backward (the first), up to the first block that stays
// unreadable: a read that fails is resumed with a new iterator at the key
// reached (SeekGE re-reads the versions of the last key; SeekLT goes on
// below the first), so a transient flip on the way (gone on a re-read)
// does not stop the pass early and widen the isolated span; ReadAttempts
// consecutive failures without progress stop it. The error is nil if the
// pass reached the end of the table.
func isolationPass(r *sstable.Reader, forward bool) ([]byte, error) {
	var at []byte
	var lastErr error
	for failures := 0; failures < ReadAttempts; {
		it, err := r.NewIter(block.NoTransforms, nil, nil, sstable.AssertNoBlobHandles)
		if err != nil {
			return at, errIterOpen
		}
		progress := false
		kv := startPass(it.First, it.Last, it.SeekGE, it.SeekLT, at, forward)
		for ; kv != nil; kv = step(it.Next, it.Prev, forward) {
			if at == nil || !bytes.Equal(at, kv.K.UserKey) {
				progress = true
			}
			at = append(at[:0], kv.K.UserKey...)
		}
		lastErr = it.Error()
		it.Close()
		if lastErr == nil {
			return at, nil
		}
		if progress {
			failures = 0
		} else {
			failures++
		}
	}
	return at, lastErr
}

// startPass positions a pass: at the table's first or last key, or at a
// resume key (zero flags: plain seeks). Generic only to name Pebble's
// internal key and flag types without importing its internal package.
func startPass[K any, GF, LF any](first, last func() K, seekGE func([]byte, GF) K, seekLT func([]byte, LF) K, at []byte, forward bool) K {
	var gf GF
	var lf LF
	switch {
	case forward && at == nil:
		return first()
	case forward:
		return seekGE(at, gf)
	case at == nil:
		return last()
	default:
		return seekLT(at, lf)
	}
}

func step[K any](next, prev func() K, forward bool) K {
	if forward {
		return next()
	}
	return prev()
}

// DamagedSpan is the Pebble key span [Start, End) of one run of adjacent
// damaged data blocks of an sstable (End nil: to the file's end).
type DamagedSpan struct {
	Start, End []byte
	Blocks     int      // damaged data blocks in the run
	Offsets    []uint64 // their file offsets
	// StartAbsent is set when Start is a separator the table provably does
	// not hold (sepAbsent): the run lost nothing at Start itself.
	StartAbsent bool
	// Table is the table's id (tableid.go; 0 if it has none).
	Table uint64
	// KeysKnown is set when the table lists its keys (tablekeys.go): Keys
	// are then exactly the user-space Pebble keys of the table within
	// [Start, End), ascending (none: the run holds only the applied
	// record), and the table holds no other key there.
	KeysKnown bool
	Keys      [][]byte
	// AllKeys, when KeysKnown, are every user-space Pebble key of the
	// table (of its backing file, for a virtual table): it holds no
	// version of any other key, which is what a read around it needs.
	AllKeys [][]byte
}

// IsolateBlocks finds every damaged data block of the sstable at path and
// returns one span per run of adjacent damaged blocks, bounded by the index
// separators around the run (DIRECT 000 section 4.1.3, at the granularity
// of a data block: the index block says which keys each data block holds,
// so no read of a neighbouring block is needed). A separator is at least
// the last key of its block and below the next block's first key; the
// span of blocks i..j is [separator i-1, separator j] inclusive (versions
// of one user key can straddle a block boundary). fileStart and fileEnd
// (exclusive) bound the first and last runs. total is the number of data
// blocks. An error means the table's index or metadata is damaged: the
// caller falls back to the whole file.
func IsolateBlocks(fs vfs.FS, path string, readerOpts sstable.ReaderOptions, fileStart, fileEnd []byte) (spans []DamagedSpan, total int, err error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("kv: isolate: open %s: %w", path, err)
	}
	readable, err := objstorageprovider.NewFileReadable(f, fs, objstorageprovider.NewReadaheadConfig(), path)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("kv: isolate: %w", err)
	}
	r, err := sstable.NewReader(context.Background(), readable, readerOpts)
	if err != nil {
		readable.Close()
		return nil, 0, fmt.Errorf("kv: isolate: %w", err)
	}
	defer r.Close()
	blocks, err := SSTDataBlocks(r)
	if err != nil {
		return nil, 0, err
	}
	raw, err := fs.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("kv: isolate: open %s: %w", path, err)
	}
	defer raw.Close()
	table := tableIDOf(r)
	keys, keysKnown := tableKeysOf(r)
	damaged := make([]bool, len(blocks))
	for i, b := range blocks {
		ok, err := BlockVerifies(raw, b.h)
		if err != nil {
			return nil, 0, err
		}
		damaged[i] = !ok
	}
	for i := 0; i < len(blocks); i++ {
		if !damaged[i] {
			continue
		}
		j := i
		for j+1 < len(blocks) && damaged[j+1] {
			j++
		}
		sp := DamagedSpan{Start: fileStart, End: fileEnd, Blocks: j - i + 1, Table: table}
		for k := i; k <= j; k++ {
			sp.Offsets = append(sp.Offsets, blocks[k].h.Offset)
		}
		// The table may be virtual (what an excise left of a file): its
		// bounds, fileStart and fileEnd, can cut the backing file's blocks.
		// A run wholly outside them holds no live data.
		sp.Start, sp.End = nil, nil
		if i > 0 {
			sp.Start = bytes.Clone(blocks[i-1].sep)
			sp.StartAbsent = table != 0 && sepAbsent(r, blocks[i-1].sep, blocks[i].h)
		}
		if j < len(blocks)-1 {
			sp.End = append(bytes.Clone(blocks[j].sep), 0)
		}
		if fileStart != nil && (sp.Start == nil || bytes.Compare(sp.Start, fileStart) < 0) {
			sp.Start = fileStart
			sp.StartAbsent = false
		}
		if fileEnd != nil && (sp.End == nil || bytes.Compare(sp.End, fileEnd) > 0) {
			sp.End = fileEnd
		}
		if keysKnown && table != 0 {
			sp.KeysKnown, sp.Keys, sp.AllKeys = true, keysIn(keys, sp.Start, sp.End), keys
		}
		if sp.End == nil || bytes.Compare(sp.Start, sp.End) < 0 {
			spans = append(spans, sp)
		}
		i = j
	}
	return spans, len(blocks), nil
}

// sepAbsent reports whether the table does not hold Pebble key sep, the
// index separator between an intact data block and the damaged block h
// after it. A separator is at least the last key of its block and below the
// first key of the next unless it equals that last key (Pebble shortens it
// when it can: "key00499" | "key00500" -> "key005"; when it cannot, versions
// of the key may straddle the boundary). So a seek to sep bounded to sep
// alone either finds sep in the intact block (it is a key), or finds
// nothing, or steps on into h and fails there: then the intact block ends
// below sep, sep was shortened, and the next block starts above it. A
// failure anywhere else (a transient flip in the intact block) answers
// false, the conservative answer.
func sepAbsent(r *sstable.Reader, sep []byte, h block.Handle) bool {
	upper := append(bytes.Clone(sep), 0)
	for attempt := 0; attempt < ReadAttempts; attempt++ {
		it, err := r.NewIter(block.NoTransforms, sep, upper, sstable.AssertNoBlobHandles)
		if err != nil {
			return false
		}
		kv := seekGE(it.SeekGE, sep)
		found := kv != nil
		err = it.Error()
		_ = it.Close()
		switch {
		case found:
			return false
		case err == nil:
			return true
		}
		if bh, ok := CorruptBlockHandle(err); ok && bh.Offset == h.Offset {
			return true
		}
	}
	return false
}

// seekGE calls an iterator's SeekGE with zero flags (generic only to name
// Pebble's internal types without importing its internal package).
func seekGE[K any, F any](f func([]byte, F) K, key []byte) K {
	var flags F
	return f(key, flags)
}

// dataBlock is one data block of an sstable: its handle and its index
// separator.
type dataBlock struct {
	h   block.Handle
	sep []byte
}

// indexIter is what the row and columnar index iterators share.
type indexIter interface {
	First() bool
	Next() bool
	Separator() []byte
	BlockHandleWithProperties() (block.HandleWithProperties, error)
	Close() error
}

// SSTDataBlocks lists the data blocks of r from its index blocks (one
// level or two), reading them through the reader (checksum verified).
func SSTDataBlocks(r *sstable.Reader) ([]dataBlock, error) {
	layout, err := r.Layout()
	if err != nil {
		return nil, err
	}
	newIter := func(data []byte) (indexIter, error) {
		if layout.Format.BlockColumnar() {
			it := &colblk.IndexIter{}
			return it, it.Init(r.Comparer, data, block.NoTransforms)
		}
		it := &rowblk.IndexIter{}
		return it, it.Init(r.Comparer, data, block.NoTransforms)
	}
	noMeta := func(*block.Metadata, []byte) error { return nil }
	var out []dataBlock
	for _, ih := range layout.Index {
		h, err := r.BlockReader().Read(context.Background(), block.NoReadEnv, nil, ih, blockkind.SSTableIndex, noMeta)
		if err != nil {
			return nil, err
		}
		it, err := newIter(h.BlockData())
		if err != nil {
			h.Release()
			return nil, err
		}
		for valid := it.First(); valid; valid = it.Next() {
			bh, err := it.BlockHandleWithProperties()
			if err != nil {
				_ = it.Close()
				h.Release()
				return nil, err
			}
			out = append(out, dataBlock{h: bh.Handle, sep: bytes.Clone(it.Separator())})
		}
		_ = it.Close()
		h.Release()
	}
	if len(out) != len(layout.Data) {
		return nil, fmt.Errorf("kv: isolate: index lists %d data blocks, layout %d", len(out), len(layout.Data))
	}
	return out, nil
}

// BlockVerifies reads block h (with its trailer) from f and checks its
// checksum, re-reading once past a transient flip.
func BlockVerifies(f vfs.File, h block.Handle) (bool, error) {
	if h.Length > maxBlockBytes {
		return false, nil
	}
	buf := make([]byte, h.Length+block.TrailerLen)
	for attempt := 0; attempt < rereadAttempts; attempt++ {
		if _, err := f.ReadAt(buf, int64(h.Offset)); err != nil {
			return false, nil // short or unreadable: damaged
		}
		if blockChecksumOK(buf, h) {
			return true, nil
		}
	}
	return false, nil
}
