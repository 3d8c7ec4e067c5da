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
	"github.com/flashmend/flashmend/internal/objstore"
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
	UBERs            []float64 // the first is 0, the error-free baseline
	Readers          int
	ObjectsPerReader int
	ReadsPerReader   int
	Repetitions      int
}

func throughputPlanFor(cfg Config) throughputPlan {
	if cfg.Quick {
		return throughputPlan{ObjectBytes: 16 * objstore.ChunkSize, UBERs: []float64{0, 1e-7, 1e-5},
			Readers: 2, ObjectsPerReader: 2, ReadsPerReader: 2, Repetitions: 1}
	}
	return throughputPlan{ObjectBytes: 16 * objstore.ChunkSize, UBERs: []float64{0, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5},
		Readers: 4, ObjectsPerReader: 4, ReadsPerReader: 48, Repetitions: 5}
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
	// runs[rep][uberIndex][modeIndex]
	runs := make([][][]throughputRun, pl.Repetitions)
	for rep := range runs {
		runs[rep] = make([][]throughputRun, len(pl.UBERs))
		for ui, uber := range pl.UBERs {
			if err := cluster.setUBER(ctx, clients[0], uber); err != nil {
				return nil, err
			}
			runs[rep][ui] = make([]throughputRun, len(modes))
			for k := range modes {
				// Alternate which mode goes first, so that slow drifts of
				// this shared machine's load do not favour one mode.
				mi := (k + rep + ui) % len(modes)
				run, err := timedReads(ctx, clients, owned, rngs, modes[mi], uber, pl.ReadsPerReader)
				if err != nil {
					return nil, err
				}
				runs[rep][ui][mi] = run
			}
		}
	}
	if err := cluster.setUBER(ctx, clients[0], 0); err != nil {
		return nil, err
	}
	return throughputReport(pl, modes, runs)
}

// throughputCell summarizes one (UBER, mode) over the repetitions.
type throughputCell struct {
	MBps, MBpsMin, MBpsMax float64 // median, min, max over repetitions
	Ratio                  float64 // median of per-repetition ratios to UBER 0
	FailedFraction         float64
}

func summarizeThroughput(runs [][][]throughputRun, ui, mi int) throughputCell {
	var mbps, ratios []float64
	reads, failed := 0, 0
	for rep := range runs {
		r := runs[rep][ui][mi]
		mbps = append(mbps, r.BytesPerSecond/1e6)
		if base := runs[rep][0][mi].BytesPerSecond; base > 0 {
			ratios = append(ratios, r.BytesPerSecond/base)
		}
		reads += r.Reads
		failed += r.Failed
	}
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

func throughputReport(pl throughputPlan, modes []string, runs [][][]throughputRun) (*report.Report, error) {
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
		"alternating; the whole sweep, error-free baseline included, is repeated %d times and the tables give "+
		"medians. The ratio is the median over repetitions of (throughput at this UBER) / (error-free "+
		"throughput of the same mode in the same repetition), so slow drifts of this shared 2-core machine's "+
		"load cancel. hdfs runs include the whole-object re-replication that its failed-over reads start (each "+
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
	for ui, uber := range pl.UBERs {
		row := []string{"no errors"}
		if uber > 0 {
			row[0] = fmt.Sprintf("%.0e", uber)
			x = append(x, uber)
		}
		for mi := range modes {
			c := summarizeThroughput(runs, ui, mi)
			row = append(row, fmt.Sprintf("%.0f [%.0f, %.0f]", c.MBps, c.MBpsMin, c.MBpsMax),
				fmt.Sprintf("%.2f", c.Ratio), fmt.Sprintf("%.1f%%", 100*c.FailedFraction))
			if uber > 0 {
				ratioSeries[mi] = append(ratioSeries[mi], c.Ratio)
			}
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
	r.Text("%s", throughputDiscussion(pl, modes, runs))
	return r, nil
}

func throughputDiscussion(pl throughputPlan, modes []string, runs [][][]throughputRun) string {
	var b fmtBuilder
	b.printf("**Discussion.** ")
	for ui, uber := range pl.UBERs {
		if uber != 1e-7 {
			continue
		}
		h, d := summarizeThroughput(runs, ui, 0), summarizeThroughput(runs, ui, 1)
		verdict := "met"
		if d.Ratio < 0.9 || d.FailedFraction > 0 {
			verdict = "not met"
		}
		b.printf("At UBER 1e-7 DIRECT kept %.0f%% of its error-free throughput with %.1f%% failed reads "+
			"(the mission's target there, no failed read and at least 90%%: %s), hdfs %.0f%% with %.1f%% "+
			"failed reads. ", 100*d.Ratio, 100*d.FailedFraction, verdict, 100*h.Ratio, 100*h.FailedFraction)
	}
	last := len(pl.UBERs) - 1
	h, d := summarizeThroughput(runs, last, 0), summarizeThroughput(runs, last, 1)
	b.printf("At the highest UBER, %.0e, hdfs kept %.0f%% (%.0f%% of its reads failed) and DIRECT %.0f%% "+
		"(%.0f%% failed). ", pl.UBERs[last], 100*h.Ratio, 100*h.FailedFraction, 100*d.Ratio, 100*d.FailedFraction)
	b.printf("The paper's Table 4 (128 MB blocks, 3 DataNodes, four 64-thread clients) has HDFS at 0 from UBER " +
		"1e-8 and HDFS-DIRECT at 73%% of error-free throughput at 1e-7. Our objects are 128x smaller, so the " +
		"same number of flips per object read (what decides both the hdfs collapse and DIRECT's repair work) " +
		"comes at a 128x higher UBER: our 1e-6 corresponds to the paper's ~1e-8. DIRECT's cost per repaired " +
		"chunk is one more chunk read from the next replica plus one chunk write (and, when all three copies " +
		"are bad, a second and third read, the nodes' re-reads and three writes); hdfs's cost is whole-object " +
		"re-replication. Ratios above 1 are noise of this shared machine (other engineers' tests ran at the " +
		"same time; see the min-max spread).")
	return b.String()
}

// fmtBuilder is a strings.Builder with printf.
type fmtBuilder struct{ s []byte }

func (b *fmtBuilder) printf(format string, args ...any) { b.s = fmt.Appendf(b.s, format, args...) }
func (b *fmtBuilder) String() string                    { return string(b.s) }
