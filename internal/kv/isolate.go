package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// isolation is what isolateCorruption found in one sstable: the Pebble key
// span [Start, End) (End exclusive) that holds the corrupt data block(s).
type isolation struct {
	Start, End []byte
	// Blocks is the number of data blocks in the file, for reporting error
	// amplification (one block of Blocks, not the file).
	Blocks int
	// WholeFile is set when the corruption is not in a data block (index,
	// properties, footer): the span is then the file's bounds.
	WholeFile bool
}

func (i isolation) String() string {
	return fmt.Sprintf("[%q, %q) of %d blocks whole=%t", i.Start, i.End, i.Blocks, i.WholeFile)
}

// isolateCorruption opens the sstable at path and finds the key span of its
// corrupt data blocks (DIRECT 000 section 4.1.3): iterating forward stops at
// the first unreadable block, just after the last key L of the healthy block
// before it; iterating backward stops just before the first key F of the
// healthy block after it. The span [L, F] holds exactly the corrupt block's
// keys plus L and F themselves, which are included because versions of one
// key may straddle a block boundary. With several corrupt blocks the span
// covers all of them and the healthy blocks in between (conservative).
// fileStart and fileEnd (exclusive) bound the answer when the first or last
// block is the corrupt one.
func isolateCorruption(fs vfs.FS, path string, readerOpts sstable.ReaderOptions, fileStart, fileEnd []byte) (isolation, error) {
	f, err := fs.Open(path)
	if err != nil {
		return isolation{}, fmt.Errorf("kv: isolate: open %s: %w", path, err)
	}
	readable, err := objstorageprovider.NewFileReadable(f, fs, objstorageprovider.NewReadaheadConfig(), path)
	if err != nil {
		f.Close()
		return isolation{}, fmt.Errorf("kv: isolate: %w", err)
	}
	r, err := sstable.NewReader(context.Background(), readable, readerOpts)
	if err != nil {
		readable.Close()
		// The footer, metaindex or properties are damaged: the whole file.
		return isolation{Start: fileStart, End: fileEnd, WholeFile: true}, nil
	}
	defer r.Close()
	res := isolation{Start: fileStart, End: fileEnd}
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
// does not stop the pass early and widen the isolated span; readAttempts
// consecutive failures without progress stop it. The error is nil if the
// pass reached the end of the table.
func isolationPass(r *sstable.Reader, forward bool) ([]byte, error) {
	var at []byte
	var lastErr error
	for failures := 0; failures < readAttempts; {
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
