package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
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
	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/invariants"
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
	// MaxRecordBytes bounds one record (one entry or snapshot). Default 256
	// MiB, at most 1 GiB.
	MaxRecordBytes int
	// BlockBytes is the block size of the fragment layout, the largest
	// checksum domain in the files. Default 512 B, in [512 B, 32 KiB]: a
	// record spans about one fragment per block, and is lost only if the
	// same fragment is damaged in both copies, so smaller blocks lose less
	// at a given bit error rate (at UBER 1e-5 a 16 KiB entry is lost in
	// both copies with probability about 5% at 512 B blocks, 34% at 4 KiB)
	// for 7 bytes of header per block (1.4% at 512 B).
	BlockBytes int
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
	if o.BlockBytes == 0 {
		o.BlockBytes = 512
	}
	if o.BlockBytes < 512 || o.BlockBytes > 32<<10 {
		return base.InvalidArgumentf("raftlog: BlockBytes %d outside [512, 32768]", o.BlockBytes)
	}
	return nil
}

// Stats counts what the log found and did.
type Stats struct {
	// FragmentsRepaired counts fragments that did not verify in one copy
	// and were read from the other (at Open).
	FragmentsRepaired int
	// RecordsLost counts places where records were lost in both copies (at
	// Open); the entries they held are repaired from peers (Offer).
	RecordsLost int
	// EntriesFilled counts entries repaired from peers.
	EntriesFilled int
	// TornTailBytes is how many bytes of a torn tail Open dropped.
	TornTailBytes int64
	// FellBack is set when the newest generation was unreadable and Open
	// used the one before it.
	FellBack bool
	// Generation is the current file generation.
	Generation uint64
	// SizeBytes is the size of one copy of the current generation.
	SizeBytes int64
	// Rewrites counts generations written by this Log.
	Rewrites int
}

func (s Stats) String() string {
	return fmt.Sprintf("gen=%d size=%dB fragsRepaired=%d recordsLost=%d filled=%d torn=%dB rewrites=%d",
		s.Generation, s.SizeBytes, s.FragmentsRepaired, s.RecordsLost, s.EntriesFilled, s.TornTailBytes, s.Rewrites)
}

// copies is how many copies of each file the log writes.
const copies = 2

// Log is a durable raft log with every record written twice. It implements
// raft.Storage once sealed. It is safe for concurrent use.
type Log struct {
	opts Options

	mu     sync.Mutex
	img    *image
	damage Damage
	sealed bool
	gen    uint64
	files  [copies]vfs.File
	// lag writes and syncs copy 1 (files[1]) behind Save: see copyWriter.
	// Set while files are.
	lag   *copyWriter
	fr    framer
	stats Stats
	// failed is set after a failed write: the files are in an unknown state
	// and the log refuses further use.
	failed error
	// pendingCommit is the newest commit index a Save left unwritten (its
	// hard state changed nothing else; see Save), written with the next
	// record that is; 0 when the image's commit index is the newest.
	pendingCommit uint64
}

var _ raft.Storage = (*Log)(nil)

const filePrefix = "raftlog-"

func fileName(gen uint64, copyIndex int) string {
	return fmt.Sprintf("%s%06d.%d", filePrefix, gen, copyIndex)
}

const tmpSuffix = ".tmp"

// parseFileName recognizes a generation's files; tmp marks a generation
// still being written (renamed into place once whole).
func parseFileName(name string) (gen uint64, tmp, ok bool) {
	if !strings.HasPrefix(name, filePrefix) {
		return 0, false, false
	}
	rest := strings.TrimPrefix(name, filePrefix)
	if strings.HasSuffix(rest, tmpSuffix) {
		tmp = true
		rest = strings.TrimSuffix(rest, tmpSuffix)
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 {
		return 0, false, false
	}
	if c, err := strconv.Atoi(rest[dot+1:]); err != nil || c < 0 || c >= copies {
		return 0, false, false
	}
	g, err := strconv.ParseUint(rest[:dot], 10, 64)
	if err != nil || g == 0 {
		return 0, false, false
	}
	return g, tmp, true
}

// Open opens or creates the log in opts.Dir. A log whose files are whole,
// or repaired from the other copy fragment by fragment, is sealed: raft can
// use it at once. A log that lost entries in both copies is returned
// unsealed with its Damage: the caller repairs it from peers (Offer),
// tells it what the state machine already holds (DiscardApplied), and
// Seals it (or gives up on what no peer has, GiveUp).
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
		g, tmp, ok := parseFileName(n)
		if !ok {
			continue
		}
		if tmp {
			// A rewrite that did not finish: its generation never
			// replaced the one before it.
			_ = opts.FS.Remove(opts.FS.PathJoin(opts.Dir, n))
			continue
		}
		genSet[g] = true
	}
	gens := make([]uint64, 0, len(genSet))
	for g := range genSet {
		gens = append(gens, g)
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] > gens[j] })

	l := &Log{opts: opts, img: newImage()}
	var maxGen uint64
	if len(gens) > 0 {
		maxGen = gens[0]
	}
	loaded := len(gens) == 0 // a new log
	for i, g := range gens {
		img, d, st, usable, err := l.load(g)
		if err != nil {
			return nil, err
		}
		if !usable {
			continue
		}
		l.img, l.damage = img, d
		l.stats.FragmentsRepaired, l.stats.RecordsLost, l.stats.TornTailBytes = st.fragsRepaired, d.Losses, st.tornBytes
		if i > 0 {
			// Records appended to the newer generation are gone: the tail
			// and the hard state are unknown.
			l.stats.FellBack = true
			l.damage.TailUnknown, l.damage.HardStateUncertain = true, true
		}
		loaded = true
		break
	}
	if !loaded {
		// Files exist but no generation holds a readable record: the log
		// lost everything (its peers still hold the shard).
		l.damage = Damage{TailUnknown: true, HardStateUncertain: true, Losses: 1}
		l.stats.RecordsLost = 1
	}
	l.gen = maxGen
	if !l.damage.Empty() {
		return l, nil
	}
	// Every Open starts a new generation, whole or repaired: appends then
	// only ever go to files this Log created, so an append-only vfs.FS
	// (internal/sdfvfs: no WriteAt, no reopen for writing) works too.
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.sealLocked(); err != nil {
		return nil, err
	}
	return l, nil
}

type loadStats struct {
	fragsRepaired int
	tornBytes     int64
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
		// A read error is damage of that copy, not of the log.
		return nil, nil
	}
	return data, nil
}

// load replays one generation, reading each fragment from whichever copy
// verifies. usable is false if no record of it could be read.
func (l *Log) load(gen uint64) (*image, Damage, loadStats, bool, error) {
	var cs [][]byte
	for i := 0; i < copies; i++ {
		data, err := l.readCopy(gen, i)
		if err != nil {
			return nil, Damage{}, loadStats{}, false, err
		}
		cs = append(cs, data)
	}
	res := parseCopies(gen, cs, int64(l.opts.BlockBytes))
	usable := false
	for _, it := range res.items {
		if !it.loss {
			usable = true
			break
		}
	}
	if !usable {
		return nil, Damage{}, loadStats{}, false, nil
	}
	img, d := replay(res.items)
	return img, d, loadStats{fragsRepaired: res.fragsRepaired, tornBytes: res.tornBytes}, true, nil
}

// ---- repair (before Seal) ---------------------------------------------------

// Sealed reports whether the log is whole and usable by raft.
func (l *Log) Sealed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sealed
}

// Damage returns what Open could not recover (empty once sealed).
func (l *Log) Damage() Damage {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.damage
	d.Holes = append([]Span(nil), d.Holes...)
	return d
}

// DiscardApplied tells an unsealed log that the state machine durably holds
// every entry up to index (of the given term): those entries, and any holes
// among them, are no longer needed. If the state machine is behind the
// log's start, the missing entries become holes to repair from peers.
func (l *Log) DiscardApplied(index, term uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed {
		return base.AssertionFailedf("raftlog: DiscardApplied on a sealed log")
	}
	m := l.img
	switch {
	case index >= m.lastIndex():
		m.reset(entryID{index, term})
	case index >= m.base.index:
		if t, ok := m.termAt(index); ok {
			term = t
		}
		m.compact(entryID{index, term})
	default:
		// The state machine is behind the log's start: the entries between
		// were compacted locally and must come from a peer.
		// The old base entry itself is one of them: its term is checked
		// through the anchor of the next intact entry.
		gap := make([]*pb.Entry, m.base.index-index)
		m.ents = append(gap, m.ents...)
		m.base = entryID{index, term}
	}
	if m.hs.GetCommit() < index {
		hs := proto.Clone(m.hs).(*pb.HardState)
		hs.Commit = proto.Uint64(index)
		m.hs = hs
	}
	l.damage.Holes = m.holes()
	return nil
}

// RepairSpan is the range of entries to ask peers for: from the first hole
// (or just past the commit index, whichever is lower, so a peer's
// committed entries can replace an uncertain run) to the last index, or
// unbounded when the tail is unknown. ok is false when nothing is missing.
func (l *Log) RepairSpan() (lo, hi uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, m := l.damage, l.img
	if l.sealed || (len(d.Holes) == 0 && !d.TailUnknown) {
		return 0, 0, false
	}
	lo = m.lastIndex() + 1
	if len(d.Holes) > 0 {
		lo = d.Holes[0].Lo
	}
	lo = max(m.base.index+1, min(lo, m.hs.GetCommit()+1))
	hi = m.lastIndex() + 1 // the anchor after the last hole, if any
	if d.TailUnknown {
		hi = math.MaxUint64
	}
	return lo, hi, true
}

// Offer repairs the unsealed log from a peer's contiguous entries and the
// peer's commit index (see image.offer for the rules). It returns how many
// missing entries it filled.
func (l *Log) Offer(ents []*pb.Entry, peerCommit uint64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed {
		return 0, nil
	}
	for i := 1; i < len(ents); i++ {
		if ents[i].GetIndex() != ents[i-1].GetIndex()+1 {
			return 0, base.InvalidArgumentf("raftlog: offered entries not contiguous at %d", ents[i].GetIndex())
		}
	}
	before := l.img.lastIndex()
	filled, truncated := l.img.offer(ents, peerCommit, l.damage.TailUnknown)
	if truncated {
		l.raiseFloorLocked()
	}
	if l.damage.TailUnknown && l.img.lastIndex() > before && filled > 0 {
		// Committed entries past our old end were adopted; what we may
		// have held after them is still unknown.
		l.raiseFloorLocked()
	}
	l.stats.EntriesFilled += filled
	l.damage.Holes = l.img.holes()
	return filled, nil
}

// raiseFloorLocked sets the vote floor to the log's state before the
// damage: entries this replica may have acknowledged are gone, so until its
// log is again at least that up to date it must not help elect a leader
// whose log lacks them (Protocol-Aware Recovery, FAST'18).
func (l *Log) raiseFloorLocked() {
	f := l.damage.LastSeen
	if l.damage.TailUnknown {
		f = entryID{index: math.MaxUint64, term: l.damage.MaxTermSeen}
	}
	if l.img.floor.less(f) {
		l.img.floor = f
	}
}

// GiveUp ends the repair with what no peer could supply: the log is cut at
// its first hole, a vote floor keeps the replica from electing a leader
// that lacks entries it may have acknowledged, and the log is sealed. The
// leader then replicates the rest.
func (l *Log) GiveUp() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed {
		return nil
	}
	if hs := l.img.holes(); len(hs) > 0 {
		l.img.truncate(hs[0].Lo)
		l.raiseFloorLocked()
	}
	if l.damage.TailUnknown {
		l.raiseFloorLocked()
	}
	return l.sealLocked()
}

// Seal writes the repaired log as a new generation and makes it usable by
// raft. It fails if holes remain.
func (l *Log) Seal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed {
		return nil
	}
	if hs := l.img.holes(); len(hs) > 0 {
		return base.InvalidArgumentf("raftlog: seal with holes %v", hs)
	}
	if l.damage.TailUnknown {
		l.raiseFloorLocked()
	}
	return l.sealLocked()
}

// sealLocked settles the hard state against the repaired entries and
// rewrites the log as a new generation.
func (l *Log) sealLocked() error {
	m := l.img
	hs := proto.Clone(m.hs).(*pb.HardState)
	switch {
	case l.damage.HardStateUncertain && l.damage.MaxTermSeen == 0 && m.lastIndex() == m.base.index:
		// Nothing of the log survived: the replica knows neither its term
		// nor its vote. It votes for no one until it has applied a barrier
		// of its own (see ClearFloor), which a leader holding every
		// committed entry must have replicated to it.
		m.floor = entryID{index: math.MaxUint64, term: math.MaxUint64}
		hs.Vote = proto.Uint64(0)
	case l.damage.HardStateUncertain:
		// Lost records may have held newer hard states: a term change and
		// a vote in it. Skip past every term they could have reached (one
		// per smallest hard state record in the lost bytes) and vote for
		// no one: the replica can then never vote twice in a term. Raising
		// a term is always safe in raft (it costs at most an election).
		bump := uint64(1 + l.damage.LostAfterHardState/minHardStateRecordBytes)
		hs.Term = proto.Uint64(max(hs.GetTerm(), l.damage.MaxTermSeen) + bump)
		hs.Vote = proto.Uint64(0)
	}
	// raft requires base <= commit <= last index.
	commit := min(max(hs.GetCommit(), m.base.index), m.lastIndex())
	hs.Commit = proto.Uint64(commit)
	if hs.GetTerm() < m.lastID().term {
		hs.Term = proto.Uint64(m.lastID().term)
	}
	m.hs = hs
	if !m.lastID().less(m.floor) {
		m.floor = entryID{}
	}
	if err := l.rewriteLocked(l.gen + 1); err != nil {
		return err
	}
	l.sealed = true
	l.damage = Damage{}
	return nil
}

// minHardStateRecordBytes is the smallest a hard state record can be on
// disk: a fragment header, the kind byte and a few bytes of payload.
const minHardStateRecordBytes = fragHeaderBytes + 1 + 2

// ClearFloor lifts the vote floor: the replica applied a barrier entry it
// proposed after the floor was set, so its log holds every entry committed
// before its damage (a leader commits only what its log holds, and its log
// holds every earlier committed entry).
func (l *Log) ClearFloor() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.img.floor == (entryID{}) {
		return nil
	}
	if err := l.writeLocked([]decoded{{kind: recFloor}}); err != nil {
		return err
	}
	return nil
}

// SetVoteFloor raises the vote floor to (term, index) (a replica started
// afresh after its files were lost: it may have voted and acknowledged
// entries it no longer knows of).
func (l *Log) SetVoteFloor(term, index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := entryID{index: index, term: term}
	if !l.img.floor.less(f) {
		return nil
	}
	return l.writeLocked([]decoded{{kind: recFloor, id: f}})
}

// VoteFloor returns the vote floor: while the log's last entry is below it
// (raft's up-to-date order), the replica must not grant a vote to a
// candidate whose log is below it, nor campaign. ok is false when there is
// none.
func (l *Log) VoteFloor() (term, index uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.img.floor
	return f.term, f.index, f != (entryID{})
}

// PeerEntries serves a peer's repair: the contiguous intact entries from lo
// to at most hi (stopping at a hole or after maxBytes), and this log's
// commit index. It works sealed or not.
func (l *Log) PeerEntries(lo, hi, maxBytes uint64) ([]*pb.Entry, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.img.intact(lo, hi, maxBytes), max(l.img.hs.GetCommit(), l.pendingCommit)
}

// ---- writing -----------------------------------------------------------------

func (l *Log) closeFilesLocked() error {
	var first error
	if l.lag != nil {
		first = l.lag.stop()
		l.lag = nil
	}
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

// encode frames recs for the current files (every copy gets the same
// bytes).
func (l *Log) encode(fr *framer, recs []decoded) ([]byte, error) {
	var out []byte
	for _, r := range recs {
		b, err := r.encode()
		if err != nil {
			return nil, err
		}
		if len(b) > l.opts.MaxRecordBytes {
			return nil, base.InvalidArgumentf("raftlog: record of %d bytes exceeds MaxRecordBytes %d", len(b), l.opts.MaxRecordBytes)
		}
		if invariants.Enabled {
			// Before the write: the record decodes back into what it
			// encodes (the framed half is verifyFramed).
			back, err := decodeRecord(b)
			again, _ := back.encode()
			_ = invariants.Check(err == nil && back.kind == r.kind && bytes.Equal(again, b),
				"raftlog: record kind %d does not decode back before its write (%v)", r.kind, err)
		}
		out = fr.appendRecord(out, b)
	}
	return out, nil
}

// rewriteLocked writes the whole image as generation gen under temporary
// names, syncs it, renames it into place and switches to it. The previous
// generation is kept (a second local source if the new one is damaged
// before its next rewrite); older ones are removed.
func (l *Log) rewriteLocked(gen uint64) error {
	fr := framer{gen: gen, blockBytes: int64(l.opts.BlockBytes)}
	recs := l.img.stateRecords()
	data, err := l.encode(&fr, recs)
	if err != nil {
		return err
	}
	if invariants.Enabled {
		// The new generation parses back into exactly the image's records.
		verifyFramed(gen, data, fr.off-int64(len(data)), l.opts.BlockBytes, len(recs))
	}
	var files [copies]vfs.File
	closeAll := func() {
		for _, f := range files {
			if f != nil {
				_ = f.Close()
			}
		}
	}
	for i := range files {
		name := l.opts.FS.PathJoin(l.opts.Dir, fileName(gen, i)+tmpSuffix)
		f, err := l.opts.FS.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			closeAll()
			return fmt.Errorf("raftlog: create generation %d: %w", gen, err)
		}
		files[i] = f
		// NB: a vfs.File may scribble over a written buffer (Pebble's
		// invariants builds do), so each copy gets its own.
		if _, err := f.Write(bytes.Clone(data)); err != nil {
			closeAll()
			return fmt.Errorf("raftlog: write generation %d: %w", gen, err)
		}
		if err := f.Sync(); err != nil {
			closeAll()
			return fmt.Errorf("raftlog: sync generation %d: %w", gen, err)
		}
	}
	crashpoint.Hit("raftlog-rewrite")
	for i := range files {
		from := l.opts.FS.PathJoin(l.opts.Dir, fileName(gen, i)+tmpSuffix)
		if err := l.opts.FS.Rename(from, l.opts.FS.PathJoin(l.opts.Dir, fileName(gen, i))); err != nil {
			closeAll()
			return fmt.Errorf("raftlog: rename generation %d: %w", gen, err)
		}
		crashpoint.HitIf(i == 0, "raftlog-rename")
	}
	if err := syncDir(l.opts.FS, l.opts.Dir); err != nil {
		closeAll()
		return err
	}
	// The previous generation's copy 1 may still be syncing its last
	// records: the new generation holds them all, synced in both copies.
	_ = l.closeFilesLocked()
	l.files = files
	l.lag = newCopyWriter(files[1])
	l.gen = gen
	l.fr = fr
	l.stats.Generation = gen
	l.stats.SizeBytes = fr.off
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

// removeOldGenerations deletes generations older than the previous one.
// Failures are harmless: Open prefers the newest readable generation.
func (l *Log) removeOldGenerations() {
	names, err := l.opts.FS.List(l.opts.Dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if g, tmp, ok := parseFileName(n); ok && !tmp && g+1 < l.gen {
			_ = l.opts.FS.Remove(l.opts.FS.PathJoin(l.opts.Dir, n))
		}
	}
}

// writeLocked applies recs to a copy of the image, appends them to both
// copies and syncs them, and only then publishes the new image.
func (l *Log) writeLocked(recs []decoded) error {
	if l.failed != nil {
		return l.failed
	}
	if !l.sealed {
		return base.AssertionFailedf("raftlog: write to an unsealed log")
	}
	if c := l.pendingCommit; c > 0 {
		// The newest commit index Save left unwritten goes with these
		// records, ahead of them (it is at most the last index already in
		// the log) and unless they carry a hard state or snapshot of
		// their own, which are newer.
		l.pendingCommit = 0
		if c > l.img.hs.GetCommit() && c <= l.img.lastIndex() && !hasStateRecord(recs) {
			hs := proto.Clone(l.img.hs).(*pb.HardState)
			hs.Commit = proto.Uint64(c)
			recs = append([]decoded{{kind: recHardState, hs: hs}}, recs...)
		}
	}
	next := l.img.clone()
	if err := next.applyRecords(recs); err != nil {
		return err
	}
	if next.floor != (entryID{}) && !next.lastID().less(next.floor) {
		// The log is again at least as up to date as before its damage.
		recs = append(recs, decoded{kind: recFloor})
		next.floor = entryID{}
	}
	fr := l.fr
	data, err := l.encode(&fr, recs)
	if err != nil {
		return err
	}
	if invariants.Enabled {
		// Checksummed and framed: what goes to the files parses back into
		// exactly these records.
		verifyFramed(l.gen, data, fr.off-int64(len(data)), l.opts.BlockBytes, len(recs))
	}
	crashpoint.Hit("raftlog-append")
	if err := l.lag.failure(); err != nil {
		l.failed = fmt.Errorf("raftlog: write or sync copy 1: %w", err)
		return l.failed
	}
	// NB: copy 1 is written only after copy 0 is synced. A crash then tears
	// at most one copy, and copy 0 first: bytes present in copy 1 mean
	// copy 0 held that record whole, so a record bad in every copy that
	// has it is damage, never a torn write (parseCopies). Copy 1 is written
	// and synced behind Save (copyWriter): one fsync on the path of a
	// write, not two in series. Each copy gets its own buffer (see
	// rewriteLocked); the files are only appended to.
	if _, err := l.files[0].Write(bytes.Clone(data)); err != nil {
		l.failed = fmt.Errorf("raftlog: write copy 0: %w", err)
		return l.failed
	}
	if err := l.files[0].Sync(); err != nil {
		l.failed = fmt.Errorf("raftlog: sync copy 0: %w", err)
		return l.failed
	}
	crashpoint.Hit("raftlog-copy")
	if err := l.lag.append(data); err != nil {
		l.failed = fmt.Errorf("raftlog: write or sync copy 1: %w", err)
		return l.failed
	}
	crashpoint.Hit("raftlog-synced")
	l.fr = fr
	l.stats.SizeBytes = fr.off
	l.img = next
	if fr.off > l.opts.RewriteThresholdBytes {
		if err := l.rewriteLocked(l.gen + 1); err != nil {
			l.failed = err
			return err
		}
	}
	return nil
}

// hasStateRecord reports whether recs carry a hard state or a snapshot.
func hasStateRecord(recs []decoded) bool {
	for _, r := range recs {
		if r.kind == recHardState || r.kind == recSnapshot {
			return true
		}
	}
	return false
}

// verifyFramed checks, before a write, that data (records framed for
// generation gen from file offset from) parses back into n whole records
// (test builds only). It checks the framing code, not the storage: a device
// that damages the bytes after the write is a fault the log detects when it
// reads them (parseCopies), never an assertion: under fault injection a
// re-read may fail or differ while the code is right.
func verifyFramed(gen uint64, data []byte, from int64, blockBytes int, n int) {
	bb := int64(blockBytes)
	end := from + int64(len(data))
	got := 0
	for off := from; off < end; {
		if bb-off%bb < fragHeaderBytes+1 {
			off = (off/bb + 1) * bb
			continue
		}
		typ, _, m, ok := decodeFragAt(gen, data, from, off, bb)
		if !ok {
			_ = invariants.Check(false, "raftlog: generation %d: fragment at %d does not verify before its write", gen, off)
			return
		}
		if typ == fragFull || typ == fragLast {
			got++
		}
		off += m
	}
	_ = invariants.Check(got == n, "raftlog: %d of %d records framed at %d parse back", got, n, from)
}

// Save persists what a raft Ready hands out: a snapshot to install (may be
// nil or empty), entries to append, and the hard state (may be nil or empty).
// It returns after both copies are synced.
func (l *Log) Save(hs *pb.HardState, entries []*pb.Entry, snap *pb.Snapshot) error {
	var recs []decoded
	if snap != nil && !raft.IsEmptySnap(snap) {
		recs = append(recs, decoded{kind: recSnapshot, snap: snap})
	}
	for _, e := range entries {
		recs = append(recs, decoded{kind: recEntry, entry: e})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if hs != nil && !raft.IsEmptyHardState(hs) {
		if len(recs) == 0 && !raft.MustSync(hs, l.img.hs, 0) && l.sealed && l.failed == nil {
			// Only the commit index moved. raft keeps it as volatile state
			// (a restarted replica learns it from the leader; etcd's WAL
			// does not sync it either, raft.MustSync), so it costs no sync
			// of its own: it rides with the next record written (writeLocked),
			// and a restart that finds the state machine past it raises it
			// (CommitAtLeast). A commit-only Ready comes after every
			// proposal's append, on every replica, and its two syncs were
			// on the path of every write before the write applied.
			l.pendingCommit = max(l.pendingCommit, hs.GetCommit())
			return nil
		}
		recs = append(recs, decoded{kind: recHardState, hs: hs})
		l.pendingCommit = 0
	}
	if len(recs) == 0 {
		return nil
	}
	crashpoint.HitIf(len(recs) == 1 && recs[0].kind == recHardState, "raftlog-hardstate")
	return l.writeLocked(recs)
}

// CommitAtLeast raises the durable commit index to i when it is lower and i
// is in the log: the replica calls it at start with its state machine's
// applied index, which only ever holds committed entries, since a commit
// index that moved alone is written lazily (see Save) while the state
// machine's may already be durable. raft refuses an applied index above
// the commit index.
func (l *Log) CommitAtLeast(i uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i <= l.img.hs.GetCommit() || i > l.img.lastIndex() {
		return nil
	}
	hs := proto.Clone(l.img.hs).(*pb.HardState)
	hs.Commit = proto.Uint64(i)
	l.pendingCommit = 0
	crashpoint.Hit("raftlog-hardstate")
	return l.writeLocked([]decoded{{kind: recHardState, hs: hs}})
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
	if l.img.lastIndex() != 0 || !raft.IsEmptyHardState(l.img.hs) {
		return base.InvalidArgumentf("raftlog: bootstrap of a non-empty log (last index %d)", l.img.lastIndex())
	}
	snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index: proto.Uint64(1), Term: proto.Uint64(1),
		ConfState: &pb.ConfState{Voters: append([]uint64(nil), voters...)},
	}}
	return l.writeLocked([]decoded{
		{kind: recSnapshot, snap: snap},
		{kind: recHardState, hs: &pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(1)}},
	})
}

// IsEmpty reports whether the log holds no state yet.
func (l *Log) IsEmpty() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.img.lastIndex() == 0 && raft.IsEmptyHardState(l.img.hs) && l.damage.Empty()
}

// Compact discards entries up to and including index i.
func (l *Log) Compact(i uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i <= l.img.base.index {
		return raft.ErrCompacted
	}
	if i > l.img.lastIndex() {
		return base.InvalidArgumentf("raftlog: compact %d beyond last index %d", i, l.img.lastIndex())
	}
	t, err := l.img.term(i)
	if err != nil {
		return err
	}
	if err := l.writeLocked([]decoded{{kind: recCompact, id: entryID{i, t}}}); err != nil {
		return err
	}
	// A file mostly made of compacted entries is rewritten now rather than
	// at RewriteThresholdBytes, so the log on disk stays near what it
	// retains.
	var live int64
	for _, e := range l.img.ents {
		live += int64(len(e.GetData())) + 32
	}
	if l.fr.off > 1<<20 && l.fr.off > 2*live {
		if err := l.rewriteLocked(l.gen + 1); err != nil {
			l.failed = err
			return err
		}
	}
	return nil
}

// CreateSnapshot records a snapshot of the state machine at applied index i
// (which must be in the log) and keeps the log.
func (l *Log) CreateSnapshot(i uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i <= l.img.snap.GetMetadata().GetIndex() {
		return nil, raft.ErrSnapOutOfDate
	}
	term, err := l.img.term(i)
	if err != nil {
		return nil, err
	}
	snap := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{
		Index: proto.Uint64(i), Term: proto.Uint64(term), ConfState: cs,
	}}
	if err := l.writeLocked([]decoded{{kind: recKeep, snap: snap}}); err != nil {
		return nil, err
	}
	return snap, nil
}

// KeepFrom returns the lowest index i <= upTo such that the entries in
// (i, upTo] hold at most maxBytes of data: compacting up to i keeps about
// maxBytes of the most recent entries for followers.
func (l *Log) KeepFrom(upTo, maxBytes uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.img
	upTo = min(upTo, m.lastIndex())
	var sum uint64
	i := upTo
	for ; i > m.base.index; i-- {
		e := m.at(i)
		if e == nil {
			break
		}
		sum += uint64(len(e.GetData()))
		if sum > maxBytes {
			break
		}
	}
	return i
}

// Stats returns counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.SizeBytes = l.fr.off
	return s
}

// Close waits for copy 1's last records to be written and synced and
// closes the files.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = fmt.Errorf("raftlog: closed")
	}
	return l.closeFilesLocked()
}

// ---- raft.Storage -------------------------------------------------------------

// InitialState implements raft.Storage.
func (l *Log) InitialState() (*pb.HardState, *pb.ConfState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := l.img.snap.GetMetadata().GetConfState()
	if cs == nil {
		cs = &pb.ConfState{}
	}
	return proto.Clone(l.img.hs).(*pb.HardState), proto.Clone(cs).(*pb.ConfState), nil
}

// Entries implements raft.Storage.
func (l *Log) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.img.entries(lo, hi, maxSize)
}

// Term implements raft.Storage.
func (l *Log) Term(i uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.img.term(i)
}

// LastIndex implements raft.Storage.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.img.lastIndex(), nil
}

// FirstIndex implements raft.Storage.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.img.firstIndex(), nil
}

// Snapshot implements raft.Storage.
func (l *Log) Snapshot() (*pb.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.img.snap, nil
}
