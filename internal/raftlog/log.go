package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
)

// Options configures a Log. Zero values take the defaults.
type Options struct {
	// FS holds the log files. Required.
	FS vfs.FS
	// Dir is the log directory. Required.
	Dir string
	// RewriteThresholdBytes: when the current generation grows past this, the
	// live state is rewritten into a new generation. Default 16 MiB.
	RewriteThresholdBytes int64
	// MaxRecordBytes bounds one record (a Ready's entries and snapshot).
	// Default 256 MiB, at most 1 GiB.
	MaxRecordBytes int
}

func (o *Options) validate() error {
	if o.FS == nil {
		return base.InvalidArgumentf("raftlog: Options.FS is nil")
	}
	if o.Dir == "" {
		return base.InvalidArgumentf("raftlog: Options.Dir is empty")
	}
	if o.RewriteThresholdBytes == 0 {
		o.RewriteThresholdBytes = int64(16 * base.MiB)
	}
	if o.RewriteThresholdBytes < 4096 {
		return base.InvalidArgumentf("raftlog: RewriteThresholdBytes %d below 4096", o.RewriteThresholdBytes)
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = int(256 * base.MiB)
	}
	if o.MaxRecordBytes < 1024 || o.MaxRecordBytes > int(base.GiB) {
		return base.InvalidArgumentf("raftlog: MaxRecordBytes %d outside [1KiB, 1GiB]", o.MaxRecordBytes)
	}
	return nil
}

// Stats counts what the log found and did.
type Stats struct {
	// RecordsRepaired counts records whose one copy did not verify and were
	// read from the other copy (at Open).
	RecordsRepaired int
	// TornTailBytes is how many bytes of a torn tail Open dropped.
	TornTailBytes int64
	// Generation is the current file generation.
	Generation uint64
	// SizeBytes is the size of one copy of the current generation.
	SizeBytes int64
	// Rewrites counts generations written by this Log.
	Rewrites int
}

func (s Stats) String() string {
	return fmt.Sprintf("gen=%d size=%dB repaired=%d torn=%dB rewrites=%d",
		s.Generation, s.SizeBytes, s.RecordsRepaired, s.TornTailBytes, s.Rewrites)
}

// Log is a durable raft log with every record written twice. It implements
// raft.Storage. It is safe for concurrent use.
type Log struct {
	opts Options

	mu    sync.Mutex
	st    *state
	gen   uint64
	files [2]vfs.File
	size  int64
	stats Stats
	// failed is set after a failed write: the files are in an unknown state
	// and the log refuses further use.
	failed error
}

var _ raft.Storage = (*Log)(nil)

const filePrefix = "raftlog-"

func fileName(gen uint64, copyIndex int) string {
	return fmt.Sprintf("%s%06d.%d", filePrefix, gen, copyIndex)
}

func parseFileName(name string) (gen uint64, ok bool) {
	if !strings.HasPrefix(name, filePrefix) || len(name) < len(filePrefix)+3 {
		return 0, false
	}
	rest := strings.TrimPrefix(name, filePrefix)
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 || (rest[dot+1:] != "0" && rest[dot+1:] != "1") {
		return 0, false
	}
	g, err := strconv.ParseUint(rest[:dot], 10, 64)
	if err != nil || g == 0 {
		return 0, false
	}
	return g, true
}

// Open opens or creates the log in opts.Dir.
func Open(opts Options) (*Log, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := opts.FS.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftlog: mkdir %s: %w", opts.Dir, err)
	}
	names, err := opts.FS.List(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("raftlog: list %s: %w", opts.Dir, err)
	}
	genSet := map[uint64]bool{}
	for _, n := range names {
		if g, ok := parseFileName(n); ok {
			genSet[g] = true
		}
	}
	gens := make([]uint64, 0, len(genSet))
	for g := range genSet {
		gens = append(gens, g)
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] > gens[j] })

	l := &Log{opts: opts}
	var maxGen uint64
	if len(gens) > 0 {
		maxGen = gens[0]
	}
	loaded := false
	for _, g := range gens {
		res, err := l.load(g)
		if err == errIncompleteGeneration {
			continue // a rewrite crashed; its files are dropped below
		}
		if err != nil {
			return nil, err
		}
		l.st, l.gen, l.size = res.st, g, res.size
		l.stats.RecordsRepaired = res.repaired
		l.stats.TornTailBytes = res.tornBytes
		loaded = true
		break
	}
	if !loaded {
		l.st = newState()
	}
	// Every Open starts a new generation, whole or repaired: appends then
	// only ever go to files this Log created, so an append-only vfs.FS
	// (internal/sdfvfs: no WriteAt, no reopen for writing) works too.
	if err := l.rewriteLocked(maxGen + 1); err != nil {
		return nil, err
	}
	return l, nil
}

var errIncompleteGeneration = fmt.Errorf("raftlog: incomplete generation")

type loadResult struct {
	st        *state
	size      int64
	repaired  int
	tornBytes int64
}

func (l *Log) readCopy(gen uint64, i int) ([]byte, error) {
	f, err := l.opts.FS.Open(l.opts.FS.PathJoin(l.opts.Dir, fileName(gen, i)))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("raftlog: open copy %d of generation %d: %w", i, gen, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("raftlog: read copy %d of generation %d: %w", i, gen, err)
	}
	return data, nil
}

// load replays one generation, reading each record from whichever copy
// verifies.
func (l *Log) load(gen uint64) (loadResult, error) {
	var copies [2][]byte
	for i := range copies {
		data, err := l.readCopy(gen, i)
		if err != nil {
			return loadResult{}, err
		}
		copies[i] = data
	}
	res := loadResult{st: newState()}
	var off int64
	for {
		var kinds [2]byte
		var payloads [2][]byte
		var lengths [2]int
		var errs [2]error
		for i := range copies {
			if off < int64(len(copies[i])) {
				kinds[i], payloads[i], lengths[i], errs[i] = decodeRecord(gen, off, copies[i][off:], l.opts.MaxRecordBytes)
			} else {
				errs[i] = io.EOF
			}
		}
		good := -1
		for i := range copies {
			if errs[i] == nil {
				good = i
				break
			}
		}
		if good < 0 {
			end := max(int64(len(copies[0])), int64(len(copies[1])))
			if off >= end {
				break
			}
			if l.validRecordAfter(gen, copies[0], off) || l.validRecordAfter(gen, copies[1], off) {
				return loadResult{}, base.DataLossErrorf(
					"raftlog: both copies of the record at offset %d of generation %d are corrupt (%v; %v) and later records exist",
					off, gen, errs[0], errs[1])
			}
			if off == 0 {
				return loadResult{}, errIncompleteGeneration
			}
			res.tornBytes = end - off
			break
		}
		if errs[1-good] != nil {
			res.repaired++
		}
		wantKind := kindUpdate
		if off == 0 {
			wantKind = kindState
		}
		if kinds[good] != wantKind {
			return loadResult{}, base.CorruptionErrorf("raftlog: record kind %d at offset %d of generation %d, want %d",
				kinds[good], off, gen, wantKind)
		}
		u, err := decodeUpdate(payloads[good])
		if err != nil {
			return loadResult{}, err
		}
		if err := res.st.apply(u); err != nil {
			return loadResult{}, err
		}
		off += int64(lengths[good])
	}
	res.size = off
	return res, nil
}

// validRecordAfter reports whether any verifying record starts after off.
// Records are bound to their offset, so stale bytes do not count.
func (l *Log) validRecordAfter(gen uint64, data []byte, off int64) bool {
	for p := off + 1; p+headerBytes <= int64(len(data)); p++ {
		if data[p] != byte(recordMagic&0xff) {
			continue
		}
		if _, _, _, err := decodeRecord(gen, p, data[p:], l.opts.MaxRecordBytes); err == nil {
			return true
		}
	}
	return false
}

func (l *Log) closeFilesLocked() error {
	var first error
	for i, f := range l.files {
		if f != nil {
			if err := f.Close(); err != nil && first == nil {
				first = err
			}
			l.files[i] = nil
		}
	}
	return first
}

// rewriteLocked writes the whole state as generation gen and switches to it.
func (l *Log) rewriteLocked(gen uint64) error {
	payload, err := l.st.fullUpdate().encode()
	if err != nil {
		return err
	}
	rec := encodeRecord(gen, 0, kindState, payload)
	var files [2]vfs.File
	for i := range files {
		f, err := l.opts.FS.Create(l.opts.FS.PathJoin(l.opts.Dir, fileName(gen, i)), vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("raftlog: create generation %d: %w", gen, err)
		}
		files[i] = f
		// NB: a vfs.File may scribble over a written buffer (Pebble's
		// invariants builds do), so each copy gets its own.
		if _, err := f.Write(bytes.Clone(rec)); err != nil {
			return fmt.Errorf("raftlog: write generation %d: %w", gen, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("raftlog: sync generation %d: %w", gen, err)
		}
	}
	if err := syncDir(l.opts.FS, l.opts.Dir); err != nil {
		return err
	}
	_ = l.closeFilesLocked()
	l.files = files
	l.gen = gen
	l.size = int64(len(rec))
	l.stats.Generation = gen
	l.stats.Rewrites++
	l.removeOldGenerations()
	return nil
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("raftlog: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("raftlog: sync dir %s: %w", dir, err)
	}
	return nil
}

// removeOldGenerations deletes every generation other than the current one.
// Failures are harmless: Open prefers the newest complete generation.
func (l *Log) removeOldGenerations() {
	names, err := l.opts.FS.List(l.opts.Dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if g, ok := parseFileName(n); ok && g != l.gen {
			_ = l.opts.FS.Remove(l.opts.FS.PathJoin(l.opts.Dir, n))
		}
	}
}

// writeLocked applies u to a copy of the state, then appends it to both
// copies and syncs them, and only then publishes the new state.
func (l *Log) writeLocked(u *update) error {
	if l.failed != nil {
		return l.failed
	}
	next := *l.st
	if err := next.apply(u); err != nil {
		return err
	}
	payload, err := u.encode()
	if err != nil {
		return err
	}
	if len(payload) > l.opts.MaxRecordBytes {
		return base.InvalidArgumentf("raftlog: record of %d bytes exceeds MaxRecordBytes %d", len(payload), l.opts.MaxRecordBytes)
	}
	rec := encodeRecord(l.gen, l.size, kindUpdate, payload)
	for i, f := range l.files {
		// NB: each copy gets its own buffer; see rewriteLocked. The files
		// are only appended to (their offset is l.size).
		if _, err := f.Write(bytes.Clone(rec)); err != nil {
			l.failed = fmt.Errorf("raftlog: write copy %d: %w", i, err)
			return l.failed
		}
	}
	for i, f := range l.files {
		if err := f.Sync(); err != nil {
			l.failed = fmt.Errorf("raftlog: sync copy %d: %w", i, err)
			return l.failed
		}
	}
	l.size += int64(len(rec))
	l.stats.SizeBytes = l.size
	l.st = &next
	if l.size > l.opts.RewriteThresholdBytes {
		if err := l.rewriteLocked(l.gen + 1); err != nil {
			l.failed = err
			return err
		}
	}
	return nil
}

// Save persists what a raft Ready hands out: a snapshot to install (may be
// nil or empty), entries to append, and the hard state (may be nil or empty).
// It returns after both copies are synced.
func (l *Log) Save(hs *pb.HardState, entries []*pb.Entry, snap *pb.Snapshot) error {
	u := &update{entries: entries}
	if snap != nil && !raft.IsEmptySnap(snap) {
		u.snap = snap
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		u.hs = hs
	}
	if u.snap == nil && u.hs == nil && len(u.entries) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writeLocked(u)
}

// Bootstrap initialises an empty log with a snapshot at index 1, term 1
// naming the voters, so every replica of a new group starts from the same
// log. It fails if the log is not empty.
func (l *Log) Bootstrap(voters []uint64) error {
	if len(voters) == 0 {
		return base.InvalidArgumentf("raftlog: bootstrap with no voters")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.lastIndex() != 0 || !raft.IsEmptyHardState(l.st.hs) {
		return base.InvalidArgumentf("raftlog: bootstrap of a non-empty log (last index %d)", l.st.lastIndex())
	}
	snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index: proto.Uint64(1), Term: proto.Uint64(1),
		ConfState: &pb.ConfState{Voters: append([]uint64(nil), voters...)},
	}}
	return l.writeLocked(&update{snap: snap, hs: &pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(1)}})
}

// IsEmpty reports whether the log holds no state yet.
func (l *Log) IsEmpty() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.lastIndex() == 0 && raft.IsEmptyHardState(l.st.hs)
}

// Compact discards entries up to and including index i.
func (l *Log) Compact(i uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i <= l.st.offset() {
		return raft.ErrCompacted
	}
	if i > l.st.lastIndex() {
		return base.InvalidArgumentf("raftlog: compact %d beyond last index %d", i, l.st.lastIndex())
	}
	return l.writeLocked(&update{compact: i})
}

// CreateSnapshot records a snapshot of the state machine at applied index i
// (which must be in the log) and keeps the log.
func (l *Log) CreateSnapshot(i uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i <= l.st.snap.GetMetadata().GetIndex() {
		return nil, raft.ErrSnapOutOfDate
	}
	term, err := l.st.term(i)
	if err != nil {
		return nil, err
	}
	snap := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{
		Index: proto.Uint64(i), Term: proto.Uint64(term), ConfState: cs,
	}}
	if err := l.writeLocked(&update{keep: snap}); err != nil {
		return nil, err
	}
	return snap, nil
}

// Stats returns counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.SizeBytes = l.size
	return s
}

// Close closes the files.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = fmt.Errorf("raftlog: closed")
	}
	return l.closeFilesLocked()
}

// InitialState implements raft.Storage.
func (l *Log) InitialState() (*pb.HardState, *pb.ConfState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := l.st.snap.GetMetadata().GetConfState()
	if cs == nil {
		cs = &pb.ConfState{}
	}
	return proto.Clone(l.st.hs).(*pb.HardState), proto.Clone(cs).(*pb.ConfState), nil
}

// Entries implements raft.Storage.
func (l *Log) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.entries(lo, hi, maxSize)
}

// Term implements raft.Storage.
func (l *Log) Term(i uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.term(i)
}

// LastIndex implements raft.Storage.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.lastIndex(), nil
}

// FirstIndex implements raft.Storage.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.offset() + 1, nil
}

// Snapshot implements raft.Storage.
func (l *Log) Snapshot() (*pb.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.snap, nil
}
