package node

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/objstore"
)

// Repair kinds of the history (nodepb.RepairEvent.kind).
const (
	KindTransient       = "transient"
	KindPersistent      = "persistent"
	KindRepaired        = "repaired"
	KindMissingRepaired = "missing-repaired"
	KindRejectedWrite   = "rejected-write"
	// KindRepairFailed: a repair write this node could not store (device
	// full, write error); the detail says why. The chunk stays damaged
	// until a later read or scrub repairs it.
	KindRepairFailed = "repair-failed"
	KindMetaRepaired = "meta-repaired"
	KindHistoryLost  = "history-lost"
	// KindDieFailed and KindDieRepaired: a die the flash layer declared
	// failed with what it held, and each round of its repair (Reparo).
	KindDieFailed   = "die-failed"
	KindDieRepaired = "die-repaired"
	// CountChunksRead is not a repair kind: the chunk reads the counts above
	// are out of, kept with them (without events).
	CountChunksRead = "chunks-read"
	// CountRefusedFull is not a repair kind either: new writes refused to
	// keep the repair reserve free (Config.RepairReserve), without events.
	CountRefusedFull = "refused-full"
)

// RepairKinds lists the repair kinds in display order.
func RepairKinds() []string {
	return []string{KindTransient, KindPersistent, KindRepaired, KindMissingRepaired,
		KindRepairFailed, KindRejectedWrite, KindMetaRepaired, KindHistoryLost, KindDieFailed, KindDieRepaired}
}

// historyFile is the repair history's metadata file (objstore.MetaFiles:
// three copies, each with a sequence number and a CRC32C).
const historyFile = "node/repair-history"

// historyEvents bounds the recent events kept (and the file's size: about
// 150 bytes an event).
const historyEvents = 200

// historyFormat is the version of the file's JSON payload.
const historyFormat = 1

// historyRecord is the history file's content.
type historyRecord struct {
	Format      int              `json:"format"`
	SinceUnixMs int64            `json:"since_unix_ms"`
	Counts      map[string]int64 `json:"counts"`
	// Recent holds the newest events, oldest first, at most historyEvents.
	Recent []historyEvent `json:"recent"`
}

type historyEvent struct {
	UnixMs  int64  `json:"t"`
	Kind    string `json:"kind"`
	Object  uint64 `json:"object,omitempty"`
	Version uint64 `json:"version,omitempty"`
	Shard   uint32 `json:"shard,omitempty"`
	Index   uint32 `json:"index,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// history is a node's repair history: what it detected and repaired, kept
// durably in its store as triplicated checksummed metadata, like the
// identity file, so that "what was repaired, where" survives restarts.
//
// Events are recorded in memory and written by flush, which the node calls
// every historyFlushInterval while there is something new and once more at
// a clean shutdown: a crash loses at most the last interval's events.
// Writing every event synchronously would put three metadata writes on the
// read path of every corrupt chunk, which under injected bit error rates is
// most reads.
type history struct {
	meta *objstore.MetaFiles
	now  func() time.Time

	// reads counts chunk reads not yet folded into rec (every read adds
	// one: an atomic keeps the read path off the mutex).
	reads atomic.Int64

	mu    sync.Mutex
	rec   historyRecord
	dirty bool
	// flushMu serializes flushes (the file's sequence numbers).
	flushMu sync.Mutex
}

// historyFlushInterval is how often new events are written.
const historyFlushInterval = time.Second

// loadHistory reads the history from the store. A history that cannot be
// read (every copy corrupt, or a payload this binary does not understand)
// begins again, with a history-lost event saying so: losing the record of
// past repairs must not keep a node from serving.
func loadHistory(meta *objstore.MetaFiles, now func() time.Time, logf func(string, ...any)) *history {
	h := &history{meta: meta, now: now}
	fresh := historyRecord{Format: historyFormat, SinceUnixMs: now().UnixMilli(), Counts: map[string]int64{}}
	res, err := meta.Read(historyFile)
	switch {
	case objstore.IsNotFound(err):
		h.rec, h.dirty = fresh, true
		return h
	case err != nil:
		h.rec = fresh
		h.recordLocked(KindHistoryLost, nil, fmt.Sprintf("could not read the previous history: %v", err))
		logf("node: repair history: %v; beginning a new one", err)
		return h
	}
	var rec historyRecord
	if err := json.Unmarshal(res.Payload, &rec); err != nil || rec.Format != historyFormat {
		if err == nil {
			err = fmt.Errorf("format %d, this binary reads %d", rec.Format, historyFormat)
		}
		h.rec = fresh
		h.recordLocked(KindHistoryLost, nil, fmt.Sprintf("could not decode the previous history: %v", err))
		logf("node: repair history: %v; beginning a new one", base.CorruptionErrorf("%v", err))
		return h
	}
	if rec.Counts == nil {
		rec.Counts = map[string]int64{}
	}
	h.rec = rec
	if res.Repaired > 0 {
		h.recordLocked(KindMetaRepaired, nil, fmt.Sprintf("%d copies of %s rewritten", res.Repaired, historyFile))
	}
	return h
}

// record adds one event; id is nil for events without a chunk.
func (h *history) record(kind string, id *direct.ChunkID, detail string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recordLocked(kind, id, detail)
}

func (h *history) recordLocked(kind string, id *direct.ChunkID, detail string) {
	h.rec.Counts[kind]++
	ev := historyEvent{UnixMs: h.now().UnixMilli(), Kind: kind, Detail: detail}
	if id != nil {
		ev.Object, ev.Version, ev.Shard, ev.Index = id.Object, id.Version, id.Shard, id.Index
	}
	if len(h.rec.Recent) >= historyEvents {
		n := copy(h.rec.Recent, h.rec.Recent[len(h.rec.Recent)-historyEvents+1:])
		h.rec.Recent = h.rec.Recent[:n]
	}
	h.rec.Recent = append(h.rec.Recent, ev)
	h.dirty = true
}

// count adds n to a total that has no events (CountRefusedFull).
func (h *history) count(name string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rec.Counts[name] += n
	h.dirty = true
}

// countReads adds chunk reads (not events: the denominator of the counts).
// They are written with the next flush that has events to write, and at
// shutdown.
func (h *history) countReads(n int64) { h.reads.Add(n) }

// foldReadsLocked moves the reads counted since the last call into rec.
func (h *history) foldReadsLocked() {
	if n := h.reads.Swap(0); n != 0 {
		h.rec.Counts[CountChunksRead] += n
	}
}

// flush writes the history when it changed since the last flush; force
// writes it anyway (shutdown: the read count).
func (h *history) flush(force bool) error {
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	h.mu.Lock()
	h.foldReadsLocked()
	if !h.dirty && !force {
		h.mu.Unlock()
		return nil
	}
	b, err := json.Marshal(h.rec)
	h.dirty = false
	h.mu.Unlock()
	if err != nil {
		return err
	}
	if err := h.meta.Write(historyFile, b); err != nil {
		h.mu.Lock()
		h.dirty = true
		h.mu.Unlock()
		return fmt.Errorf("node: repair history: %w", err)
	}
	return nil
}

// counts returns a copy of the totals.
func (h *history) counts() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.foldReadsLocked()
	out := make(map[string]int64, len(h.rec.Counts))
	for k, v := range h.rec.Counts {
		out[k] = v
	}
	return out
}

// snapshot returns the history for the wire; key names the object of a
// chunk ("" when the node no longer knows it).
func (h *history) snapshot(key func(object, version uint64, shard uint32) string) *nodepb.RepairHistory {
	h.mu.Lock()
	h.foldReadsLocked()
	out := &nodepb.RepairHistory{Counts: map[string]int64{}, SinceUnixMs: h.rec.SinceUnixMs}
	for k, v := range h.rec.Counts {
		out.Counts[k] = v
	}
	recent := append([]historyEvent(nil), h.rec.Recent...)
	h.mu.Unlock()
	type blob struct {
		object, version uint64
		shard           uint32
	}
	keys := map[blob]string{}
	for _, ev := range recent {
		e := &nodepb.RepairEvent{UnixMs: ev.UnixMs, Kind: ev.Kind, Object: ev.Object, Version: ev.Version,
			Shard: ev.Shard, Index: ev.Index, Detail: ev.Detail}
		if ev.Version != 0 {
			b := blob{ev.Object, ev.Version, ev.Shard}
			k, ok := keys[b]
			if !ok {
				k = key(b.object, b.version, b.shard)
				keys[b] = k
			}
			e.Key = k
		}
		out.Recent = append(out.Recent, e)
	}
	return out
}
