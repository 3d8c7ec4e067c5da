package flash

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash/pagefile"
	"github.com/flashmend/flashmend/internal/fsys"
)

// fileStore keeps the device in a directory, in the layout of
// internal/flash/pagefile (a slot per page with its CRC32C, the state
// record's copies, a lock).
type fileStore struct{ *pagefile.Store }

var _ store = fileStore{}

// Persistent implements store: the directory survives the process.
func (fileStore) Persistent() bool { return true }

// OpenFile opens (or creates) a file-backed emulated device in dir. The
// device's state is assembled unit by unit from its three state copies; if
// the last run did not Close the device, the write pointers are rebuilt
// from the page file. A directory whose state files are all gone while its
// page file holds programmed pages is not a new device: its write pointers
// are rebuilt from the page file (erase and read counters, bad-block flags
// and failed dies are lost; OpenInfo.StateRebuilt). Opening with a geometry
// other than the one the device was created with is an invalid argument; a
// device whose state cannot be assembled from any copy does not open (a
// corruption error naming the directory and its state files).
func OpenFile(dir string, g Geometry, opts Options) (*Emulator, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if err := opts.validate(g); err != nil {
		return nil, err
	}
	files := opts.FS
	if files == nil {
		files = fsys.OS{}
	}
	_, pagesErr := files.Stat(filepath.Join(dir, "pages"))
	pf, err := pagefile.OpenFS(files, dir, g.PageSize+g.OOBSize, int64(g.Dies())*int64(g.BlocksPerDie)*int64(g.PagesPerBlock))
	if err != nil {
		return nil, err
	}
	st := fileStore{pf}
	pf.SetStateIO(opts.StateIO)
	copies, err := st.LoadState()
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	saved, merge, err := pickState(g, copies)
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("flash: open %s (state files %s): %w", dir, strings.Join(st.StateNames(), ", "), err)
	}
	if saved != nil && errors.Is(pagesErr, fs.ErrNotExist) && saved.anyWritten() {
		_ = st.Close()
		return nil, base.CorruptionErrorf("flash: open %s: the page file (pages) is missing, but the device state says pages are programmed", dir)
	}
	rebuild := saved == nil
	if rebuild {
		// No state at all: a fresh device, or one whose state files were
		// lost. Restoring an unclean empty state rebuilds the write
		// pointers from the page file, which tells the two apart.
		saved = emptyState(g)
	}
	e, err := newEmulator(g, opts, st, saved)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	e.openInfo = OpenInfo{
		RejectedStateCopies: merge.DamagedCopies, StateUnitsMerged: merge.UnitsMerged,
		StateUnitsVoted: merge.UnitsVoted, Clean: !rebuild && saved.clean,
	}
	if rebuild {
		e.openInfo.New = !e.anyProgrammed()
		e.openInfo.StateRebuilt = !e.openInfo.New
		e.openInfo.RejectedStateCopies = 0
	}
	// Mark the device open: a crash from here on is detected at the next
	// open by the clean flag being off. This also rewrites every damaged
	// copy.
	if err := e.saveState(false /* clean */); err != nil {
		_ = st.Close()
		return nil, err
	}
	return e, nil
}

// emptyState is the state of a device whose every block is erased and
// unworn, marked unclean so that restore reads the write pointers from the
// backend.
func emptyState(g Geometry) *deviceState {
	st := &deviceState{}
	for d := 0; d < g.Dies(); d++ {
		st.failed = append(st.failed, false)
		st.silent = append(st.silent, false)
		st.blocks = append(st.blocks, make([]blockState, g.BlocksPerDie))
	}
	return st
}

// anyProgrammed reports whether any block holds a programmed page.
func (e *Emulator) anyProgrammed() bool {
	for _, d := range e.dies {
		d.mu.Lock()
		for _, b := range d.blocks {
			if b.written > 0 {
				d.mu.Unlock()
				return true
			}
		}
		d.mu.Unlock()
	}
	return false
}

// OpenInfo tells how a file-backed device was opened.
type OpenInfo struct {
	New   bool // no state record existed and no page is programmed: a fresh device
	Clean bool // the previous run closed the device
	// RejectedStateCopies counts state copies that were missing, short,
	// damaged or stale (all rewritten at open).
	RejectedStateCopies int
	// StateUnitsMerged counts state units that did not verify in some copy
	// and were taken from another; StateUnitsVoted those that verified in
	// no copy and were rebuilt by a bit-by-bit majority vote.
	StateUnitsMerged, StateUnitsVoted int
	// StateRebuilt: every state copy was gone but pages are programmed;
	// write pointers were rebuilt from the page file and the wear counters
	// restart at zero.
	StateRebuilt bool
}

func (o OpenInfo) String() string {
	s := fmt.Sprintf("new=%t clean=%t rejected=%d", o.New, o.Clean, o.RejectedStateCopies)
	if o.StateUnitsMerged > 0 || o.StateUnitsVoted > 0 {
		s += fmt.Sprintf(" units-merged=%d units-voted=%d", o.StateUnitsMerged, o.StateUnitsVoted)
	}
	if o.StateRebuilt {
		s += " state-rebuilt"
	}
	return s
}

// OpenInfo reports how the device was opened (zero for memory devices).
func (e *Emulator) OpenInfo() OpenInfo { return e.openInfo }
