package flash

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/invariants"
)

// Emulator is the emulated NAND device: it enforces the NAND rules, keeps the
// per-block wear state, applies the error, wear and timing models, counts
// statistics, and stores page content in a backend (memory or file).
//
// Create one with NewMemory or OpenFile. It is safe for concurrent use: every
// die has its own lock, so operations on different dies run in parallel and
// operations on one die are serialized.
type Emulator struct {
	geo  Geometry
	opts Options
	st   store

	dies     []*die
	channels []*channel
	// host is the host interface's timeline (Timing.HostBytesPerSecond).
	host channel

	closed atomic.Bool

	inject   *Faults
	openInfo OpenInfo

	// stateMu serializes state snapshots and saves (Sync, Close).
	stateMu sync.Mutex
	// stateSeq is the sequence number of the last saved state record.
	stateSeq uint64
	// erasesSinceSave counts erases since the last state save.
	erasesSinceSave atomic.Int64
	// unsynced counts the programs and erases written to the backend
	// since the last PowerSafe fsync began (syncPages).
	unsynced atomic.Int64
	// saveErr is the first error of an automatic state save, returned by
	// the next Sync or Close.
	saveErrMu sync.Mutex
	saveErr   error
}

var _ Device = (*Emulator)(nil)

// die is one NAND die: its blocks' state, its random source, its error-model
// instance and its timeline. Everything but the counters is guarded by mu.
type die struct {
	mu     sync.Mutex
	addr   DieAddr
	index  int
	failed bool
	// silent: the die is dead but the device does not say so: reads are
	// uncorrectable, programs and erases fail and retire their block
	// (FailDieSilently). The host must detect it (Reparo's Detector).
	silent bool
	// failAt is when the random die-failure process kills this die (zero:
	// never).
	failAt time.Time
	blocks []blockState
	rng    *rand.Rand
	model  DieErrorModel
	// scratch is a page-sized buffer for reads (len PageSize+OOBSize).
	scratch []byte
	// busyUntil is when the die finishes its last scheduled operation.
	// Invariant: non-decreasing.
	busyUntil time.Time

	ctr dieCounters
	// failedNow mirrors failed and badBlocks counts bad blocks, for Stats.
	failedNow atomic.Bool
	badBlocks atomic.Int64
	// persist is set when the die's state changed in a way that must reach
	// the state record soon (a retired block, a failed die).
	persist atomic.Bool
}

// markBad retires b. The caller holds d.mu.
func (d *die) markBad(b *blockState) {
	if !b.bad {
		b.bad = true
		d.badBlocks.Add(1)
		d.persist.Store(true)
	}
}

// setFailed fails the die. The caller holds d.mu.
func (d *die) setFailed() {
	if !d.failed {
		d.failed = true
		d.failedNow.Store(true)
		d.persist.Store(true)
	}
}

// channel is one channel's bus timeline.
type channel struct {
	mu sync.Mutex
	// busUntil is when the bus finishes its last scheduled transfer.
	busUntil time.Time
	busy     atomic.Int64 // total nanoseconds of bus transfer
}

// blockState is the device's own record of one erase block. It is what the
// state record persists.
type blockState struct {
	eraseCount int32
	written    int32 // pages programmed since the last erase
	bad        bool
	// readsSinceErase counts page reads since the block was last erased
	// (read disturb grows with it).
	readsSinceErase int64
	// reads counts every page read of the block over its life.
	reads int64
	// programUnixNano is when the first page after the last erase was
	// programmed (retention is measured from it); 0 while erased.
	programUnixNano int64
}

// NewMemory returns an emulated device whose pages live in memory.
func NewMemory(g Geometry, opts Options) (*Emulator, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if err := opts.validate(g); err != nil {
		return nil, err
	}
	return newEmulator(g, opts, newMemStore(g), nil)
}

func newEmulator(g Geometry, opts Options, st store, saved *deviceState) (*Emulator, error) {
	opts = opts.withDefaults()
	e := &Emulator{geo: g, opts: opts, st: st, inject: newFaults()}
	seedSrc := rand.New(rand.NewSource(opts.Seed))
	now := opts.Clock.Now()
	for c := 0; c < g.Channels; c++ {
		e.channels = append(e.channels, &channel{})
		for d := 0; d < g.DiesPerChannel; d++ {
			addr := DieAddr{c, d}
			di := &die{
				addr:    addr,
				index:   addr.Index(g),
				blocks:  make([]blockState, g.BlocksPerDie),
				rng:     rand.New(rand.NewSource(seedSrc.Int63())),
				scratch: make([]byte, g.PageSize+g.OOBSize),
			}
			if opts.ErrorModel != nil {
				di.model = opts.ErrorModel.ForDie(addr)
			}
			if opts.DieFailure.MeanTimeToFailure > 0 {
				// Exponential lifetime: a memoryless failure process whose
				// rate is 1/MTTF per die (see DieFailureOptions).
				life := time.Duration(di.rng.ExpFloat64() * float64(opts.DieFailure.MeanTimeToFailure))
				di.failAt = now.Add(life)
			}
			e.dies = append(e.dies, di)
		}
	}
	if saved != nil {
		if err := e.restore(saved); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Geometry implements Device.
func (e *Emulator) Geometry() Geometry { return e.geo }

// Options returns the options the device runs with (defaults filled in).
func (e *Emulator) Options() Options { return e.opts }

func (e *Emulator) String() string { return "flash.Emulator(" + e.geo.String() + ")" }

// flatPage is the page's index in the store.
func (e *Emulator) flatPage(a PageAddr) int64 { return a.Flat(e.geo) }

func (e *Emulator) checkBlockAddr(a BlockAddr) bool {
	g := e.geo
	return a.Channel >= 0 && a.Channel < g.Channels && a.Die >= 0 && a.Die < g.DiesPerChannel &&
		a.Block >= 0 && a.Block < g.BlocksPerDie
}

func (e *Emulator) checkDieAddr(a DieAddr) bool {
	return a.Channel >= 0 && a.Channel < e.geo.Channels && a.Die >= 0 && a.Die < e.geo.DiesPerChannel
}

func opErr(op string, a PageAddr, err error) error { return &OpError{Op: op, Addr: a, Err: err} }

// lockDie locks the die of a for an operation issued at now (zero: the
// clock's now, which it returns) and checks that the device is open and the
// die alive. On error the die is not locked.
func (e *Emulator) lockDie(op string, a PageAddr, now time.Time) (*die, time.Time, error) {
	if now.IsZero() {
		now = e.opts.Clock.Now()
	}
	if e.closed.Load() {
		return nil, now, opErr(op, a, ErrClosed)
	}
	d := e.dies[DieAddr{a.Channel, a.Die}.Index(e.geo)]
	d.mu.Lock()
	// NB: check again under the lock: Close sets closed and then takes
	// every die lock once, so an operation that gets the lock after that
	// barrier must not touch the (closed) backend.
	if e.closed.Load() {
		d.mu.Unlock()
		return nil, now, opErr(op, a, ErrClosed)
	}
	if !d.failed && !d.failAt.IsZero() && !now.Before(d.failAt) {
		d.setFailed()
	}
	if d.failed {
		d.mu.Unlock()
		d.ctr.failedOps.Add(1)
		return nil, now, opErr(op, a, ErrDieFailed)
	}
	return d, now, nil
}

// Program implements Device.
func (e *Emulator) Program(a PageAddr, data, oob []byte) error {
	_, err := e.ProgramAt(time.Time{}, a, data, oob)
	return err
}

// ProgramAt is Program issued at the given time (zero: the clock's now). It
// returns when the operation completes on the device's timeline; with virtual
// timing that is the simulated completion time.
func (e *Emulator) ProgramAt(issue time.Time, a PageAddr, data, oob []byte) (time.Time, error) {
	done, err := e.programAt(issue, a, data, oob)
	e.persistIfDue()
	return done, err
}

func (e *Emulator) programAt(issue time.Time, a PageAddr, data, oob []byte) (time.Time, error) {
	const op = "program"
	if !e.geo.Contains(a) {
		return time.Time{}, opErr(op, a, ErrOutOfRange)
	}
	if len(data) != e.geo.PageSize || len(oob) > e.geo.OOBSize {
		return time.Time{}, opErr(op, a, fmt.Errorf("%w: data %d bytes (want %d), oob %d bytes (max %d)",
			ErrBadSize, len(data), e.geo.PageSize, len(oob), e.geo.OOBSize))
	}
	d, issue, err := e.lockDie(op, a, issue)
	if err != nil {
		return time.Time{}, err
	}
	defer d.mu.Unlock()
	b := &d.blocks[a.Block]
	if err := d.checkProgramLocked(op, b, a); err != nil {
		return time.Time{}, err
	}
	done := e.schedule(d, opProgram, issue)
	if d.silent || e.programFails(d, b, a) {
		d.markBad(b)
		d.ctr.programFailures.Add(1)
		d.ctr.failedOps.Add(1)
		e.wait(done)
		return done, opErr(op, a, ErrProgramFailed)
	}
	buf := d.scratch
	copy(buf, data)
	n := copy(buf[e.geo.PageSize:], oob)
	fill(buf[e.geo.PageSize+n:], 0)
	if e.inject != nil && e.inject.programLost(a) {
		fill(buf, 0xff) // the cells stay erased
	}
	if err := e.st.WritePage(e.flatPage(a), buf); err != nil {
		d.ctr.failedOps.Add(1)
		return time.Time{}, opErr(op, a, err)
	}
	e.unsynced.Add(1) // before the program returns: see syncPages
	if b.written == 0 {
		b.programUnixNano = issue.UnixNano()
	}
	b.written++
	d.ctr.programs.Add(1)
	d.ctr.bytesProgrammed.Add(int64(len(data)))
	e.wait(done)
	return done, nil
}

// checkProgramLocked refuses a program of page a of block b unless the
// block is good and a is its next page (NAND programs pages in order, once
// per erase), counting a refusal as a failed operation. The caller holds
// d.mu.
func (d *die) checkProgramLocked(op string, b *blockState, a PageAddr) error {
	var err error
	switch {
	case b.bad:
		err = ErrBadBlock
	case a.Page < int(b.written):
		err = ErrNotErased
	case a.Page > int(b.written):
		err = fmt.Errorf("%w: next page is %d", ErrProgramOrder, b.written)
	default:
		return nil
	}
	d.ctr.failedOps.Add(1)
	return opErr(op, a, err)
}

// Read implements Device.
func (e *Emulator) Read(a PageAddr, data, oob []byte) (ReadStatus, error) {
	st, _, err := e.ReadAt(time.Time{}, a, data, oob)
	return st, err
}

// ReadAt is Read issued at the given time (zero: the clock's now); it also
// returns the completion time on the device's timeline.
func (e *Emulator) ReadAt(issue time.Time, a PageAddr, data, oob []byte) (ReadStatus, time.Time, error) {
	const op = "read"
	if !e.geo.Contains(a) {
		return ReadStatus{}, time.Time{}, opErr(op, a, ErrOutOfRange)
	}
	if len(data) != e.geo.PageSize || (oob != nil && len(oob) != e.geo.OOBSize) {
		return ReadStatus{}, time.Time{}, opErr(op, a, fmt.Errorf("%w: data %d bytes (want %d), oob %d bytes (want %d or nil)",
			ErrBadSize, len(data), e.geo.PageSize, len(oob), e.geo.OOBSize))
	}
	d, issue, err := e.lockDie(op, a, issue)
	if err != nil {
		return ReadStatus{}, time.Time{}, err
	}
	defer d.mu.Unlock()
	b := &d.blocks[a.Block]
	if b.bad {
		d.ctr.failedOps.Add(1)
		return ReadStatus{}, time.Time{}, opErr(op, a, ErrBadBlock)
	}
	done := e.schedule(d, opRead, issue)
	if d.silent {
		d.ctr.failedOps.Add(1)
		d.ctr.uncorrectable.Add(1)
		fill(data, 0)
		fill(oob, 0)
		e.wait(done)
		return ReadStatus{Uncorrectable: true}, done, opErr(op, a, ErrUncorrectable)
	}
	d.ctr.reads.Add(1)
	d.ctr.bytesRead.Add(int64(len(data)))
	b.reads++
	if a.Page >= int(b.written) {
		// Erased cells read as all ones; the error models act on
		// programmed data only.
		fill(data, 0xFF)
		fill(oob, 0xFF)
		e.wait(done)
		return ReadStatus{}, done, nil
	}
	b.readsSinceErase++
	buf := d.scratch
	if err := e.st.ReadPage(e.flatPage(a), buf); err != nil {
		d.ctr.failedOps.Add(1)
		if base.IsCorruption(err) {
			// The backing medium itself failed its checksum: report it
			// like an ECC failure, content (as read) included.
			d.ctr.uncorrectable.Add(1)
			e.returnContent(buf, data, oob, true)
			e.wait(done)
			return ReadStatus{Uncorrectable: true}, done, opErr(op, a, fmt.Errorf("%w: %w", ErrUncorrectable, err))
		}
		return ReadStatus{}, time.Time{}, opErr(op, a, err)
	}
	hostBytes := e.geo.PageSize
	if oob != nil {
		hostBytes += e.geo.OOBSize
	}
	status, err := e.applyErrorModel(d, b, a, issue, buf, hostBytes)
	if err != nil {
		return ReadStatus{}, time.Time{}, opErr(op, a, err)
	}
	e.returnContent(buf, data, oob, status.Uncorrectable)
	e.wait(done)
	if status.Uncorrectable {
		d.ctr.failedOps.Add(1)
		return status, done, opErr(op, a, ErrUncorrectable)
	}
	return status, done, nil
}

// returnContent copies the page read (buf) to the caller's buffers, or
// zeros for an uncorrectable page when the device hides such content.
func (e *Emulator) returnContent(buf, data, oob []byte, uncorrectable bool) {
	if uncorrectable && e.opts.HideUncorrectableContent {
		fill(data, 0)
		fill(oob, 0)
		return
	}
	copy(data, buf[:e.geo.PageSize])
	copy(oob, buf[e.geo.PageSize:])
}

// Erase implements Device.
func (e *Emulator) Erase(a BlockAddr) error {
	_, err := e.EraseAt(time.Time{}, a)
	return err
}

// EraseAt is Erase issued at the given time (zero: the clock's now); it also
// returns the completion time on the device's timeline.
func (e *Emulator) EraseAt(issue time.Time, a BlockAddr) (time.Time, error) {
	done, err := e.eraseAt(issue, a)
	e.persistIfDue()
	return done, err
}

func (e *Emulator) eraseAt(issue time.Time, a BlockAddr) (time.Time, error) {
	const op = "erase"
	pa := PageAddr{a.Channel, a.Die, a.Block, 0}
	if !e.checkBlockAddr(a) {
		return time.Time{}, opErr(op, pa, ErrOutOfRange)
	}
	d, issue, err := e.lockDie(op, pa, issue)
	if err != nil {
		return time.Time{}, err
	}
	defer d.mu.Unlock()
	b := &d.blocks[a.Block]
	if b.bad {
		d.ctr.failedOps.Add(1)
		return time.Time{}, opErr(op, pa, ErrBadBlock)
	}
	done := e.schedule(d, opErase, issue)
	if d.silent || e.eraseFails(d, b, a) {
		d.markBad(b)
		d.ctr.eraseFailures.Add(1)
		d.ctr.failedOps.Add(1)
		e.wait(done)
		return done, opErr(op, pa, ErrEraseFailed)
	}
	if e.opts.PowerSafe && e.st.Persistent() {
		// NB: the erase must not reach the disk before the programs issued
		// before it (a journal page that unmapped this block's last live
		// page, a checkpoint root): after a power loss the block would be
		// gone and its new mapping with it.
		if err := e.syncPages(); err != nil {
			d.ctr.failedOps.Add(1)
			return time.Time{}, opErr(op, pa, err)
		}
	}
	if err := e.st.EraseBlock(e.flatPage(pa), e.geo.PagesPerBlock); err != nil {
		d.ctr.failedOps.Add(1)
		return time.Time{}, opErr(op, pa, err)
	}
	e.unsynced.Add(1)
	b.eraseCount++
	e.erasesSinceSave.Add(1)
	b.written = 0
	b.readsSinceErase = 0
	b.programUnixNano = 0
	d.ctr.erases.Add(1)
	e.wait(done)
	return done, nil
}

// Block implements Device.
func (e *Emulator) Block(a BlockAddr) (BlockInfo, error) {
	if !e.checkBlockAddr(a) {
		return BlockInfo{}, opErr("block", PageAddr{a.Channel, a.Die, a.Block, 0}, ErrOutOfRange)
	}
	d := e.dies[a.DieAddr().Index(e.geo)]
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.blocks[a.Block].info(), nil
}

func (b *blockState) info() BlockInfo {
	info := BlockInfo{
		EraseCount:      int(b.eraseCount),
		WrittenPage:     int(b.written),
		Bad:             b.bad,
		Reads:           b.reads,
		ReadsSinceErase: b.readsSinceErase,
	}
	if b.programUnixNano != 0 {
		info.ProgramTime = time.Unix(0, b.programUnixNano)
	}
	return info
}

// FailDie makes every later operation on the die fail with ErrDieFailed, as
// when a die dies inside an SSD (Reparo 003, section 2.2). The failure is
// part of the persisted device state.
func (e *Emulator) FailDie(a DieAddr) error {
	if !e.checkDieAddr(a) {
		return base.InvalidArgumentf("flash: die %s out of range for %s", a, e.geo)
	}
	d := e.dies[a.Index(e.geo)]
	d.mu.Lock()
	d.setFailed()
	d.mu.Unlock()
	e.persistIfDue()
	return nil
}

// FailDieSilently makes the die fail without the device reporting it: every
// later read of it is uncorrectable and every program or erase fails and
// retires its block, but no operation returns ErrDieFailed and DieFailed
// stays false. It is how a die that dies inside an SSD looks to a host that
// only sees bad blocks (Reparo 003, section 4.2.1); the host's detector
// must notice it. Persisted with the device state.
func (e *Emulator) FailDieSilently(a DieAddr) error {
	if !e.checkDieAddr(a) {
		return base.InvalidArgumentf("flash: die %s out of range for %s", a, e.geo)
	}
	d := e.dies[a.Index(e.geo)]
	d.mu.Lock()
	if !d.silent && !d.failed {
		d.silent = true
		d.persist.Store(true)
	}
	d.mu.Unlock()
	e.persistIfDue()
	return nil
}

// DieFailed reports whether the die has failed (explicitly or by the random
// die-failure process as of now).
func (e *Emulator) DieFailed(a DieAddr) (bool, error) {
	if !e.checkDieAddr(a) {
		return false, base.InvalidArgumentf("flash: die %s out of range for %s", a, e.geo)
	}
	d := e.dies[a.Index(e.geo)]
	now := e.opts.Clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.failed && !d.failAt.IsZero() && !now.Before(d.failAt) {
		d.setFailed()
	}
	return d.failed, nil
}

// MarkBad retires a block on the host's request (for example after the host
// saw too many corrected bits in it). Later operations fail with ErrBadBlock.
func (e *Emulator) MarkBad(a BlockAddr) error {
	if !e.checkBlockAddr(a) {
		return base.InvalidArgumentf("flash: block %s out of range for %s", a, e.geo)
	}
	d := e.dies[a.DieAddr().Index(e.geo)]
	d.mu.Lock()
	d.markBad(&d.blocks[a.Block])
	d.mu.Unlock()
	e.persistIfDue()
	return nil
}

// SyncPrograms makes every completed program and erase durable when the
// device is Options.PowerSafe and file-backed (an fsync of the page file);
// otherwise it does nothing (programs then survive a process crash, and a
// power loss only once Sync or Close ran).
func (e *Emulator) SyncPrograms() error {
	if e.closed.Load() {
		return ErrClosed
	}
	if !e.opts.PowerSafe || !e.st.Persistent() {
		return nil
	}
	return e.syncPages()
}

// syncPages fsyncs the page file unless no program or erase completed
// since the last fsync began (PowerSafe: SDF asks before and after each
// journal flush, and often nothing was written in between). The count is
// taken to zero before the fsync, so a write that completes during it
// counts for the next; a program counts before it returns, so one that
// returned before a SyncPrograms call is always covered.
func (e *Emulator) syncPages() error {
	if e.unsynced.Swap(0) == 0 {
		return nil
	}
	if err := e.st.Sync(); err != nil {
		e.unsynced.Add(1)
		return err
	}
	return nil
}

// Sync makes programmed pages and the device state durable (file backend).
func (e *Emulator) Sync() error {
	if e.closed.Load() {
		return ErrClosed
	}
	if err := e.takeSaveErr(); err != nil {
		return err
	}
	return e.saveState(false /* clean */)
}

// Close implements Device: it saves the device state and releases the
// backend. Operations after Close fail with ErrClosed.
func (e *Emulator) Close() error {
	if e.closed.Swap(true) {
		return ErrClosed
	}
	// Wait for in-flight operations: each holds its die lock.
	for _, d := range e.dies {
		d.mu.Lock()
		d.mu.Unlock() //nolint:staticcheck // empty critical section is a barrier
	}
	err := e.takeSaveErr()
	if serr := e.saveState(true /* clean */); err == nil {
		err = serr
	}
	if cerr := e.st.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkBlock asserts the block state invariants (used by tests and after
// restore).
func (e *Emulator) checkBlock(b *blockState) error {
	return invariants.Check(b.written >= 0 && int(b.written) <= e.geo.PagesPerBlock && b.eraseCount >= 0,
		"flash: block state out of range: written %d erases %d", b.written, b.eraseCount)
}
