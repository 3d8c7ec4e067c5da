package kv

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/flashmend/flashmend/internal/base"
)

// Scrub verifies the block checksums of every live sstable of the replica
// (cold data that no read touches included) and reports each damaged file
// like a read that ran into it, which starts its repair. It returns the
// files verified and the damaged ones found.
func (r *Replica) Scrub() (files, damaged int, err error) {
	r.smMu.RLock()
	if r.smClosed {
		r.smMu.RUnlock()
		return 0, 0, ErrReplicaUnavailable
	}
	levels, err := r.sm.db.SSTables()
	readerOpts := r.sm.opts.MakeReaderOptions()
	gen := r.smGen.Load()
	r.smMu.RUnlock()
	if err != nil {
		return 0, 0, classify(err)
	}
	seen := map[string]bool{}
	for _, level := range levels {
		for _, t := range level {
			path := r.fs.PathJoin(r.dir, "pebble", fmt.Sprintf("%06d.sst", uint64(t.BackingSSTNum)))
			if seen[path] {
				continue
			}
			seen[path] = true
			if r.stopped() {
				return files, damaged, nil
			}
			files++
			verr := verifySSTable(r, path, readerOpts)
			if verr == nil {
				continue
			}
			if !base.IsCorruption(verr) && !pebble.IsCorruptionError(verr) {
				continue // the file went away (compacted) meanwhile
			}
			damaged++
			var info pebble.DataCorruptionInfo
			info.Path = path
			info.Details = verr
			info.Bounds.Start = t.Smallest.UserKey
			info.Bounds.End.Key = t.Largest.UserKey
			r.reportCorruption(gen, info)
		}
	}
	return files, damaged, nil
}

// verifySSTable checks every data block of the sstable at path against its
// checksum (our own check, blockChecksumOK: Pebble's ValidateBlockChecksums
// searches every single-bit flip of a damaged block) and that its
// metadata reads. It returns an error naming the first damaged block, in
// the form Pebble's errors take ("block <offset>/<length>"), or nil.
func verifySSTable(r *Replica, path string, ro sstable.ReaderOptions) error {
	f, err := r.fs.Open(path)
	if err != nil {
		return err
	}
	readable, err := objstorageprovider.NewFileReadable(f, r.fs, objstorageprovider.NewReadaheadConfig(), path)
	if err != nil {
		f.Close()
		return err
	}
	rd, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		readable.Close()
		return base.CorruptionErrorf("kv: scrub %s: %w", path, err)
	}
	defer rd.Close()
	blocks, err := sstDataBlocks(rd)
	if err != nil {
		return base.CorruptionErrorf("kv: scrub %s: index: %w", path, err)
	}
	raw, err := r.fs.Open(path)
	if err != nil {
		return err
	}
	defer raw.Close()
	for _, b := range blocks {
		ok, err := blockVerifies(raw, b.h)
		if err != nil {
			return err
		}
		if !ok {
			return base.CorruptionErrorf("kv: scrub %s: block %d/%d: checksum mismatch", path, b.h.Offset, b.h.Length)
		}
	}
	return nil
}
