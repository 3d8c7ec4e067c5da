package experiments

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/report"
)

// directThroughput is DIRECT Table 4 (paper 000 section 5): read
// throughput of hdfs and DIRECT against UBER on one cluster under one load,
// as a ratio to the error-free throughput measured in the same repetition.
func directThroughput() Experiment {
	return Experiment{
		Name:        "direct-throughput",
		Description: "DIRECT Table 4: read throughput of hdfs and DIRECT against UBER, as a ratio to error-free throughput",
		Run:         runDirectThroughput,
	}
}

type throughputPlan struct {
	ObjectBytes      int
	UBERs            []float64 // each run is paired with an error-free run
	Readers          int
	ObjectsPerReader int
	ReadsPerReader   int
	Repetitions      int
}

func throughputPlanFor(cfg Config) throughputPlan {
	if cfg.Quick {
		return throughputPlan{ObjectBytes: 16 * direct.ChunkSize, UBERs: []float64{1e-7, 1e-5},
			Readers: 2, ObjectsPerReader: 2, ReadsPerReader: 2, Repetitions: 1}
	}
	return throughputPlan{ObjectBytes: 16 * direct.ChunkSize, UBERs: []float64{1e-9, 1e-8, 1e-7, 1e-6, 1e-5},
		Readers: 4, ObjectsPerReader: 4, ReadsPerReader: 40, Repetitions: 5}
}

// throughputRun is one timed run of one mode at one UBER.
type throughputRun struct {
	Mode           string
	UBER           float64
	Reads, Failed  int
	Bytes          int64 // returned to readers (successful reads)
	Elapsed        time.Duration
	BytesPerSecond float64
}

func (r throughputRun) String() string {
	return fmt.Sprintf("%s UBER=%g: %d reads, %d failed, %.1f MB/s", r.Mode, r.UBER, r.Reads, r.Failed, r.BytesPerSecond/1e6)
}

// timedReads runs every reader through readsPerReader reads of its own
// objects, picked at random, and measures the bytes successfully read per
// wall-clock second. Objects a read failed on stay damaged until the run
// ends (as lost data would), and are then written afresh, untimed.
func timedReads(ctx context.Context, clients []*client.Client, owned [][]*testObject, rngs []*rand.Rand,
	mode string, uber float64, readsPerReader int) (throughputRun, error) {
	run := throughputRun{Mode: mode, UBER: uber}
	var mu sync.Mutex
	var firstErr error
	damaged := make([]map[*testObject]bool, len(clients))
	var wg sync.WaitGroup
	start := time.Now()
	for r := range clients {
		damaged[r] = map[*testObject]bool{}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for k := 0; k < readsPerReader && ctx.Err() == nil; k++ {
				o := owned[r][rngs[r].Intn(len(owned[r]))]
				rctx, cancel := context.WithTimeout(ctx, readTimeout)
				out, err := readObject(rctx, clients[r], o, mode)
				cancel()
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				run.Reads++
				run.Bytes += out.Bytes
				if out.Failed {
					run.Failed++
					damaged[r][o] = true
				}
				mu.Unlock()
			}
		}(r)
	}
	wg.Wait()
	run.Elapsed = time.Since(start)
	run.BytesPerSecond = float64(run.Bytes) / run.Elapsed.Seconds()
	if firstErr != nil {
		return run, fmt.Errorf("%s at UBER %g: %w", mode, uber, firstErr)
	}
	for r := range damaged {
		for o := range damaged[r] {
			if err := o.restore(ctx, clients[r]); err != nil {
				return run, err
			}
		}
	}
	return run, nil
}

func runDirectThroughput(ctx context.Context, cfg Config) (*report.Report, error) {
	pl := throughputPlanFor(cfg)
	rng := rand.New(rand.NewSource(cfg.Seed))
	cluster, err := startObjCluster(ctx, objClusterOptions{Nodes: 3, MemoryStores: true})
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	clients := make([]*client.Client, pl.Readers)
	owned := make([][]*testObject, pl.Readers)
	rngs := make([]*rand.Rand, pl.Readers)
	for r := range clients {
		if clients[r], err = cluster.dial(ctx); err != nil {
			return nil, err
		}
		defer clients[r].Close()
		if owned[r], err = putObjects(ctx, clients[r], rng, fmt.Sprintf("tput/r%d", r), pl.ObjectsPerReader, pl.ObjectBytes); err != nil {
			return nil, err
		}
		rngs[r] = rand.New(rand.NewSource(rng.Int63()))
	}
	modes := []string{client.ModeHDFS, client.ModeDirect}
	// runs[rep][uberIndex][modeIndex]; baselines[rep][uberIndex][modeIndex]
	// is the error-free run of the same mode taken just before it.
	runs := make([][][]throughputRun, pl.Repetitions)
	baselines := make([][][]throughputRun, pl.Repetitions)
	for rep := range runs {
		runs[rep] = make([][]throughputRun, len(pl.UBERs))
		baselines[rep] = make([][]throughputRun, len(pl.UBERs))
		for ui, uber := range pl.UBERs {
			runs[rep][ui] = make([]throughputRun, len(modes))
			baselines[rep][ui] = make([]throughputRun, len(modes))
			for k := range modes {
				// Alternate which mode goes first, so that slow drifts of
				// this shared machine's load do not favour one mode; pair
				// every run with an error-free run right before it, so that
				// the ratio compares runs seconds apart.
				mi := (k + rep + ui) % len(modes)
				for _, u := range []float64{0, uber} {
					if err := cluster.setUBER(ctx, clients[0], u); err != nil {
						return nil, err
					}
					run, err := timedReads(ctx, clients, owned, rngs, modes[mi], u, pl.ReadsPerReader)
					if err != nil {
						return nil, err
					}
					if u == 0 {
						baselines[rep][ui][mi] = run
					} else {
						runs[rep][ui][mi] = run
					}
				}
			}
		}
	}
	if err := cluster.setUBER(ctx, clients[0], 0); err != nil {
		return nil, err
	}
	return throughputReport(pl, modes, runs, baselines)
}

// throughputCell summarizes one (UBER, mode) over the repetitions.
type throughputCell struct {
	MBps, MBpsMin, MBpsMax float64 // median, min, max over repetitions
	Ratio                  float64 // median of per-repetition ratios to UBER 0
	FailedFraction         float64
}

func summarizeThroughput(runs, baselines [][][]throughputRun, ui, mi int) throughputCell {
	var mbps, ratios []float64
	reads, failed := 0, 0
	for rep := range runs {
		r := runs[rep][ui][mi]
		mbps = append(mbps, r.BytesPerSecond/1e6)
		if base := baselines[rep][ui][mi].BytesPerSecond; base > 0 {
			ratios = append(ratios, r.BytesPerSecond/base)
		}
		reads += r.Reads
		failed += r.Failed
	}
	return cellOf(mbps, ratios, reads, failed)
}

// summarizeBaselines summarizes every error-free run of mode mi.
func summarizeBaselines(baselines [][][]throughputRun, mi int) throughputCell {
	var mbps []float64
	for rep := range baselines {
		for ui := range baselines[rep] {
			mbps = append(mbps, baselines[rep][ui][mi].BytesPerSecond/1e6)
		}
	}
	return cellOf(mbps, []float64{1}, 1, 0)
}

func cellOf(mbps, ratios []float64, reads, failed int) throughputCell {
	c := throughputCell{MBpsMin: math.Inf(1), MBpsMax: math.Inf(-1)}
	for _, v := range mbps {
		c.MBpsMin, c.MBpsMax = math.Min(c.MBpsMin, v), math.Max(c.MBpsMax, v)
	}
	c.MBps = median(mbps)
	c.Ratio = median(ratios)
	if reads > 0 {
		c.FailedFraction = float64(failed) / float64(reads)
	}
	return c
}

func throughputReport(pl throughputPlan, modes []string, runs, baselines [][][]throughputRun) (*report.Report, error) {
	r, err := report.New("direct-throughput", "DIRECT Table 4 on flashmend: read throughput against UBER")
	if err != nil {
		return nil, err
	}
	r.Text("**What is measured.** One in-process cluster (coordinator with embedded etcd, 3 storage nodes on "+
		"127.0.0.1, chunks in memory so that the fault injector's persistent flips cost no file rewrite) holds "+
		"%d REP-3 objects of %s. %d concurrent readers, each with its own client and its own %d objects, each "+
		"read %d objects picked at random (seeded); throughput is the bytes returned by successful reads per "+
		"wall-clock second of the run. For every UBER the nodes inject persistent flips on read (as in "+
		"direct-read-errors) and the same load runs once in hdfs mode and once in DIRECT mode, the order "+
		"alternating, each run right after an error-free run of the same mode and load; the sweep is "+
		"repeated %d times and the tables give medians. The ratio is the median over repetitions of "+
		"(throughput at this UBER) / (throughput of the error-free run just before it), so that drifts of "+
		"this shared 2-core machine's load (other engineers' tests) cancel as far as they can. hdfs runs include the whole-object re-replication that its failed-over reads start (each "+
		"reader waits for it before its next read: on 2 cores it competes for the same CPU either way); DIRECT "+
		"repairs synchronously on the read path. An object whose read failed stays damaged until the run ends "+
		"(its later reads fail too, as lost data would) and is then written afresh, untimed.",
		pl.Readers*pl.ObjectsPerReader, base.Bytes(pl.ObjectBytes), pl.Readers, pl.ObjectsPerReader,
		pl.ReadsPerReader, pl.Repetitions)
	table := report.Table{
		Caption: "Read throughput (median MB/s over repetitions, [min, max]) and its ratio to error-free throughput",
		Header: []string{"UBER", "hdfs MB/s", "hdfs ratio", "hdfs failed reads", "DIRECT MB/s", "DIRECT ratio",
			"DIRECT failed reads"},
	}
	var x []float64
	ratioSeries := make([][]float64, len(modes))
	row := []string{"no errors (all paired runs)"}
	for mi := range modes {
		c := summarizeBaselines(baselines, mi)
		row = append(row, fmt.Sprintf("%.0f [%.0f, %.0f]", c.MBps, c.MBpsMin, c.MBpsMax), "1", "0.0%")
	}
	table.Rows = append(table.Rows, row)
	for ui, uber := range pl.UBERs {
		row := []string{fmt.Sprintf("%.0e", uber)}
		x = append(x, uber)
		for mi := range modes {
			c := summarizeThroughput(runs, baselines, ui, mi)
			row = append(row, fmt.Sprintf("%.0f [%.0f, %.0f]", c.MBps, c.MBpsMin, c.MBpsMax),
				fmt.Sprintf("%.2f", c.Ratio), fmt.Sprintf("%.1f%%", 100*c.FailedFraction))
			ratioSeries[mi] = append(ratioSeries[mi], c.Ratio)
		}
		table.Rows = append(table.Rows, row)
	}
	if err := r.Table(table); err != nil {
		return nil, err
	}
	var series []report.Series
	for mi, m := range modes {
		series = append(series, report.Series{Name: m, X: x, Y: ratioSeries[mi]})
	}
	fig, err := report.LinePlot{
		Title:  fmt.Sprintf("%d readers, REP-3 objects of %s", pl.Readers, base.Bytes(pl.ObjectBytes)),
		XLabel: "UBER (per bit read)", YLabel: "ratio to error-free",
		LogX: true, Series: series,
	}.Build()
	if err != nil {
		return nil, err
	}
	if err := r.Plot("ratio", "read throughput relative to the error-free run, against UBER", fig); err != nil {
		return nil, err
	}
	r.Text("%s", throughputDiscussion(pl, runs, baselines))
	return r, nil
}

func throughputDiscussion(pl throughputPlan, runs, baselines [][][]throughputRun) string {
	var b fmtBuilder
	b.printf("**Discussion.** ")
	// At the lowest UBER there is almost no repair work: an object read
	// meets about 8 * size * UBER flipped bits. How far its ratio is from 1
	// is this run's noise floor.
	h0, d0 := summarizeThroughput(runs, baselines, 0, 0), summarizeThroughput(runs, baselines, 0, 1)
	b.printf("At UBER %.0e an object read meets about %.3f flipped bits, so there is almost nothing to "+
		"repair, yet the paired ratios are %.2f (hdfs) and %.2f (DIRECT): ratios within about %.0f%% of 1 are "+
		"noise of this shared machine, not cost. ", pl.UBERs[0], 8*float64(pl.ObjectBytes)*pl.UBERs[0],
		h0.Ratio, d0.Ratio, 100*math.Max(math.Abs(1-h0.Ratio), math.Abs(1-d0.Ratio)))
	for ui, uber := range pl.UBERs {
		if uber != 1e-7 {
			continue
		}
		h, d := summarizeThroughput(runs, baselines, ui, 0), summarizeThroughput(runs, baselines, ui, 1)
		verdict := "met"
		if d.Ratio < 0.9 || d.FailedFraction > 0 {
			verdict = "not met as measured"
		}
		b.printf("At UBER 1e-7 DIRECT kept %.0f%% of its error-free throughput with %.1f%% failed reads "+
			"(the mission's target there, no failed read and at least 90%%: %s), hdfs %.0f%% with %.1f%% "+
			"failed reads. ", 100*d.Ratio, 100*d.FailedFraction, verdict, 100*h.Ratio, 100*h.FailedFraction)
	}
	last := len(pl.UBERs) - 1
	h, d := summarizeThroughput(runs, baselines, last, 0), summarizeThroughput(runs, baselines, last, 1)
	b.printf("At the highest UBER, %.0e, hdfs kept %.0f%% (%.0f%% of its reads failed) and DIRECT %.0f%% "+
		"(%.0f%% failed). ", pl.UBERs[last], 100*h.Ratio, 100*h.FailedFraction, 100*d.Ratio, 100*d.FailedFraction)
	b.printf("The paper's Table 4 (128 MB blocks, 3 DataNodes, four 64-thread clients) has HDFS at 0 from UBER " +
		"1e-8 and HDFS-DIRECT at 73%% of error-free throughput at 1e-7. Our objects are 128x smaller, so the " +
		"same number of flips per object read (what decides both the hdfs collapse and DIRECT's repair work) " +
		"comes at a 128x higher UBER: our 1e-6 corresponds to the paper's ~1e-8. DIRECT's cost per repaired " +
		"chunk is one more chunk read from the next replica plus one chunk write (and, when all three copies " +
		"are bad, the other reads, the nodes' re-reads and three writes); hdfs's cost is whole-object " +
		"re-replication, and its failed reads return nothing. Failed-read fractions here are higher than in " +
		"direct-read-errors because an object whose read failed stays damaged for the rest of the run.")
	return b.String()
}

// fmtBuilder is a strings.Builder with printf.
type fmtBuilder struct{ s []byte }

func (b *fmtBuilder) printf(format string, args ...any) { b.s = fmt.Appendf(b.s, format, args...) }
func (b *fmtBuilder) String() string                    { return string(b.s) }
