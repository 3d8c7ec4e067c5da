package kv

import (
	"fmt"

	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvapi"

	"github.com/cockroachdb/pebble/v2"

	"github.com/flashmend/flashmend/internal/base"
)

// Scrub verifies the block checksums of every live sstable of the replica
// (cold data that no read touches included) and reports each damaged file
// like a read that ran into it, which starts its repair: its first damaged
// block that no patch has cut out of the live data yet (a block found
// again after its repair is known as repaired once its report is handled,
// and later scrubs pass over it to the next). It returns the files
// verified and the damaged ones found. The reports are handled on
// the replica's detect loop after Scrub returns; ReplicaStats.
// ReportsHandled counts them once handled.
func (r *Replica) Scrub() (files, damaged int, err error) {
	r.smMu.RLock()
	if r.smClosed {
		r.smMu.RUnlock()
		return 0, 0, kvapi.ErrReplicaUnavailable
	}
	levels, err := r.sm.DB().SSTables()
	readerOpts := r.sm.Opts().MakeReaderOptions()
	gen := r.smGen.Load()
	r.smMu.RUnlock()
	if err != nil {
		return 0, 0, engine.Classify(err)
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
			verr := engine.VerifySSTableSkipping(r.fs, path, readerOpts, func(off uint64) bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				return r.repair.BlockRepaired(path, off)
			})
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
