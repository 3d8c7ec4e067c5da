package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/invariants"
	"github.com/flashmend/flashmend/internal/kv/engine/compactgate"
	"github.com/flashmend/flashmend/internal/kv/keyspan"
)

// StateMachine is one replica's Pebble instance. The apply worker is its
// only writer; readers use the DB or a snapshot.
//
// Pebble runs without its write-ahead log (Options.DisableWAL): the raft log
// is the shard's write-ahead log, already duplicated, checksummed in small
// units and repairable from peers (internal/raftlog), so a second log would
// double every write and add a file whose damage nothing could repair. What
// Pebble holds durably is what it has flushed; at open the replica replays
// the raft log from the flushed applied index, and it compacts the raft log
// only up to an index a completed flush made durable (durableIndex).
type StateMachine struct {
	fs   vfs.FS
	dir  string
	opts *pebble.Options
	// gate is the engine's compaction scheduler (ingestSpan holds it).
	gate *compactgate.Gate
	// flushes records the tables memtable flushes write (ingestSpan).
	flushes *flushLog
	db      *pebble.DB
	// ingestSeq names patch sstables uniquely.
	ingestSeq atomic.Uint64
	// unlocated holds the spans whose last patch's excise failed on damage
	// no isolation located (ingestSpan; apply worker only): a span in it
	// that fails so again takes the cut tables along. Bounded: cleared
	// when it grows past maxUnlocated.
	unlocated map[string]bool
	// beforeReadBack, if set (tests), runs between a patch's ingest and its
	// read-back, with the span.
	beforeReadBack func(lo, hi []byte)
	// exciseFault, if set (tests), is called before a patch's excise; an
	// error it returns is the excise's.
	exciseFault func(lo, hi []byte) error
	// state is the applied record as of the last applied entry; owned by
	// the apply worker (the only writer).
	state AppliedState
	// stateMu guards state against readers outside the apply loop
	// (applied: flushAndCompact, status); the apply loop, its only
	// writer, reads it without the lock.
	stateMu sync.Mutex
	// appliedLost is set when no copy of the applied record read back at
	// open.
	appliedLost error
	// around is what the replica knows of its damaged tables (SetAround).
	around atomic.Pointer[Around]
	// fail records a fatal error of Pebble's (Failed).
	fail *failState
}

// DB is the Pebble instance; the replica reads through it and flushes it.
func (sm *StateMachine) DB() *pebble.DB { return sm.db }

// Opts are the options the engine was opened with.
func (sm *StateMachine) Opts() *pebble.Options { return sm.opts }

// FS is the file system the engine's files are on.
func (sm *StateMachine) FS() vfs.FS { return sm.fs }

// Dir is the directory of the engine's files.
func (sm *StateMachine) Dir() string { return sm.dir }

// AppliedLost is the error that made the applied record unreadable at open
// (no copy read back), or nil: the replica then takes a peer's state.
func (sm *StateMachine) AppliedLost() error { return sm.appliedLost }

// Failed is the error that failed the engine (Pebble reported a fatal
// error: a MANIFEST or marker write that failed), or nil. A failed engine
// is never written or trusted again: its replica fail-stops and is
// replaced.
func (sm *StateMachine) Failed() error { return sm.fail.failed() }

// FailedC is closed once the engine has failed.
func (sm *StateMachine) FailedC() <-chan struct{} { return sm.fail.ch }

// ErrEngineFailed marks the error of an engine that failed (errors.Is).
var ErrEngineFailed = errors.New("kv engine failed")

// failState records an engine's fatal error. Pebble calls Logger.Fatalf
// where it cannot go on consistently (a MANIFEST edit that may or may not
// have been written, a commit pipeline that broke), from whichever
// goroutine hit it, often a background flush or compaction holding the
// DB's mutex, and expects the process to exit. Exiting would take every
// replica of the node down for one replica's device error; blocking or
// ending that goroutine would leave the DB's mutex held or its flush
// accounting unbalanced, so that nothing could close it. Every Fatalf
// call site in Pebble returns its error after the call (version_set.go,
// db.go, ingest.go), and the returned error fails that flush, compaction
// or ingest: so failLogger returns, after recording the error, and the
// engine is failed from then on. Its files are fenced at that instant
// (fenceFS: nothing Pebble does afterwards reaches them, as if the process
// had died there), FlushDurable and Close stop waiting on flushes, the
// replica refuses reads and writes, stops taking part in raft, and its
// host closes it and starts a fresh one that rebuilds from the peers
// (internal/kv/kvserver). The in-memory state Pebble kept after the
// failure is never used again.
type failState struct {
	once   sync.Once
	err    atomic.Pointer[error]
	ch     chan struct{}
	notify func(error)
}

func newFailState(notify func(error)) *failState {
	return &failState{ch: make(chan struct{}), notify: notify}
}

func (f *failState) failed() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// set records err (the first one counts) and tells the owner once. It
// must not block: Pebble may hold its mutex.
func (f *failState) set(err error) {
	f.once.Do(func() {
		err = fmt.Errorf("%w: %v", ErrEngineFailed, err)
		f.err.Store(&err)
		if f.notify != nil {
			f.notify(err)
		}
		close(f.ch) // after notify: who waits on ch sees the owner told
	})
}

// quietLogger drops Pebble's informational logging; errors reach us
// through returned errors and the event listener. Its Fatalf panics: it is
// the logger of options used without an engine (SSTReaderOptions); an
// engine's Pebble logs to a failLogger.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble fatal: "+format, args...))
}

// failLogger is an engine's Pebble logger: a fatal error fails the engine
// (failState) and returns.
type failLogger struct {
	quietLogger
	f *failState
}

func (l failLogger) Fatalf(format string, args ...interface{}) {
	l.f.set(fmt.Errorf("pebble fatal: "+format, args...))
}

// PebbleOptions is the configuration of every replica's Pebble.
// The caller owns cache (may be nil) and unrefs it after pebble.Open.
func PebbleOptions(fs vfs.FS, cache *pebble.Cache, memTableBytes int64, onCorruption func(pebble.DataCorruptionInfo)) *pebble.Options {
	if onCorruption == nil {
		onCorruption = func(pebble.DataCorruptionInfo) {}
	}
	opts := &pebble.Options{
		FS:         fs,
		DisableWAL: true,
		// internal/guardfs holds a framed file's content in memory while
		// it is open: keep the MANIFEST small.
		MaxManifestFileSize: int64(8 * base.MiB),
		MemTableSize:        uint64(memTableBytes),
		FormatMajorVersion:  pebble.FormatNewest,
		Cache:               cache,
		Logger:              quietLogger{},
		EventListener: &pebble.EventListener{
			DataCorruption:  onCorruption,
			BackgroundError: func(error) {},
		},
	}
	// No flushable ingests: an ingest that overlaps the memtable would be
	// queued as a flushable whose excise runs inside a later flush, and an
	// excise that must read a damaged table there fails that flush again
	// and again while the ingest waits for it forever (seen: a rebuild's
	// IngestAndExcise hung for 45 minutes). Ingested directly, the excise
	// error comes back to the caller, which repairs or rebuilds.
	opts.Experimental.DisableIngestAsFlushable = func() bool { return true }
	// Writes are never stopped for a deep L0. A compaction whose input has
	// a damaged block fails until a patch cuts the damage out, and the
	// patch is applied by the same worker that applies writes: with
	// Pebble's stop at 12 L0 sublevels, persistent damage in compaction
	// inputs (kv-patch-size, flips written back at UBER 1e-7) stopped every
	// write, the apply worker waited in the stall, and the patches that
	// would have let the compactions finish never applied. Reads slow down
	// with L0's depth instead (the threshold still triggers compactions).
	opts.L0StopWritesThreshold = math.MaxInt32
	// Every table carries an id, so a repair can read around a damaged
	// table (tableid.go); a small table lists its keys, so a damaged block
	// of it costs its own keys only (tablekeys.go).
	opts.BlockPropertyCollectors = []func() pebble.BlockPropertyCollector{newTableIDCollector, newTableKeysCollector}
	// A bloom filter (10 bits per key, about 1% false positives) in every
	// table: a point read skips each table that does not hold its key
	// without reading a data block of it. Every flush makes an L0 table
	// whose bounds are the whole key space (the applied record's two
	// copies), so without filters a read reads one data block of every
	// L0 table, and on flash that decays as it is read every block read
	// is another chance to meet (and, at UBER 1e-7 written back, to
	// spread) damage. Filter blocks are metadata: guardfs keeps a second
	// copy of them like the index (internal/guardfs/sstmeta).
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	opts.EnsureDefaults()
	return opts
}

// SSTReaderOptions are the sstable reader options matching the replicas'
// Pebble configuration (for internal/sdfvfs.SSTMetadataRanges).
func SSTReaderOptions() sstable.ReaderOptions {
	return PebbleOptions(vfs.NewMem(), nil, int64(4*base.MiB), nil).MakeReaderOptions()
}

// openPebble is pebble.Open with a panic returned as an error. Pebble
// panics where it cannot go on (a failed directory sync while it moves a
// marker, which fenceFS now turns into an engine failure first); its Open
// releases what it took (lock, memory, files) before the panic leaves it,
// so one engine that cannot open must not take the process and every
// other replica with it.
func openPebble(dir string, opts *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		switch r := recover().(type) {
		case nil:
		case error:
			db, err = nil, fmt.Errorf("pebble.Open panicked: %w", r)
		default:
			db, err = nil, fmt.Errorf("pebble.Open panicked: %v", r)
		}
	}()
	return pebble.Open(dir, opts)
}

// Open opens (or creates) the engine in dir. onFail, if set, is called
// once if the engine fails (see failState); it must not block or call into
// the engine.
func Open(fs vfs.FS, dir string, cacheBytes, memTableBytes int64, onCorruption func(pebble.DataCorruptionInfo), onFail func(error)) (*StateMachine, error) {
	cache := pebble.NewCache(cacheBytes)
	defer cache.Unref()
	fail := newFailState(onFail)
	ffs := &fenceFS{FS: fs, f: fail}
	fs = ffs
	opts := PebbleOptions(fs, cache, memTableBytes, onCorruption)
	opts.Logger = failLogger{f: fail}
	gate := compactgate.New(nil)
	opts.Experimental.CompactionScheduler = gate
	opts.EventListener.BackgroundError = gate.Failed
	flushes := &flushLog{}
	opts.EventListener.FlushEnd = flushes.flushEnd
	ffs.opening.Store(true)
	db, err := openPebble(dir, opts)
	ffs.opening.Store(false)
	if err != nil {
		gate.Unregister() // a failed Open may have registered it
	}
	gate.Opened()
	if ferr := fail.failed(); ferr != nil {
		// A fatal error during open (writing a MANIFEST or moving its
		// marker): Pebble went on, but the engine is not to be trusted.
		if err == nil {
			_ = db.Close()
		}
		err = ferr
	}
	if err != nil {
		return nil, Classify(fmt.Errorf("kv: open pebble in %s: %w", dir, err))
	}
	sm := &StateMachine{fs: fs, dir: dir, opts: opts, db: db, fail: fail, gate: gate, flushes: flushes}
	st, err := ReadApplied(db)
	switch {
	case base.IsCorruption(err):
		// Both copies of the applied record are unreadable: the engine's
		// rows are there but what they reflect is unknown. The replica
		// takes a peer's state (appliedLost) rather than guess.
		sm.appliedLost = err
	case err != nil:
		_ = db.Close()
		return nil, fmt.Errorf("kv: open pebble in %s: %w", dir, err)
	default:
		sm.setState(st)
	}
	return sm, nil
}

// Classify marks Pebble corruption errors with flashmend's corruption class.
func Classify(err error) error {
	if err != nil && pebble.IsCorruptionError(err) && !base.IsCorruption(err) {
		return base.CorruptionErrorf("%w", err)
	}
	return err
}

// close flushes the memtable (so a restart replays little of the raft
// log) and closes Pebble.
//
// A failed engine is closed without a flush (one would fail, and wait for
// Pebble's retries of it); its close error is only reported.
func (sm *StateMachine) Close() error {
	if sm.Failed() == nil {
		_ = sm.Flush()
	}
	return sm.db.Close()
}

// Flush flushes the memtable and waits for it, or until the engine fails
// (Pebble retries a failed flush without end, and DB.Flush waits for it).
func (sm *StateMachine) Flush() error {
	if err := sm.Failed(); err != nil {
		return err
	}
	done, err := sm.db.AsyncFlush()
	if err != nil {
		return Classify(err)
	}
	select {
	case <-done:
		// A flush that ends after the engine failed wrote nowhere
		// (fenceFS swallowed it): it made nothing durable.
		return sm.Failed()
	case <-sm.fail.ch:
		return sm.Failed()
	}
}

func (sm *StateMachine) Applied() AppliedState {
	sm.stateMu.Lock()
	defer sm.stateMu.Unlock()
	return sm.state
}

func (sm *StateMachine) setState(st AppliedState) {
	sm.stateMu.Lock()
	sm.state = st
	sm.stateMu.Unlock()
}

// setApplied records index (of term) as applied with no change to the rows
// (entries that are not writes, patches seen by healthy replicas).
func (sm *StateMachine) SetApplied(index, term uint64) error {
	if err := sm.Failed(); err != nil {
		return err
	}
	next := sm.state
	next.Index, next.Term = index, term
	if err := sm.WriteApplied(sm.db, next); err != nil {
		return err
	}
	sm.setState(next)
	return nil
}

// writeApplied writes both copies of the applied record (appliedKey,
// appliedKey2) to w (the DB, or a batch committed by the caller).
func (sm *StateMachine) WriteApplied(w pebble.Writer, st AppliedState) error {
	v := st.encode()
	if invariants.Enabled {
		// Checksum before the write: the record decodes back to st
		// (ReadApplied verifies both copies it reads).
		back, err := DecodeAppliedState(v)
		_ = invariants.Check(err == nil && back == st, "kv: applied record %+v decodes back as %+v (%v)", st, back, err)
	}
	if err := w.Set(appliedKey, v, pebble.NoSync); err != nil {
		return Classify(err)
	}
	return Classify(w.Set(appliedKey2, v, pebble.NoSync))
}

// HoldCompactions starts no compaction until release is called, after
// waiting up to timeout for the running ones: for tools and tests that
// must see the engine's tables as they are (compactgate.Gate.Hold).
func (sm *StateMachine) HoldCompactions(timeout time.Duration) (release func()) {
	release, _ = sm.gate.Hold(timeout)
	return release
}

// durableIndex flushes the memtable and returns an applied index that is
// now durable (everything applied before the flush started).
func (sm *StateMachine) FlushDurable() (uint64, error) {
	idx := sm.state.Index
	if err := sm.Flush(); err != nil {
		return 0, err
	}
	return idx, nil
}

// ErrConditionFailed is the apply-time outcome of a failed condition or scan
// validation; it is deterministic across replicas.
var ErrConditionFailed = errors.New("condition failed")

// applyWrite applies b at index (of term) atomically with the applied
// record. A failed condition applies nothing but the index (and returns
// ErrConditionFailed); any other error means this replica could not
// evaluate the entry.
//
// Each write reads the key's old value to keep the Digest; a read that
// fails as corruption (the key sits in a damaged block awaiting its patch)
// does not fail the write: the Digest becomes unknown instead.
func (sm *StateMachine) ApplyWrite(index, term uint64, b *kvpb.WriteBatch) error {
	if err := sm.Failed(); err != nil {
		return err
	}
	ok, err := sm.Check(b)
	if err != nil {
		return err
	}
	next := sm.state
	next.Index, next.Term = index, term
	batch := sm.db.NewBatch()
	defer batch.Close()
	if ok {
		seen := map[string]*[]byte{} // latest value within this batch (nil: deleted)
		for _, op := range b.Ops {
			old, had, known := sm.current(seen, op.Key)
			if !known {
				next.Digest.Dirty = true
			} else if had && !next.Digest.Dirty {
				next.Digest.remove(op.Key, old)
			}
			switch op.Kind {
			case kvpb.Op_PUT:
				_ = batch.Set(UserKey(op.Key), op.Value, nil)
				v := op.Value
				seen[string(op.Key)] = &v
				if !next.Digest.Dirty {
					next.Digest.add(op.Key, op.Value)
				}
			case kvpb.Op_DELETE:
				_ = batch.Delete(UserKey(op.Key), nil)
				seen[string(op.Key)] = nil
			}
		}
	}
	_ = sm.WriteApplied(batch, next)
	if err := batch.Commit(pebble.NoSync); err != nil {
		return Classify(err)
	}
	crashpoint.Hit("kv-apply")
	sm.setState(next)
	if !ok {
		return ErrConditionFailed
	}
	return nil
}

// current returns key's value before the op being applied: from earlier ops
// of the same batch, or from the DB. known is false if the DB read failed.
func (sm *StateMachine) current(seen map[string]*[]byte, key []byte) (v []byte, had, known bool) {
	if p, ok := seen[string(key)]; ok {
		if p == nil {
			return nil, false, true
		}
		return *p, true, true
	}
	v, found, err := GetWith(sm.db, key, sm.Around())
	if err != nil {
		return nil, false, false
	}
	return v, found, true
}

// SetAround tells the state machine what its replica knows of its damaged
// tables (Around): the reads a write makes (its conditions, the old values
// the Digest needs) go past them like the replica's own reads, so a write
// next to damage neither fails its conditions (a rebuild) nor loses the
// Digest.
// The replica passes its own immutable Around (nil: nothing known), so a
// write costs one pointer store.
func (sm *StateMachine) SetAround(a *Around) { sm.around.Store(a) }

// Around returns what SetAround last set.
func (sm *StateMachine) Around() Around {
	if a := sm.around.Load(); a != nil {
		return *a
	}
	return Around{}
}

func (sm *StateMachine) Check(b *kvpb.WriteBatch) (bool, error) {
	a := sm.Around()
	for _, c := range b.Conditions {
		v, found, err := GetWith(sm.db, c.Key, a)
		if err != nil {
			return false, err
		}
		if found != c.Exists || (found && !bytes.Equal(v, c.Value)) {
			return false, nil
		}
	}
	for _, s := range b.Scans {
		rows, _, err := ScanBoundedWith(sm.db, s.Start, s.End, int(s.Limit), 0, a)
		if err != nil {
			return false, err
		}
		if RowsCRC(nil, rows) != s.Crc {
			return false, nil
		}
	}
	return true, nil
}

// ReadAttempts bounds the reads of one key, or of one scan position, that
// fail as corruption before the error is returned. Pebble never caches a
// block that fails its checksum, so each attempt reads the block from the
// file again: a transient flip (a bit that flipped on the way, not in the
// stored page) is gone on the next attempt, while damage that persists
// fails every attempt and is returned, never as data (MISSION.md,
// "re-read before repairing"). Every failed attempt is also reported to
// the replica's DataCorruption listener, which tells the two apart.
const ReadAttempts = 3

// get reads a user key from r (the DB or a snapshot), re-reading on
// corruption (ReadAttempts).
func Get(r pebble.Reader, key []byte) (v []byte, found bool, err error) {
	for attempt := 0; attempt < ReadAttempts; attempt++ {
		v, found, err = GetOnce(r, key)
		if !base.IsCorruption(err) {
			return v, found, err
		}
	}
	return nil, false, err
}

func GetOnce(r pebble.Reader, key []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(UserKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, Classify(err)
	}
	out := bytes.Clone(v)
	closer.Close()
	return out, true, nil
}

// scan reads up to limit user rows of [start, end) from r; more reports
// whether rows remain. limit <= 0 means unlimited. A read that fails as
// corruption is resumed, with a new iterator, just past the last row read;
// ReadAttempts consecutive failures without progress return the error.
func Scan(r pebble.Reader, start, end []byte, limit int) (rows []*kvpb.KeyValue, more bool, err error) {
	return ScanBounded(r, start, end, limit, 0)
}

// RowBytes is what a row costs against a scan's byte bound.
func RowBytes(kv *kvpb.KeyValue) int { return len(kv.Key) + len(kv.Value) }

// ScanBounded is scan that also stops once the rows' keys and values
// reach maxBytes (after at least one row; 0: no byte bound).
func ScanBounded(r pebble.Reader, start, end []byte, limit, maxBytes int) (rows []*kvpb.KeyValue, more bool, err error) {
	rows, more, err = scanPartial(r, start, end, limit, maxBytes)
	if err != nil {
		return nil, false, err
	}
	return rows, more, nil
}

// scanPartial is ScanBounded that returns, with an error, the rows read
// before it: every row of [start, k] in order, where k is the last key read
// (ScanPieces makes a piece of them).
func scanPartial(r pebble.Reader, start, end []byte, limit, maxBytes int) (rows []*kvpb.KeyValue, more bool, err error) {
	from := start
	used := 0
	for failures := 0; ; {
		want := 0
		if limit > 0 {
			want = limit - len(rows)
		}
		full := (limit > 0 && want <= 0) || (maxBytes > 0 && used >= maxBytes && len(rows) > 0)
		if full {
			// The rows are all in; only "more" is left to learn.
			next, _, err := scanOnce(r, from, end, 1, 0)
			if err == nil {
				return rows, len(next) > 0, nil
			}
			if !base.IsCorruption(err) || failures+1 >= ReadAttempts {
				return rows, false, err
			}
			failures++
			continue
		}
		budget := 0
		if maxBytes > 0 {
			budget = maxBytes - used
		}
		part, more, err := scanOnce(r, from, end, want, budget)
		rows = append(rows, part...)
		for _, kv := range part {
			used += RowBytes(kv)
		}
		if err == nil {
			return rows, more, nil
		}
		if !base.IsCorruption(err) {
			return rows, false, err
		}
		if len(part) > 0 {
			failures = 0
			from = append(bytes.Clone(part[len(part)-1].Key), 0)
			continue
		}
		if failures++; failures >= ReadAttempts {
			return rows, false, err
		}
	}
}

// scanOnce is one iterator's pass of scan (maxBytes as in ScanBounded). A
// range that ends just past a key k (end = k + "\x00") is read as
// [start, k) and a point read of k: an iterator bounded by k+"\x00" loads
// the block after k's to learn that nothing else is below the bound, and
// that block may be damaged, where one bounded by k stops at k's block (its
// index separator is at least k). On error it returns the rows read before
// the error with it.
func scanOnce(r pebble.Reader, start, end []byte, limit, maxBytes int) (rows []*kvpb.KeyValue, more bool, err error) {
	if n := len(end); n > 0 && end[n-1] == 0 && bytes.Compare(start, end[:n-1]) <= 0 {
		k := end[:n-1]
		if bytes.Compare(start, k) < 0 {
			rows, more, err = scanOnce(r, start, k, limit, maxBytes)
			if err != nil || more {
				return rows, more, err
			}
		}
		v, found, err := GetOnce(r, k)
		if err != nil {
			return rows, false, err
		}
		if found {
			used := 0
			for _, kv := range rows {
				used += RowBytes(kv)
			}
			if (limit > 0 && len(rows) == limit) || (maxBytes > 0 && used >= maxBytes && len(rows) > 0) {
				return rows, true, nil
			}
			rows = append(rows, &kvpb.KeyValue{Key: bytes.Clone(k), Value: v})
		}
		return rows, false, nil
	}
	lo, hi := PebbleSpan(start, end)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, false, Classify(err)
	}
	used := 0
	for valid := it.First(); valid; valid = it.Next() {
		if (limit > 0 && len(rows) == limit) || (maxBytes > 0 && used >= maxBytes && len(rows) > 0) {
			more = true
			break
		}
		k, _ := FromUserKey(it.Key())
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return rows, false, Classify(err)
		}
		used += len(k) + len(v)
		rows = append(rows, &kvpb.KeyValue{Key: bytes.Clone(k), Value: bytes.Clone(v)})
	}
	if err := it.Close(); err != nil {
		return rows, false, Classify(err)
	}
	return rows, more, nil
}

// RowsCRC is the CRC32C over ranges and rows (length-prefixed), the
// end-to-end checksum of patches, state transfers and scan validation.
func RowsCRC(ranges []*kvpb.KeyRange, rows []*kvpb.KeyValue) uint32 {
	var crc uint32
	var lenBuf [binary.MaxVarintLen64]byte
	add := func(b []byte) {
		n := binary.PutUvarint(lenBuf[:], uint64(len(b)))
		crc = base.CRC32CUpdate(crc, lenBuf[:n])
		crc = base.CRC32CUpdate(crc, b)
	}
	for _, r := range ranges {
		add(r.Start)
		add(r.End)
	}
	for _, kv := range rows {
		add(kv.Key)
		add(kv.Value)
	}
	return crc
}

// ingestRanges replaces the content of each user range with rows
// (IngestAndExcise: keys absent from rows are deleted, the implicit deletes
// of DIRECT 4.1.4), checks that the ranges now read back exactly as rows,
// and records index (of term) as applied. The Digest does not change: a
// patch restores the logical rows the replica already accounted for.
//
// hold, if not nil, is called with the span and the user ranges around it
// that its excise cuts, just before the excise, and the function it returns
// once the excise is checked, with the ranges the excise lost: the caller
// refuses reads there meanwhile and keeps refusing them in what was lost
// (also returned in the ExciseLossError, for the caller to patch), so rows
// an excise loses are never read as absent. The span itself is held too:
// Pebble installs the excise (its version edit) before it publishes the
// ingested table's sequence number, and a read between the two sees the
// span's rows neither in the cut tables nor in the patch (kv demo read its
// separator row, which the patch carries back, as absent).
func (sm *StateMachine) IngestRanges(ranges []Range, rows []*kvpb.KeyValue, index, term uint64, hold func(around []Range) (release func(lost []Range))) error {
	if err := sm.Failed(); err != nil {
		return err
	}
	var lost *ExciseLossError
	for _, r := range ranges {
		var in []*kvpb.KeyValue
		for _, kv := range rows {
			if r.Contains(kv.Key) {
				in = append(in, kv)
			}
		}
		lo, hi := PebbleSpan(r.Start, r.End)
		next := sm.state
		next.Index, next.Term = index, term
		if err := sm.ingestSpan(lo, hi, in, &next, true, hold); err != nil {
			var el *ExciseLossError
			if !errors.As(err, &el) {
				return err
			}
			// The range is in; what the excise lost around it is patched
			// in turn (the caller's job).
			if lost == nil {
				lost = &ExciseLossError{Err: el.Err, Refused: []Range{}}
			}
			lost.Lost = append(lost.Lost, el.Lost...)
			lost.Refused = append(lost.Refused, el.refused()...)
		}
	}
	crashpoint.Hit("patch-applied")
	if err := sm.SetApplied(index, term); err != nil {
		return err
	}
	// Make the patch and its applied record durable now: a replayed patch
	// entry finds no one waiting for it and is skipped (the damage, if the
	// ingest had not happened, would be found again).
	if _, err := sm.FlushDurable(); err != nil {
		return err
	}
	if lost != nil {
		// Every range of a patch names the same damage around it once.
		lost.Lost = keyspan.Merge(lost.Lost)
		lost.Refused = keyspan.Merge(lost.Refused)
		return lost
	}
	return nil
}

// installState replaces every user row with rows (a rebuild from a peer's
// state at index, of term, whose Digest is d) and checks that the engine
// then holds exactly rows.
func (sm *StateMachine) InstallState(rows []*kvpb.KeyValue, index, term uint64, d Digest) error {
	if err := sm.Failed(); err != nil {
		return err
	}
	lo, hi := PebbleSpan(nil, nil)
	next := AppliedState{Index: index, Term: term, Digest: d}
	if err := sm.ingestSpan(lo, hi, rows, &next, false, nil); err != nil {
		return err
	}
	if err := sm.WriteApplied(sm.db, next); err != nil {
		return err
	}
	sm.setState(next)
	if _, err := sm.FlushDurable(); err != nil {
		return err
	}
	got, err := sm.ScanDigest(sm.db)
	if err != nil {
		return err
	}
	if !got.Same(d) && !d.Dirty {
		return base.CorruptionErrorf("kv: rebuilt state holds %v, its source had %v", got, d)
	}
	return nil
}

// scanDigest computes the Digest of every user row readable through rd.
func (sm *StateMachine) ScanDigest(rd pebble.Reader) (Digest, error) {
	var d Digest
	lo, hi := PebbleSpan(nil, nil)
	it, err := rd.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return Digest{}, Classify(err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		k, _ := FromUserKey(it.Key())
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return Digest{}, Classify(err)
		}
		d.add(k, v)
	}
	if err := it.Close(); err != nil {
		return Digest{}, Classify(err)
	}
	return d, nil
}

// ingestSpan replaces [lo, hi) with rows (IngestAndExcise) and checks that
// the excise kept the rows around the span. patching (a DIRECT patch, not a
// rebuild's install) also checks that the span reads back as rows, and
// turns damage met on the way into ranges to patch again (an
// ExciseLossError): a read of the span that fails its checksum returns the
// span, an excise that fails on damage in a table it cuts returns the span
// and the tables' parts around it.
//
// A span that is the whole user key space is excised with the applied
// record's two copies around it (the whole key space: every table goes
// whole, so the excise seeks in none, and damage anywhere cannot stop it),
// and the ingested table carries both copies of applied, the record the
// caller writes next anyway. (The excise of the user key space alone cut
// every table that also holds a copy, and one damaged block at either end
// of the user keys failed it every time: a replica that lost its whole
// shard asked for it again and again, its peers sending megabytes each.)
func (sm *StateMachine) ingestSpan(lo, hi []byte, rows []*kvpb.KeyValue, applied *AppliedState, patching bool, hold func([]Range) func([]Range)) (err error) {
	// No compaction runs while the excise is made and checked: the check
	// compares the tables before and after, and a compaction in between
	// (a cut table rewritten under another number) looked like a lost
	// remainder, and its rows, often most of the shard, were patched
	// again. A compaction still running after exciseHoldTimeout is not
	// waited for (the check then may name rows lost that were not: a
	// needless patch, never a silent loss).
	release, quiet := sm.gate.Hold(exciseHoldTimeout)
	defer release()
	exciseLo, exciseHi := lo, hi
	var record []byte
	if applied != nil && bytes.Equal(lo, UserPrefix) && bytes.Equal(hi, UserEnd) {
		exciseLo, exciseHi = wholeStart, wholeEnd
		record = applied.encode()
	}
	var paths []string
	if len(rows) > 0 || record != nil {
		path := sm.fs.PathJoin(sm.dir, fmt.Sprintf("patch-%06d.sst", sm.ingestSeq.Add(1)))
		f, err := sm.fs.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("kv: create patch sstable: %w", err)
		}
		w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sm.opts.MakeWriterOptions(0, sm.db.TableFormat()))
		if record != nil {
			if err := w.Set(appliedKey, record); err != nil {
				_ = w.Close()
				return fmt.Errorf("kv: write patch sstable: %w", err)
			}
		}
		for _, kv := range rows {
			if err := w.Set(UserKey(kv.Key), kv.Value); err != nil {
				_ = w.Close()
				return fmt.Errorf("kv: write patch sstable: %w", err)
			}
		}
		if record != nil {
			if err := w.Set(appliedKey2, record); err != nil {
				_ = w.Close()
				return fmt.Errorf("kv: write patch sstable: %w", err)
			}
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("kv: close patch sstable: %w", err)
		}
		paths = append(paths, path)
	}
	flushMark := sm.flushes.mark()
	before, err := sm.Tables()
	if err != nil {
		return err
	}
	// The rows outside the span that the excise must keep: those of the
	// tables it cuts. With no compaction running (quiet), the tables
	// before and after the excise (and those flushes wrote in between:
	// flushLog) say which remainders it kept (exciseLosses), without a
	// read. Otherwise a compaction may rewrite a cut table meanwhile,
	// which would look like a lost remainder: the rows around the span
	// are read before and after instead (the apply worker is the only
	// writer, and compactions do not change what reads return). That read
	// covered every table the excise cut, often the whole shard: under
	// persistent flips each one made new damage (a tenth of what the
	// replicas read in the kv-recovery-latency runs), and it evicted the
	// blocks the seek probe below had read, so that the excise's own
	// seeks read them again and could meet a fresh flip (and drop a
	// remainder).
	outerLo, outerHi := outerSpan(before, lo, hi)
	keptBefore, keptErr := uint32(0), errKeptNotRead
	if !quiet {
		keptBefore, keptErr = sm.keptCRC(outerLo, lo, hi, outerHi)
	}
	if patching {
		// Pebble finds the bounds of a cut table's remainders by seeking
		// in it next to the span, and a seek that meets a damaged block
		// finds "no key" and drops the whole remainder (v2.1.7 excise.go,
		// determineLeftTableBounds and determineRightTableBounds ignore
		// the iterator's error): the table's rows outside the span are
		// gone from the replica. Seek there first; if a block there is
		// damaged, do not excise: the span and the damaged blocks around
		// it are patched again as one range, whose excise then seeks in
		// healthy blocks. (Excising anyway lost whole remainders, often
		// the rest of the shard, on several replicas at once, whose
		// refused ranges then overlapped and no replica could patch
		// another: a shard unreadable for the rest of a run.)
		if err := sm.seekProbe(outerLo, lo, hi, outerHi); err != nil && base.IsCorruption(err) {
			if wLo, wHi, damaged, grew, derr := sm.damagedWhereSeeksFail(before, lo, hi, err); derr == nil && grew {
				lost := []Range{userRange(wLo, wHi)}
				if hold != nil {
					hold(lost)(damaged)
				}
				for _, p := range paths {
					_ = sm.fs.Remove(p)
				}
				return &ExciseLossError{Lost: lost, Refused: damaged, Err: fmt.Errorf("kv: excise of [%q, %q) not attempted: %w", lo, hi, err)}
			}
			// No damage next to the span in a table it cuts (a
			// transient flip, or damage in a table it does not cut,
			// where the excise does not seek): excise, and check what
			// it kept below.
		}
	}
	if hold != nil {
		around := append(userRanges(outerLo, lo, hi, outerHi), userRange(lo, hi))
		release := hold(around)
		defer func() {
			var keep []Range
			var el *ExciseLossError
			if errors.As(err, &el) {
				keep = el.refused()
			} else if err != nil {
				keep = around // an excise that failed: nothing known
			}
			release(keep)
		}()
	}
	crashpoint.Hit("patch-ingest")
	ingest := func() error {
		if sm.exciseFault != nil {
			if err := sm.exciseFault(lo, hi); err != nil {
				return err
			}
		}
		_, err := sm.db.IngestAndExcise(context.Background(), paths, nil, nil, pebble.KeyRange{Start: exciseLo, End: exciseHi})
		return err
	}
	if err := ingest(); err != nil {
		err = Classify(fmt.Errorf("kv: ingest and excise [%q, %q): %w", exciseLo, exciseHi, err))
		for _, p := range paths {
			_ = sm.fs.Remove(p) // not ingested: Pebble left it where it was
		}
		if patching && base.IsCorruption(err) {
			// The excise met damage in a table it cuts and nothing was
			// ingested. The span and the damaged blocks around it are
			// patched again as one range (its excise seeks in healthy
			// blocks); if the damage cannot be located, the span and the
			// tables' parts around it, whose excise takes the damaged
			// tables whole. Either instead of a rebuild of the whole
			// replica (which would need a peer with no damage at all,
			// and under persistent damage found none).
			wLo, wHi, damaged, grew, derr := sm.damagedWhereSeeksFail(before, lo, hi, err)
			if derr != nil || !grew {
				// The error names no block that IsolateBlocks finds
				// damaged: every cut table's nearest damaged runs.
				wLo, wHi, damaged, grew, derr = sm.damagedAround(before, lo, hi)
			}
			key := string(lo) + "\xff" + string(hi)
			switch {
			case derr == nil && grew:
				lost := []Range{userRange(wLo, wHi)}
				delete(sm.unlocated, key)
				return &ExciseLossError{Lost: lost, Refused: damaged, Err: err}
			case derr == nil && !sm.unlocated[key]:
				// Every data block of the cut tables verified: the
				// damage is gone (a flip in the excise's read that its
				// block no longer holds) or was never in a data block.
				// Nothing was excised: only the span, still refused,
				// is patched again, not every row of the tables it
				// cuts (often the whole shard). The same span failing
				// so again takes the tables along below.
				if sm.unlocated == nil || len(sm.unlocated) >= maxUnlocated {
					sm.unlocated = map[string]bool{}
				}
				sm.unlocated[key] = true
				return &ExciseLossError{Lost: []Range{userRange(lo, hi)}, Err: err}
			}
			delete(sm.unlocated, key)
			return &ExciseLossError{Lost: append(userRanges(outerLo, lo, hi, outerHi), userRange(lo, hi)), Err: err}
		}
		return err
	}
	delete(sm.unlocated, string(lo)+"\xff"+string(hi))
	// Which cut tables lost a remainder (the table is damaged where Pebble
	// sought the remainder's bound): their rows there are what to patch.
	after, err := sm.Tables()
	if err != nil {
		return err
	}
	flushed, complete := sm.flushes.since(flushMark)
	lostSpans := exciseLosses(append(before, flushed...), after, lo, hi)
	if !complete && keptErr != nil {
		// More flushes than flushLog keeps, and no rows read: what the
		// excise kept is unknown. Everything it cut is patched again
		// (needless, never a silent loss).
		lostSpans = nil
		for _, sp := range [][2][]byte{{maxBytes(outerLo, UserPrefix), lo}, {hi, minBytes(outerHi, UserEnd)}} {
			if bytes.Compare(sp[0], sp[1]) < 0 {
				lostSpans = append(lostSpans, sp)
			}
		}
	}
	loss := func(err error) error {
		var lost []Range
		for _, sp := range lostSpans {
			lost = append(lost, userRange(sp[0], sp[1]))
		}
		if len(lost) == 0 {
			// The rows changed and no table shows which: everything the
			// excise cut.
			lost = userRanges(outerLo, lo, hi, outerHi)
		}
		return &ExciseLossError{Lost: lost, Err: err}
	}
	// The span must read back as the patch: a read that fails its checksum
	// there (the new table damaged as soon as it was written, or read) is
	// damage like any other, and the span is patched again, still refused
	// meanwhile; a whole-replica rebuild for it would read the whole shard
	// from a peer and meet more damage on the way (a cascade: at UBER 1e-7
	// with persistent flips, two of three replicas rebuilding from each
	// other stopped a shard for the rest of the run).
	span := userRange(lo, hi)
	var spanErr error
	var spanLost []Range
	if patching {
		if sm.beforeReadBack != nil {
			sm.beforeReadBack(lo, hi)
		}
		spanLost, spanErr, err = sm.readBack(span, rows)
		if err != nil {
			return err
		}
	}
	withSpan := func(err error) error {
		if spanErr == nil {
			return err
		}
		if err == nil {
			return &ExciseLossError{Lost: spanLost, Err: spanErr}
		}
		var el *ExciseLossError
		if errors.As(err, &el) {
			el.Lost = append(el.Lost, spanLost...)
		}
		return err
	}
	if keptErr == nil {
		keptAfter, err := sm.keptCRC(outerLo, lo, hi, outerHi)
		switch {
		case err == nil && keptAfter != keptBefore:
			return withSpan(loss(base.CorruptionErrorf("kv: excise of [%q, %q) lost or changed rows outside the span", lo, hi)))
		case err == nil:
			return withSpan(nil)
		case !base.IsCorruption(err):
			return withSpan(loss(err))
		}
		// Damage elsewhere in the tables, met by this read only (the
		// read before found those blocks in the cache, or a flip is
		// transient): it is found and patched like any damage, and is no
		// sign that the excise lost rows. (It used to name every row the
		// excise cut, often the rest of the shard, as lost.) The cut
		// tables must have kept their remainders, as below.
	}
	// The rows around the span do not all read back (other damage): each
	// cut table must have kept its remainders.
	if len(lostSpans) > 0 {
		return withSpan(loss(base.CorruptionErrorf("kv: excise of [%q, %q) lost the remainders %q of the tables it cut", lo, hi, lostSpans)))
	}
	return withSpan(nil)
}

// readBack checks that the patched range span reads back as rows. A read
// that fails its checksum is damage like any other (the new table damaged
// as soon as it was written, or as it was read): lost is then what must be
// patched again, the key spans of the damaged data blocks (IsolateBlocks
// of every table holding rows of span, clipped to it, plus any part of
// the rest that then fails its checksum too), or the whole span where a
// table's index or metadata cannot be read, with damage the error that
// found it; none if a second read meets no damage (a transient flip) and
// every row reads back as the patch. Rows that verify and differ are an
// assertion failure, not damage. The rest of the span is in and settled:
// naming the whole span lost for one damaged block (as it did) asked for
// it again and again once it was large, since at UBER 1e-7 a patch of a
// whole shard meets a flip in almost every read back (DIRECT's smallest
// granularity, section 4.1.3, applies to the patch's own table too). err
// is a failure that is not damage (the caller's to report).
func (sm *StateMachine) readBack(span Range, rows []*kvpb.KeyValue) (lost []Range, damage, err error) {
	got, _, rerr := Scan(sm.db, span.Start, span.End, 0)
	switch {
	case rerr == nil && RowsCRC(nil, got) == RowsCRC(nil, rows):
		return nil, nil, nil
	case rerr == nil:
		// Every block read verified, yet the rows differ: not damage.
		return nil, nil, base.AssertionFailedf("kv: patched range %s reads back %d rows, patch had %d", span, len(got), len(rows))
	case !base.IsCorruption(rerr):
		return nil, nil, fmt.Errorf("kv: read back patched range %s: %w", span, rerr)
	}
	damage = fmt.Errorf("kv: read back patched range %s: %w", span, rerr)
	located, ok := sm.damagedWithin(span)
	if !ok {
		return []Range{span}, damage, nil
	}
	// Outside the damaged blocks the rows must read back as the patch.
	for _, gap := range keyspan.Subtract(span, located) {
		got, _, gerr := Scan(sm.db, gap.Start, gap.End, 0)
		var want []*kvpb.KeyValue
		for _, kv := range rows {
			if gap.Contains(kv.Key) {
				want = append(want, kv)
			}
		}
		switch {
		case gerr != nil && base.IsCorruption(gerr):
			located = append(located, gap) // damage found since: not located
		case gerr != nil:
			return nil, nil, fmt.Errorf("kv: read back patched range %s: %w", gap, gerr)
		case RowsCRC(nil, got) != RowsCRC(nil, want):
			return nil, nil, base.AssertionFailedf("kv: patched range %s reads back %d rows, patch had %d", gap, len(got), len(want))
		}
	}
	if len(located) == 0 {
		// A flip no block holds any more (transient): every row read
		// back as the patch.
		return nil, nil, nil
	}
	return keyspan.Merge(located), damage, nil
}

// damagedWithin is the key spans, within span, of the damaged data blocks
// of the live tables that hold rows of span (IsolateBlocks, clipped to
// each table's bounds and to span). It reports false if a table's index or
// metadata cannot be read (the damage cannot be located).
func (sm *StateMachine) damagedWithin(span Range) ([]Range, bool) {
	tables, err := sm.Tables()
	if err != nil {
		return nil, false
	}
	lo, hi := PebbleSpan(span.Start, span.End)
	runs, err := sm.damagedRuns(tables, lo, hi)
	if err != nil {
		return nil, false
	}
	var out []Range
	for _, table := range runs {
		for _, r := range table {
			if start, end := maxBytes(r[0], lo), minBytes(r[1], hi); bytes.Compare(start, end) < 0 {
				out = append(out, userRange(start, end))
			}
		}
	}
	return out, true
}

// damagedRuns is, for each live table that overlaps [lo, hi) (Pebble
// keys), the runs of its damaged data blocks (IsolateBlocks of its backing
// file, read once per file) clipped to the table's bounds, [start, end).
// An error means a table's index or metadata cannot be read.
func (sm *StateMachine) damagedRuns(tables []tableBounds, lo, hi []byte) ([][][2][]byte, error) {
	byBacking := map[uint64][]DamagedSpan{}
	var out [][][2][]byte
	for _, m := range tables {
		if bytes.Compare(m.largest, lo) < 0 || bytes.Compare(m.smallest, hi) >= 0 {
			continue
		}
		spans, err := sm.isolateBacking(byBacking, m.backing)
		if err != nil {
			return nil, err
		}
		var runs [][2][]byte
		for _, sp := range spans {
			if r, ok := clipRun(sp, m); ok { // else outside this table (cut off earlier)
				runs = append(runs, r)
			}
		}
		out = append(out, runs)
	}
	return out, nil
}

// isolateBacking returns IsolateBlocks of the backing file numbered backing,
// remembered in cache.
func (sm *StateMachine) isolateBacking(cache map[uint64][]DamagedSpan, backing uint64) ([]DamagedSpan, error) {
	if spans, seen := cache[backing]; seen {
		return spans, nil
	}
	path := sm.fs.PathJoin(sm.dir, fmt.Sprintf("%06d.sst", backing))
	spans, _, err := IsolateBlocks(sm.fs, path, sm.opts.MakeReaderOptions(), nil, nil)
	if err != nil {
		return nil, err
	}
	cache[backing] = spans
	return spans, nil
}

// clipRun is the part of the damaged run sp (of m's backing file) within
// the live table m; false if none.
func clipRun(sp DamagedSpan, m tableBounds) ([2][]byte, bool) {
	start, end := maxBytes(sp.Start, m.smallest), append(bytes.Clone(m.largest), 0)
	if sp.End != nil {
		end = minBytes(sp.End, end)
	}
	return [2][]byte{start, end}, bytes.Compare(start, end) < 0
}

// grownSpan is what damagedAround and damagedWhereSeeksFail return for a
// span [lo, hi) grown to [newLo, newHi) over runs: the damaged part (the
// span and the runs within the result, user ranges) and whether it grew.
func grownSpan(lo, hi, newLo, newHi []byte, runs [][2][]byte) ([]byte, []byte, []Range, bool, error) {
	damaged := []Range{userRange(lo, hi)}
	for _, r := range runs {
		start, end := maxBytes(r[0], newLo), minBytes(r[1], newHi)
		if bytes.Compare(start, end) < 0 {
			damaged = append(damaged, userRange(start, end))
		}
	}
	return newLo, newHi, keyspan.Merge(damaged), bytes.Compare(newLo, lo) < 0 || bytes.Compare(newHi, hi) > 0, nil
}

// maxUnlocated bounds StateMachine.unlocated.
const maxUnlocated = 64

// exciseHoldTimeout bounds how long an ingest waits for running
// compactions to end (a shard's compactions take tens of milliseconds).
const exciseHoldTimeout = 2 * time.Second

// errKeptNotRead stands for the rows around a span that ingestSpan did not
// read (no compaction ran: the tables say what the excise kept).
var errKeptNotRead = errors.New("kv: rows around the span not read")

// seekProbe seeks, through the DB, where an excise of [lo, hi) seeks for
// the bounds of the tables it cuts (the last key below lo, the first at or
// above hi), reading the blocks there; it returns the error a damaged one
// gives (Pebble's excise would ignore it and drop the remainder).
func (sm *StateMachine) seekProbe(outerLo, lo, hi, outerHi []byte) error {
	it, err := sm.db.NewIter(&pebble.IterOptions{LowerBound: outerLo, UpperBound: outerHi})
	if err != nil {
		return Classify(err)
	}
	it.SeekLT(lo)
	if err := it.Error(); err != nil {
		it.Close()
		return Classify(err)
	}
	it.SeekGE(hi)
	return Classify(it.Close())
}

// damagedAround is the range a patch of [lo, hi) must take along so that
// its excise seeks only in healthy blocks: for each live table the excise
// cuts, the run of damaged data blocks (IsolateBlocks) nearest below lo
// and the one nearest at or above hi are where Pebble seeks for the
// table's remainders, if they are damaged; the result is the smallest
// Pebble span holding [lo, hi) and those runs (clipped to the tables'
// bounds). One contiguous span: two separate ones would each seek in the
// other's damage. It reports false if the span would not grow (no damage
// next to it in a cut table: the excise goes ahead). damaged is what of
// the result the replica cannot read: [lo, hi) and the damaged runs of the
// cut tables within the result (user ranges); the rest of it holds rows
// intact (nothing was excised), which the replica keeps serving, to its
// clients and to its peers' patches, until the patch of the result
// replaces them with the same rows. (Refusing the whole result kept
// healthy rows from peers whose own results overlapped it: three replicas
// each refused what the others asked for, and the shard stalled.) An
// error means a table's index or metadata cannot be read.
func (sm *StateMachine) damagedAround(tables []tableBounds, lo, hi []byte) (newLo, newHi []byte, damaged []Range, grew bool, err error) {
	perTable, err := sm.damagedRuns(tables, lo, hi)
	if err != nil {
		return nil, nil, nil, false, err
	}
	newLo, newHi = lo, hi
	var runs [][2][]byte // every damaged run of a cut table, clipped to it
	for _, table := range perTable {
		var below, above []byte // the nearest runs' outer edges
		for _, r := range table {
			start, end := r[0], r[1]
			runs = append(runs, r)
			if bytes.Compare(start, lo) < 0 && (below == nil || bytes.Compare(start, below) > 0) {
				below = start
			}
			if bytes.Compare(end, hi) > 0 && (above == nil || bytes.Compare(end, above) < 0) {
				above = end
			}
		}
		if below != nil && bytes.Compare(below, newLo) < 0 {
			newLo = below
		}
		if above != nil && bytes.Compare(above, newHi) > 0 {
			newHi = above
		}
	}
	newLo, newHi = maxBytes(newLo, UserPrefix), minBytes(newHi, UserEnd)
	return grownSpan(lo, hi, newLo, newHi, runs)
}

// damagedWhereSeeksFail is damagedAround for the runs an excise of [lo, hi)
// really seeks into: starting from hit, the corruption error of a seek at
// the span's edges (it names the backing file and the block), it grows the
// span over the damaged run holding that block (IsolateBlocks of that file,
// clipped to its live tables), seeks again at the grown span's edges
// (seekProbe), and so on until the seeks meet no damage, at most
// maxSeekGrowth times (then every cut table's nearest runs: damagedAround).
// It reports false if the block hit names is not damaged on disk (a
// transient flip) or names no block: the excise goes ahead.
//
// damagedAround alone grew the span to the nearest damaged run of every
// table the excise cut, however far from the span: under persistent flips
// at UBER 1e-7 every table had one somewhere, so a patch next to one
// damaged block grew to the farthest of them, patch after patch (spans of
// 3-5 MB, most of a shard, in the kv-recovery-latency runs), while Pebble
// seeks only next to the span (the last key below lo, the first at or
// above hi, in each cut table).
func (sm *StateMachine) damagedWhereSeeksFail(tables []tableBounds, lo, hi []byte, hit error) (newLo, newHi []byte, damaged []Range, grew bool, err error) {
	newLo, newHi = lo, hi
	isolated := map[uint64][]DamagedSpan{}
	var runs [][2][]byte
	for step := 0; hit != nil; step++ {
		if step == maxSeekGrowth {
			return sm.damagedAround(tables, lo, hi)
		}
		file, h, ok := corruptTableBlock(hit)
		if !ok {
			break
		}
		spans, err := sm.isolateBacking(isolated, file)
		if err != nil {
			return nil, nil, nil, false, err
		}
		var run *DamagedSpan
		for i := range spans {
			if slices.Contains(spans[i].Offsets, h.Offset) {
				run = &spans[i]
			}
		}
		if run == nil {
			break // not damaged on disk: a transient flip
		}
		moved := false
		for _, m := range tables {
			if m.backing != file || bytes.Compare(m.largest, newLo) < 0 || bytes.Compare(m.smallest, newHi) >= 0 {
				continue // another file, or a table the excise does not cut (it seeks in none)
			}
			r, ok := clipRun(*run, m)
			if !ok {
				continue // the run is outside this table of the file
			}
			runs = append(runs, r)
			start, end := r[0], r[1]
			if bytes.Compare(start, newLo) < 0 {
				newLo, moved = start, true
			}
			if bytes.Compare(end, newHi) > 0 {
				newHi, moved = end, true
			}
		}
		newLo, newHi = maxBytes(newLo, UserPrefix), minBytes(newHi, UserEnd)
		if !moved {
			break // the seek failed inside the span: not at an edge
		}
		outerLo, outerHi := outerSpan(tables, newLo, newHi)
		if hit = sm.seekProbe(outerLo, newLo, newHi, outerHi); hit != nil && !base.IsCorruption(hit) {
			return nil, nil, nil, false, hit
		}
	}
	return grownSpan(lo, hi, newLo, newHi, runs)
}

// maxSeekGrowth bounds how many damaged runs damagedWhereSeeksFail grows a
// span over, one per seek that fails.
const maxSeekGrowth = 8

// outerSpan is the span of the tables an excise of [lo, hi) cuts (Pebble
// keys, within the user key space).
func outerSpan(tables []tableBounds, lo, hi []byte) (outerLo, outerHi []byte) {
	outerLo, outerHi = lo, hi
	for _, m := range tables {
		if bytes.Compare(m.largest, lo) < 0 || bytes.Compare(m.smallest, hi) >= 0 {
			continue
		}
		if bytes.Compare(m.smallest, outerLo) < 0 {
			outerLo = m.smallest
		}
		if end := append(bytes.Clone(m.largest), 0); bytes.Compare(end, outerHi) > 0 {
			outerHi = end
		}
	}
	return maxBytes(outerLo, UserPrefix), minBytes(outerHi, UserEnd)
}

// OuterSpan is the user range of the rows an excise of rg may cut: the
// span of the tables that overlap it. A replica refuses reads there while
// the excise runs, so rows an excise loses are never read as absent.
func (sm *StateMachine) OuterSpan(rg Range) (Range, error) {
	tables, err := sm.Tables()
	if err != nil {
		return Range{}, err
	}
	lo, hi := PebbleSpan(rg.Start, rg.End)
	outerLo, outerHi := outerSpan(tables, lo, hi)
	return userRange(outerLo, outerHi), nil
}

// ExciseLossError is IngestRanges' answer when an excise cut a table whose
// remainder it could not keep (the table is damaged where Pebble seeks
// for the remainder's bound): the patch itself is in, but the rows of
// Lost may be gone and must be patched in turn (never served as absent).
type ExciseLossError struct {
	Lost []Range
	// Refused, if not nil, is what of Lost reads must not see (the rest
	// of Lost holds the replica's rows intact, patched only so that an
	// excise seeks in healthy blocks); nil: all of Lost.
	Refused []Range
	Err     error
}

// refused is what of Lost the replica refuses to read until its patch.
func (e *ExciseLossError) refused() []Range {
	if e.Refused != nil {
		return e.Refused
	}
	return e.Lost
}

func (e *ExciseLossError) Error() string {
	return fmt.Sprintf("%v (rows of %v to patch again)", e.Err, e.Lost)
}

func (e *ExciseLossError) Unwrap() error { return e.Err }

// userRanges converts the Pebble spans [outerLo, lo) and [hi, outerHi) to
// user ranges, leaving out empty ones.
func userRanges(outerLo, lo, hi, outerHi []byte) []Range {
	var out []Range
	if bytes.Compare(outerLo, lo) < 0 {
		out = append(out, userRange(outerLo, lo))
	}
	if bytes.Compare(hi, outerHi) < 0 {
		out = append(out, userRange(hi, outerHi))
	}
	return out
}

// userRange converts a Pebble span within the user key space to a user
// range (an end at or past UserEnd is unbounded).
func userRange(lo, hi []byte) Range {
	var r Range
	if k, ok := FromUserKey(lo); ok {
		r.Start = bytes.Clone(k)
	}
	if bytes.Compare(hi, UserEnd) < 0 {
		if k, ok := FromUserKey(hi); ok {
			r.End = bytes.Clone(k)
		}
	}
	return r
}

// keptCRC is the CRC32C of the rows in [outerLo, lo) and [hi, outerHi)
// (Pebble keys).
func (sm *StateMachine) keptCRC(outerLo, lo, hi, outerHi []byte) (uint32, error) {
	var crc uint32
	for _, span := range [][2][]byte{{outerLo, lo}, {hi, outerHi}} {
		if bytes.Compare(span[0], span[1]) >= 0 {
			continue
		}
		it, err := sm.db.NewIter(&pebble.IterOptions{LowerBound: span[0], UpperBound: span[1]})
		if err != nil {
			return 0, Classify(err)
		}
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				it.Close()
				return 0, Classify(err)
			}
			crc = base.CRC32CUpdate(crc, it.Key())
			crc = base.CRC32CUpdate(crc, v)
		}
		if err := it.Close(); err != nil {
			return 0, Classify(err)
		}
	}
	return crc, nil
}

func maxBytes(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

func minBytes(a, b []byte) []byte {
	if bytes.Compare(a, b) <= 0 {
		return a
	}
	return b
}

// tableBounds is one live sstable (virtual or not) of the state machine.
type tableBounds struct {
	backing           uint64
	smallest, largest []byte
}

func (sm *StateMachine) Tables() ([]tableBounds, error) {
	levels, err := sm.db.SSTables()
	if err != nil {
		return nil, Classify(err)
	}
	var out []tableBounds
	for _, level := range levels {
		for _, t := range level {
			out = append(out, tableBounds{backing: uint64(t.BackingSSTNum),
				smallest: bytes.Clone(t.Smallest.UserKey), largest: bytes.Clone(t.Largest.UserKey)})
		}
	}
	return out, nil
}

// checkExcise verifies that excising [lo, hi) kept every table's data
// outside the span. A table whose smallest key is below lo must survive as a
// left remainder starting at that key, one whose largest key is at or above
// hi as a right remainder ending at it.
//
// NB: Pebble computes the remainders' bounds by seeking in the table, and a
// seek that runs into another damaged block finds "no key" and drops the
// whole remainder (excise.go, determineLeftTableBounds ignores the
// iterator's error). The damage we repair never sits at the span's edges
// (IsolateCorruption bounds it by healthy blocks), but a second damaged
// block, or damage in another table overlapping the span, can. A failed
// check is reported as corruption; the caller rebuilds the replica rather
// than keep a state that silently lost rows. ingestSpan uses it only when
// the rows around the span cannot all be read (its logical check, which a
// compaction in between cannot fool, needs them); a compaction that
// rewrote a table in between then fails the check: a needless, safe
// rebuild.
// exciseLosses lists the remainders (Pebble spans) that tables cut by an
// excise of [lo, hi) lost: the part below lo or at and above hi of a
// table that no table of the same backing file keeps afterwards. Parts
// outside the user key space hold only the applied record, which the
// caller writes again.
func exciseLosses(before, after []tableBounds, lo, hi []byte) [][2][]byte {
	var out [][2][]byte
	for _, m := range before {
		if bytes.Compare(m.largest, lo) < 0 || bytes.Compare(m.smallest, hi) >= 0 {
			continue
		}
		if bytes.Compare(m.smallest, lo) < 0 && bytes.Compare(lo, UserPrefix) > 0 && !hasTable(after, m.backing, m.smallest, nil) {
			out = append(out, [2][]byte{maxBytes(m.smallest, UserPrefix), lo})
		}
		if bytes.Compare(m.largest, hi) >= 0 && bytes.Compare(hi, UserEnd) < 0 && !hasTable(after, m.backing, nil, m.largest) {
			out = append(out, [2][]byte{hi, minBytes(append(bytes.Clone(m.largest), 0), UserEnd)})
		}
	}
	return out
}

func checkExcise(before, after []tableBounds, lo, hi []byte) error {
	for _, m := range before {
		if bytes.Compare(m.largest, lo) < 0 || bytes.Compare(m.smallest, hi) >= 0 {
			continue // outside the span: untouched
		}
		// A part outside the user key space holds only the applied record,
		// which the caller writes again after the ingest.
		if bytes.Compare(m.smallest, lo) < 0 && bytes.Compare(lo, UserPrefix) > 0 && !hasTable(after, m.backing, m.smallest, nil) {
			return base.CorruptionErrorf("kv: excise of [%q, %q) lost the part of sstable %06d below the span", lo, hi, m.backing)
		}
		if bytes.Compare(m.largest, hi) >= 0 && bytes.Compare(hi, UserEnd) < 0 && !hasTable(after, m.backing, nil, m.largest) {
			return base.CorruptionErrorf("kv: excise of [%q, %q) lost the part of sstable %06d above the span", lo, hi, m.backing)
		}
	}
	return nil
}

func hasTable(tables []tableBounds, backing uint64, smallest, largest []byte) bool {
	for _, t := range tables {
		if t.backing == backing && (smallest == nil || bytes.Equal(t.smallest, smallest)) &&
			(largest == nil || bytes.Equal(t.largest, largest)) {
			return true
		}
	}
	return false
}

// ReadApplied reads the applied record (zero for a new state machine):
// the newer of its two copies that reads back and verifies.
func ReadApplied(rd pebble.Reader) (AppliedState, error) {
	var best AppliedState
	var firstErr error
	found, absent := false, 0
	for _, k := range [][]byte{appliedKey, appliedKey2} {
		var st AppliedState
		var err error
		for attempt := 0; attempt < ReadAttempts; attempt++ {
			st, err = readAppliedCopy(rd, k)
			if !base.IsCorruption(err) {
				break
			}
		}
		switch {
		case errors.Is(err, pebble.ErrNotFound):
			absent++
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
		default:
			if !found || st.Index > best.Index {
				best, found = st, true
			}
		}
	}
	if !found && absent < 2 {
		return AppliedState{}, firstErr // a copy exists but none reads back
	}
	return best, nil
}

func readAppliedCopy(rd pebble.Reader, k []byte) (AppliedState, error) {
	v, closer, err := rd.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return AppliedState{}, err
	}
	if err != nil {
		return AppliedState{}, Classify(err)
	}
	defer closer.Close()
	return DecodeAppliedState(v)
}
