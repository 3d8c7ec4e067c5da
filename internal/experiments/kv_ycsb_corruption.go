package experiments

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/report"
)

func kvYCSBCorruption() Experiment {
	return Experiment{
		Name:        "kv-ycsb-corruption",
		Description: "DIRECT 001 Table 4: YCSB A/B on the 3-node KV store with bit flips at rest in every file and on sstable reads, DIRECT against the crash baseline",
		Run:         runKVYCSBCorruption,
	}
}

type kvCell struct {
	label string
	res   kvRunResult
	ref   *kvRunResult // the error-free run of the same mix
}

func runKVYCSBCorruption(ctx context.Context, cfg Config) (*report.Report, error) {
	params := kvBaseParams(cfg)
	params.Duration = 12 * time.Second
	// Workload A at two UBERs (the lower one lets the crash baseline's
	// whole-shard transfer finish without a flip), B at the higher one.
	plan := []struct {
		mix   ycsbMix
		ubers []float64
		kinds []bool
	}{
		{mix: ycsbA, ubers: []float64{1e-8, params.UBER}, kinds: []bool{false, true}},
		{mix: ycsbB, ubers: []float64{params.UBER}, kinds: []bool{false, true}},
	}
	if cfg.Quick {
		params = kvBaseParams(cfg)
		plan = plan[:1]
		plan[0].ubers, plan[0].kinds = []float64{params.UBER}, []bool{false}
	}
	started := time.Now()
	var cells []kvCell
	for _, step := range plan {
		p := params
		p.Mix, p.UBER = step.mix, 0
		ref, err := runChecked(ctx, p)
		if err != nil {
			return nil, err
		}
		refCopy := ref
		cells = append(cells, kvCell{label: "error-free", res: ref, ref: &refCopy})
		turn := 0
		for _, uber := range step.ubers {
			for _, persistent := range step.kinds {
				modes := []kv.RepairMode{kv.RepairDirect, kv.RepairCrash}
				if turn%2 == 1 { // alternate the order so drift on the machine hits both
					modes[0], modes[1] = modes[1], modes[0]
				}
				turn++
				var pair []kvCell
				for _, mode := range modes {
					p := params
					p.Mix, p.Mode, p.Persistent, p.UBER = step.mix, mode, persistent, uber
					r, err := runChecked(ctx, p)
					if err != nil {
						return nil, err
					}
					pair = append(pair, kvCell{label: flipKind(persistent), res: r, ref: &refCopy})
				}
				sort.Slice(pair, func(a, b int) bool { return pair[a].res.Params.Mode < pair[b].res.Params.Mode })
				cells = append(cells, pair...)
			}
		}
	}
	return kvYCSBReport(cfg, params, cells, time.Since(started))
}

func kvYCSBReport(cfg Config, params kvRunParams, cells []kvCell, elapsed time.Duration) (*report.Report, error) {
	r, err := report.New("kv-ycsb-corruption", "KV store under bit flips: DIRECT against the crash baseline (YCSB A/B)")
	if err != nil {
		return nil, err
	}
	r.Text("DIRECT 000 section 5.1 and 001 section 5 (Table 4) measure ZippyDB with and without DIRECT while a "+
		"custom RocksDB environment flips bits as they are read. Here the same method runs against flashmend's KV "+
		"store (`internal/kv`): YCSB-style clients load a 3-node cluster while "+
		"`internal/flipfs` flips each bit read from an sstable with probability UBER "+
		"(the table's UBER column, scaled up from the paper's 1e-10..1e-13 so that errors occur in a %v run). *Transient* flips change "+
		"only the bytes returned by that read; *persistent* flips are also written back into the file, as decayed "+
		"flash would be. DIRECT isolates the damaged data block and repairs its key range with a patch through "+
		"the raft log; `crash` takes the replica down, wipes it and re-replicates the whole shard from a peer. "+
		"Each mix also runs once without flips (the error-free reference). Total wall time %v.",
		params.Duration, elapsed.Round(time.Second))
	r.Text("Parameters: %s", kvParamsText(params))
	t := report.Table{
		Caption: "Side by side, one run per row (median ops/s over whole seconds; ratio to the error-free run of the same mix)",
		Header: []string{"YCSB", "UBER", "flips", "mode", "ops/s (median)", "vs error-free", "reads", "read retries (replica errors)",
			"read errors seen by the app", "update errors", "flips at rest / applied in reads", "detected", "patches", "rebuilds",
			"replicas down at end", "repair bytes", "CPU s", "CPU ms/kop"},
	}
	for _, c := range cells {
		res := c.res
		var repairBytes uint64
		for _, e := range res.Repairs {
			repairBytes += e.Bytes
		}
		mode := res.Params.Mode.String()
		ratio := "1.00"
		if c.ref != nil && res.Params.UBER > 0 {
			ratio = fmt.Sprintf("%.2f", res.MedianOpsPerSecond()/c.ref.MedianOpsPerSecond())
		}
		t.Rows = append(t.Rows, []string{
			res.Params.Mix.Name, fmt.Sprintf("%g", res.Params.UBER), c.label, mode, fmt.Sprintf("%.0f", res.MedianOpsPerSecond()), ratio,
			fmt.Sprint(res.Reads), pct(res.ReadRetries, res.Reads), pct(res.ReadErrors, res.Reads),
			pct(res.UpdateErrors, res.Updates), fmt.Sprintf("%d / %d", res.AtRest.Flips, res.Flips.Flips),
			fmt.Sprint(res.Detected), fmt.Sprint(res.Patches), fmt.Sprint(res.Rebuilds), fmt.Sprint(res.DownAtEnd),
			fmt.Sprintf("%.0f KiB", float64(repairBytes)/1024),
			fmt.Sprintf("%.2f", res.CPU.Seconds()), fmt.Sprintf("%.2f", res.CPUPerKOp()),
		})
	}
	if err := r.Table(t); err != nil {
		return nil, err
	}
	// Figure 7 of paper 000: errors over time, here for the first mix at its
	// highest UBER (four series: the palette stays distinct).
	topUBER := 0.0
	for _, c := range cells {
		if c.res.Params.Mix == cells[0].res.Params.Mix {
			topUBER = math.Max(topUBER, c.res.Params.UBER)
		}
	}
	plotted := func(c kvCell) bool {
		return c.res.Params.Mix == cells[0].res.Params.Mix && (c.res.Params.UBER == topUBER || c.res.Params.UBER == 0)
	}
	var series []report.Series
	for _, c := range cells {
		if c.res.Params.UBER == 0 || !plotted(c) {
			continue
		}
		var xs, ys []float64
		for i, s := range c.res.PerSecond {
			xs = append(xs, float64(i)+0.5)
			ys = append(ys, float64(s.ReadRetries+s.AppErrors))
		}
		series = append(series, report.Series{Name: fmt.Sprintf("%s, %s, UBER %g", c.res.Params.Mode, c.label, c.res.Params.UBER), X: xs, Y: ys})
	}
	p, err := report.LinePlot{
		Title:  fmt.Sprintf("YCSB %s: replica read errors + application errors per second", cells[0].res.Params.Mix.Name),
		XLabel: "time in the measured phase (s)", YLabel: "errors per second",
		Series: series,
	}.Build()
	if err != nil {
		return nil, err
	}
	if err := r.Plot("errors", "read errors per second over time (paper 000 Figure 7)", p); err != nil {
		return nil, err
	}
	series = series[:0]
	for _, c := range cells {
		if !plotted(c) {
			continue
		}
		var xs, ys []float64
		for i, s := range c.res.PerSecond {
			xs = append(xs, float64(i)+0.5)
			ys = append(ys, float64(s.Ops))
		}
		name := fmt.Sprintf("%s, %s, UBER %g", c.res.Params.Mode, c.label, c.res.Params.UBER)
		if c.res.Params.UBER == 0 {
			name = "error-free"
		}
		series = append(series, report.Series{Name: name, X: xs, Y: ys})
	}
	p, err = report.LinePlot{
		Title:  fmt.Sprintf("YCSB %s: throughput per second", cells[0].res.Params.Mix.Name),
		XLabel: "time in the measured phase (s)", YLabel: "operations per second",
		Series: series,
	}.Build()
	if err != nil {
		return nil, err
	}
	if err := r.Plot("throughput", "throughput per second, side by side", p); err != nil {
		return nil, err
	}
	r.Text("%s", kvYCSBDiscussion(cells))
	return r, nil
}

// kvYCSBDiscussion states what the measured rows say, computed from them.
func kvYCSBDiscussion(cells []kvCell) string {
	var b strings.Builder
	b.WriteString("**What the numbers say.** ")
	for _, c := range cells {
		if c.res.Params.UBER == 0 || c.res.Params.Mode != kv.RepairDirect {
			continue
		}
		var crash *kvRunResult
		for i := range cells {
			o := &cells[i].res
			if o.Params.Mode == kv.RepairCrash && o.Params.Mix == c.res.Params.Mix && o.Params.Persistent == c.res.Params.Persistent && o.Params.UBER == c.res.Params.UBER {
				crash = o
			}
		}
		if crash == nil {
			continue
		}
		d := c.res
		fmt.Fprintf(&b, "YCSB %s, UBER %g, %s flips: DIRECT %.0f ops/s against crash %.0f (ratio %.2f), application-visible read errors %s against %s, "+
			"replica-level read errors %s against %s, %d patches against %d whole-shard rebuilds (%d and %d replicas still down at the end), "+
			"CPU %.2f against %.2f ms per thousand operations. ",
			d.Params.Mix.Name, d.Params.UBER, flipKind(d.Params.Persistent), d.MedianOpsPerSecond(), crash.MedianOpsPerSecond(),
			d.MedianOpsPerSecond()/math.Max(crash.MedianOpsPerSecond(), 1e-9),
			pct(d.ReadErrors, d.Reads), pct(crash.ReadErrors, crash.Reads), pct(d.ReadRetries, d.Reads), pct(crash.ReadRetries, crash.Reads),
			d.Patches, crash.Rebuilds, d.DownAtEnd, crash.DownAtEnd, d.CPUPerKOp(), crash.CPUPerKOp())
	}
	// The noise band: runs in which no flip reached Pebble behave alike, so
	// the spread of their throughput is the machine's, not the system's.
	lo, hi := math.Inf(1), 0.0
	for _, c := range cells {
		if c.res.Detected == 0 {
			lo, hi = math.Min(lo, c.res.MedianOpsPerSecond()), math.Max(hi, c.res.MedianOpsPerSecond())
		}
	}
	if hi > 0 && lo > 0 {
		fmt.Fprintf(&b, "\n\n**Noise band.** Runs in which no flip reached Pebble (no detection) should all run at the same "+
			"speed within a mix; here their median throughput ranged from %.0f to %.0f ops/s (%.1fx) across the invocation, "+
			"so throughput ratios inside that band are the machine, not the system. Error rates, repair counts, bytes moved "+
			"and replicas left down do not depend on the machine's speed in the same way and are the robust results.",
			lo, hi, hi/lo)
	}
	b.WriteString("\n\nEvery read was checked: no run returned another record's data (the experiment fails if one does). " +
		"*Read retries* are reads a replica refused or failed (corruption, range under repair, replica down) and the " +
		"client re-sent to another replica: that is the error rate ZippyDB's clients observed (paper 001 Table 4); " +
		"*read errors seen by the app* failed on every replica within the client's attempts or the 3 s operation timeout.\n\n" +
		"**How to read this on this machine.** The cluster, the clients and the injector share one process on a 2-core " +
		"machine that other engineers load at the same time (load averages well above 2 were common): absolute ops/s " +
		"and CPU seconds move by 2x between runs, so only ratios of rows next to each other mean something, and a single " +
		"run per cell carries that noise. The errors-over-time figure is the robust view: a crash-baseline replica " +
		"refuses every read until its whole shard is re-replicated, and under flips the re-replication scan itself reads " +
		"megabytes of sstables, so it can hit a flip on the source replica and take that one down as well (a cascade).\n\n" +
		"**Transient flips and isolation.** A replica re-reads the block that Pebble's corruption error names " +
		"(`block <offset>/<length>`) before repairing: when it verifies, the flip was transient, it is counted " +
		"(`ReplicaStats.TransientErrors`) and the read is retried, with no patch and no range withheld (the mission's " +
		"\"re-read before repairing\"). So transient rows show flips applied but nothing detected or patched under " +
		"DIRECT, while `crash` still rebuilds whole shards. Persistent flips are found on the re-read and isolated to " +
		"the damaged blocks (see kv-patch-size).\n\n" +
		"**Stalls.** When no healthy replica can build a patch within the patch timeout (its scan of a large range hits " +
		"a flip and it stays silent), the damaged replica falls back to rebuilding its whole state from a peer, and that " +
		"scan of megabytes can hit a flip too; `internal/kv` retries the rebuild without bound, and while the replica's " +
		"apply worker waits there, it sends no patches for its peers' damage either. A DIRECT row with replicas still " +
		"down at the end is that fallback still retrying, and its shard's throughput collapses as the crash baseline's " +
		"does. Whether a run falls into it depends on where flips land, so the same row can differ between invocations: " +
		"at UBER 1e-7 the operating point is at the edge for whole-file (transient) patches, and well inside it for " +
		"block patches (persistent).")
	return b.String()
}
