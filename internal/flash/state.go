package flash

import (
	"encoding/binary"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash/stateunit"
)

// The state record persists what the device itself knows about its cells:
// per block the P/E count, the write pointer, the bad flag, read counters and
// the program time; per die the failed flag. Layout (little endian):
//
//	magic "FMFLSTAT" | version u32 | length u32 (whole record) | seq u64 |
//	clean u8 | geometry 6 x u32 | dies u32 |
//	per die: failed u8, per block: erases u32, written u32, bad u8,
//	         readsSinceErase u64, reads u64, programUnixNano i64 |
//	crc32c u32 over everything before it
//
// The whole record carries a CRC32C as an end-to-end check; on the backend
// it is framed in small units and kept in three copies (internal/flash/stateunit).
const (
	stateMagic     = "FMFLSTAT"
	stateVersion   = 1
	stateHeaderLen = 8 + 4 + 4 + 8 + 1 + 6*4 + 4
	stateBlockLen  = 4 + 4 + 1 + 8 + 8 + 8
)

// deviceState is a decoded state record.
type deviceState struct {
	seq    uint64
	clean  bool
	failed []bool         // per die
	silent []bool         // per die: failing without saying so (FailDieSilently)
	blocks [][]blockState // per die, per block
}

func stateLen(g Geometry) int {
	return stateHeaderLen + g.Dies()*(1+g.BlocksPerDie*stateBlockLen) + 4
}

func encodeState(g Geometry, st *deviceState) []byte {
	buf := make([]byte, 0, stateLen(g))
	le := binary.LittleEndian
	buf = append(buf, stateMagic...)
	buf = le.AppendUint32(buf, stateVersion)
	buf = le.AppendUint32(buf, uint32(stateLen(g)))
	buf = le.AppendUint64(buf, st.seq)
	clean := byte(0)
	if st.clean {
		clean = 1
	}
	buf = append(buf, clean)
	for _, v := range []int{g.Channels, g.DiesPerChannel, g.BlocksPerDie, g.PagesPerBlock, g.PageSize, g.OOBSize} {
		buf = le.AppendUint32(buf, uint32(v))
	}
	buf = le.AppendUint32(buf, uint32(g.Dies()))
	for d := range st.blocks {
		f := byte(0)
		switch {
		case st.failed[d]:
			f = 1
		case d < len(st.silent) && st.silent[d]:
			f = 2
		}
		buf = append(buf, f)
		for _, b := range st.blocks[d] {
			buf = le.AppendUint32(buf, uint32(b.eraseCount))
			buf = le.AppendUint32(buf, uint32(b.written))
			bad := byte(0)
			if b.bad {
				bad = 1
			}
			buf = append(buf, bad)
			buf = le.AppendUint64(buf, uint64(b.readsSinceErase))
			buf = le.AppendUint64(buf, uint64(b.reads))
			buf = le.AppendUint64(buf, uint64(b.programUnixNano))
		}
	}
	return le.AppendUint32(buf, base.CRC32C(buf))
}

// decodeState verifies and decodes one copy of the state record. A record
// that does not verify is a corruption; a record for another geometry is an
// invalid argument (the caller opened the device with the wrong shape).
func decodeState(g Geometry, rec []byte) (*deviceState, error) {
	le := binary.LittleEndian
	if len(rec) < stateHeaderLen+4 || string(rec[:8]) != stateMagic {
		return nil, base.CorruptionErrorf("flash: state record: bad magic or length %d", len(rec))
	}
	n := int(le.Uint32(rec[12:]))
	if n < stateHeaderLen+4 || n > len(rec) {
		return nil, base.CorruptionErrorf("flash: state record: length %d of %d bytes", n, len(rec))
	}
	rec = rec[:n]
	if got, want := base.CRC32C(rec[:n-4]), le.Uint32(rec[n-4:]); got != want {
		return nil, base.CorruptionErrorf("flash: state record: crc32c %08x, stored %08x", got, want)
	}
	if v := le.Uint32(rec[8:]); v != stateVersion {
		return nil, base.CorruptionErrorf("flash: state record: unknown version %d", v)
	}
	st := &deviceState{seq: le.Uint64(rec[16:]), clean: rec[24] == 1}
	var dims [6]int
	for i := range dims {
		dims[i] = int(le.Uint32(rec[25+4*i:]))
	}
	saved := Geometry{dims[0], dims[1], dims[2], dims[3], dims[4], dims[5]}
	if saved != g {
		return nil, base.InvalidArgumentf("flash: device was created as %s, opened as %s", saved, g)
	}
	if n != stateLen(g) {
		return nil, base.CorruptionErrorf("flash: state record: length %d, want %d for %s", n, stateLen(g), g)
	}
	off := stateHeaderLen
	for d := 0; d < g.Dies(); d++ {
		st.failed = append(st.failed, rec[off] == 1)
		st.silent = append(st.silent, rec[off] == 2)
		off++
		blocks := make([]blockState, g.BlocksPerDie)
		for i := range blocks {
			b := &blocks[i]
			b.eraseCount = int32(le.Uint32(rec[off:]))
			b.written = int32(le.Uint32(rec[off+4:]))
			b.bad = rec[off+8] == 1
			b.readsSinceErase = int64(le.Uint64(rec[off+9:]))
			b.reads = int64(le.Uint64(rec[off+17:]))
			b.programUnixNano = int64(le.Uint64(rec[off+25:]))
			off += stateBlockLen
			if b.written < 0 || int(b.written) > g.PagesPerBlock || b.eraseCount < 0 {
				return nil, base.CorruptionErrorf("flash: state record: die %d block %d out of range (written %d, erases %d)",
					d, i, b.written, b.eraseCount)
			}
		}
		st.blocks = append(st.blocks, blocks)
	}
	return st, nil
}

// pickState assembles the newest state record from the copies and decodes
// it. It returns nil if there is no copy at all, and an error if copies
// exist but no record can be assembled from them.
func pickState(g Geometry, copies [][]byte) (*deviceState, stateunit.Merge, error) {
	any := false
	for _, c := range copies {
		if len(c) > 0 {
			any = true
		}
	}
	if !any {
		return nil, stateunit.Merge{}, nil
	}
	rec, m, err := stateunit.Assemble(copies)
	// NB: every save after the first finds all the copies in place, and a
	// save writes them one after the other, each synced before the next is
	// created: fewer copies than stateunit.Copies, none of which
	// assembles, is the device's first save torn by a power loss (found by
	// TestPowerLossFileDevice: a new file's size kept and not its bytes).
	// Nothing was acknowledged on that state; the device opens as one
	// whose state files are gone (write pointers from the page file).
	firstSaveTorn := len(copies) < stateunit.Copies
	if err != nil {
		if firstSaveTorn {
			return nil, m, nil
		}
		return nil, m, base.CorruptionErrorf("flash: no state record can be assembled from the %d copies: %w", len(copies), err)
	}
	if rec == nil {
		if st, ok, err := pickLegacyState(g, copies); ok || err != nil {
			return st, stateunit.Merge{DamagedCopies: stateunit.Copies}, err
		}
		if firstSaveTorn {
			return nil, m, nil
		}
		return nil, m, base.CorruptionErrorf("flash: no unit of the device state verifies in any of the %d copies", len(copies))
	}
	st, err := decodeState(g, rec)
	if err != nil {
		return nil, m, err
	}
	return st, m, nil
}

// pickLegacyState reads devices written before the unit framing: each copy
// one whole record under one CRC32C; the newest that verifies wins (the
// next save rewrites every copy in units).
func pickLegacyState(g Geometry, copies [][]byte) (*deviceState, bool, error) {
	var best *deviceState
	for _, c := range copies {
		st, err := decodeState(g, c)
		if base.IsInvalidArgument(err) {
			return nil, false, err
		}
		if err == nil && (best == nil || st.seq > best.seq) {
			best = st
		}
	}
	return best, best != nil, nil
}

// anyWritten reports whether the state has a programmed page anywhere.
func (st *deviceState) anyWritten() bool {
	for _, blocks := range st.blocks {
		for _, b := range blocks {
			if b.written > 0 {
				return true
			}
		}
	}
	return false
}

// snapshotState copies the device state under every die's lock in turn
// (each die is consistent in itself; dies are independent).
func (e *Emulator) snapshotState(clean bool) *deviceState {
	st := &deviceState{clean: clean}
	for _, d := range e.dies {
		d.mu.Lock()
		st.failed = append(st.failed, d.failed)
		st.silent = append(st.silent, d.silent)
		st.blocks = append(st.blocks, append([]blockState(nil), d.blocks...))
		d.mu.Unlock()
	}
	return st
}

// persistIfDue saves the state record of a persistent backend when a block
// was retired, a die failed, or Options.SaveStateEveryErases erases happened
// since the last save. It runs after the operation released its die lock
// (saving takes every die's lock in turn). An error is kept for the next
// Sync or Close: the operation itself succeeded.
func (e *Emulator) persistIfDue() {
	if !e.st.Persistent() || e.closed.Load() {
		return
	}
	due := false
	for _, d := range e.dies {
		if d.persist.Load() {
			due = true
			break
		}
	}
	if n := e.opts.SaveStateEveryErases; n > 0 && e.erasesSinceSave.Load() >= int64(n) {
		due = true
	}
	if !due {
		return
	}
	if err := e.saveState(false /* clean */); err != nil {
		e.saveErrMu.Lock()
		if e.saveErr == nil {
			e.saveErr = err
		}
		e.saveErrMu.Unlock()
	}
}

func (e *Emulator) takeSaveErr() error {
	e.saveErrMu.Lock()
	defer e.saveErrMu.Unlock()
	err := e.saveErr
	e.saveErr = nil
	return err
}

// saveState syncs the pages and writes the next state record.
func (e *Emulator) saveState(clean bool) error {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	if err := e.st.Sync(); err != nil {
		return err
	}
	// Clear the triggers before the snapshot: a change racing with this
	// save sets them again and is saved next time.
	for _, d := range e.dies {
		d.persist.Store(false)
	}
	e.erasesSinceSave.Store(0)
	st := e.snapshotState(clean)
	e.stateSeq++
	st.seq = e.stateSeq
	return e.st.SaveState(stateunit.Frame(st.seq, encodeState(e.geo, st)))
}

// restore installs a saved state. After an unclean shutdown the write
// pointers in the record may be stale (pages programmed or blocks erased
// after the last save), so they are rebuilt from the backend, which knows
// which pages hold programmed content.
func (e *Emulator) restore(st *deviceState) error {
	e.stateSeq = st.seq
	for i, d := range e.dies {
		d.failed = st.failed[i]
		d.silent = i < len(st.silent) && st.silent[i]
		d.failedNow.Store(d.failed)
		copy(d.blocks, st.blocks[i])
		for j := range d.blocks {
			b := &d.blocks[j]
			if b.bad {
				d.badBlocks.Add(1)
			}
			if !st.clean && !b.bad {
				w, err := e.scanWritten(BlockAddr{d.addr.Channel, d.addr.Die, j})
				if err != nil {
					return err
				}
				if w == 0 {
					b.programUnixNano = 0
					b.readsSinceErase = 0
				} else if b.programUnixNano == 0 {
					b.programUnixNano = e.opts.Clock.Now().UnixNano()
				}
				b.written = int32(w)
			}
			if err := e.checkBlock(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// scanWritten counts the programmed pages at the start of block a.
func (e *Emulator) scanWritten(a BlockAddr) (int, error) {
	first := e.flatPage(PageAddr{a.Channel, a.Die, a.Block, 0})
	for p := 0; p < e.geo.PagesPerBlock; p++ {
		ok, err := e.st.Programmed(first + int64(p))
		if err != nil {
			return 0, err
		}
		if !ok {
			return p, nil
		}
	}
	return e.geo.PagesPerBlock, nil
}

// StateLayout is how the device state of geometry g is stored: a record of
// recordBytes cut into units units of unitBytes bytes each, in copies
// copies (for models of its failure probability).
func StateLayout(g Geometry) (recordBytes, unitBytes, units, copies int) {
	n := stateLen(g)
	return n, stateunit.UnitSize, (n + stateunit.UnitPayload - 1) / stateunit.UnitPayload, stateunit.Copies
}
