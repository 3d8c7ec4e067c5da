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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

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
//     the file reports uncorrectable (flash.Faults.FailRead);
//   - write error (run time): every write, sync and create of the file's
//     kind on n1 fails (faultfs over n1's sdfvfs); for the SDF layer's
//     journal and P2L pages the device fails the next program of a page of
//     their kind in one block of a zone it was writing (flash.Faults.
//     FailProgram: the block is retired, a grown bad block);
//     a page's OOB has no write of its own.

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

	mu   sync.Mutex
	devs map[base.NodeID]*flash.Emulator
	sfss map[base.NodeID]*sdf.FS
	vfss map[base.NodeID]*sdfvfs.FS
}

func (f *flashNodes) nodeFS(id base.NodeID) (vfs.FS, error) {
	opts := flash.Options{Seed: int64(id)}
	if f.stateIO != nil {
		opts.StateIO = f.stateIO(id)
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
	targets, err := kvFlashTargets(baseDir)
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

// kvFlashTargets lists the rows on n1's device in baseDir (stopped).
func kvFlashTargets(baseDir string) ([]flashTarget, error) {
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
		if _, ok := last[k]; !ok {
			kinds = append(kinds, k)
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
		if !z.Meta && z.WritePointer > 0 && z.WritePointer < z.Capacity {
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
	// The zone nearest full first: the one whose P2L page the cell's
	// workload is likeliest to program.
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
		under = &kvIOFault{
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
		if t.Meta || t.P2L {
			// Armed once SDF is mounted: a run-time fault, as on the
			// other rows (a device whose metadata cannot be written at
			// mount does not mount, and that is not this cell's fault).
			if len(t.Open) == 0 {
				cell.What = "nothing to fail: the device was writing no zone of this kind"
				cell.Converged = true
				return cell, nil
			}
			// One block of a zone the device was writing, on one die.
			l := onflash.Layout{Geometry: g}
			z := t.Open[rng.Intn(len(t.Open))]
			if t.P2L {
				z = t.Open[0] // nearest full
			}
			b := flash.BlockAddr{Channel: l.ZoneChannel(z), Die: rng.Intn(g.DiesPerChannel), Block: l.ZoneBlock(z)}
			armed := 0
			var faults *flash.Faults
			nodes.wrap = func(id base.NodeID, fs vfs.FS) vfs.FS {
				if id == 1 {
					faults = nodes.device(1).Faults()
					armed = armFlashProgramFaults(faults, g, t, b)
				}
				return fs
			}
			cell.What = fmt.Sprintf("n1's device fails the next program of a %s page in block %v (zone %d, which it was writing): the block is retired",
				map[bool]string{true: "journal", false: "P2L"}[t.Meta], b, z)
			under = &kvIOFault{
				Injected: func() int64 {
					if faults == nil {
						return 0
					}
					return int64(armed - faults.Pending())
				},
				Clear: func() {
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
	return out, errors.Join(err, nodes.close())
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
			what = "every write of the device's state copies fails (EIO) once SDF is mounted"
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

// flashLoseProgram makes one page of t that the second load programmed
// (its slot differs from the device's state between the loads) read back
// erased: a program the device acknowledged and never made.
func flashLoseProgram(devDir, oldDir string, g flash.Geometry, t flashTarget, rng *rand.Rand) (string, error) {
	slot := int64(pagefile.HeaderBytes + g.PageSize + g.OOBSize)
	cur, err := os.OpenFile(filepath.Join(devDir, "pages"), os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer cur.Close()
	old, err := os.Open(filepath.Join(oldDir, "pages"))
	if err != nil {
		return "", err
	}
	defer old.Close()
	a, b := make([]byte, slot), make([]byte, slot)
	var fresh []int64
	for _, pg := range t.Pages {
		if _, err := cur.ReadAt(a, pg*slot); err != nil {
			return "", err
		}
		if _, err := old.ReadAt(b, pg*slot); err != nil && err != io.EOF {
			return "", err
		}
		if string(a) != string(b) {
			fresh = append(fresh, pg)
		}
	}
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
