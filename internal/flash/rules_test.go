package flash

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

func testGeometry() Geometry {
	return Geometry{Channels: 2, DiesPerChannel: 2, BlocksPerDie: 4, PagesPerBlock: 8, PageSize: 512, OOBSize: 16}
}

func pageData(g Geometry, a PageAddr, salt byte) []byte {
	b := make([]byte, g.PageSize)
	for i := range b {
		b[i] = byte(i) ^ byte(a.Page*7+a.Block*13+a.Die*17+a.Channel*19) ^ salt
	}
	return b
}

func mustMemory(t *testing.T, g Geometry, o Options) *Emulator {
	t.Helper()
	e, err := NewMemory(g, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func wantErr(t *testing.T, err, target error, op string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err %v, want %v", op, err, target)
	}
	var oe *OpError
	if !errors.As(err, &oe) {
		t.Fatalf("%s: err %v is not an *OpError", op, err)
	}
}

func TestNANDRules(t *testing.T) {
	g := testGeometry()
	e := mustMemory(t, g, Options{})
	buf := make([]byte, g.PageSize)
	oob := make([]byte, g.OOBSize)
	a := PageAddr{1, 1, 2, 0}

	// Erased pages read as 0xFF.
	if st, err := e.Read(a, buf, oob); err != nil || st != (ReadStatus{}) {
		t.Fatalf("read erased: %v %v", st, err)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{0xFF}, g.PageSize)) || oob[0] != 0xFF {
		t.Fatal("erased page does not read 0xFF")
	}
	// Program out of order.
	wantErr(t, e.Program(PageAddr{1, 1, 2, 1}, buf, nil), ErrProgramOrder, "program page 1 first")
	// Program in order, with a short OOB (zero-padded).
	for p := 0; p < g.PagesPerBlock; p++ {
		pa := PageAddr{1, 1, 2, p}
		if err := e.Program(pa, pageData(g, pa, 0), []byte{byte(p), 0xAB}); err != nil {
			t.Fatalf("program %s: %v", pa, err)
		}
	}
	for p := 0; p < g.PagesPerBlock; p++ {
		pa := PageAddr{1, 1, 2, p}
		if _, err := e.Read(pa, buf, oob); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, pageData(g, pa, 0)) {
			t.Fatalf("page %s content differs", pa)
		}
		if oob[0] != byte(p) || oob[1] != 0xAB || oob[2] != 0 || oob[g.OOBSize-1] != 0 {
			t.Fatalf("page %s oob %x", pa, oob)
		}
		// nil oob skips the spare area.
		if _, err := e.Read(pa, buf, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Reprogramming a written page needs an erase.
	wantErr(t, e.Program(PageAddr{1, 1, 2, 3}, buf, nil), ErrNotErased, "reprogram")
	info, err := e.Block(BlockAddr{1, 1, 2})
	if err != nil || info.WrittenPage != g.PagesPerBlock || info.EraseCount != 0 || info.ProgramTime.IsZero() {
		t.Fatalf("block info %v %v", info, err)
	}
	if err := e.Erase(BlockAddr{1, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if info, _ := e.Block(BlockAddr{1, 1, 2}); info.WrittenPage != 0 || info.EraseCount != 1 || !info.ProgramTime.IsZero() {
		t.Fatalf("after erase: %v", info)
	}
	if _, err := e.Read(PageAddr{1, 1, 2, 3}, buf, oob); err != nil || buf[0] != 0xFF || oob[0] != 0xFF {
		t.Fatalf("erased read: %v %x", err, buf[:4])
	}
	if err := e.Program(PageAddr{1, 1, 2, 0}, pageData(g, a, 1), nil); err != nil {
		t.Fatal(err)
	}
	all := e.Blocks()
	if len(all) != g.Dies()*g.BlocksPerDie || all[DieAddr{1, 1}.Index(g)*g.BlocksPerDie+2].EraseCount != 1 {
		t.Fatalf("Blocks() snapshot %v", all)
	}
	if ec := e.EraseCounts(); ec[DieAddr{1, 1}.Index(g)*g.BlocksPerDie+2] != 1 || ec[0] != 0 {
		t.Fatalf("EraseCounts %v", ec)
	}
	// Other blocks are untouched by all of this.
	if info, _ := e.Block(BlockAddr{1, 1, 1}); info != (BlockInfo{}) {
		t.Fatalf("neighbour block changed: %v", info)
	}
}

func TestValidation(t *testing.T) {
	g := testGeometry()
	e := mustMemory(t, g, Options{})
	buf := make([]byte, g.PageSize)
	for _, a := range []PageAddr{{-1, 0, 0, 0}, {2, 0, 0, 0}, {0, 2, 0, 0}, {0, 0, 4, 0}, {0, 0, 0, 8}, {0, 0, 0, -1}} {
		wantErr(t, e.Program(a, buf, nil), ErrOutOfRange, "program "+a.String())
		_, err := e.Read(a, buf, nil)
		wantErr(t, err, ErrOutOfRange, "read "+a.String())
		if !base.IsInvalidArgument(err) {
			t.Fatalf("out of range is not an invalid argument: %v", err)
		}
	}
	wantErr(t, e.Erase(BlockAddr{0, 0, 4}), ErrOutOfRange, "erase")
	if _, err := e.Block(BlockAddr{0, 0, -1}); !errors.Is(err, ErrOutOfRange) {
		t.Fatal(err)
	}
	a := PageAddr{0, 0, 0, 0}
	wantErr(t, e.Program(a, buf[:10], nil), ErrBadSize, "short data")
	wantErr(t, e.Program(a, buf, make([]byte, g.OOBSize+1)), ErrBadSize, "long oob")
	_, err := e.Read(a, buf, make([]byte, 3))
	wantErr(t, err, ErrBadSize, "short oob")
	if err := e.FailDie(DieAddr{5, 0}); !base.IsInvalidArgument(err) {
		t.Fatal(err)
	}
	if _, err := NewMemory(Geometry{Channels: 1, DiesPerChannel: 1, BlocksPerDie: 1, PagesPerBlock: 1, PageSize: 100}, Options{}); !base.IsInvalidArgument(err) {
		t.Fatal(err)
	}
	if _, err := NewMemory(g, Options{ErrorModel: UBERModel{UBER: 2}}); !base.IsInvalidArgument(err) {
		t.Fatal(err)
	}
	if _, err := NewMemory(g, Options{Wear: WearOptions{ProgramFailureAtRated: 1.5}}); !base.IsInvalidArgument(err) {
		t.Fatal(err)
	}
	if _, err := NewMemory(g, Options{Timing: Timing{Mode: TimingReal}, Clock: base.NewManualClock(time.Unix(0, 0))}); !base.IsInvalidArgument(err) {
		t.Fatal(err)
	}
	// Closed device.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, e.Program(a, buf, nil), ErrClosed, "program after close")
}

func TestFailedDieFailsEverything(t *testing.T) {
	g := testGeometry()
	e := mustMemory(t, g, Options{})
	buf := make([]byte, g.PageSize)
	dead := DieAddr{0, 1}
	if err := e.Program(PageAddr{0, 1, 0, 0}, buf, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.FailDie(dead); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < g.BlocksPerDie; b++ {
		for p := 0; p < g.PagesPerBlock; p++ {
			a := PageAddr{dead.Channel, dead.Die, b, p}
			_, err := e.Read(a, buf, nil)
			wantErr(t, err, ErrDieFailed, "read")
			if !base.IsCorruption(err) {
				t.Fatalf("die failure on read is not a corruption: %v", err)
			}
			wantErr(t, e.Program(a, buf, nil), ErrDieFailed, "program")
		}
		wantErr(t, e.Erase(BlockAddr{dead.Channel, dead.Die, b}), ErrDieFailed, "erase")
	}
	// Other dies work.
	for _, d := range []DieAddr{{0, 0}, {1, 0}, {1, 1}} {
		if err := e.Program(PageAddr{d.Channel, d.Die, 0, 0}, buf, nil); err != nil {
			t.Fatalf("die %s: %v", d, err)
		}
	}
	if s := e.Stats(); s.FailedDies != 1 || s.Dies[dead.Index(g)].FailedOps != int64(g.BlocksPerDie*(2*g.PagesPerBlock+1)) {
		t.Fatalf("stats %v, dead die %v", s, s.Dies[dead.Index(g)])
	}
}

func TestBadBlock(t *testing.T) {
	g := testGeometry()
	e := mustMemory(t, g, Options{})
	buf := make([]byte, g.PageSize)
	a := PageAddr{1, 0, 3, 0}
	if err := e.Program(a, buf, nil); err != nil {
		t.Fatal(err)
	}
	e.Faults().FailProgram(PageAddr{1, 0, 3, 1})
	err := e.Program(PageAddr{1, 0, 3, 1}, buf, nil)
	wantErr(t, err, ErrProgramFailed, "program failure")
	wantErr(t, err, ErrBadBlock, "program failure is a bad block")
	_, err = e.Read(a, buf, nil)
	wantErr(t, err, ErrBadBlock, "read of bad block")
	wantErr(t, e.Erase(a.BlockAddr()), ErrBadBlock, "erase of bad block")
	if info, _ := e.Block(a.BlockAddr()); !info.Bad || info.WrittenPage != 1 {
		t.Fatalf("info %v", info)
	}
	e.Faults().FailErase(BlockAddr{1, 0, 2})
	wantErr(t, e.Erase(BlockAddr{1, 0, 2}), ErrEraseFailed, "erase failure")
	if err := e.MarkBad(BlockAddr{0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, e.Program(PageAddr{0, 0, 0, 0}, buf, nil), ErrBadBlock, "program marked-bad block")
	if s := e.Stats(); s.BadBlocks != 3 || s.Total.ProgramFailures != 1 || s.Total.EraseFailures != 1 || e.Faults().Pending() != 0 {
		t.Fatalf("stats %v pending %d", s, e.Faults().Pending())
	}
}

func TestGeometryLimits(t *testing.T) {
	full := SDFGeometry(4096) // the real SDF: 44 x 2 x 4096 blocks of 2 MiB
	if err := full.Validate(); err != nil {
		t.Fatal(err)
	}
	// A memory device of the full SDF geometry costs only what is written.
	e := mustMemory(t, full, Options{})
	last := PageAddr{43, 1, 4095, 0}
	data := pageData(full, last, 0)
	if err := e.Program(last, data, nil); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, full.PageSize)
	if _, err := e.Read(last, got, nil); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("last page of the full SDF: %v", err)
	}
	for _, g := range []Geometry{
		{Channels: 1 << 11, DiesPerChannel: 1, BlocksPerDie: 1, PagesPerBlock: 1, PageSize: 512},
		{Channels: 1, DiesPerChannel: 1, BlocksPerDie: 1, PagesPerBlock: 1, PageSize: 512, OOBSize: 513},
		{Channels: 1 << 10, DiesPerChannel: 1 << 8, BlocksPerDie: 1 << 20, PagesPerBlock: 1 << 12, PageSize: 512},
	} {
		if err := g.Validate(); !base.IsInvalidArgument(err) {
			t.Fatalf("%s: %v", g, err)
		}
	}
}

func TestParseAddr(t *testing.T) {
	pa := PageAddr{3, 1, 4095, 255}
	if got, err := ParsePageAddr(pa.String()); err != nil || got != pa {
		t.Fatalf("page %v %v", got, err)
	}
	ba := pa.BlockAddr()
	if got, err := ParseBlockAddr(ba.String()); err != nil || got != ba {
		t.Fatalf("block %v %v", got, err)
	}
	da := pa.DieAddr()
	if got, err := ParseDieAddr(da.String()); err != nil || got != da {
		t.Fatalf("die %v %v", got, err)
	}
	for _, bad := range []string{"", "ch1/d0/b2", "ch1/d0/b2/p", "ch1/d0/b2/x3", "ch-1/d0/b2/p3", "ch1/d0/b2/p3/q4"} {
		if _, err := ParsePageAddr(bad); !base.IsInvalidArgument(err) {
			t.Fatalf("ParsePageAddr(%q): %v", bad, err)
		}
	}
}
