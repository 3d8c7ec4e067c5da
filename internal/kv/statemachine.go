package kv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stateMachine is one replica's Pebble instance. The apply worker is its
// only writer; readers use the DB or a snapshot.
type stateMachine struct {
	fs   vfs.FS
	dir  string
	opts *pebble.Options
	db   *pebble.DB
	// ingestSeq names patch sstables uniquely.
	ingestSeq atomic.Uint64
}

// quietLogger drops Pebble's informational logging; errors reach us
// through returned errors and the event listener.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble fatal: "+format, args...))
}

// pebbleOptions is the configuration of every replica's Pebble.
// The caller owns cache (may be nil) and unrefs it after pebble.Open.
func pebbleOptions(fs vfs.FS, cache *pebble.Cache, memTableBytes int64, onCorruption func(pebble.DataCorruptionInfo)) *pebble.Options {
	if onCorruption == nil {
		onCorruption = func(pebble.DataCorruptionInfo) {}
	}
	opts := &pebble.Options{
		FS:                 fs,
		MemTableSize:       uint64(memTableBytes),
		FormatMajorVersion: pebble.FormatNewest,
		Cache:              cache,
		Logger:             quietLogger{},
		EventListener: &pebble.EventListener{
			DataCorruption:  onCorruption,
			BackgroundError: func(error) {},
		},
	}
	opts.EnsureDefaults()
	return opts
}

// SSTReaderOptions are the sstable reader options matching the replicas'
// Pebble configuration (for internal/sdfvfs.SSTMetadataRanges).
func SSTReaderOptions() sstable.ReaderOptions {
	return pebbleOptions(vfs.NewMem(), nil, int64(4*base.MiB), nil).MakeReaderOptions()
}

func openStateMachine(fs vfs.FS, dir string, cacheBytes, memTableBytes int64, onCorruption func(pebble.DataCorruptionInfo)) (*stateMachine, error) {
	cache := pebble.NewCache(cacheBytes)
	defer cache.Unref()
	opts := pebbleOptions(fs, cache, memTableBytes, onCorruption)
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, classify(fmt.Errorf("kv: open pebble in %s: %w", dir, err))
	}
	return &stateMachine{fs: fs, dir: dir, opts: opts, db: db}, nil
}

// classify marks Pebble corruption errors with flashmend's corruption class.
func classify(err error) error {
	if err != nil && pebble.IsCorruptionError(err) && !base.IsCorruption(err) {
		return base.CorruptionErrorf("%w", err)
	}
	return err
}

func (sm *stateMachine) close() error { return sm.db.Close() }

func (sm *stateMachine) appliedIndex() (uint64, error) { return readApplied(sm.db) }

func appliedValue(index uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], index)
	return b[:]
}

func (sm *stateMachine) setApplied(index uint64) error {
	return classify(sm.db.Set(appliedKey, appliedValue(index), pebble.NoSync))
}

// errConditionFailed is the apply-time outcome of a failed condition or scan
// validation; it is deterministic across replicas.
var errConditionFailed = errors.New("condition failed")

// applyWrite applies b at index atomically with the applied index. A failed
// condition applies nothing but the index (and returns errConditionFailed);
// any other error means this replica could not evaluate the entry.
func (sm *stateMachine) applyWrite(index uint64, b *kvpb.WriteBatch) error {
	ok, err := sm.check(b)
	if err != nil {
		return err
	}
	batch := sm.db.NewBatch()
	defer batch.Close()
	if ok {
		for _, op := range b.Ops {
			switch op.Kind {
			case kvpb.Op_PUT:
				_ = batch.Set(userKey(op.Key), op.Value, nil)
			case kvpb.Op_DELETE:
				_ = batch.Delete(userKey(op.Key), nil)
			}
		}
	}
	_ = batch.Set(appliedKey, appliedValue(index), nil)
	if err := batch.Commit(pebble.NoSync); err != nil {
		return classify(err)
	}
	if !ok {
		return errConditionFailed
	}
	return nil
}

func (sm *stateMachine) check(b *kvpb.WriteBatch) (bool, error) {
	for _, c := range b.Conditions {
		v, found, err := get(sm.db, c.Key)
		if err != nil {
			return false, err
		}
		if found != c.Exists || (found && !bytes.Equal(v, c.Value)) {
			return false, nil
		}
	}
	for _, s := range b.Scans {
		rows, _, err := scan(sm.db, s.Start, s.End, int(s.Limit))
		if err != nil {
			return false, err
		}
		if rowsCRC(nil, rows) != s.Crc {
			return false, nil
		}
	}
	return true, nil
}

// readAttempts bounds the reads of one key, or of one scan position, that
// fail as corruption before the error is returned. Pebble never caches a
// block that fails its checksum, so each attempt reads the block from the
// file again: a transient flip (a bit that flipped on the way, not in the
// stored page) is gone on the next attempt, while damage that persists
// fails every attempt and is returned, never as data (MISSION.md,
// "re-read before repairing"). Every failed attempt is also reported to
// the replica's DataCorruption listener, which tells the two apart.
const readAttempts = 3

// get reads a user key from r (the DB or a snapshot), re-reading on
// corruption (readAttempts).
func get(r pebble.Reader, key []byte) (v []byte, found bool, err error) {
	for attempt := 0; attempt < readAttempts; attempt++ {
		v, found, err = getOnce(r, key)
		if !base.IsCorruption(err) {
			return v, found, err
		}
	}
	return nil, false, err
}

func getOnce(r pebble.Reader, key []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(userKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, classify(err)
	}
	out := bytes.Clone(v)
	closer.Close()
	return out, true, nil
}

// scan reads up to limit user rows of [start, end) from r; more reports
// whether rows remain. limit <= 0 means unlimited. A read that fails as
// corruption is resumed, with a new iterator, just past the last row read;
// readAttempts consecutive failures without progress return the error.
func scan(r pebble.Reader, start, end []byte, limit int) (rows []*kvpb.KeyValue, more bool, err error) {
	from := start
	for failures := 0; ; {
		want := 0
		if limit > 0 {
			want = limit - len(rows)
			if want <= 0 {
				// The rows are all in; only "more" is left to learn.
				next, _, err := scanOnce(r, from, end, 1)
				if err == nil {
					return rows, len(next) > 0, nil
				}
				if !base.IsCorruption(err) || failures+1 >= readAttempts {
					return nil, false, err
				}
				failures++
				continue
			}
		}
		part, more, err := scanOnce(r, from, end, want)
		rows = append(rows, part...)
		if err == nil {
			return rows, more, nil
		}
		if !base.IsCorruption(err) {
			return nil, false, err
		}
		if len(part) > 0 {
			failures = 0
			from = append(bytes.Clone(part[len(part)-1].Key), 0)
			continue
		}
		if failures++; failures >= readAttempts {
			return nil, false, err
		}
	}
}

// scanOnce is one iterator's pass of scan. On error it returns the rows
// read before the error with it.
func scanOnce(r pebble.Reader, start, end []byte, limit int) (rows []*kvpb.KeyValue, more bool, err error) {
	lo, hi := pebbleSpan(start, end)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, false, classify(err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		if limit > 0 && len(rows) == limit {
			more = true
			break
		}
		k, _ := fromUserKey(it.Key())
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return rows, false, classify(err)
		}
		rows = append(rows, &kvpb.KeyValue{Key: bytes.Clone(k), Value: bytes.Clone(v)})
	}
	if err := it.Close(); err != nil {
		return rows, false, classify(err)
	}
	return rows, more, nil
}

// rowsCRC is the CRC32C over ranges and rows (length-prefixed), the
// end-to-end checksum of patches, state transfers and scan validation.
func rowsCRC(ranges []*kvpb.KeyRange, rows []*kvpb.KeyValue) uint32 {
	var crc uint32
	var lenBuf [binary.MaxVarintLen64]byte
	add := func(b []byte) {
		n := binary.PutUvarint(lenBuf[:], uint64(len(b)))
		crc = crc32.Update(crc, castagnoli, lenBuf[:n])
		crc = crc32.Update(crc, castagnoli, b)
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

// contentCRC is the checksum of every user row, in order.
func (sm *stateMachine) contentCRC() (uint32, int, error) {
	rows, _, err := scan(sm.db, nil, nil, 0)
	if err != nil {
		return 0, 0, err
	}
	return rowsCRC(nil, rows), len(rows), nil
}

// ingestRanges replaces the content of each user range with rows
// (IngestAndExcise: keys absent from rows are deleted, the implicit deletes
// of DIRECT 4.1.4) and records index as applied.
func (sm *stateMachine) ingestRanges(ranges []Range, rows []*kvpb.KeyValue, index uint64) error {
	for _, r := range ranges {
		var in []*kvpb.KeyValue
		for _, kv := range rows {
			if r.Contains(kv.Key) {
				in = append(in, kv)
			}
		}
		lo, hi := pebbleSpan(r.Start, r.End)
		if err := sm.ingestSpan(lo, hi, in); err != nil {
			return err
		}
	}
	return sm.setApplied(index)
}

func (sm *stateMachine) ingestSpan(lo, hi []byte, rows []*kvpb.KeyValue) error {
	var paths []string
	if len(rows) > 0 {
		path := sm.fs.PathJoin(sm.dir, fmt.Sprintf("patch-%06d.sst", sm.ingestSeq.Add(1)))
		f, err := sm.fs.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("kv: create patch sstable: %w", err)
		}
		w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sm.opts.MakeWriterOptions(0, sm.db.TableFormat()))
		for _, kv := range rows {
			if err := w.Set(userKey(kv.Key), kv.Value); err != nil {
				_ = w.Close()
				return fmt.Errorf("kv: write patch sstable: %w", err)
			}
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("kv: close patch sstable: %w", err)
		}
		paths = append(paths, path)
	}
	before, err := sm.tables()
	if err != nil {
		return err
	}
	if _, err := sm.db.IngestAndExcise(context.Background(), paths, nil, nil, pebble.KeyRange{Start: lo, End: hi}); err != nil {
		return classify(fmt.Errorf("kv: ingest and excise [%q, %q): %w", lo, hi, err))
	}
	after, err := sm.tables()
	if err != nil {
		return err
	}
	return checkExcise(before, after, lo, hi)
}

// tableBounds is one live sstable (virtual or not) of the state machine.
type tableBounds struct {
	backing           uint64
	smallest, largest []byte
}

func (sm *stateMachine) tables() ([]tableBounds, error) {
	levels, err := sm.db.SSTables()
	if err != nil {
		return nil, classify(err)
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
// (isolateCorruption bounds it by healthy blocks), but a second damaged
// block, or damage in another table overlapping the span, can. A failed
// check is reported as corruption; the caller rebuilds the replica rather
// than keep a state that silently lost rows. A compaction that rewrote a
// table in between also fails the check: a needless, safe rebuild.
func checkExcise(before, after []tableBounds, lo, hi []byte) error {
	for _, m := range before {
		if bytes.Compare(m.largest, lo) < 0 || bytes.Compare(m.smallest, hi) >= 0 {
			continue // outside the span: untouched
		}
		if bytes.Compare(m.smallest, lo) < 0 && !hasTable(after, m.backing, m.smallest, nil) {
			return base.CorruptionErrorf("kv: excise of [%q, %q) lost the part of sstable %06d below the span", lo, hi, m.backing)
		}
		if bytes.Compare(m.largest, hi) >= 0 && !hasTable(after, m.backing, nil, m.largest) {
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
