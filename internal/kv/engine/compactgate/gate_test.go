package compactgate

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/flashmend/flashmend/internal/base"
)

// fakeDB is the DB side of the scheduler protocol: a compaction always
// waits, and every grant is counted and runs to its end at once.
type fakeDB struct {
	mu      sync.Mutex
	allowed int
	grants  int
	// panicWith, when set, is what the next Schedule panics with.
	panicWith any
}

func (d *fakeDB) GetAllowedWithoutPermission() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.allowed
}

func (d *fakeDB) GetWaitingCompaction() (bool, pebble.WaitingCompaction) {
	return true, pebble.WaitingCompaction{}
}

func (d *fakeDB) Schedule(h pebble.CompactionGrantHandle) bool {
	d.mu.Lock()
	if p := d.panicWith; p != nil {
		d.panicWith = nil
		d.mu.Unlock()
		panic(p)
	}
	d.grants++
	d.mu.Unlock()
	go h.Done() // the compaction runs and ends
	return true
}

func (d *fakeDB) granted() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.grants
}

// TestCompactionGateBacksOffAfterCorruption: no compaction while Pebble
// opens; then up to the allowed number; after a corruption error none for
// pauseMin, doubling with each further error and forgiven after a quiet
// spell; other errors change nothing; a waiting compaction is granted by
// the gate itself once a pause ends.
func TestCompactionGateBacksOffAfterCorruption(t *testing.T) {
	clock := base.NewManualClock(time.Unix(1_700_000_000, 0))
	db := &fakeDB{allowed: 1}
	g := New(clock)
	g.Register(1, db)
	defer g.Unregister()
	try := func() (bool, pebble.CompactionGrantHandle) {
		t.Helper()
		db.mu.Lock()
		db.allowed = 1
		db.mu.Unlock()
		return g.TrySchedule()
	}
	if ok, _ := try(); ok {
		t.Fatal("a compaction granted while Pebble opens")
	}
	g.Opened() // the gate's own granter may take the slot for a moment
	var h pebble.CompactionGrantHandle
	for deadline := time.Now().Add(10 * time.Second); h == nil; {
		if ok, got := try(); ok {
			h = got
		} else if time.Now().After(deadline) {
			t.Fatal("no compaction granted once open")
		}
	}
	if ok, _ := try(); ok {
		t.Fatal("a second compaction granted above the allowed one")
	}
	h.Done()
	corrupt := base.CorruptionErrorf("block checksum mismatch")
	g.Failed(errors.New("disk slow")) // not damage: no pause
	if g.Paused() {
		t.Fatal("paused after an error that is not a corruption")
	}
	for i, pause := range []time.Duration{pauseMin, 2 * pauseMin, 4 * pauseMin} {
		g.Failed(corrupt)
		if ok, h := try(); ok {
			h.Done()
			t.Fatalf("error %d: a compaction granted during the pause", i)
		}
		clock.Advance(pause - time.Millisecond)
		if !g.Paused() {
			t.Fatalf("error %d: pause over before %v", i, pause)
		}
		clock.Advance(time.Millisecond)
		if g.Paused() {
			t.Fatalf("error %d: still paused after %v", i, pause)
		}
	}
	// A quiet spell forgives: the next pause is the shortest again.
	clock.Advance(quietAfter + time.Second)
	g.Failed(corrupt)
	clock.Advance(pauseMin)
	if g.Paused() {
		t.Fatal("the pause after a quiet spell is not pauseMin")
	}
	// The gate grants a waiting compaction by itself once a pause ends.
	g.Failed(corrupt)
	before := db.granted()
	g.wake()
	clock.Advance(pauseMin + grantEvery)
	deadline := time.Now().Add(10 * time.Second)
	for db.granted() == before {
		if time.Now().After(deadline) {
			t.Fatal("the waiting compaction was not granted after the pause")
		}
		clock.Advance(grantEvery)
		time.Sleep(time.Millisecond)
	}
}

// TestStaleManualCompactionPanicSchedulesNothing: Pebble's panic on a
// cached pick of a cancelled manual compaction (see Gate.schedule) counts
// as nothing scheduled: the gate's slot is free again and the next waiting
// compaction is granted; any other panic is not swallowed.
func TestStaleManualCompactionPanicSchedulesNothing(t *testing.T) {
	db := &fakeDB{allowed: 1, panicWith: errors.New("pebble: internal error: did not find manual compaction with id 1")}
	g := New(nil)
	g.db = db // no granter goroutine: grantWaiting is called here
	g.Opened()
	g.grantWaiting() // the stale pick: nothing runs, the slot is released
	g.mu.Lock()
	running := g.mu.running
	g.mu.Unlock()
	if running != 0 {
		t.Fatalf("%d compactions counted as running after the stale pick", running)
	}
	g.grantWaiting()
	if db.granted() == 0 {
		t.Fatal("the next waiting compaction was not granted")
	}
	db.mu.Lock()
	db.panicWith = errors.New("some other assertion")
	db.mu.Unlock()
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("another panic was swallowed")
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		g.grantWaiting() // panics once the running compaction ended
	}
}

// TestHoldStartsNothingAndWaitsForRunning: a Hold grants no compaction
// until released, and returns once the compactions running have ended
// (quiet), or at its timeout if one runs on (not quiet).
func TestHoldStartsNothingAndWaitsForRunning(t *testing.T) {
	clock := base.NewManualClock(time.Unix(1_700_000_000, 0))
	db := &fakeDB{allowed: 2}
	g := New(clock)
	g.Register(0, db)
	defer g.Unregister()
	g.Opened() // the gate's own granter may take a slot for a moment
	var running pebble.CompactionGrantHandle
	for deadline := time.Now().Add(10 * time.Second); running == nil; {
		if ok, h := g.TrySchedule(); ok {
			running = h
		} else if time.Now().After(deadline) {
			t.Fatal("no compaction granted on an open gate")
		}
	}
	type held struct {
		release func()
		quiet   bool
	}
	got := make(chan held, 1)
	go func() {
		release, quiet := g.Hold(time.Second)
		got <- held{release, quiet}
	}()
	// Held: nothing new starts (wait until the Hold is in force).
	for deadline := time.Now().Add(10 * time.Second); ; {
		g.mu.Lock()
		n := g.mu.held
		g.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Hold never took effect")
		}
		time.Sleep(time.Millisecond)
	}
	if ok, _ := g.TrySchedule(); ok {
		t.Fatal("a compaction granted while held")
	}
	select {
	case h := <-got:
		t.Fatalf("Hold returned (quiet %v) while a compaction ran", h.quiet)
	case <-time.After(50 * time.Millisecond):
	}
	running.Done()
	h := <-got
	if !h.quiet {
		t.Fatal("Hold not quiet after the running compaction ended")
	}
	if ok, _ := g.TrySchedule(); ok {
		t.Fatal("a compaction granted before the Hold's release")
	}
	h.release()
	running = nil
	for deadline := time.Now().Add(10 * time.Second); running == nil; {
		if ok, got := g.TrySchedule(); ok {
			running = got
		} else if time.Now().After(deadline) {
			t.Fatal("no compaction granted after the release")
		}
	}
	// A compaction that runs on: the Hold gives up at its timeout.
	go func() {
		release, quiet := g.Hold(time.Second)
		got <- held{release, quiet}
	}()
	for {
		select {
		case h = <-got:
		default:
			clock.Advance(100 * time.Millisecond)
			time.Sleep(time.Millisecond)
			continue
		}
		break
	}
	if h.quiet {
		t.Fatal("Hold quiet while a compaction still runs")
	}
	h.release()
	running.Done()
}
