package journal

import (
	"fmt"
	"sync"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
	"github.com/flashmend/flashmend/internal/testseed"
)

// host is a minimal layer over an emulated device: its state is a list of
// records (every create logged so far), its zones are reset by erasing
// their blocks.
type host struct {
	mu    sync.Mutex
	l     onflash.Layout
	dev   flash.Device
	table *zones.Table
	chans []*channels.Worker
	state []byte // guarded by mu
}

func newHost(t *testing.T, dev flash.Device) *host {
	t.Helper()
	g := dev.Geometry()
	l := onflash.Layout{Geometry: g}
	blocks, err := zones.LoadBlocks(dev)
	if err != nil {
		t.Fatal(err)
	}
	h := &host{l: l, dev: dev, table: zones.New(l, blocks)}
	for c := 0; c < g.Channels; c++ {
		h.chans = append(h.chans, channels.Start(c, dev, 8))
	}
	t.Cleanup(func() {
		for _, w := range h.chans {
			w.Stop()
		}
	})
	return h
}

func (h *host) Lock()   { h.mu.Lock() }
func (h *host) Unlock() { h.mu.Unlock() }

func (h *host) SnapshotLocked() (super, records, done []byte) {
	return metalog.Super{Geometry: h.l.Geometry}.Record(), append([]byte(nil), h.state...), metalog.CheckpointDone{NextFileID: 1, NextSeq: 1}.Record()
}

func (h *host) ResetZone(z *zones.Zone) error {
	var dies []int
	for _, d := range h.table.GoodDies(z) {
		if err := h.dev.Erase(h.l.ZoneBlockAddr(z.ID, d)); err == nil {
			dies = append(dies, d)
		}
	}
	h.mu.Lock()
	z.Reset(dies)
	h.mu.Unlock()
	return nil
}

func (h *host) Run(ops []*channels.Op) {
	for _, op := range ops {
		h.chans[op.Addr.Channel].Do(op)
	}
}

// log applies a create to the host's state and logs it.
func (h *host) log(j *Journal, id uint64) {
	rec := metalog.Create{ID: id, Name: fmt.Sprintf("file-%d", id)}.Record()
	h.mu.Lock()
	h.state = append(h.state, rec...)
	j.LogLocked(rec)
	h.mu.Unlock()
}

// reopen reads the journal back from the device as Open does and returns
// the files its newest epoch holds.
func reopen(t *testing.T, dev flash.Device) (map[uint64]bool, *Journal) {
	t.Helper()
	h := newHost(t, dev)
	j := New(h.l, h, h.table, true)
	stream, info, err := metalog.Latest(j.Scan())
	if err != nil {
		t.Fatal(err)
	}
	var br BodyRead
	tables, err := metalog.Replay(h.l, info.Epoch, stream, func(b onflash.CheckpointBody) ([]byte, error) { return j.ReadBody(b, &br) })
	if err != nil {
		t.Fatal(err)
	}
	files := map[uint64]bool{}
	for id := range tables.Files {
		files[id] = true
	}
	return files, j
}

var testGeometry = flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 40, PagesPerBlock: 8, PageSize: 2048, OOBSize: 64}

// TestRecordsSurviveEpochs logs records in random batches, flushing after
// each, over many epochs (the metadata zones fill and checkpoints roll over,
// inline and, as the state grows, as bodies in lent data zones), and reads
// the journal back from the device after each: every flushed record is
// there.
func TestRecordsSurviveEpochs(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	dev, err := flash.NewMemory(testGeometry, flash.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t, dev)
	j := New(h.l, h, h.table, false)
	if err := j.Checkpoint(nil); err != nil {
		t.Fatal(err)
	}
	id := uint64(0)
	sawBody := false
	for batch := 0; batch < 60; batch++ {
		for k := rng.Intn(40); k >= 0; k-- {
			id++
			h.log(j, id)
		}
		if err := j.Flush(); err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		_, lent, ok := j.Body()
		sawBody = sawBody || ok
		for _, z := range lent {
			if !z.Meta || !z.Body || z.State != zones.Full {
				t.Fatalf("batch %d: body zone %s not lent", batch, z)
			}
		}
		// Only the durable epoch's body holds zones: older ones went back.
		held := 0
		for _, z := range h.table.Data() {
			if z.Body {
				held++
			}
		}
		if held != len(lent) {
			t.Fatalf("batch %d: %d zones lent to bodies, the durable body has %d", batch, held, len(lent))
		}
		if batch%10 != 9 {
			continue
		}
		files, _ := reopen(t, dev)
		if len(files) != int(id) {
			t.Fatalf("batch %d: %d files read back, %d logged", batch, len(files), id)
		}
	}
	if j.Stats.Checkpoints.Load() < 3 || !sawBody {
		t.Fatalf("%d checkpoints, body %v: the test did not roll the journal over", j.Stats.Checkpoints.Load(), sawBody)
	}
}

// TestReadOnlyWritesNothing: a read-only journal drops what is logged and
// programs nothing.
func TestReadOnlyWritesNothing(t *testing.T) {
	dev, err := flash.NewMemory(testGeometry, flash.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t, dev)
	j := New(h.l, h, h.table, true)
	h.log(j, 1)
	j.MarkUrgentLocked()
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	if j.UrgentLocked() || j.Stats.MetaPages.Load() != 0 {
		t.Fatalf("read-only flush: urgent %v, %d pages", j.UrgentLocked(), j.Stats.MetaPages.Load())
	}
	if _, _, err := metalog.Latest(j.Scan()); err == nil {
		t.Fatal("a read-only journal wrote an epoch")
	}
}
