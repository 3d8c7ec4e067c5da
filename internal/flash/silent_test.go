package flash

import (
	"errors"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// TestFailDieSilently: a silently failed die never says it failed; it only
// shows bad blocks, and stays dead across a reopen.
func TestFailDieSilently(t *testing.T) {
	g := testGeometry()
	dir := t.TempDir()
	clock := base.NewManualClock(time.Unix(1e9, 0))
	e, err := OpenFile(dir, g, Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	dead, alive := DieAddr{1, 0}, DieAddr{0, 1}
	data, oob := make([]byte, g.PageSize), make([]byte, g.OOBSize)
	for _, d := range []DieAddr{dead, alive} {
		pa := PageAddr{d.Channel, d.Die, 0, 0}
		if err := e.Program(pa, pageData(g, pa, 1), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.FailDieSilently(DieAddr{9, 9}); !base.IsInvalidArgument(err) {
		t.Fatalf("out of range: %v", err)
	}
	if err := e.FailDieSilently(dead); err != nil {
		t.Fatal(err)
	}
	checkDead := func(e *Emulator) {
		t.Helper()
		if f, _ := e.DieFailed(dead); f {
			t.Fatal("a silent failure was reported")
		}
		st, err := e.Read(PageAddr{dead.Channel, dead.Die, 0, 0}, data, oob)
		if !errors.Is(err, ErrUncorrectable) || errors.Is(err, ErrDieFailed) || !st.Uncorrectable {
			t.Fatalf("read of the dead die: %v %+v", err, st)
		}
		if err := e.Erase(BlockAddr{dead.Channel, dead.Die, 2}); !errors.Is(err, ErrBadBlock) {
			t.Fatalf("erase: %v", err)
		}
		pa := PageAddr{dead.Channel, dead.Die, 3, 0}
		if err := e.Program(pa, pageData(g, pa, 2), nil); !errors.Is(err, ErrBadBlock) {
			t.Fatalf("program: %v", err)
		}
		pa = PageAddr{alive.Channel, alive.Die, 0, 0}
		if _, err := e.Read(pa, data, oob); err != nil {
			t.Fatalf("other die: %v", err)
		}
	}
	checkDead(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = OpenFile(dir, g, Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	checkDead(e)
}
