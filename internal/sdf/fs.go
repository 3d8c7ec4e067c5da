package sdf

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/invariants"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/detect"
	"github.com/flashmend/flashmend/internal/sdf/dieloss"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/identify"
	"github.com/flashmend/flashmend/internal/sdf/journal"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// FS is the SDF host layer over one raw flash device: zones, channel
// workers, extent files, the metadata journal, host GC and P2L entrustment.
// It is safe for concurrent use. The device stays owned by the caller: Close
// does not close it.
type FS struct {
	dev   flash.Device
	opts  Options
	l     onflash.Layout
	chans []*channels.Worker

	// mu guards the zone table, the file table, the pending journal records,
	// writers' buffers and the counters below it.
	mu sync.Mutex
	// zones is the zone table: every zone, the blocks' state, the failed
	// dies, the allocation state.
	zones      *zones.Table
	files      map[string]*inode
	byID       map[uint64]*inode
	nextFileID uint64
	nextSeq    uint64
	created    int64 // unix ns of Format
	closed     bool

	jr        *journal.Journal
	ctr       counters
	openInfo  OpenInfo
	oobPool   sync.Pool  // *[]byte scratch OOB buffers for reads
	aheadPool sync.Pool  // *[]byte read-ahead buffers (getAheadBuf)
	gcMu      sync.Mutex // one garbage collection at a time
	det       *detect.Detector
	ident     *identify.Identifier
}

// inode is a file. Guarded by FS.mu.
type inode struct {
	id    uint64
	name  string
	hint  Lifetime
	size  int64
	mtime int64 // unix ns
	m     extmap.Map
	// ver changes (under FS.mu) whenever bytes below size may change or
	// move: a page map update, a patch of the write buffer, a truncation.
	// A read-ahead taken at one ver is used only at the same ver.
	ver uint64

	unlinked bool // removed from the namespace; freed when opens drops to 0
	opens    int
	writing  bool // a writable handle exists
	// buf holds the bytes from file page bufPage to size that are not yet
	// programmed, or programmed only as a padded partial page (which the
	// next flush programs again, out of place).
	// Invariant: int64(bufPage)*PageSize + len(buf) == size.
	buf     []byte
	bufPage uint64
	// flushMu serializes flushFile on the inode: a handle's Write, Sync
	// and Close (under File.mu) and FS.Close, which flushes every writer
	// and may race a handle closing (the node's shutdown did: both
	// programmed the same pages, and the later one sliced a buffer the
	// other had consumed).
	flushMu sync.Mutex
	last    *zones.Zone // zone of the last write, preferred for the next one
	channel int         // the only channel the file's zones may be on; -1: any
	// prefer: channel is a preference (CreatePreferring): when it has no
	// zone to give, the file takes one on another channel, one not in
	// avoid (a bit per channel, CreateApart) if any has a zone to give.
	prefer bool
	avoid  uint64
}

func (ino *inode) String() string {
	return fmt.Sprintf("file %d %q size=%d extents=%d", ino.id, ino.name, ino.size, len(ino.m.Exts))
}

// counters are the layer's statistics (atomics, read without locks).
type counters struct {
	userBytes      atomic.Int64 // bytes appended by files
	rewriteBytes   atomic.Int64 // bytes written by RewriteRange
	recoveryReads  atomic.Int64 // pages read on open to recover unsealed zones
	recoveredPages atomic.Int64 // pages mapped by that recovery
	dataPages      atomic.Int64 // data pages programmed (user, padding, GC, rewrites)
	padBytes       atomic.Int64 // zero padding programmed on syncs
	tailRewrites   atomic.Int64 // partial pages programmed again after a padded sync
	gcPages        atomic.Int64 // data pages copied by GC
	gcRuns         atomic.Int64
	p2lPages       atomic.Int64
	resets         atomic.Int64
	corruptions    atomic.Int64 // reads that returned a CorruptionError
	checksumErrs   atomic.Int64
	uncorrectables atomic.Int64
	dieFailedReads atomic.Int64
	programErrs    atomic.Int64
	probes         atomic.Int64 // detector probes (first pages of blocks read)
	rebalanced     atomic.Int64 // bytes Rebalance moved
	readBytes      atomic.Int64
	rereads        atomic.Int64 // pages read again after a checksum failure
	transients     atomic.Int64 // ... that verified on the second read
	readAheads     atomic.Int64 // ReadAt calls served from a read-ahead
}

func newFS(dev flash.Device, opts Options) (*FS, error) {
	if dev == nil {
		return nil, base.InvalidArgumentf("sdf: nil device")
	}
	l := onflash.Layout{Geometry: dev.Geometry()}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.GCFreeZonesMin > l.Zones()/4 {
		opts.GCFreeZonesMin = max(2, l.Zones()/4)
	}
	fs := &FS{
		dev: dev, opts: opts, l: l,
		files: map[string]*inode{}, byID: map[uint64]*inode{},
		nextFileID: 1, nextSeq: 1,
	}
	fs.det = fs.newDetector()
	fs.ident = identify.New(identifyHost{fs}, l, opts.Clock)
	g := l.Geometry
	blocks, err := zones.LoadBlocks(dev)
	if err != nil {
		return nil, err
	}
	fs.zones = zones.New(l, blocks)
	fs.jr = journal.New(l, journalHost{fs}, fs.zones, opts.ReadOnly)
	for c := 0; c < g.Channels; c++ {
		start := channels.Start
		if opts.Serial {
			start = channels.StartSerial
		}
		fs.chans = append(fs.chans, start(c, dev, opts.QueueDepth))
	}
	return fs, nil
}

// Format erases the device and writes an empty file system on it.
func Format(dev flash.Device, opts Options) (*FS, error) {
	if opts.ReadOnly {
		return nil, base.InvalidArgumentf("sdf: cannot format read-only")
	}
	fs, err := newFS(dev, opts)
	if err != nil {
		return nil, err
	}
	fs.created = fs.opts.Clock.Now().UnixNano()
	// Erase every written block, each channel's blocks in one request (its
	// dies in parallel), all channels at once.
	perChan := make([][]*channels.Op, fs.l.Geometry.Channels)
	for _, z := range fs.zones.All {
		z.Dies = fs.zones.GoodDies(z)
		for _, d := range z.Dies {
			if fs.zones.Block(fs.l.ZoneBlockAddr(z.ID, d)).WrittenPage > 0 {
				perChan[z.Channel] = append(perChan[z.Channel], &channels.Op{Kind: channels.Erase,
					Addr: flash.PageAddr{Channel: z.Channel, Die: d, Block: z.Block}})
			}
		}
	}
	var all []*channels.Op
	for _, ops := range perChan {
		all = append(all, ops...)
	}
	fs.doParallel(all)
	for _, op := range all {
		if op.Err != nil {
			if !errors.Is(op.Err, flash.ErrBadBlock) && !errors.Is(op.Err, flash.ErrDieFailed) {
				fs.stopChannels()
				return nil, fmt.Errorf("sdf: format: %w", op.Err)
			}
			z := fs.zones.OnChannel(op.Addr.Channel, op.Addr.Block)
			z.DropDie(op.Addr.Die)
		}
	}
	for _, z := range fs.zones.All {
		if len(z.Dies) == 0 {
			z.State = ZoneOffline
		}
	}
	if err := fs.jr.Checkpoint(nil); err != nil {
		fs.stopChannels()
		return nil, fmt.Errorf("sdf: format: %w", err)
	}
	if err := fs.syncPrograms(); err != nil {
		fs.stopChannels()
		return nil, fmt.Errorf("sdf: format: %w", err)
	}
	return fs, nil
}

// OpenInfo says how Open assembled the metadata journal.
type OpenInfo struct {
	Epoch     uint64
	MetaPages int // journal pages replayed
	MetaUnits int // their units (each kept in three copies)
	// MetaUnitsMerged counts units of those pages that did not verify in
	// some copy (taken from another); MetaUnitsVoted those that verified in
	// no copy and were rebuilt by a bit-by-bit majority vote.
	MetaUnitsMerged, MetaUnitsVoted int
	// MetaPagesLost counts journal pages of the epoch after a page no copy
	// gave back: their records were not replayed (files they created or
	// changed are as of the page before).
	MetaPagesLost int
	// BodyPages is the pages of the epoch's checkpoint body (0: the
	// checkpoint was inline); BodyPagesMerged those that did not verify in
	// their first copy and were merged from the others.
	BodyPages, BodyPagesMerged int
}

func (o OpenInfo) String() string {
	return fmt.Sprintf("epoch %d: %d journal pages, %d units merged, %d voted, %d pages lost, %d body pages (%d merged)",
		o.Epoch, o.MetaPages, o.MetaUnitsMerged, o.MetaUnitsVoted, o.MetaPagesLost, o.BodyPages, o.BodyPagesMerged)
}

// OpenInfo says how the metadata was assembled when the FS was opened (zero
// after Format).
func (fs *FS) OpenInfo() OpenInfo { return fs.openInfo }

// Open mounts the file system on dev: it replays the newest complete
// metadata epoch, rebuilds the zone table from the device's block state,
// and writes a fresh checkpoint to three other metadata zones.
func Open(dev flash.Device, opts Options) (*FS, error) {
	fs, err := newFS(dev, opts)
	if err != nil {
		return nil, err
	}
	if err := fs.load(); err != nil {
		fs.stopChannels()
		return nil, err
	}
	// Dies journaled failed before this open are known to the detector
	// (no second event).
	for _, d := range fs.zones.FailedList() {
		fs.det.Reported(d)
	}
	if len(fs.zones.Failed) > 0 {
		fs.mu.Lock()
		fs.zones.SetWeights(fs.opts.Handler)
		fs.mu.Unlock()
	}
	return fs, nil
}

func (fs *FS) load() error {
	stream, info, err := metalog.Latest(fs.jr.Scan())
	if err != nil {
		return err
	}
	epoch, holders := info.Epoch, info.Zones
	fs.openInfo = OpenInfo{Epoch: epoch, MetaPages: info.Pages, MetaUnits: info.Units, MetaUnitsMerged: info.Merged,
		MetaUnitsVoted: info.Voted, MetaPagesLost: info.Lost}
	if err := fs.replay(epoch, stream); err != nil {
		return err
	}
	if fs.opts.ReadOnly {
		return nil
	}
	var keep []*zones.Zone
	for _, z := range holders {
		keep = append(keep, fs.zones.All[z])
	}
	if err := fs.jr.Checkpoint(keep); err != nil {
		return err
	}
	return fs.syncPrograms()
}

// replay applies the records of metadata epoch's stream (every record
// verified its CRC) to the in-memory tables (metalog.Replay, which reads
// the checkpoint body the epoch names), rebuilds the zone table from them
// and the device's block state, and maps the synced pages of the zones
// left unsealed whose extents never reached the journal.
func (fs *FS) replay(epoch uint64, stream []byte) error {
	var br journal.BodyRead
	t, err := metalog.Replay(fs.l, epoch, stream, func(b onflash.CheckpointBody) ([]byte, error) {
		return fs.jr.ReadBody(b, &br)
	})
	fs.openInfo.BodyPages += br.Pages
	fs.openInfo.BodyPagesMerged += br.Merged
	if err != nil {
		return err
	}
	fs.created = t.Created
	for _, d := range t.Failed {
		fs.zones.Failed[d] = true
	}
	for z, open := range t.Unsealed {
		fs.zones.All[z].Unsealed = open
	}
	states := map[int]ZoneState{}
	for z, s := range t.States {
		states[z] = ZoneState(s)
	}
	fs.zones.Rebuild(t.Masks, states)
	// The body's zones stay lent to the journal until the next checkpoint
	// is durable.
	lent := fs.zones.LendBody(t.Body)
	fs.jr.Adopt(epoch, t.Body, lent)
	fs.ctr.recoveredPages.Add(int64(t.Recover(fs.readUnsealed(), fs.l.Geometry.PageSize)))
	fs.nextFileID, fs.nextSeq = t.NextFileID, t.NextSeq
	fs.adoptFiles(t)
	maps := make([]*extmap.Map, 0, len(fs.byID))
	for _, ino := range fs.byID {
		maps = append(maps, &ino.m)
	}
	fs.zones.CountLive(maps)
	fs.zones.Settle()
	return nil
}

// adoptFiles makes the replayed file table the FS's: one inode per entry,
// by ID and by name.
func (fs *FS) adoptFiles(t *metalog.Tables) {
	ps := int64(fs.l.Geometry.PageSize)
	inodes := map[*metalog.File]*inode{}
	inodeOf := func(f *metalog.File) *inode {
		if ino := inodes[f]; ino != nil {
			return ino
		}
		ino := &inode{id: f.ID, name: f.Name, hint: Lifetime(f.Hint), mtime: f.MTime, size: f.Size, m: f.Map,
			bufPage: uint64(f.Size / ps), channel: -1}
		inodes[f] = ino
		return ino
	}
	for id, f := range t.Files {
		fs.byID[id] = inodeOf(f)
	}
	for name, f := range t.Names {
		fs.files[name] = inodeOf(f)
	}
}

// readUnsealed reads every programmed page of the zones that were open at
// the crash (unsealed) and returns the data pages that verify, in the order
// read, for metalog.Tables.Recover.
func (fs *FS) readUnsealed() []metalog.Found {
	g := fs.l.Geometry
	var found []metalog.Found
	for _, z := range fs.zones.Data() {
		if !z.Unsealed || z.WP == 0 || len(z.Dies) == 0 {
			continue
		}
		w := len(z.Dies)
		var ops []*channels.Op
		var zps []int
		for di, d := range z.Dies {
			n := min(fs.zones.Block(fs.l.ZoneBlockAddr(z.ID, d)).WrittenPage, g.PagesPerBlock-1)
			for p := 0; p < n; p++ {
				ops = append(ops, &channels.Op{Kind: channels.Read, Decode: true,
					Addr: flash.PageAddr{Channel: z.Channel, Die: d, Block: z.Block, Page: p},
					Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)})
				zps = append(zps, p*w+di)
			}
		}
		fs.chans[z.Channel].Do(ops...)
		fs.ctr.recoveryReads.Add(int64(len(ops)))
		for i, op := range ops {
			if op.Err == nil && op.IDOK {
				found = append(found, metalog.Found{ID: op.ID, Zone: z.ID, ZonePage: zps[i]})
			}
		}
	}
	return found
}

// unlinkLocked removes ino from the namespace and, if no handle has it
// open, frees its pages.
func (fs *FS) unlinkLocked(ino *inode) {
	if fs.files[ino.name] == ino {
		delete(fs.files, ino.name)
	}
	ino.unlinked = true
	if ino.opens == 0 {
		fs.freeLocked(ino)
	}
}

// freeLocked drops every page of ino.
func (fs *FS) freeLocked(ino *inode) {
	ino.m.Truncate(0, fs.dropLocked)
	ino.ver++
	ino.buf = nil
	delete(fs.byID, ino.id)
}

// dropLocked accounts for pages that no file maps any more.
func (fs *FS) dropLocked(e extmap.Extent) {
	z := fs.zones.All[e.Zone]
	z.Live -= e.N
	if z.Live < 0 {
		_ = invariants.Check(false, "sdf: zone %d live pages went negative dropping %s", z.ID, e)
		z.Live = 0
	}
}

// doParallel runs ops on their channels, every channel at once (with
// Options.Serial, one channel after the other, lowest first).
func (fs *FS) doParallel(ops []*channels.Op) {
	perChan := map[int][]*channels.Op{}
	for _, op := range ops {
		perChan[op.Addr.Channel] = append(perChan[op.Addr.Channel], op)
	}
	if fs.opts.Serial {
		for c := range fs.chans {
			if list := perChan[c]; len(list) > 0 {
				fs.chans[c].Do(list...)
			}
		}
		return
	}
	if len(perChan) == 1 {
		for c, list := range perChan {
			fs.chans[c].Do(list...)
		}
		return
	}
	var wg sync.WaitGroup
	for c, list := range perChan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fs.chans[c].Do(list...)
		}()
	}
	wg.Wait()
}

func (fs *FS) stopChannels() {
	for _, c := range fs.chans {
		c.Stop()
	}
}

// Sync makes every namespace change and every synced file durable.
func (fs *FS) Sync() error {
	if err := fs.checkOpen(); err != nil {
		return err
	}
	return fs.flushJournal()
}

func (fs *FS) checkOpen() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.closed {
		return ErrClosed
	}
	return nil
}

// Close flushes every file that is open for writing, makes the metadata
// durable and stops the channel workers. The device is left open. Close
// must not run concurrently with Write or Sync on a file (a handle's Close
// may race it: each file's flushes are serialized); handles used after it
// fail with ErrClosed.
func (fs *FS) Close() error {
	fs.mu.Lock()
	if fs.closed {
		fs.mu.Unlock()
		return ErrClosed
	}
	var writers []*inode
	for _, ino := range fs.byID {
		if ino.writing {
			writers = append(writers, ino)
		}
	}
	fs.mu.Unlock()
	var errs []error
	for _, ino := range writers {
		errs = append(errs, fs.flushFile(ino, true))
	}
	errs = append(errs, fs.flushJournal())
	fs.gcMu.Lock()
	fs.mu.Lock()
	fs.closed = true
	fs.mu.Unlock()
	fs.gcMu.Unlock()
	fs.stopChannels()
	return errors.Join(errs...)
}

// resetZone erases every usable block of z and makes it empty, excluding dies
// whose erase fails (grown bad block or failed die). The caller guarantees
// that the records that unmapped z's pages are durable; a data zone is
// reset only if, once its program lock is held, it is still full or
// read-only with no live page and no writer (two reclaims may race for it).
func (fs *FS) resetZone(z *zones.Zone) error {
	z.Prog.Lock()
	defer z.Prog.Unlock()
	fs.mu.Lock()
	if !z.Meta && !z.Reclaimable() {
		// Someone reset and reused the zone while we waited for it.
		fs.mu.Unlock()
		return nil
	}
	var ops []*channels.Op
	for _, d := range fs.zones.GoodDies(z) {
		ops = append(ops, &channels.Op{Kind: channels.Erase, Addr: flash.PageAddr{Channel: z.Channel, Die: d, Block: z.Block}})
	}
	fs.mu.Unlock()
	fs.chans[z.Channel].Do(ops...)
	crashpoint.Hit("sdf-zone-erased")
	var dies []int
	var errs []error
	var failedOps []*channels.Op
	for _, op := range ops {
		switch {
		case op.Err == nil:
			dies = append(dies, op.Addr.Die)
		case errors.Is(op.Err, flash.ErrBadBlock), errors.Is(op.Err, flash.ErrDieFailed):
			fs.mu.Lock()
			fs.zones.MarkBad(op.Addr.BlockAddr())
			if errors.Is(op.Err, flash.ErrDieFailed) {
				fs.noteDieFailedLocked(op.Addr.DieAddr())
			}
			fs.mu.Unlock()
			failedOps = append(failedOps, op)
		default:
			errs = append(errs, op.Err)
		}
	}
	for _, op := range failedOps {
		fs.observe(op.Addr, flash.ReadStatus{}, op.Err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("sdf: reset of zone %d: %w", z.ID, errors.Join(errs...))
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	z.Reset(dies)
	if !z.Meta {
		fs.ctr.resets.Add(1)
		if m := onflash.MaskOf(dies); m != fs.l.FullDieMask() {
			fs.logLocked(zoneResetRecord(z.ID, m))
		}
		if z.State == ZoneOffline {
			fs.logLocked(zoneStateRecord(z.ID, ZoneOffline))
		}
	}
	return nil
}

// reclaim resets every data zone that no file maps any more and that takes
// no more writes. The journal is flushed first so that the records that
// unmapped the zones are durable before their pages are erased.
func (fs *FS) reclaim() error {
	if fs.opts.ReadOnly {
		return nil
	}
	fs.mu.Lock()
	dead := fs.zones.Reclaimable()
	fs.mu.Unlock()
	if len(dead) == 0 {
		return nil
	}
	if err := fs.flushJournal(); err != nil {
		return err
	}
	var errs []error
	for _, z := range dead {
		fs.mu.Lock()
		still := z.Reclaimable()
		fs.mu.Unlock()
		if still {
			errs = append(errs, fs.resetZone(z))
		}
	}
	return errors.Join(errs...)
}

// noteDieFailedLocked records a failed die (Reparo's Detector): the host
// stops writing to every zone on it, and the records that make it durable
// are queued (dieloss.Fail). The caller holds fs.mu.
func (fs *FS) noteDieFailedLocked(d flash.DieAddr) {
	recs, checkpoint := dieloss.Fail(fs.zones, d, fs.opts.Handler)
	for _, r := range recs {
		fs.logLocked(r.Record())
	}
	if checkpoint {
		// A copy of the checkpoint body or of the journal's pages is on
		// the die: write a new epoch elsewhere at the next flush.
		fs.jr.CheckpointDueLocked()
	}
}
