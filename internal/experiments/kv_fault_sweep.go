package experiments

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/torture/faultfs"
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

// KVCordsFaults are the faults of the torture harness's CORDS table
// (internal/torture): damage at rest (a 4 KiB block zeroed or junk, one
// bit flipped), faults the device returns while the cluster runs (every
// read of one 4 KiB block fails with EIO; every write, sync and create of
// the file's kind on the replica fails with EIO), and a lost write (one 4
// KiB block keeps the content it had before the second load: older bytes,
// or zeros past the old end of the file).
var KVCordsFaults = []string{"zero-4k", "junk-4k", "flip-bit", "eio-read-4k", "write-error", "lost-write-4k"}

// isIOFault reports whether fault is injected at run time (faultfs) rather
// than applied to the stopped store.
func isIOFault(fault string) bool { return fault == "eio-read-4k" || fault == "write-error" }

// kvSweepCell is one (file, fault) of the sweep.
type kvSweepCell struct {
	Kind, File, Fault, What string
	Crash                   bool
	StartErr                string
	Missing, Wrong, Errors  int
	Converged               bool
	// DuringErrors counts reads and writes that failed while an I/O fault
	// was in place (before it was cleared and the replica restarted);
	// Missing, Wrong and Errors are counted after.
	DuringErrors int
	// Injected counts the operations the I/O fault failed (0: the fault
	// never fired, the file was not read or written).
	Injected int64
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
// kvSweepConfig is the sweep's cluster on fs.
func kvSweepConfig(fs vfs.FS) kvcluster.Config {
	return kvcluster.Config{FS: fs, Dir: "kv", Options: kv.Options{ScrubInterval: -1, CacheBytes: -1}}
}

// The second return is a copy of the store between the two loads (the
// "old content" of a lost write).
func kvSweepBase(ctx context.Context, p kvSweepParams) (vfs.FS, vfs.FS, kvcluster.Config, error) {
	fs := vfs.NewMem()
	cfg := kvSweepConfig(fs)
	c, err := kvcluster.Start(cfg)
	if err != nil {
		return nil, nil, cfg, err
	}
	half := uberRestartParams{Keys: p.Keys / 2, ValueBytes: 800, Seed: p.Seed}
	if err := uberLoad(ctx, c, half); err != nil {
		c.Close()
		return nil, nil, cfg, err
	}
	if err := kvWaitCaughtUp(ctx, c); err != nil {
		c.Close()
		return nil, nil, cfg, err
	}
	c.Close()
	old := vfs.NewMem()
	if err := bitrot.Copy(fs, cfg.Dir, old, cfg.Dir); err != nil {
		return nil, nil, cfg, err
	}
	c, err = kvcluster.Start(cfg)
	if err != nil {
		return nil, nil, cfg, err
	}
	cl, err := c.NewClient(kvclient.Options{Seed: p.Seed})
	if err != nil {
		c.Close()
		return nil, nil, cfg, err
	}
	for i := p.Keys / 2; i < p.Keys; i++ {
		if err := uberRetry(ctx, func() error { _, err := cl.Put(ctx, uberKey(i), uberValue(i, 800)); return err }); err != nil {
			cl.Close()
			c.Close()
			return nil, nil, cfg, err
		}
	}
	cl.Close()
	if err := kvWaitCaughtUp(ctx, c); err != nil {
		c.Close()
		return nil, nil, cfg, err
	}
	for _, id := range c.NodeIDs() {
		stop := c.StopNode
		if p.Crash {
			stop = c.CrashNode
		}
		if err := stop(id); err != nil {
			return nil, nil, cfg, err
		}
	}
	return fs, old, cfg, nil
}

// applyLostWrite makes one 4 KiB block of path keep the content it had in
// old (zeros past old's end, or where old lacks the file): a write the
// device acknowledged and dropped. It picks a block whose content
// differs, if any.
func applyLostWrite(fs, old vfs.FS, path string, rng *rand.Rand) (string, error) {
	cur, err := readWhole(fs, path)
	if err != nil {
		return "", err
	}
	prev, err := readWhole(old, path)
	if err != nil && !oserror.IsNotExist(err) {
		return "", err
	}
	blocks := (len(cur) + 4095) / 4096
	if blocks == 0 {
		return "empty file: nothing to lose", nil
	}
	var differ []int
	for b := 0; b < blocks; b++ {
		lo, hi := b*4096, min((b+1)*4096, len(cur))
		was := make([]byte, hi-lo)
		if lo < len(prev) {
			copy(was, prev[lo:min(hi, len(prev))])
		}
		if string(was) != string(cur[lo:hi]) {
			differ = append(differ, b)
		}
	}
	if len(differ) == 0 {
		return "no block changed since the first load: nothing to lose", nil
	}
	b := differ[rng.Intn(len(differ))]
	lo, hi := b*4096, min((b+1)*4096, len(cur))
	was := make([]byte, hi-lo)
	if lo < len(prev) {
		copy(was, prev[lo:min(hi, len(prev))])
	}
	copy(cur[lo:hi], was)
	if err := writeWhole(fs, path, cur); err != nil {
		return "", err
	}
	return fmt.Sprintf("block [%d,%d) kept its old content (%d of %d blocks had changed)", lo, hi, len(differ), blocks), nil
}

func readWhole(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func writeWhole(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
	baseFS, oldFS, cfg, err := kvSweepBase(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("kv-fault-sweep base: %w", err)
	}
	files, err := kvSweepFiles(baseFS, oldFS, cfg, p)
	if err != nil {
		return nil, err
	}
	faults := p.Faults
	if len(faults) == 0 {
		faults = kvSweepFaults
	}
	rng := rand.New(rand.NewSource(p.Seed))
	var cells []kvSweepCell
	for _, file := range files {
		for _, fault := range faults {
			cell, err := runKVSweepCell(ctx, baseFS, oldFS, cfg, file, fault, p, rng)
			if err != nil {
				return nil, err
			}
			cells = append(cells, cell)
		}
	}
	return cells, nil
}

// fileChanged reports whether the file at path differs between base and
// old (or is not in old).
func fileChanged(base, old vfs.FS, path string) bool {
	a, err := readFS(base, path)
	if err != nil {
		return false
	}
	b, err := readFS(old, path)
	return err != nil || !bytes.Equal(a, b)
}

func readFS(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// kvSweepFiles lists the files of replica n1 the sweep damages.
func kvSweepFiles(baseFS, oldFS vfs.FS, cfg kvcluster.Config, p kvSweepParams) ([]string, error) {
	victimDir := baseFS.PathJoin(cfg.Dir, "n1")
	files, err := bitrot.Files(baseFS, victimDir)
	if err != nil {
		return nil, err
	}
	if p.OnePerKind {
		// The last file of each kind: the newest generation, sstable or
		// MANIFEST (an older one may be unused); of a kind whose names
		// do not sort by age (guardfs copies), the last that changed
		// since the first load, so that a lost write has a block to
		// lose.
		last := map[string]string{}
		changed := map[string]bool{}
		var kinds []string
		for _, f := range files {
			k := bitrot.Kind(f)
			changed[f] = fileChanged(baseFS, oldFS, f)
			if cur, ok := last[k]; !ok {
				kinds = append(kinds, k)
			} else if changed[cur] && !changed[f] {
				continue
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
	return files, nil
}

func runKVSweepCell(ctx context.Context, baseFS, oldFS vfs.FS, cfg kvcluster.Config, file, fault string, p kvSweepParams,
	rng *rand.Rand) (kvSweepCell, error) {
	cell := kvSweepCell{Kind: bitrot.Kind(file), File: strings.TrimPrefix(file, cfg.Dir+"/"), Fault: fault, Crash: p.Crash}
	if cell.Kind == "lock" {
		// Pebble's LOCK file is created empty and only locked
		// (vfs.FS.Lock): no byte to damage or lose, no read or write to
		// fail.
		cell.What = "not applicable: LOCK holds no byte and Pebble only takes a lock on it (vfs.FS.Lock), never reading or writing it"
		cell.Converged = true
		return cell, nil
	}
	fs := vfs.NewMem()
	if err := bitrot.Copy(baseFS, cfg.Dir, fs, cfg.Dir); err != nil {
		return cell, err
	}
	ffs := faultfs.New(fs)
	victimDir := fs.PathJoin(cfg.Dir, "n1") + "/"
	var what string
	var err error
	switch fault {
	case "eio-read-4k":
		var st vfs.FileInfo
		if st, err = fs.Stat(file); err == nil {
			off := rng.Int63n(max(1, (st.Size()+4095)/4096)) * 4096
			ffs.Set(&faultfs.Rule{Kind: faultfs.ReadError, Match: func(p string) bool { return p == file }, Off: off, Len: 4096})
			what = fmt.Sprintf("EIO on every read of [%d,%d)", off, off+4096)
		}
	case "write-error":
		kind := cell.Kind
		ffs.Set(&faultfs.Rule{Kind: faultfs.WriteError, Match: func(p string) bool {
			return strings.HasPrefix(p, victimDir) && bitrot.Kind(p) == kind
		}})
		what = "EIO on every write, sync and create of n1's " + kind + " files"
	case "lost-write-4k":
		what, err = applyLostWrite(fs, oldFS, file, rng)
	default:
		what, err = applyFault(fs, file, fault, rng)
	}
	if err != nil {
		return cell, fmt.Errorf("%s %s: %w", file, fault, err)
	}
	cell.What = what
	cfg.FS = ffs
	var under *kvIOFault
	if isIOFault(fault) {
		under = &kvIOFault{Injected: ffs.Injected, Clear: func() { ffs.Set(nil) }}
	}
	return runKVCellWorkload(ctx, cfg, cell, p, under)
}

// kvIOFault is a run-time fault in place while a cell's workload runs.
type kvIOFault struct {
	// Injected counts the operations the fault failed so far.
	Injected func() int64
	// Clear heals the device.
	Clear func()
	// Reader, if set, reads what the fault lies under once the cluster
	// is up, before the workload, with the fault in place: for
	// structures no workload reads (an SDF P2L page is read only when a die's data is
	// identified). It returns what it found and whether that was wrong.
	Reader func() (string, bool)
}

// runKVCellWorkload runs a cell once its fault is in place: the cluster
// started from cfg, under an I/O fault (io != nil) the workload continued
// and the fault cleared and n1 restarted, then every key read back and the
// replicas compared; cell.Outcome says how n1 came back.
func runKVCellWorkload(ctx context.Context, cfg kvcluster.Config, cell kvSweepCell, p kvSweepParams, io *kvIOFault) (kvSweepCell, error) {
	var replaced []string // n1's replica failures under an I/O fault
	started := time.Now()
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
	if io != nil && io.Reader != nil {
		note, wrong := io.Reader()
		cell.What += "; " + note
		if wrong {
			cell.Wrong++
		}
	}
	if io != nil {
		// The workload continues under the fault: new keys are written
		// and every key is read; what fails is unavailability, as long as
		// it ends once the fault is cleared and the replica restarted.
		extra := max(20, p.Keys/20)
		for i := p.Keys; i < p.Keys+extra; i++ {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := cl.Put(wctx, uberKey(i), uberValue(i, 800)); err != nil {
				cell.DuringErrors++
			}
			cancel()
		}
		// A flush and compaction on n1 writes every kind of file the
		// engine writes after open (sstables, MANIFEST, markers), so a
		// write fault of those kinds lands. Its error is the fault's
		// (the device's); what counts is what clients see and whether n1
		// comes back.
		if r := c.Node(1).Replica(1); r != nil {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_ = r.Compact(cctx)
			cancel()
		}
		for i := 0; i < p.Keys+extra; i++ {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			v, found, err := cl.Get(rctx, uberKey(i), kvclient.Eventual())
			cancel()
			if err != nil || !found {
				cell.DuringErrors++
			} else if string(v) != string(uberValue(i, 800)) {
				cell.Wrong++
			}
		}
		cell.Injected = io.Injected()
		// A replica that failed under the fault (its engine fail-stopped,
		// or it could not open) was replaced by this run of n1: say so,
		// the restart below starts a node that does not know.
		if n := c.Node(1); n != nil {
			for _, f := range n.Failures() {
				line := strings.Join(strings.Fields(f.String()), " ")
				if len(line) > 300 {
					line = line[:300] + "..."
				}
				replaced = append(replaced, line)
			}
		}
		io.Clear()
		// The device is healed (or replaced by one that works): restart
		// the replica on it.
		_ = c.StopNode(1)
		if err := c.RestartNode(1); err != nil {
			cell.StartErr = "restart after the fault: " + err.Error()
			return cell, nil
		}
		p.Keys += extra
	}
	deadline := time.Now().Add(20 * time.Second)
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
	if r == nil {
		cell.StartErr = fmt.Sprintf("n1 holds no replica of the shard at the end: %v", n.Failures())
		return cell, nil
	}
	st := r.Stats()
	ls := r.RaftLogStats()
	switch {
	case len(replaced) > 0:
		cell.Outcome = "replaced under the fault (" + strings.Join(replaced, "; ") + ")"
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
