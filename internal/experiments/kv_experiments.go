package experiments

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/report"
)

// The KV experiments of DIRECT (paper 000 sections 4.1 and 5.1, ZippyDB;
// paper 001 section 5, Table 4) on internal/kv: a 3-node loopback cluster in
// one process, Pebble on an in-memory FS wrapped by internal/flipfs. Every number is
// a wall-clock measurement on a shared machine: reports quote medians and
// ratios of runs made side by side in the same invocation.

// kvBaseParams are the full-form cluster and workload parameters.
func kvBaseParams(cfg Config) kvRunParams {
	p := kvRunParams{
		Mode: kv.RepairDirect, Mix: ycsbA,
		Records: 10000, ValueBytes: 1024, Shards: 2, Clients: 8,
		Duration: 15 * time.Second, UBER: 1e-7, AtRest: true,
		CacheBytes: 1 << 20, MemTableBytes: 1 << 20, OpTimeout: 3 * time.Second,
		Seed: cfg.Seed,
	}
	if cfg.Quick {
		p.Records, p.Clients, p.Duration, p.UBER = 1000, 4, time.Second, 1e-6
	}
	return p
}

func flipKind(persistent bool) string {
	if persistent {
		return "persistent"
	}
	return "transient"
}

// checkRun turns a run's safety violations into an error: the store must
// never return another record's data.
func checkRun(r kvRunResult) error {
	if r.WrongReads > 0 {
		return base.AssertionFailedf("kv experiment: %d reads returned wrong data, %d of them a record as missing (%s)",
			r.WrongReads, r.MissingReads, r.Params)
	}
	return nil
}

func runChecked(ctx context.Context, p kvRunParams) (kvRunResult, error) {
	r, err := runKV(ctx, p)
	if err != nil {
		return r, fmt.Errorf("%s: %w", p, err)
	}
	return r, checkRun(r)
}

func pct(num, den int64) string {
	if den == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f%%", 100*float64(num)/float64(den))
}

func kvParamsText(p kvRunParams) string {
	return fmt.Sprintf("3 nodes in one process on loopback gRPC, %d shards (every shard a raft group of 3 replicas, "+
		"one per node), %d records of %d B values (about %.1f MiB per shard replica), Pebble memtable %d KiB and "+
		"block cache %d KiB per replica (small, so reads reach the device), %d closed-loop clients, eventual "+
		"reads (any replica; the client retries another replica on an error), scrambled zipfian keys "+
		"(theta %.2f), %v measured per run after loading. Faults land in every file: before each measured run "+
		"with flips, every bit of every stored file (raft logs, Pebble MANIFEST, OPTIONS, markers, sstables and the "+
		"protection layer's copies and sidecars) flips at rest with probability UBER and the cluster restarts on "+
		"those files (internal/bitrot); during the run every bit Pebble reads from an sstable or a sidecar flips "+
		"with probability UBER (the column 'flips applied'). Sstable metadata is really duplicated "+
		"(internal/guardfs sidecars), not modelled. Values are a shifted letter pattern that Snappy compresses "+
		"several-fold, so sstables are smaller than the logical data and a read moves fewer bits than the value "+
		"size suggests.",
		p.Shards, p.Records, p.ValueBytes, float64(p.Records)*float64(p.ValueBytes+len(ycsbKey(0)))/float64(p.Shards)/(1<<20),
		p.MemTableBytes>>10, p.CacheBytes>>10, p.Clients, ycsbZipfTheta, p.Duration)
}

// ---- kv-ycsb-corruption -------------------------------------------------------

// ---- kv-recovery-latency ------------------------------------------------------

// kvSeriesRun is one labelled run of a CDF experiment.
type kvSeriesRun struct {
	label string
	res   kvRunResult
}

func kvCDFRuns(ctx context.Context, cfg Config, specs []kvRunParams, labels []string) ([]kvSeriesRun, error) {
	var out []kvSeriesRun
	for i, p := range specs {
		r, err := runChecked(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, kvSeriesRun{label: labels[i], res: r})
	}
	return out, nil
}

// kvRunsTable lists what each run of a CDF experiment did, so that a
// distribution with few samples can be read against its run.
func kvRunsTable(r *report.Report, runs []kvSeriesRun) error {
	t := report.Table{
		Caption: "The runs behind the distributions",
		Header: []string{"series", "ops/s (median)", "reads", "read retries", "read errors seen by the app",
			"flips at rest / applied in reads", "detected", "patches", "own rows carried (MiB) / pieces failed on them", "patch waits that timed out", "rebuilds", "patch requests pending at end", "replicas down at end"},
	}
	for _, run := range runs {
		res := run.res
		t.Rows = append(t.Rows, []string{
			run.label, fmt.Sprintf("%.0f", res.MedianOpsPerSecond()), fmt.Sprint(res.Reads),
			pct(res.ReadRetries, res.Reads), pct(res.ReadErrors, res.Reads),
			fmt.Sprintf("%d / %d", res.AtRest.Flips, res.Flips.Flips), fmt.Sprint(res.Detected),
			fmt.Sprint(res.Patches), fmt.Sprintf("%.1f / %d", float64(res.OwnBytes)/(1<<20), res.OwnFailures),
			fmt.Sprint(res.WaitTimeouts), fmt.Sprint(res.Rebuilds), fmt.Sprint(res.PendingAtEnd),
			fmt.Sprint(res.DownAtEnd),
		})
	}
	return r.Table(t)
}

func kvRank(n int, q float64) int {
	rank := int(math.Ceil(q*float64(n))) - 1
	return min(max(rank, 0), n-1)
}

func kvMS(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// ---- kv-patch-size --------------------------------------------------------------

func kvKiB(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }
