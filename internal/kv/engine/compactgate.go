package engine

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/flashmend/flashmend/internal/base"
)

// compactionGate is each replica's pebble.CompactionScheduler: Pebble's own
// concurrency limit (GetAllowedWithoutPermission), plus a backoff after a
// compaction fails on damaged data.
//
// Pebble retries a failed compaction at once and without end (compaction.go:
// "TODO: count consecutive compaction errors and backoff"; problem spans,
// which hold a failed compaction's inputs back, are not kept for L0), and
// every retry that reads the damaged block again runs its bit-flip search:
// each byte of the block flipped bit by bit and the whole block's checksum
// recomputed (sstable/block.ValidateChecksum), 8·n² bytes hashed for a block
// of n bytes. Until a patch cuts the damage out (the same corruption report
// starts it), a replica whose L0 holds a damaged table hashed gigabytes a
// second for nothing: under persistent flips at UBER 1e-7, 38% of the
// process's CPU went to it, and the KV store's throughput fell to a few
// operations a second. The gate holds every compaction of the engine back
// after a corruption error, for pauseMin, doubling with each further one up
// to pauseMax, and forgives after quietAfter without one. Flushes do not
// go through the scheduler, and writes are never stopped for a deep L0
// (PebbleOptions), so a pause only delays compactions.
//
// Locking follows Pebble's rule: the gate's mutex is taken after the DB's
// (TrySchedule runs under the DB's), so the gate never calls into the DB
// while holding it. Only its granting goroutine grants (Schedule), one at a
// time; Done and a pause's end wake it.
type compactionGate struct {
	clock base.Clock

	db pebble.DBForCompaction // set by Register, before anything else

	mu struct {
		sync.Mutex
		running      int
		pausedUntil  time.Time
		pause        time.Duration // the next pause's length
		lastError    time.Time
		unregistered bool
		// opening holds every compaction back until pebble.Open has
		// returned: an Open that fails closes its file cache under any
		// compaction it started (see fenceFS.opening).
		opening bool
	}
	poke chan struct{}
	stop chan struct{}
	done chan struct{}
}

const (
	pauseMin   = 100 * time.Millisecond
	pauseMax   = 5 * time.Second
	quietAfter = 30 * time.Second
	// grantEvery is how often the granting goroutine looks for waiting
	// compactions on its own (Pebble's scheduler samples every 100 ms:
	// flushes, which raise the allowed concurrency, are not seen by the
	// scheduler otherwise).
	grantEvery = 100 * time.Millisecond
)

var _ pebble.CompactionScheduler = (*compactionGate)(nil)

func newCompactionGate(clock base.Clock) *compactionGate {
	if clock == nil {
		clock = base.SystemClock{}
	}
	g := &compactionGate{clock: clock, poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	g.mu.opening = true
	return g
}

// opened lets compactions run: pebble.Open has returned.
func (g *compactionGate) opened() {
	g.mu.Lock()
	g.mu.opening = false
	g.mu.Unlock()
	g.wake()
}

// Register implements pebble.CompactionScheduler.
func (g *compactionGate) Register(_ int, db pebble.DBForCompaction) {
	g.db = db
	go g.granter()
}

// Unregister implements pebble.CompactionScheduler: it returns once the
// granting goroutine, the only caller into the DB, has stopped.
func (g *compactionGate) Unregister() {
	g.mu.Lock()
	if g.mu.unregistered {
		g.mu.Unlock()
		return
	}
	g.mu.unregistered = true
	g.mu.Unlock()
	close(g.stop)
	if g.db != nil {
		<-g.done
	}
}

// TrySchedule implements pebble.CompactionScheduler.
func (g *compactionGate) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	allowed := g.db.GetAllowedWithoutPermission()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.openLocked(allowed) {
		return false, nil
	}
	g.mu.running++
	return true, grant{g}
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler.
func (g *compactionGate) UpdateGetAllowedWithoutPermission() { g.wake() }

// failed is told of every background error; a corruption error pauses
// compactions.
func (g *compactionGate) failed(err error) {
	if !pebble.IsCorruptionError(err) && !base.IsCorruption(err) {
		return
	}
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.pause == 0 || now.Sub(g.mu.lastError) > quietAfter {
		g.mu.pause = pauseMin
	}
	g.mu.lastError = now
	g.mu.pausedUntil = now.Add(g.mu.pause)
	g.mu.pause = min(2*g.mu.pause, pauseMax)
}

// paused reports whether compactions are held back now (tests).
func (g *compactionGate) paused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.clock.Now().Before(g.mu.pausedUntil)
}

func (g *compactionGate) openLocked(allowed int) bool {
	return !g.mu.unregistered && !g.mu.opening && g.mu.running < allowed && !g.clock.Now().Before(g.mu.pausedUntil)
}

func (g *compactionGate) wake() {
	select {
	case g.poke <- struct{}{}:
	default:
	}
}

func (g *compactionGate) granter() {
	defer close(g.done)
	tick, stopTick := base.NewTicker(g.clock, grantEvery)
	defer stopTick()
	for {
		select {
		case <-g.stop:
			return
		case <-g.poke:
		case <-tick:
		}
		g.grantWaiting()
	}
}

// grantWaiting starts waiting compactions while the gate is open.
func (g *compactionGate) grantWaiting() {
	for {
		allowed := g.db.GetAllowedWithoutPermission()
		g.mu.Lock()
		if !g.openLocked(allowed) {
			g.mu.Unlock()
			return
		}
		g.mu.running++
		g.mu.Unlock()
		if waiting, _ := g.db.GetWaitingCompaction(); !waiting || !g.db.Schedule(grant{g}) {
			g.release()
			return
		}
	}
}

func (g *compactionGate) release() {
	g.mu.Lock()
	g.mu.running--
	g.mu.Unlock()
}

// grant is the handle of one granted compaction.
type grant struct{ g *compactionGate }

func (grant) Started()                                          {}
func (grant) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (grant) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done implements pebble.CompactionGrantHandle.
func (h grant) Done() {
	h.g.release()
	h.g.wake()
}
