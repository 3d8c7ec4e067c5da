package powerloss

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/fsys"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/filestore"
)

// Options bound a run.
type Options struct {
	// Seed draws the workloads, the crash points and what each power loss
	// keeps (0: not allowed; the caller draws and prints one).
	Seed int64
	// Workloads is how many workloads are drawn; each is crashed at
	// CrashesPerWorkload points in each Mode.
	Workloads int
	// CrashesPerWorkload is how many operations of a workload a crash is
	// drawn at (0: every mutating operation of the workload, in order).
	CrashesPerWorkload int
	// Steps is the workload's length (puts, repairs, deletes, compactions).
	Steps int
	// MaxChunks bounds a blob's chunks; MaxChunkBytes a chunk's size.
	MaxChunks, MaxChunkBytes int
	// Modes are the crash kinds tried (default AllModes).
	Modes []Mode
	// Store is the node store under test: StoreFile (default), the
	// plain-file store, or StoreSDF, objstore's SDFStore on a file-backed
	// emulated flash device (SDFGeometry) whose page file is on the
	// power-cut file system; its Sync modes run it power-safe (the
	// default), nosync with SDFStoreOptions.PowerUnsafe.
	Store string
	// Logf, when set, sees one line per failed trial.
	Logf func(format string, args ...any)
}

// The stores a run can cut from power.
const (
	StoreFile = "file"
	StoreSDF  = "sdf"
)

// SDFGeometry is the emulated device of a StoreSDF run: 2 channels x 2
// dies x 24 blocks x 16 pages of 4 KiB (6 MiB), small enough that every
// crash image is a cheap copy, large enough for SDF's metadata zones and
// a workload's chunks several times over.
func SDFGeometry() flash.Geometry {
	return flash.Geometry{Channels: 2, DiesPerChannel: 2, BlocksPerDie: 24, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
}

// Defaults for Options' zero fields.
const (
	DefaultWorkloads          = 4
	DefaultCrashesPerWorkload = 25
	DefaultSteps              = 12
	DefaultMaxChunks          = 4
	DefaultMaxChunkBytes      = 24 << 10
)

// Validate fills the defaults in and checks the options.
func (o *Options) Validate() error {
	if o.Seed == 0 {
		return base.InvalidArgumentf("powerloss: seed 0 (draw one and print it)")
	}
	if o.Workloads == 0 {
		o.Workloads = DefaultWorkloads
	}
	if o.Steps == 0 {
		o.Steps = DefaultSteps
	}
	if o.MaxChunks == 0 {
		o.MaxChunks = DefaultMaxChunks
	}
	if o.MaxChunkBytes == 0 {
		o.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if len(o.Modes) == 0 {
		o.Modes = AllModes
	}
	if o.Store == "" {
		o.Store = StoreFile
	}
	switch {
	case o.Store != StoreFile && o.Store != StoreSDF:
		return base.InvalidArgumentf("powerloss: store %q (want %s or %s)", o.Store, StoreFile, StoreSDF)
	case o.Workloads < 1 || o.Workloads > 10000:
		return base.InvalidArgumentf("powerloss: %d workloads (want 1..10000)", o.Workloads)
	case o.CrashesPerWorkload < 0 || o.CrashesPerWorkload > 100000:
		return base.InvalidArgumentf("powerloss: %d crashes per workload (want 0 for every operation, or up to 100000)", o.CrashesPerWorkload)
	case o.Steps < 1 || o.Steps > 1000:
		return base.InvalidArgumentf("powerloss: %d steps (want 1..1000)", o.Steps)
	case o.MaxChunks < 1 || o.MaxChunks > 64:
		return base.InvalidArgumentf("powerloss: %d chunks per blob (want 1..64)", o.MaxChunks)
	case o.MaxChunkBytes < 1 || o.MaxChunkBytes > direct.ChunkSize:
		return base.InvalidArgumentf("powerloss: chunks of %d bytes (want 1..%d)", o.MaxChunkBytes, direct.ChunkSize)
	}
	for _, m := range o.Modes {
		if !m.valid() {
			return base.InvalidArgumentf("powerloss: unknown mode %v", m)
		}
	}
	return nil
}

// Mode is a kind of crash: whether the store fsyncs (its durability
// contract) and what of the unsynced state the crash keeps.
type Mode struct {
	Sync bool
	// Keep is fsys.CrashConfig.KeepPercent: 0 exactly what was synced (a
	// power loss), 50 a torn mix, 100 a process crash (the kernel keeps
	// every write).
	Keep int
}

// AllModes are the modes a run tries by default: power losses of a
// syncing store (the node's default, `flashmend node --sync`) keeping
// none, half or all of the unsynced state, and a process crash of a store
// that does not sync.
var AllModes = []Mode{{Sync: true, Keep: 0}, {Sync: true, Keep: 50}, {Sync: true, Keep: 100}, {Sync: false, Keep: 100}}

func (m Mode) valid() bool {
	return m.Keep >= 0 && m.Keep <= 100 && (m.Sync || m.Keep == 100)
}

func (m Mode) String() string {
	sync := "sync"
	if !m.Sync {
		sync = "no sync"
	}
	switch m.Keep {
	case 0:
		return sync + ", power loss keeping only synced state"
	case 100:
		return sync + ", process crash (every write kept)"
	}
	return fmt.Sprintf("%s, power loss keeping %d%% of unsynced sectors and directory changes", sync, m.Keep)
}

// ParseMode reads "sync/0", "sync/50", "sync/100", "nosync/100".
func ParseMode(s string) (Mode, error) {
	kind, keep, ok := strings.Cut(s, "/")
	var m Mode
	switch kind {
	case "sync":
		m.Sync = true
	case "nosync":
	default:
		ok = false
	}
	if ok {
		_, err := fmt.Sscanf(keep, "%d", &m.Keep)
		ok = err == nil && m.valid()
	}
	if !ok {
		return Mode{}, base.InvalidArgumentf("powerloss: mode %q (want sync/<keep 0..100> or nosync/100)", s)
	}
	return m, nil
}

// Label is ParseMode's form of m.
func (m Mode) Label() string {
	if m.Sync {
		return fmt.Sprintf("sync/%d", m.Keep)
	}
	return fmt.Sprintf("nosync/%d", m.Keep)
}

// Tally counts what the checks after the restarts found, per mode and
// workload step.
type Tally struct {
	Trials int
	// Acked chunks and index entries checked (acknowledged before the
	// crash, not deleted): each must read back verified and equal.
	AckedChunks, AckedEntries int
	// Lost and Wrong are the failures: an acknowledged chunk or entry
	// missing or corrupt after the restart, and anything that verifies
	// with other bytes than were written.
	Lost, Wrong int
	// InFlight* are the outcomes of the write the crash interrupted:
	// absent, corrupt (reported as such, for a repair), whole.
	InFlightAbsent, InFlightCorrupt, InFlightWhole int
	// Resurrected counts deleted chunks that came back (whole and
	// verified): deletes are not synced (the contract says so).
	Resurrected int
	// TornTails and DamagedRegions are what the reopened store's pack
	// loads cut off or skipped (PackStats).
	TornTails, DamagedRegions int64
	// Failed counts trials with any failure; Errors unexpected errors.
	Failed, Errors int
}

func (t *Tally) add(o Tally) {
	t.Trials += o.Trials
	t.AckedChunks += o.AckedChunks
	t.AckedEntries += o.AckedEntries
	t.Lost += o.Lost
	t.Wrong += o.Wrong
	t.InFlightAbsent += o.InFlightAbsent
	t.InFlightCorrupt += o.InFlightCorrupt
	t.InFlightWhole += o.InFlightWhole
	t.Resurrected += o.Resurrected
	t.TornTails += o.TornTails
	t.DamagedRegions += o.DamagedRegions
	t.Failed += o.Failed
	t.Errors += o.Errors
}

// Result is a run's outcome.
type Result struct {
	Options Options
	// Cells maps mode label and step kind to its tally.
	Cells map[string]map[string]*Tally
	// Ops is the number of mutating file-system operations per workload.
	Ops []int64
	// Failures lists the failed trials (at most 50), each reproducible
	// from its line.
	Failures []string
	Elapsed  time.Duration
}

// Passed reports whether no acknowledged write was lost, nothing read back
// wrong and nothing failed unexpectedly.
func (r *Result) Passed() bool {
	for _, byStep := range r.Cells {
		for _, t := range byStep {
			if t.Failed > 0 {
				return false
			}
		}
	}
	return true
}

// Total sums every cell.
func (r *Result) Total() Tally {
	var t Tally
	for _, byStep := range r.Cells {
		for _, c := range byStep {
			t.add(*c)
		}
	}
	return t
}

// Run crashes the store of every workload at its drawn operations in
// every mode, restarts it from the crash image and checks it.
func Run(opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	res := &Result{Options: opts, Cells: map[string]map[string]*Tally{}}
	rng := rand.New(rand.NewSource(opts.Seed))
	for w := 0; w < opts.Workloads; w++ {
		wl := drawWorkload(rng, opts)
		for _, mode := range opts.Modes {
			total, err := wl.dryRun(mode)
			if err != nil {
				return nil, fmt.Errorf("powerloss: workload %d (%s) without a crash: %w", w, mode.Label(), err)
			}
			if mode == opts.Modes[0] {
				res.Ops = append(res.Ops, total)
			}
			var points []int64
			if opts.CrashesPerWorkload == 0 || int64(opts.CrashesPerWorkload) >= total {
				for n := int64(1); n <= total; n++ {
					points = append(points, n)
				}
			} else {
				for i := 0; i < opts.CrashesPerWorkload; i++ {
					points = append(points, 1+rng.Int63n(total))
				}
			}
			for _, at := range points {
				keepSeed := rng.Int63()
				t, step, fails := wl.trial(mode, at, keepSeed)
				cells := res.Cells[mode.Label()]
				if cells == nil {
					cells = map[string]*Tally{}
					res.Cells[mode.Label()] = cells
				}
				if cells[step] == nil {
					cells[step] = &Tally{}
				}
				cells[step].add(t)
				for _, f := range fails {
					line := fmt.Sprintf("seed %d workload %d mode %s crash at op %d (keep seed %d, %s): %s", opts.Seed, w, mode.Label(), at, keepSeed, step, f)
					if len(res.Failures) < 50 {
						res.Failures = append(res.Failures, line)
					}
					if opts.Logf != nil {
						opts.Logf("powerloss: %s", line)
					}
				}
			}
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// step is one workload step.
type step struct {
	kind string // put, repair, delete, compact
	blob int    // index into workload.blobs (put, delete, repair)
	// chunk is the chunk a repair rewrites.
	chunk int
}

type blobSpec struct {
	object, version uint64
	chunks          [][]byte
}

type workload struct {
	steps []step
	blobs []blobSpec
	store string // Options.Store
}

func drawWorkload(rng *rand.Rand, opts Options) *workload {
	wl := &workload{store: opts.Store}
	put := func() {
		b := blobSpec{object: rng.Uint64() | 1, version: uint64(1 + rng.Intn(3))}
		for i := 0; i < 1+rng.Intn(opts.MaxChunks); i++ {
			c := make([]byte, 1+rng.Intn(opts.MaxChunkBytes))
			rng.Read(c)
			b.chunks = append(b.chunks, c)
		}
		wl.blobs = append(wl.blobs, b)
		wl.steps = append(wl.steps, step{kind: "put", blob: len(wl.blobs) - 1})
	}
	live := func() []int {
		dead := map[int]bool{}
		for _, s := range wl.steps {
			if s.kind == "delete" {
				dead[s.blob] = true
			}
		}
		var out []int
		for i := range wl.blobs {
			if !dead[i] {
				out = append(out, i)
			}
		}
		return out
	}
	put()
	for len(wl.steps) < opts.Steps {
		l, r := live(), rng.Intn(10)
		switch {
		case r < 4 || len(l) == 0:
			put()
		case r < 7:
			b := l[rng.Intn(len(l))]
			wl.steps = append(wl.steps, step{kind: "repair", blob: b, chunk: rng.Intn(len(wl.blobs[b].chunks))})
		case r < 9:
			wl.steps = append(wl.steps, step{kind: "delete", blob: l[rng.Intn(len(l))]})
		default:
			wl.steps = append(wl.steps, step{kind: "compact"})
		}
	}
	return wl
}

func (b blobSpec) id(i int) direct.ChunkID {
	return direct.ChunkID{Object: b.object, Version: b.version, Index: uint32(i)}
}

func (b blobSpec) info() objstore.BlobInfo {
	return objstore.BlobInfo{Key: fmt.Sprintf("obj-%x", b.object), Object: b.object, Version: b.version, Redundancy: "rep", Chunks: uint32(len(b.chunks))}
}

const root = "/node/store"

// nodeStore is the store under test and what only the plain-file store
// has: compaction and its packs' load statistics.
type nodeStore struct {
	objstore.Store
	compact   func() error
	packStats func() filestore.PackStats
}

// open opens the workload's store on m.
func (wl *workload) open(m *fsys.Mem, mode Mode) (*nodeStore, error) {
	if wl.store == StoreSDF {
		s, err := objstore.OpenSDFStore(root, objstore.SDFStoreOptions{Geometry: SDFGeometry(), Seed: 1, FS: m, PowerUnsafe: !mode.Sync,
			Serial: true})
		if err != nil {
			return nil, err
		}
		// SDF reclaims space by itself (host GC): nothing to compact.
		return &nodeStore{Store: s, compact: func() error { return nil }, packStats: func() filestore.PackStats { return filestore.PackStats{} }}, nil
	}
	s, err := filestore.OpenFS(m, root, mode.Sync)
	if err != nil {
		return nil, err
	}
	return &nodeStore{Store: s, compact: func() error { return s.Compact(0) }, packStats: s.PackStats}, nil
}

// state is what the workload knows about each blob when the crash hits.
type state struct {
	// ackedChunks[b][i]: chunk i of blob b acknowledged.
	ackedChunks map[int]map[int]bool
	ackedEntry  map[int]bool
	// deleting: a delete of the blob was started (acknowledged or not).
	deleting map[int]bool
	// inFlight is the chunk or entry the crash interrupted (-1: none).
	inFlightBlob, inFlightChunk int
	inFlightEntry               bool
	step                        string
}

// execute runs the workload on a store over m until a call fails with
// fsys.ErrCrashed (then the interrupted step is recorded) or it ends.
func (wl *workload) execute(m *fsys.Mem, mode Mode, st *state) (err error) {
	s, err := wl.open(m, mode)
	if err != nil {
		st.step = "reopen"
		return err
	}
	defer func() {
		if err != nil {
			// The power is cut: what Close writes is lost, but the
			// store's goroutines and memory go (an SDF device's).
			_ = s.Close()
		}
	}()
	cs := objstore.NewChunkStore(s)
	st.inFlightBlob, st.inFlightChunk = -1, -1
	for _, sp := range wl.steps {
		b := wl.blobs[sp.blob]
		switch sp.kind {
		case "put":
			if st.ackedChunks[sp.blob] == nil {
				st.ackedChunks[sp.blob] = map[int]bool{}
			}
			for i, data := range b.chunks {
				st.step, st.inFlightBlob, st.inFlightChunk = "put chunk", sp.blob, i
				id := b.id(i)
				if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
					return err
				}
				st.ackedChunks[sp.blob][i] = true
			}
			st.step, st.inFlightChunk, st.inFlightEntry = "put index", -1, true
			if err := cs.PutBlobInfo(b.info()); err != nil {
				return err
			}
			st.ackedEntry[sp.blob] = true
			st.inFlightEntry = false
		case "repair":
			st.step, st.inFlightBlob, st.inFlightChunk = "repair", sp.blob, -1
			id := b.id(sp.chunk)
			data := b.chunks[sp.chunk]
			if err := cs.WriteChunk(id, data, direct.Sums(id, data), true); err != nil {
				return err
			}
		case "delete":
			st.step, st.inFlightBlob, st.inFlightChunk = "delete", sp.blob, -1
			st.deleting[sp.blob] = true
			if err := cs.DeleteBlob(b.object, b.version); err != nil {
				return err
			}
		case "compact":
			st.step, st.inFlightBlob, st.inFlightChunk = "compact", -1, -1
			if err := s.compact(); err != nil {
				return err
			}
		}
		st.inFlightBlob, st.inFlightChunk = -1, -1
	}
	st.step = "done"
	return s.Close()
}

func newState() *state {
	return &state{ackedChunks: map[int]map[int]bool{}, ackedEntry: map[int]bool{}, deleting: map[int]bool{}, inFlightBlob: -1, inFlightChunk: -1}
}

// dryRun runs the workload without a crash, checks it, and returns how
// many mutating operations it made.
func (wl *workload) dryRun(mode Mode) (int64, error) {
	m := fsys.NewMem()
	if err := wl.execute(m, mode, newState()); err != nil {
		return 0, err
	}
	return m.Ops(), nil
}

// trial runs the workload, cuts the power before its at-th mutating
// operation, restarts the store from the image and checks it. It returns
// the tally, the step the crash interrupted and the failures.
func (wl *workload) trial(mode Mode, at int64, keepSeed int64) (Tally, string, []string) {
	m := fsys.NewMem()
	var img *fsys.Mem
	keep := rand.New(rand.NewSource(keepSeed))
	m.SetHook(func(op fsys.Op) {
		if op.N == at {
			img = m.Crash(fsys.CrashConfig{KeepPercent: mode.Keep, Rand: keep})
		}
	})
	st := newState()
	err := wl.execute(m, mode, st)
	t := Tally{Trials: 1}
	var fails []string
	fail := func(format string, args ...any) {
		fails = append(fails, fmt.Sprintf(format, args...))
	}
	// The SDF store runs its device serially (SDFStoreOptions.Serial), so
	// a trial makes the dry run's operations in the dry run's order and
	// the cut always lands.
	if img == nil {
		t.Failed, t.Errors = 1, 1
		return t, st.step, []string{fmt.Sprintf("the crash at operation %d never happened (workload ended: %v)", at, err)}
	}
	// err is nil when the crash hit an operation whose failure the store
	// ignores (removing an emptied directory) and nothing followed it.
	// SDF takes a program that fails after the cut for a bad block and
	// retires its zone, so the workload may end on another error (no
	// space, after the retirements): the image was taken at the cut, and
	// nothing after it counts.
	if err != nil && !errors.Is(err, fsys.ErrCrashed) && wl.store != StoreSDF {
		t.Errors++
		fail("the workload failed otherwise than by the crash: %v", err)
	}
	t.add(wl.check(img, mode, st, fail))
	if len(fails) > 0 {
		t.Failed = 1
	}
	return t, st.step, fails
}

// check reopens the store on img and checks every blob against st, then
// that the store takes writes and that a second restart (a power loss
// right after the first one's repairs) finds the same.
func (wl *workload) check(img *fsys.Mem, mode Mode, st *state, fail func(string, ...any)) Tally {
	var t Tally
	s, err := wl.open(img, mode)
	if err != nil {
		t.Errors++
		fail("reopen: %v", err)
		return t
	}
	defer s.Close()
	cs := objstore.NewChunkStore(s)
	for b, spec := range wl.blobs {
		for i, data := range spec.chunks {
			id := spec.id(i)
			r, err := cs.ReadChunk(id)
			acked := st.ackedChunks[b][i]
			inFlight := st.inFlightBlob == b && st.inFlightChunk == i
			verified := err == nil && !r.Corrupt
			switch {
			case verified && !bytes.Equal(r.Data, data):
				t.Wrong++
				fail("chunk %s verifies with other bytes (%d bytes, wrote %d)", id, len(r.Data), len(data))
			case st.deleting[b]:
				if verified && acked {
					t.Resurrected++
				} else if err != nil && !objstore.IsNotFound(err) {
					t.Errors++
					fail("deleted chunk %s: %v", id, err)
				}
			case acked:
				t.AckedChunks++
				if !verified {
					t.Lost++
					fail("acknowledged chunk %s after the restart: %s %v", id, r, err)
				}
			case inFlight:
				switch {
				case verified:
					t.InFlightWhole++
				case err == nil && r.Corrupt:
					t.InFlightCorrupt++
				case objstore.IsNotFound(err):
					t.InFlightAbsent++
				default:
					t.Errors++
					fail("in-flight chunk %s: %v", id, err)
				}
			case err != nil && !objstore.IsNotFound(err):
				t.Errors++
				fail("never-written chunk %s: %v", id, err)
			case err == nil:
				// Never acknowledged nor in flight: only a previous
				// trial's... impossible in a fresh file system.
				t.Wrong++
				fail("chunk %s never written reads back (%s)", id, r)
			}
		}
		info, err := cs.BlobInfoOf(spec.object, spec.version, 0)
		want := spec.info()
		switch {
		case err == nil && !sameInfo(info, want):
			t.Wrong++
			fail("index entry of blob %d reads %s, wrote %s", b, info, want)
		case st.deleting[b]:
			if err != nil && !objstore.IsNotFound(err) {
				t.Errors++
				fail("deleted blob %d's index entry: %v", b, err)
			}
		case st.ackedEntry[b]:
			t.AckedEntries++
			if err != nil {
				t.Lost++
				fail("acknowledged index entry of blob %d: %v", b, err)
			}
		case st.inFlightEntry && st.inFlightBlob == b && err == nil:
			t.InFlightWhole++
		case st.inFlightEntry && st.inFlightBlob == b && objstore.IsNotFound(err):
			t.InFlightAbsent++
		case err != nil && !objstore.IsNotFound(err):
			t.Errors++
			fail("unacknowledged index entry of blob %d: %v", b, err)
		}
	}
	if _, err := cs.Blobs(); err != nil {
		t.Errors++
		fail("listing the index after the restart: %v", err)
	}
	ps := s.packStats()
	t.TornTails, t.DamagedRegions = ps.TornTails, ps.DamagedRegions
	// The store takes writes again: the interrupted chunk is repaired
	// (written out of place over whatever the crash left) and reads back.
	if st.inFlightBlob >= 0 && st.inFlightChunk >= 0 && !st.deleting[st.inFlightBlob] {
		spec := wl.blobs[st.inFlightBlob]
		id, data := spec.id(st.inFlightChunk), spec.chunks[st.inFlightChunk]
		if err := cs.WriteChunk(id, data, direct.Sums(id, data), true); err != nil {
			t.Errors++
			fail("repairing the interrupted chunk %s: %v", id, err)
		} else if r, err := cs.ReadChunk(id); err != nil || r.Corrupt || !bytes.Equal(r.Data, data) {
			t.Errors++
			fail("the interrupted chunk %s after its repair: %s %v", id, r, err)
		}
	}
	// A second restart, from exactly what the first one synced (with
	// sync; everything without): the loads' cuts and the repairs hold.
	again := img.Crash(fsys.CrashConfig{KeepPercent: map[bool]int{true: 0, false: 100}[mode.Sync]})
	s2, err := wl.open(again, mode)
	if err != nil {
		t.Errors++
		fail("second reopen: %v", err)
		return t
	}
	defer s2.Close()
	cs2 := objstore.NewChunkStore(s2)
	for b, spec := range wl.blobs {
		if st.deleting[b] {
			continue
		}
		for i, data := range spec.chunks {
			if !st.ackedChunks[b][i] {
				continue
			}
			if r, err := cs2.ReadChunk(spec.id(i)); err != nil || r.Corrupt || !bytes.Equal(r.Data, data) {
				t.Lost++
				fail("acknowledged chunk %s after the second restart: %s %v", spec.id(i), r, err)
			}
		}
	}
	return t
}

func sameInfo(a, b objstore.BlobInfo) bool {
	return a.Key == b.Key && a.Object == b.Object && a.Version == b.Version && a.Shard == b.Shard && a.Redundancy == b.Redundancy && a.Chunks == b.Chunks
}
