package experiments

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/model"
	"github.com/flashmend/flashmend/internal/report"
)

// directReadErrors is DIRECT Figure 10 (paper 000 section 5, 001 section
// 5): the application-visible read error rate against UBER for the hdfs
// baseline, chunk recovery and chunk recovery with majority vote, measured
// on the in-process cluster next to the closed-form curves.
func directReadErrors() Experiment {
	return Experiment{
		Name:        "direct-read-errors",
		Description: "DIRECT Figure 10: measured object read error rate against UBER (hdfs, chunk repair, + majority vote) next to the closed-form model",
		Run:         runDirectReadErrors,
	}
}

// readErrorsPlan sizes the experiment.
type readErrorsPlan struct {
	ObjectBytes      int
	UBERs            []float64
	Readers          int
	ObjectsPerReader int
	// Reads per (UBER, mode) are chosen from the model before measuring, so
	// the choice does not bias the estimate: enough to expect
	// TargetFailures failures of the rarest measurable series, between
	// MinReads and MaxReads; BoundReads where no series is expected to show
	// an error even at MaxReads (the point then only bounds the rate).
	MinReads, MaxReads, BoundReads int
	TargetFailures                 float64
	// Sums is the checksum layout found in the cluster at run time (the
	// injection model's exposure of a chunk read's sums).
	Sums sumsLayout
}

func readErrorsPlanFor(cfg Config) readErrorsPlan {
	if cfg.Quick {
		return readErrorsPlan{
			ObjectBytes: 16 * direct.ChunkSize, UBERs: []float64{1e-7, 1e-5},
			Readers: 2, ObjectsPerReader: 2, MinReads: 6, MaxReads: 16, BoundReads: 6, TargetFailures: 4,
		}
	}
	var ubers []float64
	for e := -9.0; e <= -4.0+1e-9; e += 0.5 {
		ubers = append(ubers, roundUBER(math.Pow(10, e)))
	}
	return readErrorsPlan{
		ObjectBytes: 16 * direct.ChunkSize, UBERs: ubers,
		Readers: 4, ObjectsPerReader: 4, MinReads: 100, MaxReads: 2000, BoundReads: 200, TargetFailures: 20,
	}
}

// roundUBER keeps three significant digits (3.16e-8, not 3.1622776601683795e-08).
func roundUBER(x float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	if err != nil {
		panic(base.AssertionFailedf("round %g: %v", x, err))
	}
	return r
}

// errorSeries names the three schemes of Figure 10.
type errorSeries int

const (
	seriesHDFS errorSeries = iota
	seriesChunk
	seriesVote
	numErrorSeries
)

func (s errorSeries) String() string {
	return [...]string{"hdfs (block failover)", "DIRECT chunk repair only", "DIRECT (chunk, sector merge, vote)"}[s]
}

// readErrorPoint is one measured (UBER, series) cell with its predictions.
type readErrorPoint struct {
	UBER      float64
	Series    errorSeries
	Measured  rateEstimate
	Injection float64 // model of the injection path (model.DirectInjected*)
	Paper     float64 // internal/model closed form for the same B, C, R
}

func (p readErrorPoint) String() string {
	return fmt.Sprintf("UBER=%g %s: %s injection=%.3g paper=%.3g", p.UBER, p.Series, p.Measured, p.Injection, p.Paper)
}

// predictions returns the injection-path and paper predictions of every
// series at one UBER.
func predictions(uber float64, objectBytes int, sums sumsLayout) (inj, paper [numErrorSeries]float64, err error) {
	ip := model.DirectInjectionParams{
		UBER: uber, Chunks: objectBytes / direct.ChunkSize, ChunkBits: 8 * direct.ChunkSize,
		SectorBits: 8 * direct.SectorSize, SumsBits: sums.RecordBits, Replicas: 3,
	}
	if inj[seriesHDFS], err = model.DirectInjectedHDFSFailure(ip); err != nil {
		return inj, paper, err
	}
	if inj[seriesChunk], err = model.DirectInjectedChunkFailure(ip); err != nil {
		return inj, paper, err
	}
	if inj[seriesVote], err = model.DirectInjectedVoteFailure(ip); err != nil {
		return inj, paper, err
	}
	mp := model.DirectParams{UBER: uber, BlockBytes: int64(objectBytes), ChunkBytes: direct.ChunkSize, Replicas: 3}
	if err := mp.Validate(); err != nil {
		return inj, paper, err
	}
	paper[seriesHDFS] = model.DirectBlockRecovery(mp)
	paper[seriesChunk] = model.DirectChunkRecovery(mp)
	paper[seriesVote] = model.DirectMajorityVote(mp)
	return inj, paper, nil
}

// readsFor picks the number of reads of one mode at one UBER from the
// injection model's predictions of the series that mode measures.
func (pl readErrorsPlan) readsFor(preds []float64) int {
	n, measurable := pl.MinReads, false
	for _, p := range preds {
		if p*float64(pl.MaxReads) < 0.5 {
			continue // not measurable here: the point bounds the rate
		}
		measurable = true
		n = max(n, int(math.Ceil(pl.TargetFailures/p)))
	}
	if !measurable {
		return pl.BoundReads
	}
	return min(n, pl.MaxReads)
}

// modeTally counts the outcomes of one mode's reads at one UBER.
type modeTally struct {
	reads, failed, chunkFailed int
	voted, repaired            int
	bytes                      int64
	// opErrors counts reads that ended in an operating error (not a
	// data-loss verdict); they are retried and not scored.
	opErrors int
}

// readTimeout bounds one object read, so that a stuck read surfaces as an
// operating error instead of stalling the experiment.
const readTimeout = 2 * time.Minute

// maxOpErrors is how many operating errors a batch of reads tolerates.
func maxOpErrors(reads int) int { return max(3, reads/100) }

func (t *modeTally) add(o readOutcome) {
	t.reads++
	t.voted += o.Voted
	t.repaired += o.Repaired
	t.bytes += o.Bytes
	if o.Failed {
		t.failed++
	}
	// Chunk recovery alone fails exactly where DIRECT found a chunk corrupt
	// on every replica (and had to merge sectors or vote).
	if o.Failed || o.AllCorrupt > 0 {
		t.chunkFailed++
	}
}

// runReads performs total reads of mode spread over the readers, each on
// its own objects in turn; a read that fails is followed by a restore of
// its object. Every successful read leaves the object clean (DIRECT repairs
// what it read; hdfs re-replicates), so each read is a fresh trial.
func runReads(ctx context.Context, clients []*client.Client, owned [][]*testObject, mode string, total int) (modeTally, error) {
	var mu sync.Mutex
	var tally modeTally
	var firstErr error
	var wg sync.WaitGroup
	for r := range clients {
		share := total / len(clients)
		if r < total%len(clients) {
			share++
		}
		wg.Add(1)
		go func(r, share int) {
			defer wg.Done()
			cli, objs := clients[r], owned[r]
			for k := 0; k < share && ctx.Err() == nil; k++ {
				o := objs[k%len(objs)]
				rctx, cancel := context.WithTimeout(ctx, readTimeout)
				out, err := readObject(rctx, cli, o, mode)
				cancel()
				opErr := err != nil && !errors.Is(err, errWrongData)
				if out.Failed || opErr {
					// A failed read leaves damage behind; so may an
					// interrupted one. Start the object afresh.
					if rerr := o.restore(ctx, cli); rerr != nil {
						err = rerr
						opErr = false
					}
				}
				mu.Lock()
				switch {
				case opErr && tally.opErrors < maxOpErrors(total):
					// An operating error (a timeout on this loaded
					// machine) is not an outcome: count it, do not score it.
					tally.opErrors++
					k--
				case err != nil:
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				default:
					tally.add(out)
				}
				mu.Unlock()
			}
		}(r, share)
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return tally, firstErr
}

func runDirectReadErrors(ctx context.Context, cfg Config) (*report.Report, error) {
	pl := readErrorsPlanFor(cfg)
	rng := rand.New(rand.NewSource(cfg.Seed))
	cluster, err := startObjCluster(ctx, objClusterOptions{Nodes: 3, MemoryStores: true})
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	clients := make([]*client.Client, pl.Readers)
	owned := make([][]*testObject, pl.Readers)
	for r := range clients {
		if clients[r], err = cluster.dial(ctx); err != nil {
			return nil, err
		}
		defer clients[r].Close()
		if owned[r], err = putObjects(ctx, clients[r], rng, fmt.Sprintf("errors/r%d", r), pl.ObjectsPerReader, pl.ObjectBytes); err != nil {
			return nil, err
		}
	}
	var all []*testObject
	for _, objs := range owned {
		all = append(all, objs...)
	}
	if pl.Sums, err = cluster.sumsLayoutOf(all); err != nil {
		return nil, err
	}
	start := time.Now()
	var points []readErrorPoint
	type tallies struct{ hdfs, direct modeTally }
	var perUBER []tallies
	for _, uber := range pl.UBERs {
		inj, paper, err := predictions(uber, pl.ObjectBytes, pl.Sums)
		if err != nil {
			return nil, err
		}
		if err := cluster.setUBER(ctx, clients[0], uber); err != nil {
			return nil, err
		}
		hdfs, err := runReads(ctx, clients, owned, client.ModeHDFS, pl.readsFor(inj[:seriesChunk]))
		if err != nil {
			return nil, fmt.Errorf("UBER %g, hdfs: %w", uber, err)
		}
		direct, err := runReads(ctx, clients, owned, client.ModeDirect, pl.readsFor(inj[seriesChunk:]))
		if err != nil {
			return nil, fmt.Errorf("UBER %g, direct: %w", uber, err)
		}
		perUBER = append(perUBER, tallies{hdfs, direct})
		counts := [numErrorSeries][2]int{
			{hdfs.failed, hdfs.reads}, {direct.chunkFailed, direct.reads}, {direct.failed, direct.reads},
		}
		for s := errorSeries(0); s < numErrorSeries; s++ {
			est, err := newRateEstimate(counts[s][0], counts[s][1])
			if err != nil {
				return nil, err
			}
			points = append(points, readErrorPoint{UBER: uber, Series: s, Measured: est, Injection: inj[s], Paper: paper[s]})
		}
	}
	if err := cluster.setUBER(ctx, clients[0], 0); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	opErrors := 0
	for _, t := range perUBER {
		opErrors += t.hdfs.opErrors + t.direct.opErrors
	}
	return readErrorsReport(pl, points, elapsed, opErrors)
}

func readErrorsReport(pl readErrorsPlan, points []readErrorPoint, elapsed time.Duration, opErrors int) (*report.Report, error) {
	r, err := report.New("direct-read-errors", "DIRECT Figure 10 on flashmend: object read error rate against UBER")
	if err != nil {
		return nil, err
	}
	sumsBits := pl.Sums.RecordBits
	r.Text("**What is measured.** An in-process cluster (coordinator with embedded etcd, 3 storage nodes on "+
		"127.0.0.1, chunks kept in memory) holds %d REP-3 objects of %s (%d chunks of 64 KiB), written by %d "+
		"concurrent readers that each own %d of them. For each UBER, every node's fault store is set to "+
		"persistent injection (`objstore.FaultStore`: each bit a node reads flips with probability UBER and the "+
		"flip is written back into the stored file, DIRECT 000 section 5), then the readers read their objects "+
		"in hdfs mode (fail over at the first bad chunk, never go back, re-replicate the whole object) and in "+
		"DIRECT mode (per-chunk repair from the next replica; when all three copies of a chunk are corrupt, a "+
		"merge of the 512 B sectors that verify in some copy and a bit-by-bit majority vote on the sectors "+
		"corrupt in all three, `direct.DecideREP`). An application-visible error is a read that returns an explicit data-loss error; a read "+
		"that returned wrong bytes would abort the experiment (none did). A read that fails is followed by a "+
		"fresh write of its object; a read that succeeds leaves the object clean (DIRECT rewrites what it found "+
		"corrupt, hdfs re-replicates and the reader waits for it), so every read is an independent trial. "+
		"*Chunk repair only* (the paper's chunk recovery, without merge or vote) is not a separate mode: it "+
		"fails exactly when DIRECT found some chunk corrupt on all three replicas, so it is counted from the "+
		"same DIRECT reads (failed, or `ReadReport.AllCorrupt` > 0). The object contents come from the seed; "+
		"the nodes' injectors are seeded too (node i with seed i), but concurrent readers interleave their "+
		"draws, so a rerun gives other counts within the intervals, not the same ones.",
		pl.Readers*pl.ObjectsPerReader, base.Bytes(pl.ObjectBytes), pl.ObjectBytes/direct.ChunkSize,
		pl.Readers, pl.ObjectsPerReader)
	r.Text("**Scale.** The paper reads 128 MB HDFS blocks; this machine (2 shared cores) reads %s objects, "+
		"%.0fx smaller, so the hdfs curve sits %.0fx to the right of the paper's (the same B E) and the "+
		"DIRECT curves, whose chunk is the paper's 64 KiB, sit lower by the ratio of chunk counts. The "+
		"number of reads per point is chosen from the model before measuring (to expect %.0f failures of "+
		"the rarest measurable series, between %d and %d reads; %d where nothing is expected), so the choice "+
		"does not bias the estimate. Intervals are 95%% Wilson score intervals. Total measuring time %s; "+
		"%d reads ended in an operating error (a timeout, not a verdict) and were retried unscored.",
		base.Bytes(pl.ObjectBytes), float64(128<<20)/float64(pl.ObjectBytes), float64(128<<20)/float64(pl.ObjectBytes), pl.TargetFailures,
		pl.MinReads, pl.MaxReads, pl.BoundReads, elapsed.Round(time.Second), opErrors)
	r.Text("**Two models.** *Paper* is the closed form of DIRECT 000 section 3.1 (`internal/model`: "+
		"`DirectBlockRecovery`, `DirectChunkRecovery`, `DirectMajorityVote`) for B = %s, C = 64 KiB, R = 3: "+
		"independent flips at rate E per stored data bit, read once. *Injection* models what the injection "+
		"path really does (`internal/model` `injection.go`): (1) the node also reads the chunk's sums record (%d bits, "+
		"stored apart; found at run time in files of %.1f records, %d bits fetched per chunk read) and a "+
		"flip in the record makes the chunk count as corrupt, so a replica's chunk is bad with probability "+
		"1-(1-E)^(C+%d); (2) a node re-reads a chunk that fails verification, and with persistent "+
		"injection the re-read adds fresh flips, so the copy it returns for a vote carries about 2E flips per "+
		"bit and its sums record must survive two reads; the merge fails when no returned sums record is "+
		"valid, or when a sector corrupt in all three copies has a bit flipped in two of them (the paper's "+
		"vote model works on whole chunks; flashmend merges 512 B sectors first); (3) hdfs fails over *at the offset* of the first bad chunk, so the next replica must only be "+
		"clean from there on: a read fails when the replicas' first failure offsets are non-decreasing, which "+
		"is less likely than the paper's \"every replica has an error somewhere\". Both models are checked "+
		"against a bit-level simulation of the read path in the package tests.",
		base.Bytes(pl.ObjectBytes), sumsBits, pl.Sums.ChunksPerFile, pl.Sums.ReadBitsPerChunk, sumsBits)
	if pl.Sums.ChunksPerFile > 1 && pl.Sums.ReadBitsPerChunk <= pl.Sums.RecordBits {
		r.Text("**Shared sums files.** Here %.1f chunks keep their records in one sums file, but a chunk "+
			"read fetches only its own %d-bit record (a range read, as a page read on flash), so each chunk's "+
			"checksums are exposed to read errors exactly as the model assumes.",
			pl.Sums.ChunksPerFile, pl.Sums.RecordBits)
	}
	if pl.Sums.ChunksPerFile > 1 && pl.Sums.ReadBitsPerChunk > pl.Sums.RecordBits {
		r.Text("**Caveat: shared sums files.** Here %.1f chunks keep their records in one sums file of about "+
			"%d bits. Every fetch of that file draws flips over all of it and writes them back: the read of "+
			"any chunk of the group, a node's re-read, and a repair's read-modify-write of the file. A chunk's "+
			"record is therefore exposed many times during one object read, not once as the model assumes "+
			"(it counts only the chunk's own record read twice), and the model underestimates the error rate. "+
			"The "+
			"report of commit 2df3be7, measured with one record per file, agrees with the model in 32 of its "+
			"33 cells. On real flash a read does not damage the page it reads, so the multiplied exposure is "+
			"an artefact of flip-on-read injection; what is real is that an unreadable sums page takes the "+
			"checksums of several chunks with it.", pl.Sums.ChunksPerFile, pl.Sums.ReadBitsPerChunk)
	}

	table := report.Table{
		Caption: "Measured application-visible error rate per object read, with the predictions",
		Header:  []string{"UBER", "scheme", "reads", "failed", "measured [95% CI]", "injection model", "paper model", "injection model in CI"},
	}
	var disagree []string
	for _, p := range points {
		in := "yes"
		if !p.Measured.Contains(p.Injection) {
			in = "**no**"
			disagree = append(disagree, fmt.Sprintf("%s at UBER %g (measured %s, model %.3g; a count at least "+
				"this far out has binomial probability %.2g under the model)",
				p.Series, p.UBER, p.Measured, p.Injection, binomialTailBeyond(p.Measured, p.Injection)))
		}
		table.Rows = append(table.Rows, []string{
			fmt.Sprintf("%.3g", p.UBER), p.Series.String(), fmt.Sprint(p.Measured.Trials), fmt.Sprint(p.Measured.Failures),
			fmt.Sprintf("%.3g [%.3g, %.3g]", p.Measured.Rate(), p.Measured.Lo, p.Measured.Hi),
			fmt.Sprintf("%.3g", p.Injection), fmt.Sprintf("%.3g", p.Paper), in,
		})
	}
	if err := r.Table(table); err != nil {
		return nil, err
	}
	if len(disagree) == 0 {
		r.Text("**Agreement.** Every measured interval contains the injection model's prediction (%d cells; "+
			"at 95%% about %.1f would miss by chance alone).", len(points), 0.05*float64(len(points)))
	} else {
		r.Text("**Disagreements** (the injection model outside the 95%% interval; with %d cells about %.1f "+
			"are expected by chance alone): %s.", len(points), 0.05*float64(len(points)), strings.Join(disagree, "; "))
	}

	fig, err := readErrorsPlot(pl, points)
	if err != nil {
		return nil, err
	}
	if err := r.Plot("rate", "object read error rate against UBER: models (lines), measurements (points)", fig); err != nil {
		return nil, err
	}
	r.Text("Measured points with no failure cannot be drawn on the log axis; their 95%% upper bounds are in " +
		"the table.")
	r.Text("%s", readErrorsDiscussion(pl, points))
	return r, nil
}

func readErrorsPlot(pl readErrorsPlan, points []readErrorPoint) (*plot.Plot, error) {
	// Dense model curves over the measured range, half a decade beyond.
	lo, hi := pl.UBERs[0]/math.Sqrt(10), pl.UBERs[len(pl.UBERs)-1]
	var x []float64
	for e := math.Log10(lo); e <= math.Log10(hi)+1e-9; e += 0.125 {
		x = append(x, math.Pow(10, e))
	}
	var inj, paper [numErrorSeries][]float64
	for _, u := range x {
		i, p, err := predictions(u, pl.ObjectBytes, pl.Sums)
		if err != nil {
			return nil, err
		}
		for s := range i {
			inj[s] = append(inj[s], i[s])
			paper[s] = append(paper[s], p[s])
		}
	}
	var series []report.Series
	// Series order fixes the colours: measured points share the colour of
	// their injection model (palette entries 0-2), paper curves take 3-5.
	for s := errorSeries(0); s < numErrorSeries; s++ {
		series = append(series, report.Series{Name: s.String() + ", injection model", X: x, Y: inj[s]})
	}
	for s := errorSeries(0); s < numErrorSeries; s++ {
		series = append(series, report.Series{Name: s.String() + ", paper model", X: x, Y: paper[s], Dashed: true})
	}
	for s := errorSeries(0); s < numErrorSeries; s++ {
		var mx, my []float64
		for _, p := range points {
			if p.Series == s && p.Measured.Failures > 0 {
				mx, my = append(mx, p.UBER), append(my, p.Measured.Rate())
			}
		}
		series = append(series, report.Series{Name: s.String() + ", measured", X: mx, Y: my, Points: true})
	}
	return report.LinePlot{
		Title:  fmt.Sprintf("REP-3 objects of %s, 64 KiB chunks", base.Bytes(pl.ObjectBytes)),
		XLabel: "UBER (per bit read)", YLabel: "P(read error visible to the application)",
		LogX: true, LogY: true, YFloor: 1e-12, Series: series,
	}.Build()
}

// binomialTailBeyond is the probability, under Binomial(trials, model),
// of a failure count at least as far out as the measured one on its side:
// P(X >= k) when k is above the mean, P(X <= k) otherwise. Unlike a count
// of standard errors it stays meaningful when the expected count is far
// below one.
func binomialTailBeyond(m rateEstimate, model float64) float64 {
	n, k := m.Trials, m.Failures
	logPMF := func(j int) float64 {
		lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
		switch {
		case model == 0:
			if j == 0 {
				return 0
			}
			return math.Inf(-1)
		case model == 1:
			if j == n {
				return 0
			}
			return math.Inf(-1)
		}
		return lg(n) - lg(j) - lg(n-j) + float64(j)*math.Log(model) + float64(n-j)*math.Log1p(-model)
	}
	lo, hi := 0, k
	if float64(k) > model*float64(n) {
		lo, hi = k, n
	}
	total := 0.0
	for j := lo; j <= hi; j++ {
		total += math.Exp(logPMF(j))
	}
	return math.Min(total, 1)
}

// uberAtRate finds, by bisection in log10(UBER), the UBER at which f
// reaches rate (f increasing in UBER); NaN when it does not in [lo, hi].
func uberAtRate(f func(float64) float64, rate, lo, hi float64) float64 {
	if f(lo) > rate || f(hi) < rate {
		return math.NaN()
	}
	a, b := math.Log10(lo), math.Log10(hi)
	for i := 0; i < 60; i++ {
		m := (a + b) / 2
		if f(math.Pow(10, m)) < rate {
			a = m
		} else {
			b = m
		}
	}
	return math.Pow(10, (a+b)/2)
}

// readErrorsDiscussion states what the numbers mean, computed from them.
func readErrorsDiscussion(pl readErrorsPlan, points []readErrorPoint) string {
	var b strings.Builder
	b.WriteString("**Discussion.** ")
	first := map[errorSeries]float64{}
	for _, p := range points {
		if _, ok := first[p.Series]; !ok && p.Measured.Failures > 0 {
			first[p.Series] = p.UBER
		}
	}
	for s := errorSeries(0); s < numErrorSeries; s++ {
		if u, ok := first[s]; ok {
			fmt.Fprintf(&b, "%s first failed a read at UBER %.3g. ", s, u)
		} else {
			fmt.Fprintf(&b, "%s never failed a read. ", s)
		}
	}
	const target = 1e-3
	at := func(s errorSeries, injection bool) float64 {
		return uberAtRate(func(u float64) float64 {
			i, p, err := predictions(u, pl.ObjectBytes, pl.Sums)
			if err != nil {
				return math.NaN()
			}
			if injection {
				return i[s]
			}
			return p[s]
		}, target, 1e-14, 1e-3)
	}
	hInj, cInj, vInj := at(seriesHDFS, true), at(seriesChunk, true), at(seriesVote, true)
	hPap, vPap := at(seriesHDFS, false), at(seriesVote, false)
	fmt.Fprintf(&b, "At an error rate of %.0e per read, the injection model puts hdfs at UBER %.2g, chunk "+
		"repair only at %.2g and DIRECT's full path at %.2g: DIRECT tolerates %.0fx (chunk) and %.0fx (full "+
		"path) the UBER of hdfs here; the paper's formulas for the same sizes give %.0fx for its vote (the paper "+
		"reports 10,000-100,000x for 128 MB blocks, where B/C is 2048 instead of %d). ",
		target, hInj, cInj, vInj, cInj/hInj, vInj/hInj, vPap/hPap, pl.ObjectBytes/direct.ChunkSize)
	differ, injIn, paperIn := 0, 0, 0
	for _, p := range points {
		if p.Measured.Failures == 0 || math.Max(p.Injection, p.Paper) < 2*math.Min(p.Injection, p.Paper) {
			continue
		}
		differ++
		if p.Measured.Contains(p.Injection) {
			injIn++
		}
		if p.Measured.Contains(p.Paper) {
			paperIn++
		}
	}
	fmt.Fprintf(&b, "Of the %d measured cells (at least one failure) where the two models differ by more than 2x, "+
		"the 95%% interval contains the injection model in %d and the paper's formula in %d. ", differ, injIn, paperIn)
	b.WriteString("The differences are properties of the system, not noise: hdfs fails less often than the paper's formula " +
		"because it fails over at an offset (the paper's own measured HDFS curve sits to the right of its " +
		"formula, 001 section 5, which the authors put down to the Taylor approximation; the offset is a " +
		"sufficient reason). DIRECT's merge works on 512 B sectors, finer than the paper's chunk-level vote, " +
		"which lowers its failure rate; against that, under persistent flip-on-read injection the node's " +
		"re-read (meant to tell a transient flip from damage) doubles the damage in the copies it returns, " +
		"and a merge needs one intact sums record among three that were each read twice: at high UBER that " +
		"last condition is what fails most. The offset failover and the sums record hold on real flash too; the doubled " +
		"damage is an artefact of injecting on read (a real device does not damage a page by reading it " +
		"twice). The sums-record effect suggests an improvement: when all three sums records fail their CRC, " +
		"vote over the three records as well (bit by bit, then check the voted record's CRC), or keep the " +
		"record duplicated like other metadata. On this 2-core machine the measurements are limited by reads " +
		"per second: rates below about 1e-3 per read are only bounded, not measured.")
	return b.String()
}
