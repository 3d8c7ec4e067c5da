package experiments

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/report"
)

// kvFaultSweep is the KV store's single-fault sweep (CORDS, FAST'17, one
// fault at a time): for every file one replica keeps (raft log copies and
// generations, Pebble MANIFEST, OPTIONS, markers, sstables, the protection
// layer's copies and sidecars) and every fault (zero a 4 KiB block, junk,
// flip one bit, truncate to half, delete), damage that file of a stopped
// cluster, restart it, and check that the cluster starts, every key reads
// back right, and the damaged replica ends with the same content as its
// peers (opened and repaired, or rebuilt).
func kvFaultSweep() Experiment {
	return Experiment{
		Name:        "kv-fault-sweep",
		Description: "KV single-fault sweep: every file of a replica x {zero, junk, flip, truncate, delete}: starts, wrong, errors, how it recovered",
		Run:         runKVFaultSweepExperiment,
	}
}

// kvSweepFaults are the faults of the sweep.
var kvSweepFaults = []string{"zero-4k", "junk-4k", "flip-bit", "truncate-half", "delete"}

// kvSweepCell is one (file, fault) of the sweep.
type kvSweepCell struct {
	Kind, File, Fault, What string
	Crash                   bool
	StartErr                string
	Missing, Wrong, Errors  int
	Converged               bool
	// Outcome says how the damaged replica came back: "intact" (nothing to
	// repair: the copy served), "repaired" (patches or raft log entries
	// from peers), "rebuilt: reason", "replaced".
	Outcome string
	Took    time.Duration
}

// Pass reports whether the cell met the sweep's bar: started, no wrong or
// missing key, no key left unreadable, and the replica back in step.
func (c kvSweepCell) Pass() bool {
	return c.StartErr == "" && c.Missing == 0 && c.Wrong == 0 && c.Errors == 0 && c.Converged
}

// kvSweepParams configure a sweep.
type kvSweepParams struct {
	Keys int
	Seed int64
	// Crash stops the base cluster without flushing engines.
	Crash bool
	// OnePerKind damages one file of each kind only (the test); otherwise
	// every file.
	OnePerKind bool
	Faults     []string
	// Only, if set, keeps the files whose path contains it.
	Only string
}

// kvSweepBase builds the stored cluster every cell starts from: two
// loads with a restart between them (two sstables, MANIFEST edits and raft
// log generations per replica), then a stop.
func kvSweepBase(ctx context.Context, p kvSweepParams) (vfs.FS, kvcluster.Config, error) {
	fs := vfs.NewMem()
	cfg := kvcluster.Config{FS: fs, Dir: "kv", Options: kv.Options{ScrubInterval: -1, CacheBytes: -1}}
	c, err := kvcluster.Start(cfg)
	if err != nil {
		return nil, cfg, err
	}
	half := uberRestartParams{Keys: p.Keys / 2, ValueBytes: 800, Seed: p.Seed}
	if err := uberLoad(ctx, c, half); err != nil {
		c.Close()
		return nil, cfg, err
	}
	if err := kvWaitCaughtUp(ctx, c); err != nil {
		c.Close()
		return nil, cfg, err
	}
	c.Close()
	c, err = kvcluster.Start(cfg)
	if err != nil {
		return nil, cfg, err
	}
	cl, err := c.NewClient(kvclient.Options{Seed: p.Seed})
	if err != nil {
		c.Close()
		return nil, cfg, err
	}
	for i := p.Keys / 2; i < p.Keys; i++ {
		if err := uberRetry(ctx, func() error { _, err := cl.Put(ctx, uberKey(i), uberValue(i, 800)); return err }); err != nil {
			cl.Close()
			c.Close()
			return nil, cfg, err
		}
	}
	cl.Close()
	if err := kvWaitCaughtUp(ctx, c); err != nil {
		c.Close()
		return nil, cfg, err
	}
	for _, id := range c.NodeIDs() {
		stop := c.StopNode
		if p.Crash {
			stop = c.CrashNode
		}
		if err := stop(id); err != nil {
			return nil, cfg, err
		}
	}
	return fs, cfg, nil
}

// applyFault applies one named fault at a place drawn from rng.
func applyFault(fs vfs.FS, path, fault string, rng *rand.Rand) (string, error) {
	st, err := fs.Stat(path)
	if err != nil {
		return "", err
	}
	size := st.Size()
	block := func() (int64, int64) {
		blocks := (size + 4095) / 4096
		b := rng.Int63n(blocks)
		return b * 4096, min(4096, size-b*4096)
	}
	switch fault {
	case "delete":
		return "deleted", bitrot.Delete(fs, path)
	case "truncate-half":
		return fmt.Sprintf("%d -> %d bytes", size, size/2), bitrot.Truncate(fs, path, size/2)
	}
	if size == 0 {
		return "empty file: nothing to damage", nil
	}
	switch fault {
	case "zero-4k":
		off, n := block()
		return fmt.Sprintf("zeroed [%d,%d)", off, off+n), bitrot.Zero(fs, path, off, n)
	case "junk-4k":
		off, n := block()
		return fmt.Sprintf("junk [%d,%d)", off, off+n), bitrot.Junk(fs, path, off, n, rng)
	case "flip-bit":
		bit := rng.Int63n(size * 8)
		return fmt.Sprintf("bit %d", bit), bitrot.FlipBit(fs, path, bit)
	}
	return "", base.InvalidArgumentf("unknown fault %q", fault)
}

// runKVFaultSweep runs every cell on copies of one base store.
func runKVFaultSweep(ctx context.Context, p kvSweepParams) ([]kvSweepCell, error) {
	baseFS, cfg, err := kvSweepBase(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("kv-fault-sweep base: %w", err)
	}
	victimDir := baseFS.PathJoin(cfg.Dir, "n1")
	files, err := bitrot.Files(baseFS, victimDir)
	if err != nil {
		return nil, err
	}
	if p.OnePerKind {
		// The last file of each kind: the newest generation, sstable or
		// MANIFEST (an older one may be unused).
		last := map[string]string{}
		var kinds []string
		for _, f := range files {
			k := bitrot.Kind(f)
			if _, ok := last[k]; !ok {
				kinds = append(kinds, k)
			}
			last[k] = f
		}
		files = files[:0]
		for _, k := range kinds {
			files = append(files, last[k])
		}
	}
	if p.Only != "" {
		var keep []string
		for _, f := range files {
			if strings.Contains(f, p.Only) {
				keep = append(keep, f)
			}
		}
		files = keep
	}
	faults := p.Faults
	if len(faults) == 0 {
		faults = kvSweepFaults
	}
	rng := rand.New(rand.NewSource(p.Seed))
	var cells []kvSweepCell
	for _, file := range files {
		for _, fault := range faults {
			cell, err := runKVSweepCell(ctx, baseFS, cfg, file, fault, p, rng)
			if err != nil {
				return nil, err
			}
			cells = append(cells, cell)
		}
	}
	return cells, nil
}

func runKVSweepCell(ctx context.Context, baseFS vfs.FS, cfg kvcluster.Config, file, fault string, p kvSweepParams,
	rng *rand.Rand) (kvSweepCell, error) {
	cell := kvSweepCell{Kind: bitrot.Kind(file), File: strings.TrimPrefix(file, cfg.Dir+"/"), Fault: fault, Crash: p.Crash}
	fs := vfs.NewMem()
	if err := bitrot.Copy(baseFS, cfg.Dir, fs, cfg.Dir); err != nil {
		return cell, err
	}
	what, err := applyFault(fs, file, fault, rng)
	if err != nil {
		return cell, fmt.Errorf("%s %s: %w", file, fault, err)
	}
	cell.What = what
	started := time.Now()
	cfg.FS = fs
	c, err := kvcluster.Start(cfg)
	if err != nil {
		cell.StartErr = err.Error()
		return cell, nil
	}
	defer c.Close()
	cl, err := c.NewClient(kvclient.Options{Seed: p.Seed})
	if err != nil {
		return cell, err
	}
	defer cl.Close()
	deadline := started.Add(20 * time.Second)
	for i := 0; i < p.Keys; i++ {
		for {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			v, found, err := cl.Get(rctx, uberKey(i), kvclient.Eventual())
			cancel()
			if err == nil && found && string(v) != string(uberValue(i, 800)) {
				cell.Wrong++
				break
			}
			if err == nil && found {
				break
			}
			if time.Now().After(deadline) {
				if err != nil {
					cell.Errors++
				} else {
					cell.Missing++
				}
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	cell.Converged = uberConverged(ctx, c, 20*time.Second)
	cell.Took = time.Since(started)
	n := c.Node(1)
	r := n.Replica(1)
	st := r.Stats()
	ls := r.RaftLogStats()
	switch {
	case len(n.Failures()) > 0:
		cell.Outcome = "replaced"
	case st.Rebuilds > 0:
		var reasons []string
		for k := range st.RebuildReasons {
			reasons = append(reasons, k)
		}
		sort.Strings(reasons)
		cell.Outcome = "rebuilt: " + strings.Join(reasons, ", ")
	case st.PatchesApplied > 0 || st.LogEntriesFilled > 0:
		cell.Outcome = fmt.Sprintf("repaired (%d patches, %d raft entries from peers)", st.PatchesApplied, st.LogEntriesFilled)
	case ls.FragmentsRepaired > 0 || ls.RecordsLost > 0 || ls.TornTailBytes > 0:
		cell.Outcome = "raft log copy served"
	default:
		gs := n.GuardStats()
		if gs.FramesRepaired+gs.FilesRestored+gs.CopiesRestored+gs.RangeCopyReads+gs.ZeroFilledBytes > 0 {
			cell.Outcome = "protection copy served"
		} else {
			cell.Outcome = "nothing needed"
		}
	}
	return cell, nil
}

func runKVFaultSweepExperiment(ctx context.Context, cfg Config) (*report.Report, error) {
	started := time.Now()
	keys := 1500
	modes := []bool{false, true}
	onePerKind := false
	if cfg.Quick {
		keys, modes, onePerKind = 600, []bool{false}, true
	}
	var cells []kvSweepCell
	for _, crash := range modes {
		got, err := runKVFaultSweep(ctx, kvSweepParams{Keys: keys, Seed: cfg.Seed, Crash: crash, OnePerKind: onePerKind})
		if err != nil {
			return nil, err
		}
		cells = append(cells, got...)
	}
	r, err := report.New("kv-fault-sweep", "KV single-fault sweep over every file of a replica")
	if err != nil {
		return nil, err
	}
	r.Text("Three replicas of one shard (`kvcluster.Cluster` on an in-memory file system, %d keys of 800 B written in "+
		"two phases with a restart between them, so each replica has two sstables, MANIFEST edits and two raft log "+
		"generations), then stopped (*clean*: engines flushed; *crash*: not). For every file replica n1 keeps and every "+
		"fault, one at a time, on a fresh copy of the stopped store: the fault is applied to that file, the cluster "+
		"restarted, every key read back (eventual consistency, the client retrying replicas, 20 s), and the replicas' "+
		"contents compared (20 s). A cell passes if the cluster started, no key was wrong, missing or unreadable, and "+
		"n1 ended with its peers' content. Total wall time %v.", keys, time.Since(started).Round(time.Second))
	t := report.Table{
		Caption: "One fault at a time in every file of replica n1",
		Header:  []string{"stop", "file kind", "file", "fault", "damage", "starts", "wrong", "missing", "errors", "replicas agree", "how n1 came back", "time"},
	}
	pass := 0
	for _, c := range cells {
		stop := "clean"
		if c.Crash {
			stop = "crash"
		}
		starts := "yes"
		if c.StartErr != "" {
			starts = "NO: " + c.StartErr
		}
		if c.Pass() {
			pass++
		}
		t.Rows = append(t.Rows, []string{stop, c.Kind, c.File, c.Fault, c.What, starts, fmt.Sprint(c.Wrong), fmt.Sprint(c.Missing),
			fmt.Sprint(c.Errors), fmt.Sprint(c.Converged), c.Outcome, c.Took.Round(10 * time.Millisecond).String()})
	}
	if err := r.Table(t); err != nil {
		return nil, err
	}
	r.Text("**Measured.** %d of %d cells pass.", pass, len(cells))
	return r, nil
}
