package kv

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// corruptionReport is a DataCorruption event of one Pebble instance
// (generation gen: the crash baseline replaces the instance, and reports
// of the old one are stale).
type corruptionReport struct {
	gen  uint64
	info pebble.DataCorruptionInfo
}

// listener returns Pebble's EventListener.DataCorruption for Pebble
// generation gen. It runs in read paths and must not block: it queues the
// report for detectLoop.
func (r *Replica) listener(gen uint64) func(pebble.DataCorruptionInfo) {
	return func(info pebble.DataCorruptionInfo) { r.reportCorruption(gen, info) }
}

func (r *Replica) reportCorruption(gen uint64, info pebble.DataCorruptionInfo) {
	select {
	case r.corruptc <- corruptionReport{gen: gen, info: info}:
	default: // a burst of reports of the same damage; one is enough
	}
}

// repairTick is how often detectLoop (re)proposes patch requests: ones that
// could not be proposed (no leader yet, a proposal dropped) go out within a
// tick of a leader appearing.
const repairTick = 50 * time.Millisecond

// detectLoop turns corruption reports into repairs (DIRECT 4.1.3 detect and
// isolate, 4.1.4 recovery through the log).
func (r *Replica) detectLoop() {
	defer r.wg.Done()
	ticker := time.NewTicker(repairTick)
	defer ticker.Stop()
	var scrubc <-chan time.Time
	if r.opts.ScrubInterval > 0 {
		scrub := time.NewTicker(r.opts.ScrubInterval)
		defer scrub.Stop()
		scrubc = scrub.C
	}
	for {
		select {
		case <-scrubc:
			// Reports go through corruptc like a read's, handled below.
			_, _, _ = r.Scrub()
		case rep := <-r.corruptc:
			if rep.gen == r.smGen.Load() {
				r.handleCorruption(rep.info)
			}
		case <-ticker.C:
			r.proposePending()
		case <-r.stopc:
			return
		}
	}
}

// pendingRepair is a patch request waiting to be applied.
type pendingRepair struct {
	path     string
	rg       Range
	detected time.Time
	// proposedAt is when the request was last proposed (zero: not yet, or
	// the proposal was dropped); retryAfter holds a re-request back.
	proposedAt time.Time
	retryAfter time.Time
	proposalID uint64
}

func (r *Replica) handleCorruption(info pebble.DataCorruptionInfo) {
	r.mu.Lock()
	if r.down || r.needRebuild {
		r.mu.Unlock()
		return
	}
	if r.opts.Mode == RepairDirect {
		for _, p := range r.pending {
			if p.path == info.Path {
				// A repair of this file is under way. Damage found in it
				// after that repair is applied is new damage, repaired anew.
				r.mu.Unlock()
				return
			}
		}
	}
	if r.opts.Mode == RepairCrash {
		r.stats.CorruptionsDetected++
		r.detectedAt = r.opts.Clock.Now()
		r.down = true
		r.needRebuild = true
		r.rebuildReason = rebuildCrash
		r.mu.Unlock()
		r.enqueue(applyTask{})
		return
	}
	detectedAt := r.opts.Clock.Now()
	r.mu.Unlock()
	// Re-read before repairing (MISSION.md; DIRECT 000 4.1.3): a block
	// that verifies when read again was hit by a transient flip on the way
	// (the read that failed is re-read by get/scan and succeeds); only
	// damage that persists is isolated and patched.
	if h, ok := corruptBlockHandle(info.Details); ok {
		if clean, err := rereadBlock(r.fs, info.Path, h); err == nil && clean {
			r.mu.Lock()
			r.stats.TransientErrors++
			r.stats.LastDetection = "transient"
			r.mu.Unlock()
			return
		}
	}
	rg := r.isolate(info)
	r.mu.Lock()
	for _, done := range r.repaired[info.Path] {
		if rangeCovers(done, rg) {
			// Damage already cut out of the live data by a patch (the
			// physical file keeps it until compactions drop the file);
			// the scrubber finds it again, nothing reads it.
			r.stats.LastDetection = "already repaired"
			r.mu.Unlock()
			return
		}
	}
	r.stats.CorruptionsDetected++
	r.stats.LastDetection = "pending"
	r.detectedAt = detectedAt
	r.recovering = append(r.recovering, rg)
	p := &pendingRepair{path: info.Path, rg: rg, detected: r.detectedAt}
	r.mu.Unlock()
	r.proposeRepair(p)
}

// proposeRepair registers p under a new patch id and proposes it at once
// if it may go now (else proposePending does).
func (r *Replica) proposeRepair(p *pendingRepair) {
	patchID := r.nextID.Add(1)
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[uint64]*pendingRepair{}
	}
	if r.patchDetect == nil {
		r.patchDetect = map[uint64]time.Time{}
	}
	r.pending[patchID] = p
	r.patchDetect[patchID] = p.detected
	r.mu.Unlock()
	r.proposePending()
}

// proposePending proposes the patch requests that are not in flight: new
// ones, ones whose proposal raft dropped (no leader), and ones not applied
// within three patch timeouts (a leader change loses uncommitted
// proposals). A request keeps its patch id: if two of its entries commit,
// the second finds nothing waiting and is skipped.
func (r *Replica) proposePending() {
	if !r.raftUp.Load() || r.leader.Load() == 0 {
		return
	}
	now := r.opts.Clock.Now()
	type out struct {
		id  uint64
		cmd *kvpb.Command
	}
	var send []out
	r.mu.Lock()
	for id, p := range r.pending {
		if now.Before(p.retryAfter) {
			continue
		}
		if !p.proposedAt.IsZero() && now.Sub(p.proposedAt) < 3*r.opts.PatchTimeout {
			continue
		}
		p.proposedAt = now
		p.proposalID = r.nextID.Add(1)
		send = append(send, out{id: p.proposalID, cmd: &kvpb.Command{ProposalId: p.proposalID, Patch: &kvpb.PatchRequest{
			PatchId: id, CorruptedReplica: uint64(r.id), Ranges: rangesToProto([]Range{p.rg}),
		}}})
	}
	r.mu.Unlock()
	for _, o := range send {
		data, err := proto.Marshal(o.cmd)
		if err != nil {
			continue
		}
		select {
		case r.propc <- proposal{id: o.id, data: data}:
		case <-r.stopc:
			return
		}
	}
}

// proposalDropped marks a patch request whose proposal raft refused, so the
// next tick proposes it again.
func (r *Replica) proposalDropped(proposalID uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pending {
		if p.proposalID == proposalID {
			p.proposedAt = time.Time{}
		}
	}
}

// isolate maps a corrupt file to the user key range to repair: the corrupt
// data block's range if the sstable reader can find it, else the file's
// bounds, clipped to the shard.
func (r *Replica) isolate(info pebble.DataCorruptionInfo) Range {
	fileStart, fileEnd := info.Bounds.Start, []byte(nil)
	if info.Bounds.End.Key != nil {
		fileEnd = append(bytes.Clone(info.Bounds.End.Key), 0) // inclusive either way: one past
	}
	r.smMu.RLock()
	readerOpts := r.sm.opts.MakeReaderOptions()
	r.smMu.RUnlock()
	iso, err := isolateCorruption(r.fs, info.Path, readerOpts, fileStart, fileEnd)
	lo, hi := fileStart, fileEnd
	if err == nil {
		lo, hi = iso.Start, iso.End
	}
	return r.toUserRange(lo, hi)
}

// toUserRange converts a Pebble span to a user range within the shard.
func (r *Replica) toUserRange(lo, hi []byte) Range {
	out := r.shard.Range
	if k, ok := fromUserKey(lo); ok && bytes.Compare(k, out.Start) > 0 {
		out.Start = bytes.Clone(k)
	}
	if hi != nil && bytes.Compare(hi, userPrefix) > 0 && bytes.Compare(hi, userEnd) < 0 {
		k, _ := fromUserKey(hi)
		if len(out.End) == 0 || bytes.Compare(k, out.End) < 0 {
			out.End = bytes.Clone(k)
		}
	}
	return out
}

// blockHandleRE finds the block handle in Pebble's checksum error
// ("block <offset>/<length>: crc32c checksum mismatch ...").
var blockHandleRE = regexp.MustCompile(`block (\d+)/(\d+)`)

// corruptBlockHandle returns the handle of the block a Pebble corruption
// error names, if it names one.
func corruptBlockHandle(err error) (block.Handle, bool) {
	if err == nil {
		return block.Handle{}, false
	}
	m := blockHandleRE.FindStringSubmatch(err.Error())
	if m == nil {
		return block.Handle{}, false
	}
	off, err1 := strconv.ParseUint(m[1], 10, 64)
	n, err2 := strconv.ParseUint(m[2], 10, 64)
	if err1 != nil || err2 != nil || n == 0 || n > maxBlockBytes {
		return block.Handle{}, false
	}
	return block.Handle{Offset: off, Length: n}, true
}

// maxBlockBytes bounds a block handle parsed from an error message (Pebble's
// blocks are tens of KiB; a larger "handle" is not one).
const maxBlockBytes = 64 << 20

// rereadAttempts is how many times rereadBlock reads a block before it
// calls the damage persistent: one more flip on the re-read itself must not
// turn a transient error into a repair.
const rereadAttempts = 2

// rereadBlock reads block h of the sstable at path from the file (not the
// block cache) and reports whether its checksum verifies on any of
// rereadAttempts reads. A block that verifies is intact on disk: the error
// that named it was a transient flip. Pebble writes CRC32C checksums unless
// configured otherwise; the xxhash64 check covers tables written so.
func rereadBlock(fs vfs.FS, path string, h block.Handle) (bool, error) {
	f, err := fs.Open(path)
	if err != nil {
		return false, fmt.Errorf("kv: re-read %s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, h.Length+block.TrailerLen)
	for attempt := 0; attempt < rereadAttempts; attempt++ {
		if _, err := f.ReadAt(buf, int64(h.Offset)); err != nil {
			return false, fmt.Errorf("kv: re-read %s block %d/%d: %w", path, h.Offset, h.Length, err)
		}
		for _, ct := range []block.ChecksumType{block.ChecksumTypeCRC32c, block.ChecksumTypeXXHash64} {
			if block.ValidateChecksum(ct, buf, h) == nil {
				return true, nil
			}
		}
	}
	return false, nil
}
