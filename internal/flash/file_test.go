package flash

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash/pagefile"
	"github.com/flashmend/flashmend/internal/flash/stateunit"
	"github.com/flashmend/flashmend/internal/testseed"
)

// corruptStateCopy overwrites one byte of state copy i of the device in
// dir.
func corruptStateCopy(dir string, i int, off int64) error {
	f, err := os.OpenFile(filepath.Join(dir, pagefile.StateName(i)), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil && err != io.EOF {
		return err
	}
	b[0] ^= 0x5A
	_, err = f.WriteAt(b[:], off)
	return err
}

// crash drops the device without saving its state, as a power loss would
// (pages already written stay in the page file).
func crash(t *testing.T, e *Emulator) {
	t.Helper()
	e.closed.Store(true)
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFilePersistence(t *testing.T) {
	g := testGeometry()
	dir := t.TempDir()
	clock := base.NewManualClock(time.Unix(1e9, 0))
	e, err := OpenFile(dir, g, Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if info := e.OpenInfo(); !info.New {
		t.Fatalf("open info %v", info)
	}
	// Block (0,0,0): full; (0,0,1): 3 pages then erased twice and 2 pages;
	// (1,1,3): bad; die (1,0): failed.
	prog := func(b BlockAddr, n int, salt byte) {
		for p := 0; p < n; p++ {
			pa := PageAddr{b.Channel, b.Die, b.Block, int(e.mustBlock(t, b).WrittenPage)}
			if err := e.Program(pa, pageData(g, pa, salt), []byte{salt, byte(p)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	prog(BlockAddr{0, 0, 0}, g.PagesPerBlock, 1)
	prog(BlockAddr{0, 0, 1}, 3, 2)
	for i := 0; i < 2; i++ {
		if err := e.Erase(BlockAddr{0, 0, 1}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Hour)
	prog(BlockAddr{0, 0, 1}, 2, 3)
	if err := e.MarkBad(BlockAddr{1, 1, 3}); err != nil {
		t.Fatal(err)
	}
	if err := e.FailDie(DieAddr{1, 0}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, g.PageSize)
	for i := 0; i < 5; i++ {
		if _, err := e.Read(PageAddr{0, 0, 0, 4}, buf, nil); err != nil {
			t.Fatal(err)
		}
	}
	before := e.snapshotState(true)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(dir, Geometry{2, 2, 4, 8, 1024, 16}, Options{Clock: clock}); !base.IsInvalidArgument(err) {
		t.Fatalf("open with another geometry: %v", err)
	}

	check := func(e *Emulator) {
		t.Helper()
		after := e.snapshotState(true)
		for d := range before.blocks {
			if before.failed[d] != after.failed[d] {
				t.Fatalf("die %d failed %t -> %t", d, before.failed[d], after.failed[d])
			}
			for b := range before.blocks[d] {
				if before.blocks[d][b] != after.blocks[d][b] {
					t.Fatalf("die %d block %d: %+v -> %+v", d, b, before.blocks[d][b], after.blocks[d][b])
				}
			}
		}
		oob := make([]byte, g.OOBSize)
		for p := 0; p < g.PagesPerBlock; p++ {
			pa := PageAddr{0, 0, 0, p}
			if _, err := e.Read(pa, buf, oob); err != nil || !bytes.Equal(buf, pageData(g, pa, 1)) || oob[0] != 1 || oob[1] != byte(p) {
				t.Fatalf("page %s after reopen: %v", pa, err)
			}
		}
		pa := PageAddr{0, 0, 1, 1}
		if _, err := e.Read(pa, buf, oob); err != nil || !bytes.Equal(buf, pageData(g, pa, 3)) {
			t.Fatalf("page %s after reopen: %v", pa, err)
		}
		if _, err := e.Read(PageAddr{0, 0, 1, 2}, buf, oob); err != nil || buf[0] != 0xFF {
			t.Fatalf("erased page after reopen: %v %x", err, buf[0])
		}
		_, err := e.Read(PageAddr{1, 0, 0, 0}, buf, nil)
		wantErr(t, err, ErrDieFailed, "failed die after reopen")
		wantErr(t, e.Erase(BlockAddr{1, 1, 3}), ErrBadBlock, "bad block after reopen")
	}

	e, err = OpenFile(dir, g, Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if info := e.OpenInfo(); info.New || !info.Clean || info.RejectedStateCopies != 0 {
		t.Fatalf("open info %v", info)
	}
	check(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	before = mustReopenSnapshot(t, dir, g, clock)

	// One corrupted copy (each in turn): the device opens from the others
	// and rewrites the bad one.
	for victim := 0; victim < stateunit.Copies; victim++ {
		if err := corruptStateCopy(dir, victim, 100); err != nil {
			t.Fatal(err)
		}
		e, err = OpenFile(dir, g, Options{Clock: clock})
		if err != nil {
			t.Fatalf("copy %d corrupted: %v", victim, err)
		}
		if info := e.OpenInfo(); info.RejectedStateCopies != 1 || info.StateUnitsMerged != 1 {
			t.Fatalf("copy %d corrupted: open info %v", victim, info)
		}
		check(e)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		before = mustReopenSnapshot(t, dir, g, clock)
	}

	// Every copy damaged, each in a different unit: merged unit by unit.
	fi, err := os.Stat(filepath.Join(dir, pagefile.StateName(0)))
	if err != nil {
		t.Fatal(err)
	}
	units := int(fi.Size() / stateunit.UnitSize)
	if units < 2 {
		t.Fatalf("state copy of %d bytes: the test needs two units", fi.Size())
	}
	for i := 0; i < stateunit.Copies; i++ {
		if err := corruptStateCopy(dir, i, int64(40+(i%units)*stateunit.UnitSize)); err != nil {
			t.Fatal(err)
		}
	}
	e, err = OpenFile(dir, g, Options{Clock: clock})
	if err != nil {
		t.Fatalf("every copy damaged in a different unit: %v", err)
	}
	if info := e.OpenInfo(); info.RejectedStateCopies != 3 || info.StateUnitsMerged != min(units, 3) || info.StateUnitsVoted != 0 {
		t.Fatalf("every copy damaged in a different unit: open info %v", info)
	}
	check(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	before = mustReopenSnapshot(t, dir, g, clock)

	// Every copy damaged in the same unit at different bits: majority vote.
	for i := 0; i < stateunit.Copies; i++ {
		if err := corruptStateCopy(dir, i, int64(stateunit.UnitSize+60+i)); err != nil {
			t.Fatal(err)
		}
	}
	e, err = OpenFile(dir, g, Options{Clock: clock})
	if err != nil {
		t.Fatalf("every copy damaged in the same unit: %v", err)
	}
	if info := e.OpenInfo(); info.StateUnitsVoted != 1 {
		t.Fatalf("every copy damaged in the same unit: open info %v", info)
	}
	check(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Every copy damaged at the same byte: refuse to open, as a corruption
	// that names the directory and the state files.
	for i := 0; i < stateunit.Copies; i++ {
		if err := corruptStateCopy(dir, i, 40); err != nil {
			t.Fatal(err)
		}
	}
	_, err = OpenFile(dir, g, Options{Clock: clock})
	if !base.IsCorruption(err) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "state.0") {
		t.Fatalf("every copy damaged at the same byte: %v", err)
	}
}

// TestFileStateFilesDeleted: a device whose state files are all gone but
// whose page file holds data opens with write pointers rebuilt from the
// pages (it is not a new device), and its pages read back.
func TestFileStateFilesDeleted(t *testing.T) {
	g := testGeometry()
	dir := t.TempDir()
	e, err := OpenFile(dir, g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !e.OpenInfo().New {
		t.Fatalf("fresh device: %v", e.OpenInfo())
	}
	for p := 0; p < 3; p++ {
		pa := PageAddr{1, 0, 2, p}
		if err := e.Program(pa, pageData(g, pa, 4), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < stateunit.Copies; i++ {
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("state.%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	e, err = OpenFile(dir, g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if info := e.OpenInfo(); info.New || !info.StateRebuilt {
		t.Fatalf("open info %v, want state rebuilt", info)
	}
	if b := e.mustBlock(t, BlockAddr{1, 0, 2}); b.WrittenPage != 3 {
		t.Fatalf("write pointer %d after rebuild, want 3", b.WrittenPage)
	}
	buf := make([]byte, g.PageSize)
	pa := PageAddr{1, 0, 2, 2}
	if _, err := e.Read(pa, buf, nil); err != nil || !bytes.Equal(buf, pageData(g, pa, 4)) {
		t.Fatalf("page after rebuild: %v", err)
	}
}

// TestStateMergeRandom damages the three framed copies of a state record at
// random (flips, zeroed units, truncation, a missing copy) and checks that
// the record assembled is the original whenever every unit verifies in some
// copy or can be voted, and an error otherwise, never a wrong record.
func TestStateMergeRandom(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	rec := make([]byte, 5000)
	rng.Read(rec)
	framed := stateunit.Frame(7, rec)
	units := len(framed) / stateunit.UnitSize
	for iter := 0; iter < 2000; iter++ {
		copies := make([][]byte, stateunit.Copies)
		for i := range copies {
			copies[i] = append([]byte(nil), framed...)
		}
		damaged := make([]map[int]bool, stateunit.Copies)
		for i := range copies {
			damaged[i] = map[int]bool{}
			switch rng.Intn(6) {
			case 0: // flips
				for k := rng.Intn(4); k >= 0; k-- {
					bit := rng.Intn(len(framed) * 8)
					copies[i][bit/8] ^= 1 << (bit % 8)
					damaged[i][bit/8/stateunit.UnitSize] = true
				}
			case 1: // a zeroed unit
				u := rng.Intn(units)
				clear(copies[i][u*stateunit.UnitSize : (u+1)*stateunit.UnitSize])
				damaged[i][u] = true
			case 2: // truncated
				n := rng.Intn(len(framed))
				copies[i] = copies[i][:n]
				for u := n / stateunit.UnitSize; u < units; u++ {
					damaged[i][u] = true
				}
			case 3: // missing
				copies[i] = nil
				for u := 0; u < units; u++ {
					damaged[i][u] = true
				}
			}
		}
		recoverable := true
		for u := 0; u < units; u++ {
			lost := 0
			for i := range copies {
				if damaged[i][u] {
					lost++
				}
			}
			if lost == stateunit.Copies {
				recoverable = false // maybe by vote; not required
			}
		}
		got, _, err := stateunit.Assemble(copies)
		if err == nil && got != nil && !bytes.Equal(got, rec) {
			t.Fatalf("iteration %d: wrong record assembled", iter)
		}
		if recoverable && (err != nil || !bytes.Equal(got, rec)) {
			t.Fatalf("iteration %d: every unit verifies in some copy but assembly gave %v", iter, err)
		}
	}
}

func (e *Emulator) mustBlock(t *testing.T, a BlockAddr) BlockInfo {
	t.Helper()
	info, err := e.Block(a)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// mustReopenSnapshot opens and closes the device and returns its state
// (reads during check change read counters, so the baseline moves).
func mustReopenSnapshot(t *testing.T, dir string, g Geometry, c base.Clock) *deviceState {
	t.Helper()
	e, err := OpenFile(dir, g, Options{Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	st := e.snapshotState(true)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestFileCrashRebuildsWritePointers(t *testing.T) {
	g := testGeometry()
	dir := t.TempDir()
	e, err := OpenFile(dir, g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, g.PageSize)
	for p := 0; p < 5; p++ {
		pa := PageAddr{0, 1, 2, p}
		if err := e.Program(pa, pageData(g, pa, 9), nil); err != nil {
			t.Fatal(err)
		}
	}
	for p := 0; p < 3; p++ {
		if err := e.Program(PageAddr{1, 1, 0, p}, buf, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	// After the last save: more pages, and an erase.
	if err := e.Program(PageAddr{0, 1, 2, 5}, pageData(g, PageAddr{0, 1, 2, 5}, 9), nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Erase(BlockAddr{1, 1, 0}); err != nil {
		t.Fatal(err)
	}
	crash(t, e)

	e, err = OpenFile(dir, g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if info := e.OpenInfo(); info.Clean || info.New {
		t.Fatalf("open info after crash %v", info)
	}
	if w := e.mustBlock(t, BlockAddr{0, 1, 2}).WrittenPage; w != 6 {
		t.Fatalf("write pointer after crash %d, want 6", w)
	}
	if w := e.mustBlock(t, BlockAddr{1, 1, 0}).WrittenPage; w != 0 {
		t.Fatalf("erased block's write pointer after crash %d, want 0", w)
	}
	pa := PageAddr{0, 1, 2, 5}
	if _, err := e.Read(pa, buf, nil); err != nil || !bytes.Equal(buf, pageData(g, pa, 9)) {
		t.Fatalf("read after crash: %v", err)
	}
	wantErr(t, e.Program(PageAddr{0, 1, 2, 5}, buf, nil), ErrNotErased, "program after crash")
	if err := e.Program(PageAddr{0, 1, 2, 6}, buf, nil); err != nil {
		t.Fatal(err)
	}
}

func TestFileBitRotIsReportedAsUncorrectable(t *testing.T) {
	g := testGeometry()
	dir := t.TempDir()
	e, err := OpenFile(dir, g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pa := PageAddr{1, 0, 1, 0}
	if err := e.Program(pa, pageData(g, pa, 4), nil); err != nil {
		t.Fatal(err)
	}
	// Rot one byte of the page's slot in the backing file.
	f, err := os.OpenFile(filepath.Join(dir, "pages"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := e.flatPage(pa)*int64(pagefile.HeaderBytes+g.PageSize+g.OOBSize) + pagefile.HeaderBytes + 17
	if _, err := f.WriteAt([]byte{0x00}, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	buf := make([]byte, g.PageSize)
	st, err := e.Read(pa, buf, nil)
	if !errors.Is(err, ErrUncorrectable) || !base.IsCorruption(err) || !st.Uncorrectable {
		t.Fatalf("rotten page read: %v %v", st, err)
	}
	// The corrupt content is returned: one byte differs.
	want := pageData(g, pa, 4)
	if diff := diffBits(buf, want); diff == 0 || buf[17] != 0 || !bytes.Equal(buf[18:], want[18:]) {
		t.Fatalf("rotten page content: %d bits differ", diff)
	}
	// Second open of the same directory is refused while the first holds it.
	if _, err := OpenFile(dir, g, Options{}); err == nil {
		t.Fatal("second open of an open device succeeded")
	}
}

// TestFileFailuresPersistWithoutClose checks that a retired block and a
// failed die reach the state record at once, and erase counts every
// SaveStateEveryErases erases, so a crash does not lose them.
func TestFileFailuresPersistWithoutClose(t *testing.T) {
	g := testGeometry()
	dir := t.TempDir()
	opts := Options{SaveStateEveryErases: 2}
	e, err := OpenFile(dir, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, g.PageSize)
	e.Faults().FailProgram(PageAddr{0, 1, 1, 0})
	wantErr(t, e.Program(PageAddr{0, 1, 1, 0}, buf, nil), ErrProgramFailed, "injected program failure")
	if err := e.FailDie(DieAddr{1, 1}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := e.Erase(BlockAddr{1, 0, 0}); err != nil {
			t.Fatal(err)
		}
	}
	crash(t, e)
	e, err = OpenFile(dir, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !e.mustBlock(t, BlockAddr{0, 1, 1}).Bad {
		t.Fatal("grown bad block lost in a crash")
	}
	if failed, _ := e.DieFailed(DieAddr{1, 1}); !failed {
		t.Fatal("failed die lost in a crash")
	}
	if n := e.mustBlock(t, BlockAddr{1, 0, 0}).EraseCount; n != 2 {
		t.Fatalf("erase count after crash %d, want 2 (saved every 2 erases)", n)
	}
	if s := e.Stats(); s.BadBlocks != 1 || s.FailedDies != 1 {
		t.Fatalf("stats after reopen %v", s)
	}
}

// TestFilePagesDeleted: a device whose page file is gone while its state
// says pages are programmed does not open as an empty device: a corruption
// error that names the page file.
func TestFilePagesDeleted(t *testing.T) {
	g := testGeometry()
	dir := t.TempDir()
	e, err := OpenFile(dir, g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pa := PageAddr{0, 1, 1, 0}
	if err := e.Program(pa, pageData(g, pa, 2), nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "pages")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(dir, g, Options{}); !base.IsCorruption(err) || !strings.Contains(err.Error(), "page file") {
		t.Fatalf("page file deleted: %v", err)
	}
}

// eioStateIO fails every read of the state copies named in bad with EIO
// (a bad sector under them); writes go to the os and heal the copy.
type eioStateIO struct {
	bad   map[string]bool
	reads int
}

func (s *eioStateIO) ReadFile(p string) ([]byte, error) {
	if s.bad[filepath.Base(p)] {
		s.reads++
		return nil, fmt.Errorf("read %s: injected: %w", p, syscall.EIO)
	}
	return os.ReadFile(p)
}

func (s *eioStateIO) WriteFileSync(p string, b []byte) error {
	delete(s.bad, filepath.Base(p))
	return pagefile.OSStateIO{}.WriteFileSync(p, b)
}

// TestFileStateCopyEIOReadOpens is the regression test of the torture
// harness's CORDS cell "flash device state / EIO read" (flashmend torture
// cords --only "flash device state/eio-read"): a read error on one of the
// three state copies kept the device from opening (the node stayed dead).
// It is a damaged copy now: the device opens from the other two with the
// same write pointers, and rewrites it; with every copy unreadable the
// write pointers are rebuilt from the page file.
func TestFileStateCopyEIOReadOpens(t *testing.T) {
	g := testGeometry()
	dir := t.TempDir()
	e, err := OpenFile(dir, g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pa := PageAddr{1, 0, 2, 0}
	if err := e.Program(pa, pageData(g, pa, 4), nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	io := &eioStateIO{bad: map[string]bool{pagefile.StateName(2): true}}
	e, err = OpenFile(dir, g, Options{StateIO: io})
	if err != nil {
		t.Fatalf("one unreadable state copy: %v", err)
	}
	if info := e.OpenInfo(); io.reads != 1 || info.RejectedStateCopies != 1 || !info.Clean || info.StateRebuilt {
		t.Fatalf("open info %v after %d failed reads, want one copy rejected, clean", info, io.reads)
	}
	if b := e.mustBlock(t, BlockAddr{1, 0, 2}); b.WrittenPage != 1 {
		t.Fatalf("write pointer %d, want 1", b.WrittenPage)
	}
	if io.bad[pagefile.StateName(2)] {
		t.Fatal("the unreadable copy was not rewritten at open")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	all := &eioStateIO{bad: map[string]bool{}}
	for i := 0; i < stateunit.Copies; i++ {
		all.bad[pagefile.StateName(i)] = true
	}
	e, err = OpenFile(dir, g, Options{StateIO: all})
	if err != nil {
		t.Fatalf("every state copy unreadable: %v", err)
	}
	defer e.Close()
	if info := e.OpenInfo(); !info.StateRebuilt {
		t.Fatalf("open info %v, want the state rebuilt from the page file", info)
	}
	if b := e.mustBlock(t, BlockAddr{1, 0, 2}); b.WrittenPage != 1 {
		t.Fatalf("write pointer %d after rebuild, want 1", b.WrittenPage)
	}
}
