package kv

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/raftnode"
)

// RepairMode selects what a replica does when it finds corruption.
type RepairMode int

const (
	// RepairDirect isolates the corrupt data blocks and repairs their key
	// ranges with a patch serialized through the raft log (DIRECT 4.1.4).
	RepairDirect RepairMode = iota
	// RepairCrash is the baseline: the replica goes down, drops its state and
	// is re-replicated whole from a healthy peer.
	RepairCrash
)

func (m RepairMode) String() string {
	switch m {
	case RepairDirect:
		return "direct"
	case RepairCrash:
		return "crash"
	}
	return fmt.Sprintf("RepairMode(%d)", int(m))
}

// ParseRepairMode parses "direct" or "crash".
func ParseRepairMode(s string) (RepairMode, error) {
	switch s {
	case "direct":
		return RepairDirect, nil
	case "crash":
		return RepairCrash, nil
	}
	return 0, base.InvalidArgumentf("kv: unknown repair mode %q (want direct or crash)", s)
}

// Options tunes a node's replicas. Zero values take the defaults.
type Options struct {
	// TickInterval is one raft tick. Default 10ms.
	TickInterval time.Duration
	// ElectionTicks and HeartbeatTicks are raft's timeouts in ticks.
	// Defaults 10 and 1.
	ElectionTicks, HeartbeatTicks int
	// ProposalTimeout bounds the wait for a write to apply. Default 5s.
	ProposalTimeout time.Duration
	// ReadTimeout bounds the wait for a read index or a log index. Default 5s.
	ReadTimeout time.Duration
	// PatchTimeout is how long a corrupted replica, at its patch entry, waits
	// for the first patch before it rebuilds from a peer. Default 3s.
	PatchTimeout time.Duration
	// CacheBytes is each replica's Pebble block cache. Default 8 MiB; 0 in
	// Options means the default, a negative value means no cache.
	CacheBytes int64
	// MemTableBytes is each replica's Pebble memtable size. Default 4 MiB,
	// at least 256 KiB.
	MemTableBytes int64
	// LogCompactEntries: every this many applied entries a replica records
	// a raft snapshot point and compacts its raft log, keeping
	// LogKeepEntries entries for slow followers. A follower that needs
	// compacted entries is sent the snapshot point and rebuilds from a peer's
	// state (FetchState). Defaults 10000 and 1000.
	LogCompactEntries, LogKeepEntries uint64
	// LogCompactBytes also triggers that compaction once this many bytes
	// of entries were applied since the last one (large entries fill the
	// log long before LogCompactEntries). Default 8 MiB, at least 64 KiB.
	// Each compaction first flushes the engine (Pebble runs without a WAL:
	// the raft log holds what the memtable does).
	LogCompactBytes uint64
	// ScrubInterval: every this long a replica verifies the block checksums
	// of all its live sstables, so damage in cold data is found and
	// repaired before a read needs it. Default 10 minutes; negative turns
	// the scrubber off.
	ScrubInterval time.Duration
	// Mode is the corruption repair mode. Default RepairDirect.
	Mode RepairMode
	// MaxOpenTxns bounds open transactions per replica. Default 1024.
	MaxOpenTxns int
	// ProposalBatch bounds the proposals and peers' messages a replica's
	// raft loop takes, of those already queued, before it persists one
	// Ready (group commit: one raft log sync for all their entries; each
	// proposal stays its own entry with its own result), and the strong
	// reads that share one raft read index. Default raftnode.MaxBatch; 1
	// is one Ready per proposal and one read index per read (the baseline
	// the kv-throughput experiment measures against).
	ProposalBatch int
	// Clock stamps events (durations measured for reports), dates the
	// deadlines of raft log repair at open, and is the time base of
	// proposal ids (it must move forward between a replica's runs). Raft
	// ticks, the repair tick, the scrubber, request and patch timeouts and
	// retry backoffs are timers on it (base.After, base.NewTicker): on a
	// base.ManualClock a replica moves only when the clock is advanced.
	// Calls to peers (Transport) carry wall-clock deadlines, as gRPC does.
	// Default the system clock.
	Clock base.Clock
	// OnRepair, if set, is called after each completed repair (experiments,
	// metrics). It runs on the replica's apply worker: it must not block.
	OnRepair func(RepairEvent)
}

// WithDefaults returns the options with every zero value replaced by its
// default, or an invalid-argument error for a value out of range.
func (o *Options) WithDefaults() (Options, error) {
	out := *o
	if out.TickInterval == 0 {
		out.TickInterval = 10 * time.Millisecond
	}
	if out.ElectionTicks == 0 {
		out.ElectionTicks = 10
	}
	if out.HeartbeatTicks == 0 {
		out.HeartbeatTicks = 1
	}
	if out.ProposalTimeout == 0 {
		out.ProposalTimeout = 5 * time.Second
	}
	if out.ReadTimeout == 0 {
		out.ReadTimeout = 5 * time.Second
	}
	if out.PatchTimeout == 0 {
		out.PatchTimeout = 3 * time.Second
	}
	if out.CacheBytes == 0 {
		out.CacheBytes = int64(8 * base.MiB)
	}
	if out.CacheBytes < 0 {
		out.CacheBytes = 0
	}
	if out.MemTableBytes == 0 {
		out.MemTableBytes = int64(4 * base.MiB)
	}
	if out.ScrubInterval == 0 {
		out.ScrubInterval = 10 * time.Minute
	}
	if out.LogCompactEntries == 0 {
		out.LogCompactEntries = 10000
	}
	if out.LogCompactBytes == 0 {
		out.LogCompactBytes = uint64(8 * base.MiB)
	}
	if out.LogKeepEntries == 0 {
		out.LogKeepEntries = 1000
	}
	if out.MaxOpenTxns == 0 {
		out.MaxOpenTxns = 1024
	}
	if out.ProposalBatch == 0 {
		out.ProposalBatch = raftnode.MaxBatch
	}
	if out.Clock == nil {
		out.Clock = base.SystemClock{}
	}
	switch {
	case out.TickInterval < time.Millisecond || out.TickInterval > time.Second:
		return out, base.InvalidArgumentf("kv: TickInterval %v outside [1ms, 1s]", out.TickInterval)
	case out.HeartbeatTicks < 1 || out.ElectionTicks <= out.HeartbeatTicks || out.ElectionTicks > 1000:
		return out, base.InvalidArgumentf("kv: need 1 <= HeartbeatTicks (%d) < ElectionTicks (%d) <= 1000", out.HeartbeatTicks, out.ElectionTicks)
	case out.ProposalTimeout < 0 || out.ReadTimeout < 0 || out.PatchTimeout < 0:
		return out, base.InvalidArgumentf("kv: negative timeout")
	case out.Mode != RepairDirect && out.Mode != RepairCrash:
		return out, base.InvalidArgumentf("kv: unknown repair mode %d", out.Mode)
	case out.MemTableBytes < int64(256*base.KiB) || out.MemTableBytes > int64(base.GiB):
		return out, base.InvalidArgumentf("kv: MemTableBytes %d outside [256KiB, 1GiB]", out.MemTableBytes)
	case out.LogCompactBytes < uint64(64*base.KiB):
		return out, base.InvalidArgumentf("kv: LogCompactBytes %d below 64 KiB", out.LogCompactBytes)
	case out.LogKeepEntries >= out.LogCompactEntries || out.LogCompactEntries > 1<<30:
		return out, base.InvalidArgumentf("kv: need LogKeepEntries (%d) < LogCompactEntries (%d) <= 2^30", out.LogKeepEntries, out.LogCompactEntries)
	case out.MaxOpenTxns < 1 || out.MaxOpenTxns > 1<<20:
		return out, base.InvalidArgumentf("kv: MaxOpenTxns %d outside [1, 2^20]", out.MaxOpenTxns)
	case out.ProposalBatch < 1 || out.ProposalBatch > raftnode.MaxBatch:
		return out, base.InvalidArgumentf("kv: ProposalBatch %d outside [1, %d]", out.ProposalBatch, raftnode.MaxBatch)
	}
	return out, nil
}

// ReplicaConfig says where a replica lives and who it talks to
// (OpenReplica).
type ReplicaConfig struct {
	// Transport carries the replica's messages to its peers.
	Transport Transport
	// Node is the node that hosts the replica; ID is its raft ID in Shard.
	Node  base.NodeID
	Shard kvapi.ShardSpec
	ID    base.ReplicaID
	// FS and Dir hold the replica's files: Dir/raft (the raft log) and
	// Dir/pebble (the engine). The host puts FS behind internal/guardfs.
	FS  vfs.FS
	Dir string
	// Options must have been through WithDefaults.
	Options Options
	// Replaced is set for a fresh replica started in place of one whose
	// files could not be opened: it may have voted and acknowledged
	// entries it no longer knows of, so it starts under a vote floor above
	// every log.
	Replaced bool
	// OnFail, if set, is called (in a goroutine of its own, once) when the
	// replica fail-stops because its engine failed (Replica.Failed): the
	// host closes it and starts a fresh replica in its place.
	OnFail func(r *Replica, err error)
}
