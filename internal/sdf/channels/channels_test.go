package channels

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/testseed"
)

var testGeometry = flash.Geometry{Channels: 2, DiesPerChannel: 4, BlocksPerDie: 8, PagesPerBlock: 16, PageSize: 512, OOBSize: 64}

// recorder is a device that logs, per die, the page of every program and
// read in the order the device saw them.
type recorder struct {
	flash.Device
	mu  sync.Mutex
	log map[flash.DieAddr][]int
}

func (r *recorder) note(d flash.DieAddr, tag int) {
	r.mu.Lock()
	r.log[d] = append(r.log[d], tag)
	r.mu.Unlock()
}

// count is the operations the device saw.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, tags := range r.log {
		n += len(tags)
	}
	return n
}

func (r *recorder) Program(a flash.PageAddr, data, oob []byte) error {
	r.note(a.DieAddr(), a.Page)
	return r.Device.Program(a, data, oob)
}

func (r *recorder) Read(a flash.PageAddr, data, oob []byte) (flash.ReadStatus, error) {
	r.note(a.DieAddr(), a.Page)
	return r.Device.Read(a, data, oob)
}

func newRecorder(t *testing.T) (*recorder, *flash.Emulator) {
	t.Helper()
	dev, err := flash.NewMemory(testGeometry, flash.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &recorder{Device: dev, log: map[flash.DieAddr][]int{}}, dev
}

func page(a flash.PageAddr) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("%d/%d/%d/%d;", a.Channel, a.Die, a.Block, a.Page)), testGeometry.PageSize)[:testGeometry.PageSize]
}

// TestRequestKeepsEachDiesOrder programs random batches over the dies of a
// channel, each die's pages in order but the dies shuffled together: the
// device must see every die's operations in the order given (NAND would
// refuse an out-of-order program besides), and every page reads back with
// its identity decoded by the worker.
func TestRequestKeepsEachDiesOrder(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	rec, _ := newRecorder(t)
	w := Start(1, rec, 4)
	defer w.Stop()
	next := make([]int, testGeometry.DiesPerChannel) // next page of block 0 per die
	programs := 0
	for batch := 0; batch < 20; batch++ {
		var ops []*Op
		for k := rng.Intn(12) + 1; k > 0; k-- {
			d := rng.Intn(testGeometry.DiesPerChannel)
			if next[d] == testGeometry.PagesPerBlock {
				continue
			}
			a := flash.PageAddr{Channel: 1, Die: d, Page: next[d]}
			next[d]++
			data := page(a)
			oob := make([]byte, testGeometry.OOBSize)
			onflash.EncodeOOB(oob, data, onflash.PageID{Valid: uint32(len(data)), FileID: 7, Page: uint64(a.Die*100 + a.Page), Seq: 1})
			ops = append(ops, &Op{Kind: Program, Addr: a, Data: data, OOB: oob})
		}
		w.Do(ops...)
		programs += len(ops)
		for _, op := range ops {
			if op.Err != nil {
				t.Fatalf("batch %d: program %v: %v", batch, op.Addr, op.Err)
			}
		}
	}
	for d, tags := range rec.log {
		for i := range tags {
			if tags[i] != i {
				t.Fatalf("die %s saw pages %v, not in order", d, tags)
			}
		}
	}
	var reads []*Op
	for d := 0; d < testGeometry.DiesPerChannel; d++ {
		for p := 0; p < next[d]; p++ {
			reads = append(reads, &Op{Kind: Read, Decode: true, Addr: flash.PageAddr{Channel: 1, Die: d, Page: p},
				Data: make([]byte, testGeometry.PageSize), OOB: make([]byte, testGeometry.OOBSize)})
		}
	}
	w.Do(reads...)
	for _, op := range reads {
		if op.Err != nil || !bytes.Equal(op.Data, page(op.Addr)) || !op.IDOK || op.ID.Page != uint64(op.Addr.Die*100+op.Addr.Page) {
			t.Fatalf("read %v: %v, identity %v %+v", op.Addr, op.Err, op.IDOK, op.ID)
		}
	}
	if got := w.Stats.Programs.Load(); got != int64(programs) {
		t.Fatalf("%d programs counted, %d made", got, programs)
	}
	if got := w.Stats.Reads.Load(); got != int64(len(reads)) {
		t.Fatalf("%d reads counted, %d made", got, len(reads))
	}
}

// TestErrorsAreTheOps: a device error lands on its Op and is counted; the
// other ops of the request run.
func TestErrorsAreTheOps(t *testing.T) {
	rec, dev := newRecorder(t)
	w := Start(0, rec, 1)
	defer w.Stop()
	if err := dev.FailDie(flash.DieAddr{Channel: 0, Die: 2}); err != nil {
		t.Fatal(err)
	}
	var ops []*Op
	for d := 0; d < testGeometry.DiesPerChannel; d++ {
		a := flash.PageAddr{Channel: 0, Die: d, Block: 3}
		ops = append(ops, &Op{Kind: Program, Addr: a, Data: page(a)})
	}
	ops = append(ops, &Op{Kind: Erase, Addr: flash.PageAddr{Channel: 0, Die: 1, Block: 5}})
	w.Do(ops...)
	for _, op := range ops {
		if failed := op.Addr.Die == 2; failed != errors.Is(op.Err, flash.ErrDieFailed) || !failed && op.Err != nil {
			t.Fatalf("op %v on die %d: %v", op.Kind, op.Addr.Die, op.Err)
		}
	}
	if w.Stats.Errors.Load() != 1 || w.Stats.Erases.Load() != 1 {
		t.Fatalf("errors %d erases %d, want 1 and 1", w.Stats.Errors.Load(), w.Stats.Erases.Load())
	}
}

// TestStopRacesRequests: requests racing Stop either run or fail with
// ErrClosed, never reach a closed queue, and none runs after Stop returned.
func TestStopRacesRequests(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	for run := 0; run < 20; run++ {
		rec, _ := newRecorder(t)
		w := Start(0, rec, 1+rng.Intn(3))
		var wg sync.WaitGroup
		results := make([][]*Op, 4)
		for g := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for p := 0; p < testGeometry.PagesPerBlock; p++ {
					a := flash.PageAddr{Channel: 0, Die: g, Block: 1, Page: p}
					op := &Op{Kind: Program, Addr: a, Data: page(a)}
					w.Do(op)
					results[g] = append(results[g], op)
				}
			}()
		}
		w.Stop()
		seen := rec.count()
		wg.Wait()
		if after := rec.count(); after != seen {
			t.Fatalf("run %d: %d operations reached the device after Stop returned", run, after-seen)
		}
		ran := 0
		for g, ops := range results {
			for i, op := range ops {
				switch {
				case op.Err == nil:
					ran++
					if i > 0 && ops[i-1].Err != nil {
						t.Fatalf("run %d: die %d page %d ran after page %d failed with %v", run, g, i, i-1, ops[i-1].Err)
					}
				case !errors.Is(op.Err, ErrClosed):
					t.Fatalf("run %d: die %d page %d: %v", run, g, i, op.Err)
				}
			}
		}
		if ran != seen {
			t.Fatalf("run %d: %d programs succeeded, the device saw %d", run, ran, seen)
		}
		w.Stop() // again: a no-op
	}
}

// TestRereadOnCheck: a read asking for it is read once more in place when
// its OOB check fails with a clean device status; a transient flip then
// verifies, a persistent one still fails, and a read that verifies or did
// not ask is read once.
func TestRereadOnCheck(t *testing.T) {
	rec, dev := newRecorder(t)
	w := Start(0, rec, 1)
	defer w.Stop()
	var addrs []flash.PageAddr
	for d := 0; d < 4; d++ {
		a := flash.PageAddr{Channel: 0, Die: d}
		data := page(a)
		oob := make([]byte, testGeometry.OOBSize)
		onflash.EncodeOOB(oob, data, onflash.PageID{Valid: uint32(len(data)), FileID: 3, Page: uint64(d), Seq: 1})
		w.Do(&Op{Kind: Program, Addr: a, Data: data, OOB: oob})
		addrs = append(addrs, a)
	}
	// die 0: transient flip, asks; die 1: persistent flip, asks; die 2:
	// transient flip, does not ask; die 3: clean, asks.
	dev.Faults().FlipBit(addrs[0], 9, false)
	dev.Faults().FlipBit(addrs[1], 9, true)
	dev.Faults().FlipBit(addrs[2], 9, false)
	var ops []*Op
	for d, a := range addrs {
		ops = append(ops, &Op{Kind: Read, Decode: true, RereadOnCheck: d != 2, Addr: a,
			Data: make([]byte, testGeometry.PageSize), OOB: make([]byte, testGeometry.OOBSize)})
	}
	before := rec.count()
	w.Do(ops...)
	want := []struct{ reread, ok bool }{{true, true}, {true, false}, {false, false}, {false, true}}
	for d, op := range ops {
		if op.Err != nil || op.Reread != want[d].reread || op.IDOK != want[d].ok {
			t.Fatalf("die %d: err %v reread %t verified %t, want %+v", d, op.Err, op.Reread, op.IDOK, want[d])
		}
		if op.IDOK && !bytes.Equal(op.Data, page(op.Addr)) {
			t.Fatalf("die %d: verified but wrong data", d)
		}
	}
	if got := rec.count() - before; got != 6 {
		t.Fatalf("device saw %d reads, want 6 (4 and 2 re-reads)", got)
	}
	if got := w.Stats.Reads.Load(); got != 6 {
		t.Fatalf("%d reads counted, want 6", got)
	}
}

// switchBinder points a read at to from its second read on (Op.Bind).
type switchBinder struct {
	to    []byte
	binds int
}

func (b *switchBinder) Bind(op *Op) {
	b.binds++
	if b.binds > 1 {
		op.Data = b.to
	}
}

// TestBindBeforeEachRead: the worker asks Op.Bind for the destination
// right before each read of the page, the re-read included, and checks
// the page where it was read.
func TestBindBeforeEachRead(t *testing.T) {
	rec, dev := newRecorder(t)
	w := Start(0, rec, 1)
	defer w.Stop()
	a := flash.PageAddr{Channel: 0, Die: 1}
	data := page(a)
	oob := make([]byte, testGeometry.OOBSize)
	onflash.EncodeOOB(oob, data, onflash.PageID{Valid: uint32(len(data)), FileID: 3, Page: 1, Seq: 1})
	w.Do(&Op{Kind: Program, Addr: a, Data: data, OOB: oob})
	dev.Faults().FlipBit(a, 9, false)
	first := make([]byte, testGeometry.PageSize)
	b := &switchBinder{to: make([]byte, testGeometry.PageSize)}
	op := &Op{Kind: Read, Decode: true, RereadOnCheck: true, Addr: a, Data: first,
		OOB: make([]byte, testGeometry.OOBSize), Bind: b}
	w.Do(op)
	if op.Err != nil || !op.Reread || !op.IDOK || b.binds != 2 {
		t.Fatalf("err %v reread %t verified %t binds %d, want a verified re-read after 2 binds", op.Err, op.Reread, op.IDOK, b.binds)
	}
	if !bytes.Equal(b.to, data) || &op.Data[0] != &b.to[0] {
		t.Fatal("the re-read did not land where the second bind said")
	}
	if bytes.Equal(first, data) {
		t.Fatal("the first read (flipped) verified")
	}
}
