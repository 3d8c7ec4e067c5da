package sdf

import (
	"fmt"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/reparo"
)

// Lifetime is a write-lifetime hint (like RocksDB's WriteLifeTimeHint and
// ZenFS): files with the same hint are placed in the same zones so that they
// tend to die together and zones empty without garbage collection.
type Lifetime uint8

// Lifetime hints, shortest first.
const (
	LifetimeNone Lifetime = iota
	LifetimeShort
	LifetimeMedium
	LifetimeLong
	LifetimeExtreme
	numLifetimes
)

func (l Lifetime) String() string {
	switch l {
	case LifetimeNone:
		return "none"
	case LifetimeShort:
		return "short"
	case LifetimeMedium:
		return "medium"
	case LifetimeLong:
		return "long"
	case LifetimeExtreme:
		return "extreme"
	}
	return fmt.Sprintf("lifetime(%d)", uint8(l))
}

// GCPolicy chooses the victim zone of host garbage collection.
type GCPolicy uint8

const (
	// GCGreedy picks the full zone with the fewest live pages (least copy
	// work now).
	GCGreedy GCPolicy = iota
	// GCCostBenefit picks the zone maximising age*(1-u)/(2u) (Rosenblum and
	// Ousterhout's LFS cleaner, u = live fraction, age = time since the
	// zone's last write from the injected clock): cold, mostly dead zones
	// first, which keeps hot data from being copied again and again.
	GCCostBenefit
)

func (p GCPolicy) String() string {
	switch p {
	case GCGreedy:
		return "greedy"
	case GCCostBenefit:
		return "cost-benefit"
	}
	return fmt.Sprintf("gcpolicy(%d)", uint8(p))
}

// Options configures an FS. The zero value of every field means "default";
// every field is bounded (Validate).
type Options struct {
	// Clock stamps modification times and zone ages (cost-benefit GC).
	Clock base.Clock
	// MaxOpenZones bounds zones that are partially written and accept writes
	// (NVMe ZNS max open resources). Default 8, range [1, 1024].
	MaxOpenZones int
	// QueueDepth bounds the requests queued on one channel worker. Default
	// 32, range [1, 4096].
	QueueDepth int
	// WriteBufferBytes is how much a file buffers before programming full
	// pages. Default 256KiB; rounded up to whole pages; at most 64MiB.
	WriteBufferBytes base.Bytes
	// ReadAheadBytes turns on read-ahead for sequential readers: when a
	// File's ReadAt starts where its previous one ended (or is its first,
	// at offset 0), the layer reads the next range of the same length (if
	// at most this many bytes) in the background, queued on the channel
	// before the caller's own range is waited for, so the channel goes
	// from one request to the next without idling (see readAhead). Each
	// File so read uses up to two buffers of its request length while it
	// reads (the range being completed, the next being read), taken from
	// a pool of the FS. Default 0 (off); at most 64MiB.
	ReadAheadBytes base.Bytes
	// GCFreeZonesMin: when allocating a zone leaves fewer empty zones than
	// this, host GC runs first. Default 4, range [2, 1<<20]. GC itself may
	// consume the last free zones.
	GCFreeZonesMin int
	// GCPolicy picks victims (default greedy).
	GCPolicy GCPolicy
	// ScanWorkers is the parallelism of the CDR-style parallel scan of the
	// file table (LostRangesScan). Default 4, range [1, 256].
	ScanWorkers int
	// DieBadBlocks is Reparo's N_bad^die: a die with more bad blocks than
	// this (found by failed programs, erases and probes of the neighbours of
	// a failing block) is declared failed. Default 4, range [1, 1<<20].
	DieBadBlocks int
	// Handler is where the loss of a die is absorbed (Reparo's Handler):
	// reparo.HandlerCDR (default) spreads it over every channel so their
	// utilizations stay equal, reparo.HandlerIDR confines it to the victim
	// channel.
	Handler reparo.Policy
	// OnDieFailure, if set, is called (in its own goroutine) once for each
	// die the layer declares failed, with the event.
	OnDieFailure func(DieFailure)
	// ReadOnly opens without writing anything to the device (no new
	// checkpoint, no GC, no zone reset): for inspection. Every call that
	// would change the file system fails with ErrReadOnly; what the layer
	// learns meanwhile (a failed die) stays in memory.
	ReadOnly bool
	// Serial runs every device operation one after another: each
	// channel's requests in order with their dies in turn, and the
	// requests the layer spreads over channels one channel after the
	// other (lowest first) instead of all at once. A caller that uses the
	// layer from one goroutine at a time then gets the same sequence of
	// device operations on every run: power-loss trials that cut the
	// device at its n-th operation repeat (internal/torture/powerloss).
	// Slower; not for serving.
	Serial bool
}

const (
	defaultMaxOpenZones     = 8
	defaultQueueDepth       = 32
	defaultWriteBufferBytes = 256 * base.KiB
	defaultGCFreeZonesMin   = 4
	defaultScanWorkers      = 4
	defaultDieBadBlocks     = 4
)

// withDefaults returns o with zero fields replaced by defaults, or an error
// naming the first field out of bounds.
func (o Options) withDefaults() (Options, error) {
	if o.Clock == nil {
		o.Clock = base.SystemClock{}
	}
	base.SetDefault(&o.MaxOpenZones, defaultMaxOpenZones)
	base.SetDefault(&o.QueueDepth, defaultQueueDepth)
	base.SetDefault(&o.WriteBufferBytes, defaultWriteBufferBytes)
	base.SetDefault(&o.GCFreeZonesMin, defaultGCFreeZonesMin)
	base.SetDefault(&o.ScanWorkers, defaultScanWorkers)
	base.SetDefault(&o.DieBadBlocks, defaultDieBadBlocks)
	switch {
	case o.MaxOpenZones < 1 || o.MaxOpenZones > 1024:
		return o, base.InvalidArgumentf("sdf: MaxOpenZones %d not in [1, 1024]", o.MaxOpenZones)
	case o.QueueDepth < 1 || o.QueueDepth > 4096:
		return o, base.InvalidArgumentf("sdf: QueueDepth %d not in [1, 4096]", o.QueueDepth)
	case o.WriteBufferBytes < 0 || o.WriteBufferBytes > 64*base.MiB:
		return o, base.InvalidArgumentf("sdf: WriteBufferBytes %s not in [1B, 64MiB]", o.WriteBufferBytes)
	case o.ReadAheadBytes < 0 || o.ReadAheadBytes > 64*base.MiB:
		return o, base.InvalidArgumentf("sdf: ReadAheadBytes %s not in [0B, 64MiB]", o.ReadAheadBytes)
	case o.GCFreeZonesMin < 2 || o.GCFreeZonesMin > 1<<20:
		return o, base.InvalidArgumentf("sdf: GCFreeZonesMin %d not in [2, 1<<20]", o.GCFreeZonesMin)
	case o.GCPolicy > GCCostBenefit:
		return o, base.InvalidArgumentf("sdf: unknown GC policy %d", o.GCPolicy)
	case o.DieBadBlocks < 1 || o.DieBadBlocks > 1<<20:
		return o, base.InvalidArgumentf("sdf: DieBadBlocks %d not in [1, 1<<20]", o.DieBadBlocks)
	case o.Handler != reparo.HandlerCDR && o.Handler != reparo.HandlerIDR:
		return o, base.InvalidArgumentf("sdf: unknown handler policy %v", o.Handler)
	case o.ScanWorkers < 1 || o.ScanWorkers > 256:
		return o, base.InvalidArgumentf("sdf: ScanWorkers %d not in [1, 256]", o.ScanWorkers)
	}
	return o, nil
}
