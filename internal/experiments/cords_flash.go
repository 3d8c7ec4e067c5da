package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/flash/pagefile"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/sdf"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdfvfs"
	"github.com/flashmend/flashmend/internal/torture/faultfs"
)

// The KV CORDS sweep on emulated flash: the same 3-replica cluster and
// workload as the plain-file sweep (kv_fault_sweep.go), with each node's
// replicas on internal/sdfvfs over internal/sdf over its own file-backed
// emulated device (internal/flash, a page file of checksummed slots). The
// rows are the files replica n1 keeps on its device (every kind sdfvfs
// stores, its duplicate and range copies included) and the SDF layer's own
// structures: journal pages (records and checkpoints, the zone table
// among them), P2L pages, the OOB bytes of a data page, and the device's
// own state copies (files beside its page file, through
// flash.Options.StateIO at run time). A fault lands on the flash pages
// that hold the bytes:
//
//   - zeros, junk, bit flip (at rest): the page's stored bytes change and
//     the slot's checksum is recomputed, so the device returns the damage
//     with a clean status (an ECC miscorrection: silent corruption the
//     SDF, sdfvfs and KV checksums must catch);
//   - lost write (at rest): one page written by the second load reads back
//     erased (its program was acknowledged and never made);
//   - EIO read (run time): every read of the page under one 4 KiB block of
//     the file reports uncorrectable (flash.Faults.FailRead); a P2L page,
//     read only when a die's data is identified, is read by identifying
//     the dies of its channel under the fault (CDR*, which must list what
//     the file-table scan lists);
//   - write error (run time): every write, sync and create of the file's
//     kind on n1 fails (faultfs over n1's sdfvfs); for the SDF layer's
//     journal pages the device fails the next program of a journal page in
//     one block of a zone it was writing, for its P2L pages the first P2L
//     program in any data zone not full (flash.Faults.FailProgram: the
//     block is retired, a grown bad block); the device's state copies fail
//     every write (n1's device saving after every erase);
//     not applicable (n/a): a page's OOB has no write of its own, and
//     sdfvfs writes its copies (.sdfvfs) straight into SDF, below any
//     vfs.FS the harness wraps.

// kvFlashGeometry is each node's device: 4 channels x 2 dies x 64 blocks x
// 32 pages of 4 KiB (64 MiB; the page file is sparse).
func kvFlashGeometry() flash.Geometry {
	return flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 64, PagesPerBlock: 32, PageSize: 4096, OOBSize: 128}
}

// Pseudo-file names of the SDF layer's own structures (rows of the table).
const (
	FlashJournal = "@sdf-journal"
	FlashP2L     = "@sdf-p2l"
	FlashOOB     = "@sdf-oob"
	// FlashState is the device's own state copies (state.0-2 beside its
	// page file).
	FlashState = "@dev-state"
)

// flashTarget is one row's file on n1's device: the flat indexes of the
// pages that hold it (in file order for a file).
type flashTarget struct {
	Name  string
	Kind  string
	Pages []int64
	// OOB: faults land in the pages' OOB bytes rather than their data.
	OOB bool
	// Meta: the pages are journal pages; P2L: P2L pages; State: the
	// device's state copies (files beside the page file, no pages).
	Meta, P2L, State bool
	// Open are the zones of the pages' kind the device was writing when
	// it stopped (partly written): where its next programs go, so where a
	// write error lands.
	Open []int
}

// flashNodes opens each node's device, SDF and sdfvfs under dir/nN.
type flashNodes struct {
	dir    string
	format bool
	// arm, if set, is called with node id's device before SDF mounts it,
	// and wrap with its sdfvfs (faults of node 1); stateIO is what node
	// id's device reads and writes its state copies through (nil: the os).
	arm     func(id base.NodeID, dev *flash.Emulator)
	wrap    func(id base.NodeID, fs vfs.FS) vfs.FS
	stateIO func(id base.NodeID) pagefile.StateIO

	// saveEvery is node 1's device's flash.Options.SaveStateEveryErases.
	saveEvery int

	mu   sync.Mutex
	devs map[base.NodeID]*flash.Emulator
	sfss map[base.NodeID]*sdf.FS
	vfss map[base.NodeID]*sdfvfs.FS
}

func (f *flashNodes) nodeFS(id base.NodeID) (vfs.FS, error) {
	// Called once per node (kvcluster keeps each node's FS across its
	// restarts: a restart reopens the KV store, not the device).
	opts := flash.Options{Seed: int64(id)}
	if f.stateIO != nil {
		opts.StateIO = f.stateIO(id)
	}
	if id == 1 {
		opts.SaveStateEveryErases = f.saveEvery
	}
	dev, err := flash.OpenFile(filepath.Join(f.dir, fmt.Sprintf("n%d", uint64(id))), kvFlashGeometry(), opts)
	if err != nil {
		return nil, err
	}
	if f.arm != nil {
		f.arm(id, dev)
	}
	open := sdf.Open
	if f.format {
		open = sdf.Format
	}
	sfs, err := open(dev, sdf.Options{})
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	fs, err := sdfvfs.New(sfs, sdfvfs.Options{MetadataRanges: sdfvfs.SSTMetadataRanges(engine.SSTReaderOptions())})
	if err != nil {
		return nil, errors.Join(err, sfs.Close(), dev.Close())
	}
	f.mu.Lock()
	if f.devs == nil {
		f.devs, f.sfss, f.vfss = map[base.NodeID]*flash.Emulator{}, map[base.NodeID]*sdf.FS{}, map[base.NodeID]*sdfvfs.FS{}
	}
	f.devs[id], f.sfss[id], f.vfss[id] = dev, sfs, fs
	f.mu.Unlock()
	var out vfs.FS = fs
	if f.wrap != nil {
		out = f.wrap(id, fs)
	}
	return out, nil
}

// device is node id's open device.
func (f *flashNodes) device(id base.NodeID) *flash.Emulator {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.devs[id]
}

// close closes every SDF and device (after the cluster).
func (f *flashNodes) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for id, s := range f.sfss {
		errs = append(errs, s.Close(), f.devs[id].Close())
	}
	f.devs, f.sfss, f.vfss = nil, nil, nil
	return errors.Join(errs...)
}

// evidence says what node id's SDF layer and sdfvfs detected and repaired
// in this run (the KV layers' own counters do not see them), and whether
// they repaired anything.
func (f *flashNodes) evidence(id base.NodeID) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sfs, vfs := f.sfss[id], f.vfss[id]
	if sfs == nil {
		return "", false
	}
	st, oi, vs, di := sfs.Stats(), sfs.OpenInfo(), vfs.Stats(), f.devs[id].OpenInfo()
	var parts []string
	add := func(n int64, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(int64(di.RejectedStateCopies), "device state copies rejected")
	add(int64(di.StateUnitsMerged), "state units merged from a copy")
	add(int64(di.StateUnitsVoted), "state units voted")
	if di.StateRebuilt {
		parts = append(parts, "device state rebuilt from the page file")
	}
	add(st.ChecksumErrors, "pages failed their checksum")
	add(st.Uncorrectable, "uncorrectable reads")
	add(st.ProgramErrors, "program errors")
	add(int64(oi.MetaUnitsMerged), "journal units merged from a copy")
	add(int64(oi.MetaUnitsVoted), "journal units voted")
	add(int64(oi.BodyPagesMerged), "checkpoint body pages merged")
	add(int64(oi.MetaPagesLost), "journal pages LOST")
	add(vs.CopyReads, "sdfvfs copy reads")
	add(vs.Repairs, "sdfvfs repairs")
	add(vs.Failovers, "sdfvfs failovers")
	add(vs.Corruptions, "sdfvfs corruptions returned")
	repaired := oi.MetaUnitsMerged+oi.MetaUnitsVoted+oi.BodyPagesMerged > 0 || vs.CopyReads+vs.Repairs+vs.Failovers > 0 ||
		di.RejectedStateCopies > 0 || di.StateRebuilt
	return strings.Join(parts, ", "), repaired
}

func (f *flashNodes) config() kvcluster.Config {
	cfg := kvSweepConfig(nil)
	cfg.FS = nil
	cfg.NodeFS = f.nodeFS
	return cfg
}

// KVFlashCordsBase builds the KV sweep's stored cluster on emulated flash
// under dir/base (its state between the two loads under dir/old) and
// returns the rows to damage on replica n1's device: the newest file of
// each kind, then the SDF layer's journal, P2L and OOB pseudo-files.
func KVFlashCordsBase(ctx context.Context, dir string, keys int, seed int64) ([]string, error) {
	baseDir := filepath.Join(dir, "base")
	nodes := &flashNodes{dir: baseDir, format: true}
	if err := kvFlashLoad(ctx, nodes, 0, keys/2, seed); err != nil {
		return nil, fmt.Errorf("kv flash cords base: first load: %w", err)
	}
	if err := copyTreeSparse(baseDir, filepath.Join(dir, "old")); err != nil {
		return nil, err
	}
	nodes = &flashNodes{dir: baseDir}
	if err := kvFlashLoad(ctx, nodes, keys/2, keys, seed); err != nil {
		return nil, fmt.Errorf("kv flash cords base: second load: %w", err)
	}
	targets, err := kvFlashTargets(baseDir, filepath.Join(dir, "old"))
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(targets)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "targets.json"), raw, 0o644); err != nil {
		return nil, err
	}
	var out []string
	for _, t := range targets {
		out = append(out, t.Name)
	}
	return out, nil
}

// kvFlashLoad starts the cluster on nodes, writes keys [from, to) and stops
// it cleanly.
func kvFlashLoad(ctx context.Context, nodes *flashNodes, from, to int, seed int64) (err error) {
	defer func() { err = errors.Join(err, nodes.close()) }()
	c, err := kvcluster.Start(nodes.config())
	if err != nil {
		return err
	}
	defer c.Close()
	if from == 0 {
		if err := uberLoad(ctx, c, uberRestartParams{Keys: to, ValueBytes: 800, Seed: seed}); err != nil {
			return err
		}
	} else {
		cl, err := c.NewClient(kvclient.Options{Seed: seed})
		if err != nil {
			return err
		}
		for i := from; i < to; i++ {
			if err := uberRetry(ctx, func() error { _, err := cl.Put(ctx, uberKey(i), uberValue(i, 800)); return err }); err != nil {
				cl.Close()
				return err
			}
		}
		cl.Close()
	}
	if err := kvWaitCaughtUp(ctx, c); err != nil {
		return err
	}
	for _, id := range c.NodeIDs() {
		if err := c.StopNode(id); err != nil {
			return err
		}
	}
	return nil
}

// kvFlashTargets lists the rows on n1's device in baseDir (stopped): of
// each kind the last file listed, or the last that changed since the first
// load (oldDir), if any did, so that a lost write has a page to lose.
func kvFlashTargets(baseDir, oldDir string) ([]flashTarget, error) {
	g := kvFlashGeometry()
	devDir := filepath.Join(baseDir, "n1")
	dev, err := flash.OpenFile(devDir, g, flash.Options{Seed: 1})
	if err != nil {
		return nil, err
	}
	sfs, err := sdf.Open(dev, sdf.Options{})
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	last := map[string]flashTarget{}
	changed := map[string]bool{}
	var kinds []string
	var newestSST string
	for _, name := range sfs.List() {
		f, err := sfs.OpenFile(name)
		if err != nil {
			return nil, errors.Join(err, sfs.Close(), dev.Close())
		}
		var pages []int64
		for _, a := range sfs.DataPages(f) {
			pages = append(pages, a.Flat(g))
		}
		_ = f.Close()
		if len(pages) == 0 {
			continue
		}
		k := bitrot.Kind(name)
		fresh, err := freshPages(devDir, filepath.Join(oldDir, "n1"), g, pages)
		if err != nil {
			return nil, errors.Join(err, sfs.Close(), dev.Close())
		}
		changed[name] = len(fresh) > 0
		if cur, ok := last[k]; !ok {
			kinds = append(kinds, k)
		} else if changed[cur.Name] && !changed[name] {
			continue
		}
		last[k] = flashTarget{Name: name, Kind: k, Pages: pages}
		if k == "sstable" {
			newestSST = name
		}
	}
	zones := sfs.Zones()
	l := sfs.Layout()
	if err := errors.Join(sfs.Close(), dev.Close()); err != nil {
		return nil, err
	}
	var out []flashTarget
	for _, k := range kinds {
		out = append(out, last[k])
	}
	if newestSST != "" {
		t := last["sstable"]
		out = append(out, flashTarget{Name: FlashOOB, Kind: "sdf OOB (of " + filepath.Base(newestSST) + "'s pages)", Pages: t.Pages, OOB: true})
	}
	// The journal and P2L pages: the programmed slots of the meta zones'
	// blocks and the P2L page of every data zone's blocks.
	ps, err := pagefile.Open(devDir, g.PageSize+g.OOBSize, int64(g.Dies())*int64(g.BlocksPerDie)*int64(g.PagesPerBlock))
	if err != nil {
		return nil, err
	}
	defer ps.Close()
	journal := flashTarget{Name: FlashJournal, Kind: "sdf journal (records, checkpoints, zone table)", Meta: true}
	p2l := flashTarget{Name: FlashP2L, Kind: "sdf P2L pages", P2L: true}
	buf := make([]byte, g.PageSize+g.OOBSize)
	left := map[int]int{} // data pages an open data zone has left
	epochOf := map[int64]uint64{}
	var newest uint64
	for _, z := range zones {
		if !z.Meta && z.WritePointer < z.Capacity {
			// Data zones not full (partly written or empty): where the
			// next P2L pages will be programmed.
			p2l.Open = append(p2l.Open, z.ID)
			left[z.ID] = z.Capacity - z.WritePointer
		}
		metaPages := 0
		for _, d := range z.Dies {
			for pg := 0; pg < g.PagesPerBlock; pg++ {
				if !l.IsMeta(z.ID) && pg != l.P2LPage() {
					continue
				}
				a := flash.PageAddr{Channel: l.ZoneChannel(z.ID), Die: d, Block: l.ZoneBlock(z.ID), Page: pg}
				ok, err := ps.Programmed(a.Flat(g))
				if err != nil {
					return nil, err
				}
				if !ok {
					continue
				}
				if l.IsMeta(z.ID) {
					journal.Pages = append(journal.Pages, a.Flat(g))
					metaPages++
					if err := ps.ReadPage(a.Flat(g), buf); err == nil {
						if epoch, _, _, ok := onflash.ParseMetaPage(buf[:g.PageSize]); ok {
							epochOf[a.Flat(g)] = epoch
							newest = max(newest, epoch)
						}
					}
				} else {
					p2l.Pages = append(p2l.Pages, a.Flat(g))
				}
			}
		}
		if l.IsMeta(z.ID) && metaPages > 0 && metaPages < len(z.Dies)*g.PagesPerBlock {
			journal.Open = append(journal.Open, z.ID)
		}
	}
	// The zone nearest full first.
	sort.SliceStable(p2l.Open, func(i, j int) bool { return left[p2l.Open[i]] < left[p2l.Open[j]] })
	// The journal's faults land on the newest epoch's pages (its
	// checkpoint and records, which the next open replays), not on an
	// older epoch's, which nothing reads again.
	var cur []int64
	for _, pg := range journal.Pages {
		if epochOf[pg] == newest {
			cur = append(cur, pg)
		}
	}
	if len(cur) > 0 {
		journal.Pages = cur
		journal.Kind = "sdf journal (newest epoch: checkpoint, zone table, records)"
	}
	for _, t := range []flashTarget{journal, p2l} {
		if len(t.Pages) > 0 {
			out = append(out, t)
		}
	}
	out = append(out, flashTarget{Name: FlashState, Kind: "flash device state (state.0-2)", State: true})
	return out, nil
}

// KVFlashKind is the row (file kind) of a name KVFlashCordsBase returned.
func KVFlashKind(dir, name string) string {
	if t, err := flashTargetOf(dir, name); err == nil {
		return t.Kind
	}
	return bitrot.Kind(name)
}

func flashTargetOf(dir, name string) (flashTarget, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "targets.json"))
	if err != nil {
		return flashTarget{}, err
	}
	var ts []flashTarget
	if err := json.Unmarshal(raw, &ts); err != nil {
		return flashTarget{}, err
	}
	for _, t := range ts {
		if t.Name == name {
			return t, nil
		}
	}
	return flashTarget{}, fmt.Errorf("kv flash cords: %s is no row of %s", name, dir)
}

// kvFlashEIOReads is how many reads of the page an EIO-read fault fails
// (every read of the cell, in practice).
const kvFlashEIOReads = 1 << 12

// KVFlashCordsCell runs one cell of the KV sweep on emulated flash on a
// copy of the store KVFlashCordsBase wrote under dir: fault (one of
// KVCordsFaults) on the row name of n1's device, the cluster restarted,
// the workload continued, every key read back, replicas compared.
func KVFlashCordsCell(ctx context.Context, dir, name, fault string, keys int, seed int64) (KVSweepCell, error) {
	t, err := flashTargetOf(dir, name)
	if err != nil {
		return KVSweepCell{}, err
	}
	known := false
	for _, f := range KVCordsFaults {
		known = known || f == fault
	}
	if !known {
		return KVSweepCell{}, fmt.Errorf("kv flash cords: unknown fault %q (want one of %s)", fault, strings.Join(KVCordsFaults, ", "))
	}
	cellDir, err := os.MkdirTemp(dir, "cell-")
	if err != nil {
		return KVSweepCell{}, err
	}
	defer os.RemoveAll(cellDir)
	if err := copyTreeSparse(filepath.Join(dir, "base"), cellDir); err != nil {
		return KVSweepCell{}, err
	}
	rng := rand.New(rand.NewSource(seed))
	g := kvFlashGeometry()
	devDir := filepath.Join(cellDir, "n1")
	cell := kvSweepCell{Kind: t.Kind, File: name, Fault: fault}
	nodes := &flashNodes{dir: cellDir}
	var under *kvIOFault
	if t.State {
		var err error
		cell.What, under, err = flashStateFault(nodes, devDir, filepath.Join(dir, "old", "n1"), fault, rng)
		if err != nil {
			return cell, fmt.Errorf("%s %s: %w", name, fault, err)
		}
		fault = "" // applied
	}
	switch fault {
	case "":
	case "eio-read-4k":
		pg := t.Pages[rng.Intn(len(t.Pages))]
		a, _ := g.PageOfFlat(pg)
		var faults *flash.Faults
		nodes.arm = func(id base.NodeID, dev *flash.Emulator) {
			if id != 1 {
				return
			}
			faults = dev.Faults()
			for i := 0; i < kvFlashEIOReads; i++ {
				faults.FailRead(a)
			}
		}
		cell.What = fmt.Sprintf("page %v (flat %d) reads uncorrectable", a, pg)
		var reader func() (string, bool)
		if t.P2L {
			// Only the identification of a die's data reads P2L pages
			// (CDR*, sdf.LostRanges): run it under the fault; it must
			// list what the file-table scan lists.
			// A die's P2L pages are kept on another die of its channel
			// (entrustment): identify every die of the page's channel.
			reader = func() (string, bool) {
				var notes []string
				wrong := false
				for d := 0; d < g.DiesPerChannel; d++ {
					note, w := identifyUnderFault(nodes, flash.DieAddr{Channel: a.Channel, Die: d})
					notes, wrong = append(notes, note), wrong || w
				}
				return strings.Join(notes, "; "), wrong
			}
		}
		under = &kvIOFault{
			Reader: reader,
			Injected: func() int64 {
				if faults == nil {
					return 0
				}
				return int64(kvFlashEIOReads - faults.Pending())
			},
			Clear: func() {
				if faults != nil {
					faults.Clear()
				}
			},
		}
	case "write-error":
		if t.OOB {
			cell.What = "not applicable: a page's OOB is programmed with its data (the data rows' write errors cover it)"
			cell.Converged = true
			return cell, nil
		}
		if strings.HasPrefix(t.Kind, ".sdfvfs ") {
			// sdfvfs writes its shadow and range copies straight into
			// SDF (sdf.File.Write), under the vfs.FS the harness wraps
			// with faultfs; below SDF a failed write is a failed page
			// program, which SDF absorbs by retiring the block and
			// writing the page elsewhere before the copy's write returns
			// (the journal and P2L rows' write errors are such program
			// failures). So no write error of a copy reaches sdfvfs from
			// a fault of this kind; sdfvfs's own tests cover a copy whose
			// writes fail (it drops the shadow: dropShadow).
			cell.What = "not applicable: sdfvfs writes its copies straight into SDF, below the faultfs over n1's sdfvfs, and a failed program there is absorbed by SDF (block retired, page rewritten) as in the journal and P2L rows"
			cell.Converged = true
			return cell, nil
		}
		if t.Meta || t.P2L {
			// Armed once SDF is mounted: a run-time fault, as on the
			// other rows (a device whose metadata cannot be written at
			// mount does not mount, and that is not this cell's fault).
			if len(t.Open) == 0 {
				cell.What = "nothing to fail: the device was writing no zone of this kind"
				cell.Converged = true
				return cell, nil
			}
			// Journal: one block of a zone the device was writing, on
			// one die. P2L: the first P2L page programmed in a block of
			// the data zones not full (a P2L page is programmed when
			// its block fills, and which zone the workload fills first
			// is the SDF layer's choice: arming only the zone nearest
			// full left the cell unreached).
			l := onflash.Layout{Geometry: g}
			z := t.Open[rng.Intn(len(t.Open))]
			var blocks []flash.BlockAddr
			if t.P2L {
				for _, z := range t.Open {
					for d := 0; d < g.DiesPerChannel; d++ {
						blocks = append(blocks, l.ZoneBlockAddr(z, d))
					}
				}
				cell.What = fmt.Sprintf("n1's device fails the first program of a P2L page in any of the %d data zones not full (%d blocks): the block is retired",
					len(t.Open), len(blocks))
			} else {
				b := flash.BlockAddr{Channel: l.ZoneChannel(z), Die: rng.Intn(g.DiesPerChannel), Block: l.ZoneBlock(z)}
				blocks = []flash.BlockAddr{b}
				cell.What = fmt.Sprintf("n1's device fails the next program of a journal page in block %v (zone %d, which it was writing): the block is retired",
					b, z)
			}
			var (
				armed  int
				faults *flash.Faults
				fired  atomic.Int64 // programs failed when the rest was disarmed
				done   = make(chan struct{})
				once   sync.Once
			)
			stop := func() { once.Do(func() { close(done) }) }
			nodes.wrap = func(id base.NodeID, fs vfs.FS) vfs.FS {
				if id != 1 {
					return fs
				}
				faults = nodes.device(1).Faults()
				for _, b := range blocks {
					armed += armFlashProgramFaults(faults, g, t, b)
				}
				if t.P2L {
					// One grown bad block: once a P2L program failed,
					// the others are disarmed (within a millisecond;
					// P2L pages are programmed once per block filled).
					go func() {
						tick := time.NewTicker(time.Millisecond)
						defer tick.Stop()
						for {
							select {
							case <-done:
								return
							case <-tick.C:
								if n := armed - faults.Pending(); n > 0 {
									faults.Clear()
									fired.Store(int64(n))
									return
								}
							}
						}
					}()
				}
				return fs
			}
			under = &kvIOFault{
				Injected: func() int64 {
					if faults == nil {
						return 0
					}
					if n := fired.Load(); n > 0 {
						return n
					}
					return int64(armed - faults.Pending())
				},
				Clear: func() {
					stop()
					if faults != nil {
						faults.Clear()
					}
				},
			}
			break
		}
		var ffs *faultfs.FS
		kind := t.Kind
		nodes.wrap = func(id base.NodeID, fs vfs.FS) vfs.FS {
			if id != 1 {
				return fs
			}
			ffs = faultfs.New(fs)
			ffs.Set(&faultfs.Rule{Kind: faultfs.WriteError, Match: func(p string) bool { return bitrot.Kind(p) == kind }})
			return ffs
		}
		cell.What = "EIO on every write, sync and create of n1's " + kind + " files (faultfs over its sdfvfs)"
		under = &kvIOFault{
			Injected: func() int64 {
				if ffs == nil {
					return 0
				}
				return ffs.Injected()
			},
			Clear: func() {
				if ffs != nil {
					ffs.Set(nil)
				}
			},
		}
	case "lost-write-4k":
		cell.What, err = flashLoseProgram(devDir, filepath.Join(dir, "old", "n1"), g, t, rng)
	default:
		cell.What, err = flashDamagePage(devDir, g, t, fault, rng)
	}
	if err != nil {
		return cell, fmt.Errorf("%s %s: %w", name, fault, err)
	}
	cfg := nodes.config()
	p := kvSweepParams{Keys: keys, Seed: seed}
	out, err := runKVCellWorkload(ctx, cfg, cell, p, under)
	if ev, repaired := nodes.evidence(1); ev != "" {
		switch {
		case out.Outcome == "nothing needed" && repaired:
			out.Outcome = "repaired below the KV store on n1 (" + ev + ")"
		case out.Outcome == "nothing needed":
			out.What += "; n1's flash stack: " + ev
		default:
			out.Outcome += "; n1's flash stack: " + ev
		}
	}
	cerr := nodes.close()
	if cerr != nil && t.State && errors.Is(cerr, syscall.EIO) {
		// The device keeps a state save that failed under the fault
		// and reports it at its next sync or close (after the fault was
		// cleared, its close saved anew): the fault's, not the cell's.
		out.What += "; n1's device reported a failed state save at close: " + cerr.Error()
		cerr = nil
	}
	return out, errors.Join(err, cerr)
}

// identifyUnderFault lists the live file ranges of die d of n1's device
// with CDR* (P2L pages) and with the file-table scan, and reports whether
// they differ (wrong: the die's loss would go unrepaired in part).
func identifyUnderFault(nodes *flashNodes, d flash.DieAddr) (string, bool) {
	nodes.mu.Lock()
	sfs := nodes.sfss[1]
	nodes.mu.Unlock()
	if sfs == nil {
		return "n1 holds no SDF to identify", false
	}
	got, st, err := sfs.LostRanges(d)
	want, _, serr := sfs.LostRangesScan(d)
	switch {
	case err != nil:
		return fmt.Sprintf("identifying die %v by its P2L pages failed: %v", d, err), true
	case serr != nil:
		return fmt.Sprintf("the file-table scan of die %v failed: %v", d, serr), true
	case (len(got) > 0 || len(want) > 0) && !reflect.DeepEqual(got, want):
		return fmt.Sprintf("identifying die %v by its P2L pages listed %d ranges, the file-table scan %d", d, len(got), len(want)), true
	}
	return fmt.Sprintf("die %v identified by its P2L pages (%d read, %d zones by the scan instead): the same %d file ranges as the file-table scan",
		d, st.PagesRead, st.ZonesByScan, len(got)), false
}

// kvStateFault is an I/O fault on n1's device's state copies (its
// flash.Options.StateIO), armed from the start (EIO read) or once SDF is
// mounted (write error: a device that cannot mark itself open does not
// open, and that is the object sweep's cell).
type kvStateFault struct {
	fault    string
	victim   string // the copy whose reads fail
	armed    atomic.Bool
	injected atomic.Int64
}

func (f *kvStateFault) ReadFile(p string) ([]byte, error) {
	if f.fault == "eio-read-4k" && f.armed.Load() && filepath.Base(p) == f.victim {
		f.injected.Add(1)
		return nil, fmt.Errorf("read %s: injected: %w", p, syscall.EIO)
	}
	return pagefile.OSStateIO{}.ReadFile(p)
}

func (f *kvStateFault) WriteFileSync(p string, b []byte) error {
	if f.armed.Load() {
		switch {
		case f.fault == "write-error":
			f.injected.Add(1)
			return fmt.Errorf("write %s: injected: %w", p, syscall.EIO)
		case f.fault == "eio-read-4k" && filepath.Base(p) == f.victim:
			f.armed.Store(false) // written anew, off the bad sector
		}
	}
	return pagefile.OSStateIO{}.WriteFileSync(p, b)
}

// flashStateFault applies fault to n1's device's state copies in devDir:
// at rest (zeros, junk, a bit flip in one copy; a lost write: one copy
// keeps what it held between the loads, in oldDir) or at run time through
// nodes' StateIO (EIO on every read of one copy until it is written anew;
// EIO on every write of the copies once SDF is mounted).
func flashStateFault(nodes *flashNodes, devDir, oldDir, fault string, rng *rand.Rand) (string, *kvIOFault, error) {
	copyName := pagefile.StateName(rng.Intn(3))
	path := filepath.Join(devDir, copyName)
	switch fault {
	case "eio-read-4k", "write-error":
		f := &kvStateFault{fault: fault, victim: copyName}
		nodes.stateIO = func(id base.NodeID) pagefile.StateIO {
			if id != 1 {
				return nil
			}
			return f
		}
		what := "every read of " + copyName + " fails (EIO) until it is written anew"
		if fault == "eio-read-4k" {
			f.armed.Store(true)
		} else {
			// The device saves its state when it opens and closes,
			// when a block goes bad and every SaveStateEveryErases
			// erases: the workload retires no block and the device
			// stays open until the cell ends, after the fault is
			// cleared, so n1's device saves after every erase here.
			what = "every write of the device's state copies fails (EIO) once SDF is mounted; n1's device saves its state after every erase"
			nodes.saveEvery = 1
			nodes.wrap = func(id base.NodeID, fs vfs.FS) vfs.FS {
				if id == 1 {
					f.armed.Store(true)
				}
				return fs
			}
		}
		return what, &kvIOFault{Injected: f.injected.Load, Clear: func() { f.armed.Store(false) }}, nil
	case "lost-write-4k":
		old, err := os.ReadFile(filepath.Join(oldDir, copyName))
		if err != nil {
			return "", nil, err
		}
		cur, err := os.ReadFile(path)
		if err != nil {
			return "", nil, err
		}
		if string(old) == string(cur) {
			return "no state save since the first load: nothing to lose", nil, nil
		}
		return copyName + " keeps what it held between the two loads (its saves since were lost)", nil, os.WriteFile(path, old, 0o644)
	}
	what, err := applyFault(vfs.Default, path, fault, rng)
	return copyName + ": " + what, nil, err
}

// armFlashProgramFaults fails the next program of t's kind of page (any
// journal page, or the P2L page) in block b: one grown bad block. It
// returns how many pages it armed.
func armFlashProgramFaults(f *flash.Faults, g flash.Geometry, t flashTarget, b flash.BlockAddr) int {
	l := onflash.Layout{Geometry: g}
	n := 0
	for pg := 0; pg < g.PagesPerBlock; pg++ {
		if t.P2L && pg != l.P2LPage() {
			continue
		}
		f.FailProgram(flash.PageAddr{Channel: b.Channel, Die: b.Die, Block: b.Block, Page: pg})
		n++
	}
	return n
}

// flashDamagePage applies zeros, junk or a bit flip to one of t's pages
// (its data, or its OOB bytes) in the stopped device's page file, with the
// slot checksum recomputed: the device reads it back with a clean status.
func flashDamagePage(devDir string, g flash.Geometry, t flashTarget, fault string, rng *rand.Rand) (string, error) {
	ps, err := pagefile.Open(devDir, g.PageSize+g.OOBSize, int64(g.Dies())*int64(g.BlocksPerDie)*int64(g.PagesPerBlock))
	if err != nil {
		return "", err
	}
	defer ps.Close()
	pg := t.Pages[rng.Intn(len(t.Pages))]
	a, _ := g.PageOfFlat(pg)
	buf := make([]byte, g.PageSize+g.OOBSize)
	if err := ps.ReadPage(pg, buf); err != nil {
		return "", fmt.Errorf("page %v: %w", a, err)
	}
	region, where := buf[:g.PageSize], "data"
	if t.OOB {
		region, where = buf[g.PageSize:], "OOB"
	}
	var what string
	switch fault {
	case "zero-4k":
		clear(region)
		what = "zeroed"
	case "junk-4k":
		rng.Read(region)
		what = "junk"
	case "flip-bit":
		bit := rng.Intn(len(region) * 8)
		region[bit/8] ^= 1 << (bit % 8)
		what = fmt.Sprintf("bit %d flipped", bit)
	default:
		return "", base.InvalidArgumentf("unknown fault %q", fault)
	}
	if err := ps.WritePage(pg, buf); err != nil {
		return "", err
	}
	return fmt.Sprintf("page %v %s %s (device status clean)", a, where, what), nil
}

// freshPages are the pages (flat indexes) whose slots in devDir's page file
// differ from oldDir's: programmed since.
func freshPages(devDir, oldDir string, g flash.Geometry, pages []int64) ([]int64, error) {
	slot := int64(pagefile.HeaderBytes + g.PageSize + g.OOBSize)
	cur, err := os.Open(filepath.Join(devDir, "pages"))
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	old, err := os.Open(filepath.Join(oldDir, "pages"))
	if err != nil {
		return nil, err
	}
	defer old.Close()
	a, b := make([]byte, slot), make([]byte, slot)
	var fresh []int64
	for _, pg := range pages {
		if _, err := cur.ReadAt(a, pg*slot); err != nil {
			return nil, err
		}
		clear(b)
		if _, err := old.ReadAt(b, pg*slot); err != nil && err != io.EOF {
			return nil, err
		}
		if string(a) != string(b) {
			fresh = append(fresh, pg)
		}
	}
	return fresh, nil
}

// flashLoseProgram makes one page of t that the second load programmed
// (its slot differs from the device's state between the loads) read back
// erased: a program the device acknowledged and never made.
func flashLoseProgram(devDir, oldDir string, g flash.Geometry, t flashTarget, rng *rand.Rand) (string, error) {
	slot := int64(pagefile.HeaderBytes + g.PageSize + g.OOBSize)
	fresh, err := freshPages(devDir, oldDir, g, t.Pages)
	if err != nil {
		return "", err
	}
	cur, err := os.OpenFile(filepath.Join(devDir, "pages"), os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer cur.Close()
	if len(fresh) == 0 {
		return "no page programmed since the first load: nothing to lose", nil
	}
	sort.Slice(fresh, func(i, j int) bool { return fresh[i] < fresh[j] })
	pg := fresh[rng.Intn(len(fresh))]
	if _, err := cur.WriteAt(make([]byte, slot), pg*slot); err != nil {
		return "", err
	}
	if err := cur.Sync(); err != nil {
		return "", err
	}
	pa, _ := g.PageOfFlat(pg)
	return fmt.Sprintf("page %v reads erased (%d of %d pages programmed since the first load)", pa, len(fresh), len(t.Pages)), nil
}
