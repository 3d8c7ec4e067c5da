package experiments

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/flash/pagefile"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/filestore"
	"github.com/flashmend/flashmend/internal/report"
)

// The single-fault sweep over the files of storage nodes and of the
// coordinator (CORDS, FAST'17, one fault at a time): a small cluster is
// written and stopped; for each file type and each fault (a 4 KiB block
// zeroed, overwritten with junk, one bit flipped, the file truncated to
// half, the file deleted) one file of that type on one node (or the
// coordinator) is damaged, the cluster restarts, every object is read back
// and scrubbed, and the outcome is classified. Targets: every cell is
// correct, repaired, or one node reported dead whose data is re-created on
// the others; never a hang (every cell has a deadline), never a reformat,
// never the whole cluster down, never wrong or lost data.
//
// Nodes run on both stores: plain files (where a node's chunks, sums files
// (with the local index entries) and identity are files of their own) and emulated
// flash (where they live inside the device's page file, next to its state
// copies and format marker).

// sweepFault is one kind of single fault.
type sweepFault string

const (
	faultZero     sweepFault = "zero"
	faultJunk     sweepFault = "junk"
	faultFlip     sweepFault = "flip"
	faultTruncate sweepFault = "truncate"
	faultDelete   sweepFault = "delete"
)

var sweepFaults = []sweepFault{faultZero, faultJunk, faultFlip, faultTruncate, faultDelete}

// Faults a node's store returns while the cluster runs (plain-file nodes
// only: objIOFaultStore wraps the victim node's store). They are columns
// of the torture harness's CORDS table, not of this sweep's default set.
const (
	// faultEIORead: every read of the victim file fails with EIO, as a bad
	// sector under it would, until the file is written anew (out of
	// place: its new bytes are elsewhere on the device).
	faultEIORead sweepFault = "eio-read"
	// faultWriteError: every write of a file of the victim's type on the
	// victim's node fails with EIO.
	faultWriteError sweepFault = "write-error"
	// faultLostWrite: every write of a file of the victim's type on the
	// victim's node is acknowledged and dropped (the file keeps what it
	// held: nothing, for a new one) while new objects are written and read
	// back; then the fault clears and the scrubber must find and repair
	// every copy that was lost.
	faultLostWrite sweepFault = "lost-write"
)

func isObjIOFault(f sweepFault) bool {
	return f == faultEIORead || f == faultWriteError || f == faultLostWrite
}

// objIOFault names what a cell's I/O fault hits: a node (by its
// directory) and a file of its store.
type objIOFault struct {
	fault   sweepFault
	nodeDir string
	name    string // store-relative file (a pack holds many store names: filestore.FileOf)
	names   string // prefix of the store names whose writes are hit ("": name's directory's)
}

// objIOFaultStore is a node's plain-file store with one I/O fault.
type objIOFaultStore struct {
	*filestore.Store
	f        objIOFault
	injected atomic.Int64
	// rewritten holds the names in the victim file written anew since the
	// fault began (Put, Create, WriteFresh): out of place, off the bad
	// sector (a plain file is replaced; a pack appends the new record).
	rewritten sync.Map
	// cleared: a lost-write fault is over.
	cleared atomic.Bool
}

// ofVictimType says whether name is a file of the victim's type (its store
// directory: d/ chunk data, k/ sums, i/ index entries, node/ identity).
func (s *objIOFaultStore) ofVictimType(name string) bool {
	if s.f.names != "" {
		return strings.HasPrefix(name, s.f.names)
	}
	return path.Dir(name) != "." && strings.SplitN(name, "/", 2)[0] == strings.SplitN(s.f.name, "/", 2)[0]
}

func (s *objIOFaultStore) readFails(name string) error {
	if s.f.fault != faultEIORead || filestore.FileOf(name) != s.f.name {
		return nil
	}
	if _, ok := s.rewritten.Load(name); !ok {
		s.injected.Add(1)
		return fmt.Errorf("read %s: injected: %w", name, syscall.EIO)
	}
	return nil
}

func (s *objIOFaultStore) writeFails(name string) error {
	if s.f.fault == faultWriteError && s.ofVictimType(name) {
		s.injected.Add(1)
		return fmt.Errorf("write %s: injected: %w", name, syscall.EIO)
	}
	return nil
}

// drops says whether a write of name is lost (acknowledged, never made).
func (s *objIOFaultStore) drops(name string) bool {
	if s.f.fault == faultLostWrite && !s.cleared.Load() && s.ofVictimType(name) {
		s.injected.Add(1)
		return true
	}
	return false
}

// GetInto is objstore's allocation-free read (chunk reads take it).
func (s *objIOFaultStore) GetInto(name string, alloc func(n int) []byte) ([]byte, error) {
	if err := s.readFails(name); err != nil {
		return nil, err
	}
	return s.Store.GetInto(name, alloc)
}

func (s *objIOFaultStore) Get(name string) ([]byte, error) {
	if err := s.readFails(name); err != nil {
		return nil, err
	}
	return s.Store.Get(name)
}

func (s *objIOFaultStore) GetRange(name string, off, n int64) ([]byte, error) {
	if err := s.readFails(name); err != nil {
		return nil, err
	}
	return s.Store.GetRange(name, off, n)
}

func (s *objIOFaultStore) Put(name string, data []byte) error {
	if err := s.writeFails(name); err != nil {
		return err
	}
	if s.drops(name) {
		return nil
	}
	err := s.Store.Put(name, data)
	s.noteRewrite(name, err)
	return err
}

func (s *objIOFaultStore) noteRewrite(name string, err error) {
	if err == nil && filestore.FileOf(name) == s.f.name {
		s.rewritten.Store(name, true)
	}
}

// Create is objstore.Creator's (new chunk data files).
func (s *objIOFaultStore) Create(name string, data []byte) error {
	if err := s.writeFails(name); err != nil {
		return err
	}
	if s.drops(name) {
		return nil
	}
	err := s.Store.Create(name, data)
	s.noteRewrite(name, err)
	return err
}

// WriteFresh is objstore.FreshWriter's (sums records of new chunks).
func (s *objIOFaultStore) WriteFresh(name string, off int64, data []byte) error {
	if err := s.writeFails(name); err != nil {
		return err
	}
	if s.drops(name) {
		return nil
	}
	err := s.Store.WriteFresh(name, off, data)
	s.noteRewrite(name, err)
	return err
}

// NewBatch is objstore.Batcher's: the plain-file store's batch, its writes
// through the fault. Without it the embedded store's NewBatch was
// promoted and a node's PUT streams, batched since objstore.ChunkBatch,
// wrote around the fault: the object cells' write errors and lost writes
// never fired.
func (s *objIOFaultStore) NewBatch() objstore.Batch {
	return &objIOFaultBatch{s: s, b: s.Store.NewBatch()}
}

// objIOFaultBatch is a batch of the victim node's store under its fault.
type objIOFaultBatch struct {
	s *objIOFaultStore
	b objstore.Batch
}

func (b *objIOFaultBatch) Create(name string, data []byte) error {
	if err := b.s.writeFails(name); err != nil {
		return err
	}
	if b.s.drops(name) {
		return nil
	}
	err := b.b.Create(name, data)
	b.s.noteRewrite(name, err)
	return err
}

func (b *objIOFaultBatch) WriteFresh(name string, off int64, data []byte) error {
	if err := b.s.writeFails(name); err != nil {
		return err
	}
	if b.s.drops(name) {
		return nil
	}
	err := b.b.WriteFresh(name, off, data)
	b.s.noteRewrite(name, err)
	return err
}

func (b *objIOFaultBatch) Commit() error { return b.b.Commit() }

var _ objstore.Batcher = (*objIOFaultStore)(nil)

// sweepFileType is a type of file a node or the coordinator keeps: Store is
// the node store it exists on ("file", "sdf", or "" for the coordinator),
// Match picks files of the type by their path relative to the cluster dir.
type sweepFileType struct {
	Name  string
	Store string
	Match func(rel string) bool
}

// indexEntryNames is the prefix of the store names of the local index
// entries, whose writes a write fault of their type hits: on plain files
// they are members of the sums packs (filestore), not files of their own,
// so the victim file's directory does not name them.
const indexEntryNames = "i/"

var sweepFileTypes = []sweepFileType{
	{"chunk data", "file", func(r string) bool { return strings.Contains(r, "/store/d/") }},
	{"sums file", "file", func(r string) bool { return strings.Contains(r, "/store/k/") }},
	// The plain-file store keeps a blob's index entry copies in its sums
	// pack (before, under i/, which an older store may still hold).
	{"local index entry", "file", func(r string) bool {
		return strings.Contains(r, "/store/i/") || strings.Contains(r, "/store/k/")
	}},
	{"node identity", "file", func(r string) bool { return strings.Contains(r, "/store/node/identity") }},
	{"flash page file", "sdf", func(r string) bool { return strings.HasSuffix(r, "/sdf/flash/pages") }},
	{"flash device state", "sdf", func(r string) bool { return strings.Contains(r, "/sdf/flash/state.") }},
	{"flash device lock", "sdf", func(r string) bool { return strings.HasSuffix(r, "/sdf/flash/LOCK") }},
	{"sdf format marker", "sdf", func(r string) bool { return strings.HasSuffix(r, "/sdf/sdf-formatted") }},
	{"etcd WAL", "", func(r string) bool { return strings.HasPrefix(r, "coordinator/") && strings.HasSuffix(r, ".wal") }},
	{"etcd backend", "", func(r string) bool { return strings.HasPrefix(r, "coordinator/") && strings.HasSuffix(r, "/snap/db") }},
	{"etcd ports file", "", func(r string) bool { return strings.HasSuffix(r, "coordinator/etcd/ports.json") }},
}

// sweepCell is one (file type, fault) run.
type sweepCell struct {
	Type    string
	Fault   sweepFault
	File    string // relative path of the damaged file
	Outcome string // correct, repaired, dead node re-created, or FAIL: why
	Detail  string
	Took    time.Duration
}

func (c sweepCell) failed() bool { return strings.HasPrefix(c.Outcome, "FAIL") }

// sweepOptions bound the sweep.
type sweepOptions struct {
	Nodes   int
	Seed    int64
	Objects int // per redundancy
	// Faults are the columns (nil: sweepFaults).
	Faults []sweepFault
	// Cells picks which cells run: nil runs every (type, fault).
	Cells func(t sweepFileType, f sweepFault) bool
	// CellTimeout bounds each cell: a hang is a failure.
	CellTimeout time.Duration
}

const sweepObjectBytes = 3*direct.ChunkSize + 4321

// sweepGeometry is a small flash device for the sweep's sdf nodes.
func sweepGeometry() flash.Geometry {
	return flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 16, PagesPerBlock: 32, PageSize: 4096, OOBSize: 128}
}

func sweepClusterOptions(dir, store string, nodes int, ns *urNodeStores) devcluster.Options {
	var open func(dir string, i int) (objstore.Store, error)
	// Plain-file nodes store on the machine's shared disk: with the
	// default repair reserve (5% of that disk) every put is refused once
	// other work has filled it past 95% (a torture run's object cells
	// failed so: "device ... is near full: 10.8 GB free of 264 GB"). A
	// sweep cell is no test of a full device: no reserve. SDF nodes' devices
	// are their own, and keep theirs.
	reserve := -1.0
	if store == "sdf" {
		open, reserve = ns.open, 0
	}
	return devcluster.Options{Dir: dir, Nodes: nodes, NodeStore: open, UnsafeNoFsync: true, RepairReserve: reserve,
		LeaseTTLSeconds: 2, HeartbeatInterval: 200 * time.Millisecond,
		Scrub: &client.ScrubberOptions{PassInterval: 200 * time.Millisecond, ReprotectAfter: time.Second,
			ScrubBytesPerSecond: 256 * base.MiB, RepairBytesPerSecond: 256 * base.MiB}}
}

func sweepObjectKey(red objectpb.Redundancy, i int) string {
	return fmt.Sprintf("sweep/%s/%d", strings.ToLower(red.String()), i)
}

// buildSweepGolden writes the sweep's objects on a new cluster in dir.
func buildSweepGolden(ctx context.Context, dir, store string, o sweepOptions) error {
	opts := sweepClusterOptions(dir, store, o.Nodes, &urNodeStores{g: sweepGeometry(), stores: map[int]*objstore.SDFStore{}})
	opts.Scrub = nil
	cl, err := devcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	cli, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		cl.Close()
		return err
	}
	for _, red := range []objectpb.Redundancy{objectpb.Redundancy_REP, objectpb.Redundancy_EC} {
		for i := 0; i < o.Objects; i++ {
			if _, err := cli.Put(ctx, sweepObjectKey(red, i), uberObjectData(o.Seed, red, i, sweepObjectBytes), red); err != nil {
				cli.Close()
				cl.Close()
				return err
			}
		}
	}
	// Let the sweeper see nothing left to collect, then stop cleanly.
	cli.Close()
	return cl.Close()
}

// runFaultSweep runs the sweep; the cells are returned in a stable order.
func runFaultSweep(ctx context.Context, tmp string, o sweepOptions) ([]sweepCell, error) {
	goldens := map[string]string{}
	var cells []sweepCell
	rng := rand.New(rand.NewSource(o.Seed))
	for _, ft := range sweepFileTypes {
		store := ft.Store
		if store == "" {
			store = "file"
		}
		faults := o.Faults
		if faults == nil {
			faults = sweepFaults
		}
		for _, f := range faults {
			if o.Cells != nil && !o.Cells(ft, f) {
				continue
			}
			golden, ok := goldens[store]
			if !ok {
				golden = filepath.Join(tmp, "golden-"+store)
				if err := buildSweepGolden(ctx, golden, store, o); err != nil {
					return cells, fmt.Errorf("sweep: write the %s cluster: %w", store, err)
				}
				goldens[store] = golden
			}
			cell, err := runSweepCell(ctx, tmp, golden, store, ft, f, rng.Int63(), o)
			if err != nil {
				return cells, err
			}
			cells = append(cells, cell)
		}
	}
	return cells, nil
}

// runSweepCell damages one file of type ft on a copy of golden and checks
// what the restarted cluster does.
func runSweepCell(ctx context.Context, tmp, golden, store string, ft sweepFileType, fault sweepFault, seed int64, o sweepOptions) (cell sweepCell, err error) {
	cell = sweepCell{Type: ft.Name, Fault: fault}
	start := time.Now()
	defer func() { cell.Took = time.Since(start) }()
	dir, err := os.MkdirTemp(tmp, "cell-")
	if err != nil {
		return cell, err
	}
	defer os.RemoveAll(dir)
	if err := copyTreeSparse(golden, dir); err != nil {
		return cell, err
	}
	rng := rand.New(rand.NewSource(seed))
	var files []string
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.Type().IsRegular() && ft.Match(filepath.ToSlash(rel)) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return cell, err
	}
	if len(files) == 0 {
		cell.Outcome = "FAIL: no file of this type"
		return cell, nil
	}
	sort.Strings(files)
	victim := files[rng.Intn(len(files))]
	cell.File, _ = filepath.Rel(dir, victim)
	var iof *objIOFault
	var df *devFault
	var sf *stateFault
	switch {
	case isObjIOFault(fault) && store == "sdf" && ft.Name == "flash device state":
		// The device's state copies go through flash.Options.StateIO.
		i := strings.LastIndex(victim, string(filepath.Separator)+"sdf"+string(filepath.Separator))
		if i < 0 {
			return cell, fmt.Errorf("%s: no node directory", victim)
		}
		sf = &stateFault{fault: fault, nodeDir: victim[:i], path: victim}
	case isObjIOFault(fault) && store == "sdf" && ft.Name == "flash device lock":
		cell.Outcome, cell.Detail = "not reached", "the lock file holds no bytes (an flock on it is the lock): nothing is read or written"
		return cell, nil
	case isObjIOFault(fault) && store == "sdf" && ft.Name == "sdf format marker":
		cell.Outcome, cell.Detail = "not reached", "the marker's existence is what it says (a stat at open); its bytes are never read, and it is written once, at format"
		return cell, nil
	case isObjIOFault(fault) && store == "sdf":
		// On emulated flash, the page file's faults are the device's own
		// (flash.Faults): a page that reads uncorrectable, a die that
		// takes no program or erase.
		i := strings.LastIndex(victim, string(filepath.Separator)+"sdf"+string(filepath.Separator))
		if ft.Name != "flash page file" || i < 0 {
			cell.Outcome = "not run: on emulated flash only the page file takes I/O faults, through the device"
			return cell, nil
		}
		flat := usedOffset(victim, rng) / int64(pagefile.HeaderBytes+sweepGeometry().PageSize+sweepGeometry().OOBSize)
		page, ok := sweepGeometry().PageOfFlat(flat)
		if !ok {
			return cell, fmt.Errorf("%s: slot %d is outside the device", victim, flat)
		}
		df = &devFault{fault: fault, nodeDir: victim[:i], page: page, flipSeed: rng.Int63()}
	case isObjIOFault(fault):
		// The victim's node directory is the one holding its "store".
		i := strings.LastIndex(victim, string(filepath.Separator)+"store"+string(filepath.Separator))
		if i < 0 {
			cell.Outcome = "not run: I/O faults are injected into node stores only (the coordinator's etcd files take none yet)"
			return cell, nil
		}
		iof = &objIOFault{fault: fault, nodeDir: victim[:i], name: filepath.ToSlash(victim[i+len("/store/"):])}
		if ft.Name == "local index entry" {
			iof.names = indexEntryNames
		}
	default:
		if err := applySweepFault(victim, fault, rng); err != nil {
			return cell, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, o.CellTimeout)
	defer cancel()
	outcome, detail := checkSweepCell(cctx, dir, store, o, iof, df, sf)
	if cctx.Err() != nil && !strings.HasPrefix(outcome, "FAIL") {
		outcome = "FAIL: deadline"
	}
	cell.Outcome, cell.Detail = outcome, detail
	return cell, nil
}

// applySweepFault damages path: a block in its used part (its data extents:
// a sparse page file's holes hold nothing), a bit there, or the file.
func applySweepFault(path string, fault sweepFault, rng *rand.Rand) error {
	fs := vfs.Default
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	off := usedOffset(path, rng)
	block := off &^ 4095
	switch fault {
	case faultZero:
		if st.Size() == 0 {
			return nil
		}
		return bitrot.Zero(fs, path, block, 4096)
	case faultJunk:
		if st.Size() == 0 {
			return nil
		}
		return bitrot.Junk(fs, path, block, 4096, rng)
	case faultFlip:
		if st.Size() == 0 {
			return nil
		}
		return bitrot.FlipBit(fs, path, off*8+int64(rng.Intn(8)))
	case faultTruncate:
		return os.Truncate(path, st.Size()/2)
	case faultDelete:
		return bitrot.Delete(fs, path)
	}
	return base.InvalidArgumentf("unknown fault %q", fault)
}

// usedOffset picks a byte of path's used part (its data extents: a sparse
// page file's holes hold nothing) uniformly; 0 for an empty file.
func usedOffset(path string, rng *rand.Rand) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	extents, _ := dataExtents(f)
	f.Close()
	var used int64
	for _, e := range extents {
		used += e[1] - e[0]
	}
	if used == 0 {
		return 0
	}
	at := rng.Int63n(used)
	for _, e := range extents {
		if at < e[1]-e[0] {
			return e[0] + at
		}
		at -= e[1] - e[0]
	}
	return 0
}

// devFault is a cell's fault in an emulated flash device, armed through
// its flash.Faults when the victim node's device opens (before SDF mounts
// it): EIO read, the page under the damaged offset reads uncorrectable
// (devFaultReads times: every read until SDF moves what it held); write
// error, the die holding that page fails every program of a page not yet
// written and every erase once (a die that takes no more writes: its
// blocks go bad, and past the detector's threshold the die is failed and
// repaired, Reparo); lost write, every program of a page not yet written
// on that die is acknowledged and leaves the cells erased, while objects
// are written, then the fault clears and the scrub must repair what was
// lost.
type devFault struct {
	fault   sweepFault
	nodeDir string
	page    flash.PageAddr
	armed   int // faults injected
	dropped int // of those, cleared before they fired
	dev     *flash.Emulator
	// flipSeed draws the bits an uncorrectable read returns flipped.
	flipSeed int64
}

// devFaultReads is how many reads of the page fail; devFaultFlips the bits
// the first of them returns flipped (a device returns what it could not
// correct: the content of an uncorrectable page is not to be trusted, and
// a layer that used it on the strength of the status alone would be
// caught).
const (
	devFaultReads = 64
	devFaultFlips = 16
)

// arm injects the fault into dev.
func (f *devFault) arm(dev *flash.Emulator) {
	f.dev = dev
	inj := dev.Faults()
	switch f.fault {
	case faultEIORead:
		for i := 0; i < devFaultReads; i++ {
			inj.FailRead(f.page)
			f.armed++
		}
		rng := rand.New(rand.NewSource(f.flipSeed))
		for i := 0; i < devFaultFlips; i++ {
			inj.FlipBit(f.page, rng.Intn(8*dev.Geometry().PageSize), false)
			f.armed++ // each pending until the first read (Faults.Pending)
		}
	case faultWriteError:
		f.eachUnwrittenPage(dev, inj.FailProgram, inj.FailErase)
	case faultLostWrite:
		f.eachUnwrittenPage(dev, inj.LoseProgram, nil)
	}
}

// eachUnwrittenPage arms page on every page not yet programmed of the
// good blocks of the fault's die, and block (if set) on each such block,
// counting what it arms.
func (f *devFault) eachUnwrittenPage(dev *flash.Emulator, page func(flash.PageAddr), block func(flash.BlockAddr)) {
	g := dev.Geometry()
	for b := 0; b < g.BlocksPerDie; b++ {
		ba := flash.BlockAddr{Channel: f.page.Channel, Die: f.page.Die, Block: b}
		info, err := dev.Block(ba)
		if err != nil || info.Bad {
			continue
		}
		for p := info.WrittenPage; p < g.PagesPerBlock; p++ {
			page(flash.PageAddr{Channel: ba.Channel, Die: ba.Die, Block: ba.Block, Page: p})
			f.armed++
		}
		if block != nil {
			block(ba)
			f.armed++
		}
	}
}

// clear ends the fault: what has not fired is dropped (fired stays).
func (f *devFault) clear() {
	if f.dev != nil {
		f.dropped += f.dev.Faults().Pending()
		f.dev.Faults().Clear()
	}
}

// fired is how many of the armed faults went off.
func (f *devFault) fired() int {
	if f.dev == nil {
		return 0
	}
	return f.armed - f.dropped - f.dev.Faults().Pending()
}

func (f *devFault) String() string {
	switch f.fault {
	case faultEIORead:
		return fmt.Sprintf("page %s uncorrectable", f.page)
	case faultLostWrite:
		return fmt.Sprintf("die %s loses every program", f.page.DieAddr())
	}
	return fmt.Sprintf("die %s takes no program or erase", f.page.DieAddr())
}

// stateFault is an I/O fault on a flash device's state copies (its
// flash.Options.StateIO): every read of the victim copy fails with EIO
// until the copy is written anew (off the bad sector); every write of the
// node's state copies fails with EIO; or every such write is acknowledged
// and dropped (the copies keep what they held). It lasts until cleared.
type stateFault struct {
	fault    sweepFault
	nodeDir  string
	path     string // the victim copy
	injected atomic.Int64
	cleared  atomic.Bool
	// rewritten: the victim copy was written since the fault began.
	rewritten atomic.Bool
}

var _ pagefile.StateIO = (*stateFault)(nil)

func (f *stateFault) ReadFile(p string) ([]byte, error) {
	if f.fault == faultEIORead && !f.cleared.Load() && !f.rewritten.Load() && filepath.Clean(p) == filepath.Clean(f.path) {
		f.injected.Add(1)
		return nil, fmt.Errorf("read %s: injected: %w", p, syscall.EIO)
	}
	return pagefile.OSStateIO{}.ReadFile(p)
}

func (f *stateFault) WriteFileSync(p string, b []byte) error {
	ofNode := filepath.Dir(filepath.Clean(p)) == filepath.Dir(filepath.Clean(f.path))
	if ofNode && !f.cleared.Load() {
		switch f.fault {
		case faultWriteError:
			f.injected.Add(1)
			return fmt.Errorf("write %s: injected: %w", p, syscall.EIO)
		case faultLostWrite:
			f.injected.Add(1)
			return nil
		}
	}
	if filepath.Clean(p) == filepath.Clean(f.path) {
		f.rewritten.Store(true)
	}
	return pagefile.OSStateIO{}.WriteFileSync(p, b)
}

func (f *stateFault) String() string {
	switch f.fault {
	case faultEIORead:
		return "every read of " + filepath.Base(f.path) + " fails (EIO) until it is written anew"
	case faultWriteError:
		return "every write of the device's state copies fails (EIO)"
	}
	return "every write of the device's state copies is acknowledged and dropped"
}

// checkSweepCell restarts the cluster in dir and checks every target.
func checkSweepCell(ctx context.Context, dir, store string, o sweepOptions, iof *objIOFault, df *devFault, sf *stateFault) (outcome, detail string) {
	var logs base.LogLines
	ns := &urNodeStores{g: sweepGeometry(), stores: map[int]*objstore.SDFStore{}}
	if df != nil {
		ns.onDevice = func(ndir string, dev *flash.Emulator) {
			if filepath.Clean(ndir) == filepath.Clean(df.nodeDir) && df.dev == nil {
				df.arm(dev)
			}
		}
	}
	if sf != nil {
		ns.stateIO = func(ndir string) pagefile.StateIO {
			if filepath.Clean(ndir) == filepath.Clean(sf.nodeDir) {
				return sf
			}
			return nil
		}
	}
	opts := sweepClusterOptions(dir, store, o.Nodes, ns)
	opts.Logf = logs.Logf
	var faulty *objIOFaultStore
	restarted := false // the run-time fault is over: a restart opens plain stores
	if iof != nil {
		opts.NodeStore = func(ndir string, i int) (objstore.Store, error) {
			fs, err := filestore.Open(filepath.Join(ndir, "store"), opts.SyncWrites)
			if err != nil || restarted || filepath.Clean(ndir) != filepath.Clean(iof.nodeDir) {
				return fs, err
			}
			faulty = &objIOFaultStore{Store: fs, f: *iof}
			return faulty, nil
		}
	}
	type started struct {
		cl  *devcluster.Cluster
		err error
	}
	done := make(chan started, 1)
	go func() {
		cl, err := devcluster.Start(ctx, opts)
		done <- started{cl, err}
	}()
	var cl *devcluster.Cluster
	select {
	case s := <-done:
		if s.err != nil {
			return "FAIL: the cluster did not start", s.err.Error()
		}
		cl = s.cl
	case <-ctx.Done():
		return "FAIL: hang at start", logs.String()
	}
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	dead := cl.Dead()
	if len(dead) > 1 {
		return "FAIL: more than one node dead", fmt.Sprint(dead)
	}
	var notes []string
	for _, d := range dead {
		notes = append(notes, "dead: "+d.String())
	}
	ns.mu.Lock()
	for i, st := range ns.stores {
		info := st.OpenInfo()
		if info.Formatted {
			ns.mu.Unlock()
			return "FAIL: a node was formatted", fmt.Sprintf("node %d: %s", i+1, info)
		}
		if info.MarkerRestored || info.Device.RejectedStateCopies > 0 || info.FS.MetaUnitsMerged > 0 || info.Device.StateRebuilt {
			notes = append(notes, fmt.Sprintf("node %d opened: %s", i+1, info))
		}
	}
	ns.mu.Unlock()
	cli, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		return "FAIL: no client", err.Error()
	}
	defer func() { // the client of the restarted cluster, after a restart
		if cli != nil {
			cli.Close()
		}
	}()
	// Every object reads back right (the index may be being rebuilt from
	// the nodes: wait for it); a wrong byte is final.
	var recs []*objectpb.ObjectRecord
	wants := map[string][]byte{}
	for _, red := range []objectpb.Redundancy{objectpb.Redundancy_REP, objectpb.Redundancy_EC} {
		for i := 0; i < o.Objects; i++ {
			key := sweepObjectKey(red, i)
			want := uberObjectData(o.Seed, red, i, sweepObjectBytes)
			wants[key] = want
			var lastErr error
			for {
				got, err := cli.Get(ctx, key)
				if err == nil && !bytes.Equal(got, want) {
					return "FAIL: wrong data", key
				}
				if err == nil {
					break
				}
				lastErr = err
				if ctx.Err() != nil {
					return "FAIL: object not readable", fmt.Sprintf("%s: %v", key, lastErr)
				}
				time.Sleep(100 * time.Millisecond)
			}
			rec, err := cli.Stat(ctx, key)
			if err != nil {
				return "FAIL: stat", err.Error()
			}
			recs = append(recs, rec)
		}
	}
	if strings.Contains(logs.String(), "adopting") || strings.Contains(logs.String(), "is damaged") {
		notes = append(notes, "coordinator: store rebuilt from the nodes")
	}
	// A dead node's data is re-created on the others.
	if len(dead) == 1 {
		id := uint64(dead[0].ID)
		for {
			moved := true
			for _, key := range keysOf(recs) {
				rec, err := cli.Stat(ctx, key)
				if err != nil || slices.Contains(rec.Placement, id) {
					moved = false
					break
				}
			}
			if moved {
				break
			}
			if ctx.Err() != nil {
				return "FAIL: the dead node's data was not re-created", strings.Join(notes, "; ")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The workload continues under a write error or lost writes: new
	// objects of each redundancy (three, so that placement lands on the
	// faulty node) are written and read back.
	underFault := (iof != nil && (iof.fault == faultWriteError || iof.fault == faultLostWrite)) ||
		(df != nil && (df.fault == faultWriteError || df.fault == faultLostWrite)) ||
		(sf != nil && (sf.fault == faultWriteError || sf.fault == faultLostWrite))
	for j := 0; underFault && j < 6; j++ {
		{
			red := []objectpb.Redundancy{objectpb.Redundancy_REP, objectpb.Redundancy_EC}[j%2]
			key := fmt.Sprintf("sweep/under-fault/%s/%d", strings.ToLower(red.String()), j/2)
			want := uberObjectData(o.Seed+1, red, j/2, sweepObjectBytes)
			wants[key] = want
			if _, err := cli.Put(ctx, key, want, red); err != nil {
				return "FAIL: put under the fault", fmt.Sprintf("%s: %v", key, err)
			}
			got, err := cli.Get(ctx, key)
			if err != nil {
				return "FAIL: object not readable", fmt.Sprintf("%s (written under the fault): %v", key, err)
			}
			if !bytes.Equal(got, want) {
				return "FAIL: wrong data", key
			}
			rec, err := cli.Stat(ctx, key)
			if err != nil {
				return "FAIL: stat", err.Error()
			}
			recs = append(recs, rec)
		}
	}
	// A lost-write fault is over: what it dropped is for the scrub to find.
	if faulty != nil {
		faulty.cleared.Store(true)
	}
	if df != nil && df.fault == faultLostWrite {
		df.clear()
	}
	// The state files' faults end before the scrub and the restart (the
	// node's device saves its state on both).
	if sf != nil {
		sf.cleared.Store(true)
	}
	// Scrub: every replica and shard present and verified.
	repaired := 0
	for _, key := range keysOf(recs) {
		rec, err := cli.Stat(ctx, key)
		if err != nil {
			return "FAIL: stat", err.Error()
		}
		rep, err := cli.ScrubObject(ctx, rec, nil, nil)
		if err != nil {
			return "FAIL: scrub", err.Error()
		}
		repaired += rep.Repaired
		if again, err := cli.ScrubObject(ctx, rec, nil, nil); err != nil || again.Repaired != 0 {
			return "FAIL: not clean after a scrub", fmt.Sprintf("%s: %v %v", key, again, err)
		}
	}
	var repairs int64
	for i := range cl.Nodes {
		if n := cl.Node(i); n != nil {
			s := n.Chunks().Stats()
			repairs += s.Repaired + s.MetaRepaired
		}
	}
	if st := cl.Scrubber(); st != nil {
		repairs += st.Stats().Repaired
	}
	if df != nil {
		n := df.fired()
		if n == 0 {
			return "not reached", "the fault never fired: " + df.String()
		}
		// What the victim's SDF saw of it.
		var seen string
		ns.mu.Lock()
		if st := ns.byDir[filepath.Clean(df.nodeDir)]; st != nil {
			s := st.FS().Stats()
			seen = fmt.Sprintf("; its SDF: %d corrupt reads (%d uncorrectable, %d checksum), %d program errors, %d failed dies",
				s.Corruptions, s.Uncorrectable, s.ChecksumErrors, s.ProgramErrors, s.FailedDies)
		}
		ns.mu.Unlock()
		defer func() {
			detail = strings.TrimPrefix(detail+fmt.Sprintf("; %s: %d of %d injected faults fired", df, n, df.armed)+seen, "; ")
		}()
	}
	if sf != nil {
		n := sf.injected.Load()
		if n == 0 {
			return "not reached", "the fault never fired: " + sf.String()
		}
		defer func() {
			detail = strings.TrimPrefix(detail+fmt.Sprintf("; %s: %d state reads or writes failed or dropped", sf, n), "; ")
		}()
	}
	if faulty != nil {
		n := faulty.injected.Load()
		if n == 0 {
			return "not reached", "the fault never fired"
		}
		defer func() {
			detail = strings.TrimPrefix(detail+fmt.Sprintf("; %d operations failed by the %s", n, iof.fault), "; ")
		}()
	}
	// A run-time fault ends with a restart once it is over: what it left
	// on disk (a lost journal page, a dropped entry) shows when the nodes
	// read their files again, not while they serve from memory.
	if iof != nil || df != nil || sf != nil {
		cli.Close()
		err := cl.Close()
		cl = nil
		if err != nil {
			return "FAIL: stop after the fault", err.Error()
		}
		restarted = true
		if cl, err = devcluster.Start(ctx, opts); err != nil {
			return "FAIL: the cluster did not restart after the fault", err.Error()
		}
		if cli, err = client.Dial(ctx, cl.Endpoint(), client.Options{}); err != nil {
			return "FAIL: no client after the restart", err.Error()
		}
		for key, want := range wants {
			for {
				got, err := cli.Get(ctx, key)
				if err == nil && !bytes.Equal(got, want) {
					return "FAIL: wrong data after the restart", key
				}
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return "FAIL: object not readable after the restart", fmt.Sprintf("%s: %v", key, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		defer func() {
			detail = strings.TrimPrefix(detail+fmt.Sprintf("; all %d objects read back after a restart", len(wants)), "; ")
		}()
	}
	switch {
	case len(dead) == 1:
		return "dead node, data re-created", strings.Join(notes, "; ")
	case repairs > 0 || repaired > 0 || len(notes) > 0:
		notes = append(notes, fmt.Sprintf("%d chunk or metadata copies rewritten", repairs+int64(repaired)))
		return "repaired", strings.Join(notes, "; ")
	}
	return "correct", ""
}

func keysOf(recs []*objectpb.ObjectRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Key)
	}
	return out
}

// singleFaultObjects is the full sweep as an experiment.
func singleFaultObjects() Experiment {
	return Experiment{
		Name: "single-fault-objects",
		Description: "one fault at a time (zero, junk, flip, truncate, delete) in every file type of the storage nodes (plain-file " +
			"and emulated-flash stores) and the coordinator: restart, read, scrub; every cell correct, repaired or one dead node re-created",
		Run: runSingleFaultObjects,
	}
}

func runSingleFaultObjects(ctx context.Context, cfg Config) (*report.Report, error) {
	tmp, err := os.MkdirTemp("", "single-fault-objects-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// Seven nodes: EC 4+2 places six shards on six distinct nodes, so a
	// dead node's shard can only be re-created elsewhere with a seventh.
	o := sweepOptions{Nodes: 7, Seed: cfg.Seed, Objects: 2, CellTimeout: 2 * time.Minute}
	if cfg.Quick {
		o.Objects = 1
		o.Cells = func(t sweepFileType, f sweepFault) bool {
			return (t.Name == "chunk data" && f == faultDelete) || (t.Name == "flash device state" && f == faultJunk)
		}
	}
	cells, err := runFaultSweep(ctx, tmp, o)
	if err != nil {
		return nil, err
	}
	r, err := report.New("single-fault-objects", "Single faults in every file type of the storage nodes and the coordinator")
	if err != nil {
		return nil, err
	}
	r.Text("A cluster of %d storage nodes and a coordinator (embedded etcd), %d REP and %d EC objects of %s, is written and stopped. "+
		"Then, one cell at a time, one file of one type on one node (or the coordinator) gets one fault: a 4 KiB block of its used part "+
		"zeroed or overwritten with junk, one bit of its used part flipped, the file truncated to half, or deleted (the file and the "+
		"place are drawn from the seed). The cluster restarts (with the background scrubber, re-protection after a node is down 1 s), "+
		"every object is read back and compared, a node reported dead must have its replicas and shards re-created on the others, "+
		"and every object is scrubbed and must be clean after. Node stores: plain files (chunks, sums files, local index entries and the "+
		"identity are files) and emulated flash (they live inside the device's page file). Cells have a %s deadline: a hang fails.",
		o.Nodes, o.Objects, o.Objects, base.Bytes(sweepObjectBytes), o.CellTimeout)
	var rows [][]string
	failed := 0
	for _, c := range cells {
		if c.failed() {
			failed++
		}
		rows = append(rows, []string{c.Type, string(c.Fault), c.File, c.Outcome, c.Detail, c.Took.Round(100 * time.Millisecond).String()})
	}
	if err := r.Table(report.Table{
		Caption: fmt.Sprintf("%d cells, %d failed.", len(cells), failed),
		Header:  []string{"file type", "fault", "file", "outcome", "what happened", "took"},
		Rows:    rows,
	}); err != nil {
		return nil, err
	}
	return r, nil
}
