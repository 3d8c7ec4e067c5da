package experiments

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/report"
)

// uberRestartKV is the KV store's answer to bit rot at rest in every file
// (issue "the KV store survives every fault in every file of a replica"):
// write a shard on three replicas on real files, stop them, flip bits in
// every file every replica stores (raft logs, Pebble MANIFEST, OPTIONS,
// markers, sstables, protection copies) at an UBER, restart, and read
// every key back.
func uberRestartKV() Experiment {
	return Experiment{
		Name:        "uber-restart-kv",
		Description: "KV restart after bit flips in every file of every replica (UBER 1e-8..1e-6): starts, missing, wrong, errors, repairs",
		Run:         runUberRestartKV,
	}
}

// uberRestartParams is one cell of the experiment.
type uberRestartParams struct {
	Keys, ValueBytes int
	UBER             float64
	Seed             int64
	// Crash stops the replicas as a crash would (engines lose what only
	// their memtables held; the raft logs must bring it back); otherwise
	// they stop cleanly (flushed).
	Crash bool
	// ServeTimeout bounds the wait for every key to read back.
	ServeTimeout time.Duration
}

// uberRestartResult is what one cell measured.
type uberRestartResult struct {
	Params uberRestartParams
	Flips  bitrot.Report
	// Started is false if the cluster did not start at all.
	Started  bool
	StartErr string
	// Failures are replicas that could not open from their files.
	Failures []string
	// Missing, Wrong and Errors count keys after the read-back (a key is
	// counted once, by its worst outcome, after retries until
	// ServeTimeout).
	Missing, Wrong, Errors int
	// AllServed is how long after the restart every key had read back
	// correctly (0 if never).
	AllServed time.Duration
	// Converged is set if every replica ended with the same content.
	Converged bool
	// Repairs, summed over replicas.
	Patches, Transient, Skipped, LogFilled uint64
	// Merged counts data blocks damaged on every replica and put back
	// together from their copies (block merge).
	Merged   uint64
	Rebuilds map[string]uint64
	RaftLog  []string
	// PatchLatency is detection to patch applied, for every patch, sorted.
	PatchLatency []time.Duration
	// States are the replicas' states at the end; StatesAtDeadline when
	// the read-back stopped; FirstError is the error of one key that did
	// not read back.
	States, StatesAtDeadline []string
	FirstError               string
}

func (r uberRestartResult) rebuildText() string {
	if len(r.Rebuilds) == 0 {
		return "0"
	}
	var parts []string
	var total uint64
	for k, v := range r.Rebuilds {
		parts = append(parts, fmt.Sprintf("%d %s", v, k))
		total += v
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, "; "))
}

// latencyText is the median and maximum of sorted latencies.
func latencyText(l []time.Duration) string {
	if len(l) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s, %s", kvMS(l[len(l)/2]), kvMS(l[len(l)-1]))
}

func uberKey(i int) []byte { return []byte(fmt.Sprintf("user%08d", i)) }

// uberValue is a deterministic value of n bytes for key i (so a read can be
// checked without keeping the values).
func uberValue(i, n int) []byte {
	v := make([]byte, n)
	rng := rand.New(rand.NewSource(int64(i)*7919 + 1))
	for k := range v {
		v[k] = byte('a' + rng.Intn(26))
	}
	return v
}

// runUberRestartCell runs one cell in a fresh directory under tmp.
func runUberRestartCell(ctx context.Context, tmp string, p uberRestartParams) (uberRestartResult, error) {
	res := uberRestartResult{Params: p, Rebuilds: map[string]uint64{}}
	dir, err := os.MkdirTemp(tmp, "uber-restart-kv-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	repairs := &repairLog{}
	repairs.measured.Store(true)
	cfg := kvcluster.Config{FS: vfs.Default, Dir: dir, Options: kv.Options{ScrubInterval: -1, OnRepair: repairs.record}}
	c, err := kvcluster.Start(cfg)
	if err != nil {
		return res, fmt.Errorf("start: %w", err)
	}
	if err := uberLoad(ctx, c, p); err != nil {
		c.Close()
		return res, fmt.Errorf("load: %w", err)
	}
	if err := kvWaitCaughtUp(ctx, c); err != nil {
		c.Close()
		return res, err
	}
	for _, id := range c.NodeIDs() {
		stop := c.StopNode
		if p.Crash {
			stop = c.CrashNode
		}
		if err := stop(id); err != nil {
			return res, fmt.Errorf("stop %s: %w", id, err)
		}
	}
	res.Flips, err = bitrot.Flip(vfs.Default, dir, p.UBER, rand.New(rand.NewSource(p.Seed)))
	if err != nil {
		return res, err
	}
	started := time.Now()
	c2, err := kvcluster.Start(cfg)
	if err != nil {
		res.StartErr = err.Error()
		return res, nil
	}
	defer c2.Close()
	res.Started = true
	for _, id := range c2.NodeIDs() {
		for _, f := range c2.Node(id).Failures() {
			res.Failures = append(res.Failures, fmt.Sprintf("%s: %v", id, f))
		}
	}
	cl, err := c2.NewClient(kvclient.Options{Seed: p.Seed})
	if err != nil {
		return res, err
	}
	defer cl.Close()
	// Read every key until it reads back right or the deadline passes; a
	// wrong value is final (counted, never retried away).
	deadline := started.Add(p.ServeTimeout)
	pending := make([]int, p.Keys)
	for i := range pending {
		pending[i] = i
	}
	outcome := make([]string, p.Keys)
	for len(pending) > 0 {
		var still []int
		for k, i := range pending {
			if time.Now().After(deadline) || ctx.Err() != nil {
				still = append(still, pending[k:]...)
				break
			}
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			v, found, err := cl.Get(rctx, uberKey(i), kvclient.Eventual())
			cancel()
			switch {
			case err != nil:
				outcome[i] = "error"
				still = append(still, i)
			case !found:
				outcome[i] = "missing"
				still = append(still, i)
			case string(v) != string(uberValue(i, p.ValueBytes)):
				outcome[i] = "wrong"
			default:
				outcome[i] = "ok"
			}
		}
		pending = still
		if len(pending) == 0 {
			res.AllServed = time.Since(started)
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, id := range c2.NodeIDs() {
		if r := c2.Node(id).Replica(1); r != nil {
			if st, err := r.Status(); err == nil {
				res.StatesAtDeadline = append(res.StatesAtDeadline, fmt.Sprintf("%s: %s", id, st.State))
			}
		}
	}
	for i, o := range outcome {
		if o == "error" && res.FirstError == "" {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			_, _, err := cl.Get(rctx, uberKey(i), kvclient.Eventual())
			cancel()
			res.FirstError = fmt.Sprintf("%s: %v", uberKey(i), err)
		}
	}
	for _, o := range outcome {
		switch o {
		case "missing":
			res.Missing++
		case "wrong":
			res.Wrong++
		case "error":
			res.Errors++
		}
	}
	// Let repairs settle, then compare the replicas.
	res.Converged = uberConverged(ctx, c2, 30*time.Second)
	for _, e := range repairs.take() {
		if !e.Rebuild && !e.Detected.IsZero() {
			res.PatchLatency = append(res.PatchLatency, e.Latency())
		}
	}
	sort.Slice(res.PatchLatency, func(i, j int) bool { return res.PatchLatency[i] < res.PatchLatency[j] })
	for _, id := range c2.NodeIDs() {
		if r := c2.Node(id).Replica(1); r != nil {
			if st, err := r.Status(); err == nil {
				res.States = append(res.States, fmt.Sprintf("%s: %s", id, st.State))
			}
		}
	}
	for _, id := range c2.NodeIDs() {
		r := c2.Node(id).Replica(1)
		if r == nil {
			continue
		}
		st := r.Stats()
		res.Patches += st.PatchesApplied
		res.Transient += st.TransientErrors
		res.Skipped += st.PatchesSkipped
		res.LogFilled += st.LogEntriesFilled
		res.Merged += st.BlocksMerged
		for k, v := range st.RebuildReasons {
			res.Rebuilds[k] += v
		}
		res.RaftLog = append(res.RaftLog, fmt.Sprintf("%s: %s", id, r.RaftLogStats()))
	}
	return res, nil
}

// uberLoad writes the keys: most in batches of 20 (one raft entry each),
// the last tenth one by one.
func uberLoad(ctx context.Context, c *kvcluster.Cluster, p uberRestartParams) error {
	cl, err := c.NewClient(kvclient.Options{Seed: p.Seed})
	if err != nil {
		return err
	}
	defer cl.Close()
	batched := p.Keys - p.Keys/10
	for i := 0; i < batched; i += 20 {
		var ops []kvclient.Op
		for j := i; j < i+20 && j < batched; j++ {
			ops = append(ops, kvclient.Op{Key: uberKey(j), Value: uberValue(j, p.ValueBytes)})
		}
		if err := uberRetry(ctx, func() error { _, err := cl.Batch(ctx, ops, nil); return err }); err != nil {
			return err
		}
	}
	for i := batched; i < p.Keys; i++ {
		if err := uberRetry(ctx, func() error { _, err := cl.Put(ctx, uberKey(i), uberValue(i, p.ValueBytes)); return err }); err != nil {
			return err
		}
	}
	return nil
}

// uberRetry retries an idempotent write whose outcome is unknown (a leader
// change dropped the proposal) a few times.
func uberRetry(ctx context.Context, write func() error) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = write(); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// uberConverged waits until every running replica reports the same content
// checksum at the same applied index.
func uberConverged(ctx context.Context, c *kvcluster.Cluster, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		sums := map[string]bool{}
		ok := true
		for _, id := range c.NodeIDs() {
			n := c.Node(id)
			if n == nil || n.Replica(1) == nil {
				ok = false
				break
			}
			crc, rows, applied, err := n.Replica(1).ContentChecksum()
			if err != nil {
				ok = false
				break
			}
			sums[fmt.Sprintf("%08x/%d/%d", crc, rows, applied)] = true
		}
		if ok && len(sums) == 1 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func runUberRestartKV(ctx context.Context, cfg Config) (*report.Report, error) {
	started := time.Now()
	keys, seeds := 20000, 3
	ubers := []float64{1e-8, 3e-8, 1e-7, 1e-6}
	modes := []bool{false, true}
	serve := 2 * time.Minute
	if cfg.Quick {
		keys, seeds = 1000, 1
		ubers = []float64{1e-6}
		modes = []bool{true}
		serve = 30 * time.Second
	}
	tmp, err := os.MkdirTemp("", "flashmend-uber-restart-kv-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var results []uberRestartResult
	for _, crash := range modes {
		for _, u := range ubers {
			for s := 0; s < seeds; s++ {
				p := uberRestartParams{Keys: keys, ValueBytes: 800, UBER: u, Seed: cfg.Seed + int64(s), Crash: crash,
					ServeTimeout: serve}
				res, err := runUberRestartCell(ctx, tmp, p)
				if err != nil {
					return nil, fmt.Errorf("uber-restart-kv %v: %w", p, err)
				}
				results = append(results, res)
			}
		}
	}
	r, err := report.New("uber-restart-kv", "KV store restart after bit flips in every file of every replica")
	if err != nil {
		return nil, err
	}
	r.Text("Three replicas of one shard on real files (`vfs.Default`, as `flashmend kv serve --dir` runs), %d keys "+
		"of 800 B written (nine tenths in batches of 20 keys per raft entry, the rest one per entry), then every replica "+
		"stopped, every bit of every file under the data directory flipped independently with probability UBER "+
		"(`internal/bitrot`: raft logs, Pebble MANIFEST, OPTIONS and markers, sstables, the protection layer's copies "+
		"and sidecars), and the cluster restarted on the same files. Every key is then read (eventual consistency, the "+
		"client retrying replicas) until it reads back or %v pass; a wrong value is final. *Clean stop*: each engine "+
		"flushed at stop. *Crash stop*: engines closed without a flush (Pebble runs without its WAL, so what only the "+
		"memtable held must come back from the raft logs). Seeds %d..%d per cell. Total wall time %v.",
		keys, serve, cfg.Seed, cfg.Seed+int64(seeds)-1, time.Since(started).Round(time.Second))
	t := report.Table{
		Caption: "Restart after bit flips in every file (one row per seed)",
		Header: []string{"stop", "UBER", "seed", "flips (raft log/sstable/other)", "starts", "replicas replaced", "keys missing", "wrong", "errors",
			"every key served after", "replicas agree", "patches", "detection to patch applied (median, max)", "blocks merged", "raft log entries from peers", "rebuilds (reason)"},
	}
	for _, res := range results {
		stop := "clean"
		if res.Params.Crash {
			stop = "crash"
		}
		var rl, sst, other int64
		for k, v := range res.Flips.ByKind {
			switch {
			case strings.HasSuffix(k, "raft log"):
				rl += v
			case strings.HasSuffix(k, "sstable"):
				sst += v
			default:
				other += v
			}
		}
		starts := "yes"
		if !res.Started {
			starts = "NO: " + res.StartErr
		}
		served := "never"
		if res.AllServed > 0 {
			served = res.AllServed.Round(10 * time.Millisecond).String()
		}
		t.Rows = append(t.Rows, []string{stop, fmt.Sprintf("%g", res.Params.UBER), fmt.Sprint(res.Params.Seed),
			fmt.Sprintf("%d (%d/%d/%d)", res.Flips.Flips, rl, sst, other), starts, fmt.Sprint(len(res.Failures)),
			fmt.Sprint(res.Missing), fmt.Sprint(res.Wrong), fmt.Sprint(res.Errors), served, fmt.Sprint(res.Converged),
			fmt.Sprint(res.Patches), latencyText(res.PatchLatency), fmt.Sprint(res.Merged), fmt.Sprint(res.LogFilled), res.rebuildText()})
	}
	if err := r.Table(t); err != nil {
		return nil, err
	}
	var notes []string
	for _, res := range results {
		for _, f := range res.Failures {
			notes = append(notes, fmt.Sprintf("UBER %g seed %d: %s", res.Params.UBER, res.Params.Seed, f))
		}
	}
	if len(notes) > 0 {
		r.Text("**Replicas that could not open from their files** (each was replaced by a fresh replica that took its "+
			"peers' state; the node and the other replicas kept serving): %s.", strings.Join(notes, "; "))
	}
	wrong := 0
	for _, res := range results {
		wrong += res.Wrong
	}
	r.Text("**Measured.** %d wrong answers in %d cells. The raft log column counts entries a replica's log lost in both "+
		"copies and fetched from a peer at open (`internal/raftlog`: small protection units, peers' entries accepted "+
		"only where raft's log matching or commit rules prove them equal); patches are DIRECT key-range repairs of "+
		"damaged sstable blocks; a rebuild (a peer's whole state) is listed with its reason.", wrong, len(results))
	var bad []string
	for _, res := range results {
		if res.Missing+res.Errors == 0 && res.Converged {
			continue
		}
		stop := "clean"
		if res.Params.Crash {
			stop = "crash"
		}
		line := fmt.Sprintf("- %s stop, UBER %g, seed %d: %d missing, %d errors, replicas agree %t",
			stop, res.Params.UBER, res.Params.Seed, res.Missing, res.Errors, res.Converged)
		if res.FirstError != "" {
			line += fmt.Sprintf("; one failing read: `%s`", res.FirstError)
		}
		if len(res.StatesAtDeadline) > 0 {
			line += fmt.Sprintf("; replicas when the read-back stopped: `%s`", strings.Join(res.StatesAtDeadline, "; "))
		}
		if len(res.States) > 0 {
			line += fmt.Sprintf("; at the end: `%s`", strings.Join(res.States, "; "))
		}
		bad = append(bad, line)
	}
	if len(bad) > 0 {
		// A model predicts how often every copy of some key is damaged;
		// the cells above are the measurement.
		blocks := float64(keys*800) / 4096
		var model []string
		for _, u := range ubers {
			p := 1 - math.Pow(1-u, 8*4096)
			model = append(model, fmt.Sprintf("%g: %.2g", u, blocks*p*p*p))
		}
		r.Text("**Cells where a key was not served or the replicas did not converge.** A key none of the three "+
			"replicas can read is lost: its reads fail with an explicit error (never a wrong value) and the replicas "+
			"holding the damaged ranges stay under repair, waiting for a copy no one has.\n\n%s\n\n"+
			"Independent flips damage a 4 KiB block with probability p = 1-(1-UBER)^32768, so with about %.0f data "+
			"blocks per replica the expected number of blocks damaged on all three replicas at once (whose keys no "+
			"patch can bring back) is blocks x p^3, per UBER: %s per cell. Such a block is put back together from "+
			"the three damaged copies (block merge, `blocks merged`) when the replicas' tables are byte-identical "+
			"(they usually are: the same log, flushed and compacted at the same points) and the flips hit different "+
			"bytes; a key is lost only where that fails (tables that differ, or the same byte damaged in every copy). "+
			"Raft log entries still held past the engines' last flush are the only other copy, and the engine does "+
			"not yet replay them into a range every replica lost.",
			strings.Join(bad, "\n"), blocks, strings.Join(model, ", "))
	}
	return r, nil
}
