package flash

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/fsys"
	"github.com/flashmend/flashmend/internal/testseed"
)

// devOp is one step of a device workload: program the next page of a
// block (erasing it first when full), or Sync.
type devOp struct {
	sync  bool
	block BlockAddr
	data  []byte
}

// devModel is what a workload did, for the checks after a power loss.
type devModel struct {
	// durable is each page's content as of the last Sync that returned
	// (nil: erased or never programmed then).
	durable map[PageAddr][]byte
	// current is each page's content now (nil: erased).
	current map[PageAddr][]byte
	// ever is every content a page held since the trial began.
	ever map[PageAddr][][]byte
	// next is each block's write pointer.
	next map[BlockAddr]int
	// erasing is the block whose erase the crash interrupted, if any.
	erasing *BlockAddr
}

func newDevModel() *devModel {
	return &devModel{durable: map[PageAddr][]byte{}, current: map[PageAddr][]byte{}, ever: map[PageAddr][][]byte{}, next: map[BlockAddr]int{}}
}

// runDevOps runs ops on a file-backed device on m until the power is cut
// (an operation fails with fsys.ErrCrashed) or they end.
func runDevOps(m *fsys.Mem, g Geometry, ops []devOp, model *devModel) error {
	e, err := OpenFile("/dev0", g, Options{FS: m})
	if err != nil {
		return err
	}
	for _, op := range ops {
		if op.sync {
			if err := e.Sync(); err != nil {
				return err
			}
			model.durable = map[PageAddr][]byte{}
			for a, c := range model.current {
				model.durable[a] = c
			}
			continue
		}
		b := op.block
		if model.next[b] == g.PagesPerBlock {
			model.erasing = &b
			if err := e.Erase(b); err != nil {
				return err
			}
			model.erasing = nil
			for p := 0; p < g.PagesPerBlock; p++ {
				delete(model.current, PageAddr{b.Channel, b.Die, b.Block, p})
			}
			model.next[b] = 0
		}
		pa := PageAddr{b.Channel, b.Die, b.Block, model.next[b]}
		model.ever[pa] = append(model.ever[pa], op.data)
		if err := e.Program(pa, op.data, nil); err != nil {
			return err
		}
		model.current[pa] = op.data
		model.next[b]++
	}
	return e.Close()
}

// A file-backed emulated device cut from power at a drawn file-system
// operation (fsys.Mem: unsynced sectors of the page file and state copies
// kept or lost) and reopened: every page programmed before the last Sync
// that returned (its block not erased since) reads back as programmed
// (Sync's contract: "makes programmed pages and the device state
// durable"); any other page reads erased, fails as uncorrectable, or holds
// a content it was programmed with, never other bytes; and the device
// takes programs and erases again at its rebuilt write pointers. Seeded.
func TestPowerLossFileDevice(t *testing.T) {
	rng := testseed.Rand(t, "FLASHMEND_POWERLOSS_SEED")
	g := Geometry{Channels: 1, DiesPerChannel: 2, BlocksPerDie: 4, PagesPerBlock: 8, PageSize: 1024, OOBSize: 16}
	outcomes := map[string]int{}
	for trial := 0; trial < 60; trial++ {
		var ops []devOp
		for i := 0; i < 60; i++ {
			if rng.Intn(8) == 0 {
				ops = append(ops, devOp{sync: true})
				continue
			}
			data := make([]byte, g.PageSize)
			rng.Read(data)
			ops = append(ops, devOp{block: BlockAddr{0, rng.Intn(2), rng.Intn(2)}, data: data})
		}
		dry := fsys.NewMem()
		if err := runDevOps(dry, g, ops, newDevModel()); err != nil {
			t.Fatalf("trial %d without a crash: %v", trial, err)
		}
		at := 1 + rng.Int63n(dry.Ops())
		keep := []int{0, 50, 100}[trial%3]
		keepRand := rand.New(rand.NewSource(rng.Int63()))
		m := fsys.NewMem()
		var img *fsys.Mem
		m.SetHook(func(op fsys.Op) {
			if op.N == at {
				img = m.Crash(fsys.CrashConfig{KeepPercent: keep, Rand: keepRand})
			}
		})
		model := newDevModel()
		err := runDevOps(m, g, ops, model)
		if img == nil || (err != nil && !errors.Is(err, fsys.ErrCrashed)) {
			t.Fatalf("trial %d: crash at operation %d of %d: %v", trial, at, dry.Ops(), err)
		}
		where := fmt.Sprintf("trial %d (crash before file operation %d of %d, keeping %d%%)", trial, at, dry.Ops(), keep)
		e, err := OpenFile("/dev0", g, Options{FS: img})
		if err != nil {
			t.Fatalf("%s: reopen: %v", where, err)
		}
		buf := make([]byte, g.PageSize)
		for die := 0; die < 2; die++ {
			for blk := 0; blk < 2; blk++ {
				b := BlockAddr{0, die, blk}
				for p := 0; p < g.PagesPerBlock; p++ {
					pa := PageAddr{0, die, blk, p}
					_, rerr := e.Read(pa, buf, nil)
					want := model.durable[pa]
					erased := rerr == nil && bytes.Equal(buf, bytes.Repeat([]byte{0xff}, g.PageSize))
					switch {
					case want != nil && model.current[pa] != nil && bytes.Equal(want, model.current[pa]) && (model.erasing == nil || *model.erasing != b):
						if rerr != nil || !bytes.Equal(buf, want) {
							t.Fatalf("%s: page %s programmed and synced reads %v (erased %v)", where, pa, rerr, erased)
						}
						outcomes["synced"]++
					case rerr != nil:
						if !errors.Is(rerr, ErrUncorrectable) {
							t.Fatalf("%s: page %s: %v", where, pa, rerr)
						}
						outcomes["uncorrectable"]++
					case erased:
						outcomes["erased"]++
					default:
						found := false
						for _, c := range model.ever[pa] {
							found = found || bytes.Equal(c, buf)
						}
						if !found {
							t.Fatalf("%s: page %s reads bytes it was never programmed with", where, pa)
						}
						outcomes["unsynced kept"]++
					}
				}
				// The device takes writes again at its write pointer.
				info, err := e.Block(b)
				if err != nil {
					t.Fatal(err)
				}
				if info.WrittenPage < g.PagesPerBlock {
					pa := PageAddr{0, die, blk, info.WrittenPage}
					if err := e.Program(pa, bytes.Repeat([]byte{byte(pa.Page)}, g.PageSize), nil); err != nil {
						t.Fatalf("%s: program %s at the rebuilt write pointer: %v", where, pa, err)
					}
				}
				if err := e.Erase(b); err != nil {
					t.Fatalf("%s: erase %s: %v", where, b, err)
				}
			}
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("pages after the restarts: %v", outcomes)
	if outcomes["synced"] == 0 || outcomes["unsynced kept"]+outcomes["uncorrectable"]+outcomes["erased"] == 0 {
		t.Fatalf("the trials checked too little: %v", outcomes)
	}
}

// Found by TestPowerLossFileDevice: a power loss during a new device's
// first state save (copy 0 created, its size kept and not its bytes; the
// other copies not yet created) left a directory the device refused to
// open ("no unit of the device state verifies in any of the 1 copies"),
// so the node could never start again. Fewer copies than three, none
// verifying, is a first save torn: the device opens as new. Three
// damaged copies still refuse to open.
func TestPowerLossTornFirstStateSave(t *testing.T) {
	g := SmallGeometry()
	m := fsys.NewMem()
	if err := fsys.MkdirAllDurable(m, "/dev0", 0o755, nil); err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile(m, "/dev0/state.0", make([]byte, 600), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := OpenFile("/dev0", g, Options{FS: m})
	if err != nil {
		t.Fatalf("a device whose first state save was torn does not open: %v", err)
	}
	if info := e.OpenInfo(); !info.New {
		t.Fatalf("open info %v, want new", info)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := fsys.WriteFile(m, fmt.Sprintf("/dev0/state.%d", i), make([]byte, 600), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenFile("/dev0", g, Options{FS: m}); err == nil {
		t.Fatal("a device with three damaged state copies opened")
	}
}
