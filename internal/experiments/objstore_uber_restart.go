package experiments

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/flash/pagefile"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/model"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/sdf"
)

// uber-restart-objects: a cluster of storage nodes on emulated flash is
// written, stopped, and every stored bit of every file of every node flips
// with probability UBER (the device's page file, its state copies, the SDF
// journal inside it, the node's chunks, sums files, local index and
// identity inside that, the format marker, lock files); then it restarts
// and every object is read back. The issue it answers: does every node
// open, and is anything lost or wrong?

func uberRestartObjects() Experiment {
	return Experiment{
		Name: "uber-restart-objects",
		Description: "6 nodes on emulated flash, REP and EC objects of 8 MiB: stop, flip every stored bit of every node file at " +
			"UBER 1e-8..3e-6, restart, read everything back (nodes that open, objects missing / wrong, repairs by kind)",
		Run: runUberRestartObjects,
	}
}

// uberRestartObjectsParams size the experiment.
type uberRestartObjectsParams struct {
	Nodes       int
	Objects     int // per redundancy
	ObjectBytes int
	UBERs       []float64
	Seeds       int
	Geometry    flash.Geometry
}

func uberRestartObjectsSize(quick bool) uberRestartObjectsParams {
	if quick {
		g := objstore.DevGeometry()
		g.BlocksPerDie = 16
		return uberRestartObjectsParams{Nodes: 6, Objects: 2, ObjectBytes: int(base.MiB), UBERs: []float64{3e-6}, Seeds: 1, Geometry: g}
	}
	return uberRestartObjectsParams{Nodes: 6, Objects: 20, ObjectBytes: int(8 * base.MiB),
		UBERs: []float64{1e-8, 1e-7, 1e-6, 3e-6}, Seeds: 3, Geometry: objstore.DevGeometry()}
}

// urCell is one (redundancy, UBER, seed) run.
type urCell struct {
	Red   objectpb.Redundancy
	UBER  float64
	Seed  int64
	Flips atRestFlips
	// Nodes that opened, and why the others did not.
	Opened int
	Dead   []string
	// Objects read back right, missing (not found or data loss), wrong
	// (bytes differ without an error: must never happen), other errors.
	OK, Missing, Wrong, Errors int
	ErrorText                  []string
	// Repairs by kind.
	StateUnitsMerged, StateUnitsVoted, StateRebuilt int
	JournalUnits, JournalMerged, JournalVoted       int
	JournalPagesLost, MarkersRestored               int
	ChunksDamaged, ChunksRepaired, ChunksMissing    int64
	MetaCopiesRewritten                             int64
	RowsReconstructed, ChunksVoted                  int
	IndexEntries                                    int
	ReadTime                                        time.Duration
}

// uberObjectData is the content of object i (regenerated to compare).
func uberObjectData(seed int64, red objectpb.Redundancy, i, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed*1_000_003 + int64(red)*7919 + int64(i))).Read(b)
	return b
}

func uberObjectKey(red objectpb.Redundancy, i int) string {
	return fmt.Sprintf("uber/%s/%04d", strings.ToLower(red.String()), i)
}

// urNodeStores opens the nodes' stores on emulated flash and remembers them
// (to read how they opened).
type urNodeStores struct {
	g      flash.Geometry
	mu     sync.Mutex
	stores map[int]*objstore.SDFStore
	// onDevice, if set, sees each node's device (by node directory) as it
	// opens, before SDF mounts it (fault injection).
	onDevice func(dir string, dev *flash.Emulator)
	// stateIO, if set, gives a node's device (by node directory) the
	// StateIO its state copies go through (nil: the os).
	stateIO func(dir string) pagefile.StateIO
	// byDir holds the open stores by node directory.
	byDir map[string]*objstore.SDFStore
}

func (s *urNodeStores) open(dir string, i int) (objstore.Store, error) {
	opts := objstore.SDFStoreOptions{Geometry: s.g, Seed: int64(i + 1)}
	if s.onDevice != nil {
		opts.OnDevice = func(dev *flash.Emulator) { s.onDevice(dir, dev) }
	}
	if s.stateIO != nil {
		if io := s.stateIO(dir); io != nil {
			opts.DeviceStateIO = io
		}
	}
	st, err := objstore.OpenSDFStore(filepath.Join(dir, "sdf"), opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.stores[i] = st
	if s.byDir == nil {
		s.byDir = map[string]*objstore.SDFStore{}
	}
	s.byDir[filepath.Clean(dir)] = st
	s.mu.Unlock()
	return st, nil
}

// buildUberGolden writes the objects of one redundancy into a new cluster
// in dir and stops it cleanly.
func buildUberGolden(ctx context.Context, dir string, p uberRestartObjectsParams, red objectpb.Redundancy, seed int64) error {
	ns := &urNodeStores{g: p.Geometry, stores: map[int]*objstore.SDFStore{}}
	cl, err := devcluster.Start(ctx, devcluster.Options{Dir: dir, Nodes: p.Nodes, NodeStore: ns.open,
		MaxObjectBytes: objMaxObjectBytes, UnsafeNoFsync: true})
	if err != nil {
		return err
	}
	cli, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		cl.Close()
		return err
	}
	for i := 0; i < p.Objects; i++ {
		if _, err := cli.Put(ctx, uberObjectKey(red, i), uberObjectData(seed, red, i, p.ObjectBytes), red); err != nil {
			cli.Close()
			cl.Close()
			return err
		}
	}
	cli.Close()
	return cl.Close()
}

// nodeFileKind classifies a node file for the flip counts.
func nodeFileKind(path string) string {
	switch b := filepath.Base(path); {
	case b == "pages":
		return "flash pages"
	case strings.HasPrefix(b, "state."):
		return "flash state"
	default:
		return b
	}
}

// runUberCell copies the golden cluster, flips bits in every node file,
// restarts and reads every object.
func runUberCell(ctx context.Context, golden, tmp string, p uberRestartObjectsParams, red objectpb.Redundancy, uber float64, seed, dataSeed int64) (urCell, error) {
	cell := urCell{Red: red, UBER: uber, Seed: seed}
	dir, err := os.MkdirTemp(tmp, "cell-")
	if err != nil {
		return cell, err
	}
	defer os.RemoveAll(dir)
	if err := copyTreeSparse(golden, dir); err != nil {
		return cell, err
	}
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < p.Nodes; i++ {
		f, err := flipStoredTree(filepath.Join(dir, fmt.Sprintf("node-%d", i+1)), uber, rng, nodeFileKind)
		if err != nil {
			return cell, err
		}
		cell.Flips.Files += f.Files
		cell.Flips.BitsStored += f.BitsStored
		cell.Flips.Flips += f.Flips
		if cell.Flips.ByKind == nil {
			cell.Flips.ByKind = map[string]int64{}
		}
		for k, v := range f.ByKind {
			cell.Flips.ByKind[k] += v
		}
	}
	ns := &urNodeStores{g: p.Geometry, stores: map[int]*objstore.SDFStore{}}
	cl, err := devcluster.Start(ctx, devcluster.Options{Dir: dir, Nodes: p.Nodes, NodeStore: ns.open,
		MaxObjectBytes: objMaxObjectBytes, UnsafeNoFsync: true})
	if err != nil {
		cell.Dead = append(cell.Dead, "cluster: "+err.Error())
		return cell, nil
	}
	defer cl.Close()
	for _, d := range cl.Dead() {
		cell.Dead = append(cell.Dead, d.String())
	}
	cell.Opened = p.Nodes - len(cell.Dead)
	cli, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		return cell, err
	}
	defer cli.Close()
	start := time.Now()
	for i := 0; i < p.Objects; i++ {
		key := uberObjectKey(red, i)
		data, rep, err := cli.GetWithReport(ctx, key, client.ModeDirect)
		switch {
		case err == nil && bytes.Equal(data, uberObjectData(dataSeed, red, i, p.ObjectBytes)):
			cell.OK++
		case err == nil:
			cell.Wrong++
		case objstore.IsNotFound(err) || base.IsDataLoss(err):
			cell.Missing++
			cell.ErrorText = append(cell.ErrorText, err.Error())
		default:
			cell.Errors++
			cell.ErrorText = append(cell.ErrorText, err.Error())
		}
		if rep != nil {
			cell.RowsReconstructed += rep.Reconstructed
			cell.ChunksVoted += rep.Voted
		}
	}
	cell.ReadTime = time.Since(start)
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for i, st := range ns.stores {
		info := st.OpenInfo()
		cell.StateUnitsMerged += info.Device.StateUnitsMerged
		cell.StateUnitsVoted += info.Device.StateUnitsVoted
		if info.Device.StateRebuilt {
			cell.StateRebuilt++
		}
		cell.JournalUnits += info.FS.MetaUnits
		cell.JournalMerged += info.FS.MetaUnitsMerged
		cell.JournalVoted += info.FS.MetaUnitsVoted
		cell.JournalPagesLost += info.FS.MetaPagesLost
		if info.MarkerRestored {
			cell.MarkersRestored++
		}
		if n := cl.Node(i); n != nil {
			s := n.Chunks().Stats()
			cell.ChunksDamaged += s.Persistent
			cell.ChunksRepaired += s.Repaired
			cell.ChunksMissing += s.MissingRepaired
			cell.MetaCopiesRewritten += s.MetaRepaired
			if blobs, err := n.Chunks().Blobs(); err == nil {
				cell.IndexEntries += len(blobs)
			}
		}
	}
	return cell, nil
}

func runUberRestartObjects(ctx context.Context, cfg Config) (*report.Report, error) {
	p := uberRestartObjectsSize(cfg.Quick)
	tmp, err := os.MkdirTemp("", "uber-restart-objects-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var cells []urCell
	for _, red := range []objectpb.Redundancy{objectpb.Redundancy_REP, objectpb.Redundancy_EC} {
		golden := filepath.Join(tmp, "golden-"+strings.ToLower(red.String()))
		if err := buildUberGolden(ctx, golden, p, red, cfg.Seed); err != nil {
			return nil, fmt.Errorf("uber-restart-objects: write %s objects: %w", red, err)
		}
		for _, uber := range p.UBERs {
			for s := 0; s < p.Seeds; s++ {
				seed := cfg.Seed*1000 + int64(s)
				cell, err := runUberCell(ctx, golden, tmp, p, red, uber, seed, cfg.Seed)
				if err != nil {
					return nil, fmt.Errorf("uber-restart-objects: %s at UBER %g seed %d: %w", red, uber, seed, err)
				}
				cells = append(cells, cell)
			}
		}
		os.RemoveAll(golden)
	}
	return uberRestartObjectsReport(cfg, p, cells)
}

func uberRestartObjectsReport(cfg Config, p uberRestartObjectsParams, cells []urCell) (*report.Report, error) {
	r, err := report.New("uber-restart-objects", "Storage nodes restarted after bit flips in every file")
	if err != nil {
		return nil, err
	}
	g := p.Geometry
	r.Text("%d storage nodes in one process (`flashmend dev` as a library: a coordinator with embedded etcd, nodes on 127.0.0.1), "+
		"each on its own file-backed emulated flash device (%dch x %d dies x %d blocks x %d pages of %d B + %d B OOB, the SDF layer on it). "+
		"Per redundancy, %d objects of %s are written (REP-3, or EC 4+2) and the cluster is stopped cleanly. For each UBER and seed, "+
		"a copy of the stopped cluster gets every stored bit of every file of every node flipped with probability UBER "+
		"(holes of sparse files hold no bits; the coordinator's files are left alone: their faults are the single-fault sweep's), "+
		"the cluster restarts on it, and every object is read back once through the DIRECT read path and compared with what was written. "+
		"%d seeds per cell.", p.Nodes, g.Channels, g.DiesPerChannel, g.BlocksPerDie, g.PagesPerBlock, g.PageSize, g.OOBSize,
		p.Objects, base.Bytes(p.ObjectBytes), p.Seeds)
	rows := [][]string{}
	for _, c := range cells {
		rows = append(rows, []string{
			c.Red.String(), fmt.Sprintf("%g", c.UBER), fmt.Sprint(c.Seed), fmt.Sprint(c.Flips.Flips),
			fmt.Sprintf("%d/%d", c.Opened, p.Nodes), fmt.Sprint(c.OK), fmt.Sprint(c.Missing), fmt.Sprint(c.Wrong), fmt.Sprint(c.Errors),
			fmt.Sprintf("%d / %d", c.StateUnitsMerged, c.StateUnitsVoted),
			fmt.Sprintf("%d / %d / %d", c.JournalMerged, c.JournalVoted, c.JournalPagesLost),
			fmt.Sprint(c.MetaCopiesRewritten),
			fmt.Sprintf("%d (%d missing)", c.ChunksRepaired, c.ChunksMissing),
			fmt.Sprintf("%d / %d", c.RowsReconstructed, c.ChunksVoted),
			c.ReadTime.Round(100 * time.Millisecond).String(),
		})
	}
	if err := r.Table(report.Table{
		Caption: "Every run. Flips: bits flipped in all node files. Nodes: nodes that opened. Objects: read back right, missing " +
			"(not found or an explicit data-loss error), wrong (different bytes without an error), other errors. Repairs by kind: " +
			"device state units merged from another copy / voted; SDF journal units merged / voted / pages lost; metadata file " +
			"copies rewritten (node identity, local index entries); chunks rewritten by reads (of them re-created because missing); " +
			"EC rows reconstructed / REP chunks with a voted sector.",
		Header: []string{"redundancy", "UBER", "seed", "flips", "nodes", "ok", "missing", "wrong", "errors",
			"state units", "journal units", "meta copies", "chunks repaired", "rows / voted", "read time"},
		Rows: rows,
	}); err != nil {
		return nil, err
	}
	if err := uberModelTables(r, p, cells); err != nil {
		return nil, err
	}
	var notes []string
	for _, c := range cells {
		for _, d := range c.Dead {
			notes = append(notes, fmt.Sprintf("- %s UBER %g seed %d: dead node: %s", c.Red, c.UBER, c.Seed, d))
		}
		for _, e := range c.ErrorText {
			notes = append(notes, fmt.Sprintf("- %s UBER %g seed %d: %s", c.Red, c.UBER, c.Seed, e))
		}
	}
	if len(notes) > 0 {
		sort.Strings(notes)
		if len(notes) > 40 {
			notes = append(notes[:40], fmt.Sprintf("- ... and %d more", len(notes)-40))
		}
		r.Text("Nodes that did not open and reads that failed:\n\n%s", strings.Join(notes, "\n"))
	}
	return r, nil
}

// uberModelTables compares the runs with internal/model: the loss
// probability of every structure at each UBER, and the damage the merges
// repaired against the damage the model expects.
func uberModelTables(r *report.Report, p uberRestartObjectsParams, cells []urCell) error {
	g := p.Geometry
	stateBytes, su, sn, sc := flash.StateLayout(g)
	state := model.MergedCopies{Name: "flash device state", UnitBytes: su, Units: sn, Copies: sc, Vote: true}
	mu, mc := sdf.MetaLayout()
	// Units and metadata files per node, as measured (means over runs).
	var units, entries, runs float64
	for _, c := range cells {
		if c.Opened > 0 {
			units += float64(c.JournalUnits) / float64(c.Opened)
			entries += float64(c.IndexEntries) / float64(c.Opened)
			runs++
		}
	}
	if runs > 0 {
		units /= runs
		entries /= runs
	}
	journal := model.MergedCopies{Name: "SDF metadata journal", UnitBytes: mu, Units: int(math.Round(units)), Copies: mc, Vote: true}
	// A metadata file: a JSON local index entry of about 200 B (the identity
	// file is smaller) with its 20-byte header and CRC, in three copies.
	metaFile := model.MergedCopies{Name: "metadata file", UnitBytes: 240, Units: int(math.Round(entries)) + 1, Copies: objstore.MetaCopies, Vote: true}
	sectorsPerChunk := direct.ChunkSize / direct.SectorSize
	sumsBytes := len(sumsrec.Encode(direct.ChunkID{}, direct.ChunkSize, make([]uint32, sectorsPerChunk)))
	repObj := model.ObjectAtRest{Rows: p.ObjectBytes / direct.ChunkSize, SectorsPerChunk: sectorsPerChunk, SectorBytes: direct.SectorSize, SumsBytes: sumsBytes}
	ecObj := model.ObjectAtRest{Rows: (p.ObjectBytes + 4*direct.ChunkSize - 1) / (4 * direct.ChunkSize), SectorsPerChunk: sectorsPerChunk, SectorBytes: direct.SectorSize, SumsBytes: sumsBytes}
	var rows [][]string
	for _, u := range p.UBERs {
		rows = append(rows, []string{fmt.Sprintf("%g", u),
			fmt.Sprintf("%.2g", state.Loss(u)), fmt.Sprintf("%.2g", model.WholeCopiesLoss(u, stateBytes, 2)),
			fmt.Sprintf("%.2g", journal.Loss(u)), fmt.Sprintf("%.2g", -math.Expm1(float64(units)/8*math.Log1p(-model.WholeCopiesLoss(u, g.PageSize+g.OOBSize+8, 2)))),
			fmt.Sprintf("%.2g", metaFile.Loss(u)),
			fmt.Sprintf("%.2g", repObj.REPLoss(u)), fmt.Sprintf("%.2g", ecObj.ECLoss(u)), fmt.Sprintf("%.2g", ecObj.ECLossWholeSums(u)),
		})
	}
	if err := r.Table(report.Table{
		Caption: fmt.Sprintf("Model (internal/model, at rest): probability that one node's structure is lost, or one %s object, at each UBER. "+
			"Device state: %d units of %d B in %d copies, merged unit by unit with a vote (before: one %d-byte record under one CRC in 2 copies). "+
			"SDF journal: %d units of %d B (mean replayed per node) in %d copies, merged and voted (before: 4 KiB pages under one checksum, "+
			"in 2 copies; as many pages as units/8). Metadata files: %d per node (local index entries and identity), %d copies, voted. "+
			"Objects: REP-3 chunks merged sector by sector and voted (lost when a chunk's three sums records are all damaged); EC 4+2 decoded "+
			"sector by sector, a shard's sector verifying unless its bytes or its entry in the shard's sums record are damaged (before: a "+
			"shard whose sums record failed its own CRC verified nowhere in its chunk).",
			base.Bytes(p.ObjectBytes), sn, su, sc, stateBytes, journal.Units, mu, mc, metaFile.Units, objstore.MetaCopies),
		Header: []string{"UBER", "device state", "device state before", "SDF journal", "journal before", "one metadata file set", "REP object", "EC object", "EC object before"},
		Rows:   rows,
	}); err != nil {
		return err
	}
	// Measured against expected, summed over runs per (redundancy, UBER).
	type key struct {
		red  objectpb.Redundancy
		uber float64
	}
	type sum struct {
		runs, nodes, objects, lost    int
		stateMerged, journalMerged    float64
		expState, expJournal, expLost float64
	}
	sums := map[key]*sum{}
	var keys []key
	for _, c := range cells {
		k := key{c.Red, c.UBER}
		s := sums[k]
		if s == nil {
			s = &sum{}
			sums[k] = s
			keys = append(keys, k)
		}
		s.runs++
		s.nodes += c.Opened
		s.objects += p.Objects
		s.lost += c.Missing + c.Errors + c.Wrong
		s.stateMerged += float64(c.StateUnitsMerged)
		s.journalMerged += float64(c.JournalMerged)
		s.expState += float64(c.Opened) * state.DamagedUnits(c.UBER)
		if c.Opened > 0 {
			perNode := journal
			perNode.Units = c.JournalUnits / c.Opened
			s.expJournal += float64(c.Opened) * perNode.DamagedUnits(c.UBER)
		}
		obj := repObj.REPLoss(c.UBER)
		if c.Red == objectpb.Redundancy_EC {
			obj = ecObj.ECLoss(c.UBER)
		}
		s.expLost += float64(p.Objects) * obj
	}
	rows = nil
	for _, k := range keys {
		s := sums[k]
		rows = append(rows, []string{k.red.String(), fmt.Sprintf("%g", k.uber), fmt.Sprint(s.runs),
			fmt.Sprintf("%.0f / %.1f", s.stateMerged, s.expState),
			fmt.Sprintf("%.0f / %.1f", s.journalMerged, s.expJournal),
			fmt.Sprintf("%d of %d / %.2f %s", s.lost, s.objects, s.expLost, poissonRange(s.expLost))})
	}
	return r.Table(report.Table{
		Caption: "Measured against the model, summed over the seeds: device state and journal units repaired by the merge (measured / " +
			"expected: units damaged in at least one copy), and objects not read back (measured / expected, with the 99% range of a Poisson " +
			"count of that mean).",
		Header: []string{"redundancy", "UBER", "runs", "state units merged", "journal units merged", "objects lost"},
		Rows:   rows,
	})
}

// poissonRange is the central 99% range of a Poisson count of mean m.
func poissonRange(m float64) string {
	if m <= 0 {
		return "[0, 0]"
	}
	lo, hi := 0, 0
	cdf, pmf := 0.0, math.Exp(-m)
	for k := 0; k < 100000; k++ {
		if k > 0 {
			pmf *= m / float64(k)
		}
		cdf += pmf
		if cdf < 0.005 {
			lo = k + 1
		}
		if cdf >= 0.995 {
			hi = k
			break
		}
	}
	return fmt.Sprintf("[%d, %d]", lo, hi)
}
