package experiments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/flash/catalog"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/sdf"
)

// sdfBench is the SDF host layer's benchmark (docs/results/sdf.md): the
// device of the committed report, in a temporary directory.
func sdfBench() Experiment {
	return Experiment{
		Name:        "sdf",
		Description: "SDF layer: throughput against channels (Figure 7), random reads (Table 4), capacity, write amplification, error cost",
		Run: func(ctx context.Context, cfg Config) (*report.Report, error) {
			dir, err := os.MkdirTemp("", "flashmend-sdf-bench-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			bc := SDFBenchConfig{Dir: dir, Preset: "sdf", Geometry: flash.SDFGeometry(64), Seed: cfg.Seed, Runs: 5,
				UBER: 1e-7, Fills: []float64{0.5, 0.7, 0.85}, RandomReads: 200, Timing: flash.TimingReal}
			if cfg.Quick {
				bc.Geometry = flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 32, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
				bc.Runs, bc.Fills, bc.RandomReads, bc.Timing = 1, []float64{0.5}, 4, flash.TimingNone
			}
			return RunSDFBench(ctx, "sdf", bc)
		},
	}
}

// SDFBenchConfig configures the SDF host layer benchmark (sdf experiment,
// `flashmend flash bench`). Zero values take the defaults noted.
type SDFBenchConfig struct {
	// Dir holds the file-backed emulated device; the benchmark formats it
	// afresh for every run (its data is lost). Required.
	Dir string
	// Preset names the device preset (timing, wear); Geometry and Seed
	// are the device's.
	Preset   string
	Geometry flash.Geometry
	Seed     int64
	// Runs repeats every measurement; medians are reported (default 3).
	Runs int
	// BytesPerChannel is the file size per channel (default: min(8 MiB,
	// a quarter of a channel)).
	BytesPerChannel base.Bytes
	// Channels are the channel counts to measure (default 1, 2, 4, ...,
	// all).
	Channels []int
	// UBER is the transient error rate of the error-model cost
	// measurement (0 skips it).
	UBER float64
	// Fills are the fills of the write-amplification measurement.
	Fills []float64
	// RandomReads per channel per request size (default 200).
	RandomReads int
	// Timing is real (the preset's latencies on the wall clock) or none.
	Timing flash.TimingMode
	// Progress, when set, receives a line per finished run.
	Progress io.Writer
}

// RunSDFBench runs SDF's microbenchmarks (ASPLOS'14 section 3.2: Figure 7's
// sequential throughput against the channels used, one writer or reader per
// channel, and Table 4's random reads) through the SDF layer, each followed
// by a raw device read of the same pages in the same run, --runs times;
// then the same reads with a transient UBER (the cost of the error model),
// write amplification under random overwrites and synced appends, the die
// identifiers, and the CPU cost of the read path on in-memory devices of
// the same block shape. The report is named name.
func RunSDFBench(ctx context.Context, name string, bc SDFBenchConfig) (*report.Report, error) {
	if bc.Dir == "" {
		return nil, base.InvalidArgumentf("sdf bench: a device directory is required")
	}
	if bc.Runs == 0 {
		bc.Runs = 3
	}
	if bc.Runs < 1 || bc.Runs > 100 {
		return nil, base.InvalidArgumentf("sdf bench: %d runs not in [1, 100]", bc.Runs)
	}
	if bc.RandomReads == 0 {
		bc.RandomReads = 200
	}
	if bc.Timing == flash.TimingVirtual {
		return nil, base.InvalidArgumentf("sdf bench: timing %s: want real or none", bc.Timing)
	}
	if bc.Progress == nil {
		bc.Progress = io.Discard
	}
	preset, err := catalog.Lookup(bc.Preset)
	if err != nil {
		return nil, err
	}
	g := bc.Geometry
	opts := sdfLoadOptions{Channels: bc.Channels, BytesPerChannel: bc.BytesPerChannel, RandomReads: bc.RandomReads}
	if opts.BytesPerChannel == 0 {
		zone := base.Bytes(g.DiesPerChannel*(g.PagesPerBlock-1)) * base.Bytes(g.PageSize)
		opts.BytesPerChannel = min(8*base.MiB, base.Bytes(g.BlocksPerDie)*zone/4)
		opts.BytesPerChannel -= opts.BytesPerChannel % base.Bytes(g.PageSize)
	}
	fsOpts := sdf.Options{MaxOpenZones: min(1024, max(8, 2*g.Channels))}
	pf, err := os.CreateTemp("", "flashmend-sdf-*.pprof")
	if err != nil {
		return nil, err
	}
	profile := pf.Name()
	pf.Close()
	defer os.Remove(profile)
	loadBefore := loadAverage()
	clean, noisy := newBenchSamples(), newBenchSamples()
	var capacity sdf.Stats
	var noisyStats []sdf.Stats
	for run := 0; run < bc.Runs; run++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		opts.Seed = int64(run)
		opts.Profile = ""
		if run == bc.Runs-1 {
			// The last run's read on all channels is profiled (one run
			// of the median; the profiler's own cost is small at 100 Hz).
			opts.Profile = profile
		}
		rows, st, err := benchOnce(bc.Dir, g, preset.Options(bc.Timing, nil, bc.Seed), fsOpts, opts)
		if err != nil {
			return nil, err
		}
		capacity = st
		clean.add(rows)
		fmt.Fprintf(bc.Progress, "run %d/%d done\n", run+1, bc.Runs)
		if bc.UBER > 0 {
			uopts := opts
			uopts.Channels = []int{g.Channels}
			uopts.NoPlainRead = true
			uopts.Profile = ""
			rows, st, err := benchOnce(bc.Dir, g,
				preset.Options(bc.Timing, flash.UBERModel{UBER: bc.UBER}, bc.Seed+int64(run)), fsOpts, uopts)
			if err != nil {
				return nil, err
			}
			noisy.add(rows)
			noisyStats = append(noisyStats, st)
		}
	}
	cpuLayer, cpuRaw, err := cpuCost(g)
	if err != nil {
		return nil, err
	}
	walWA, err := syncedAppendsOnce(g)
	if err != nil {
		return nil, err
	}
	ident, err := identifyDieOnce(g)
	if err != nil {
		return nil, err
	}
	var was []sdfOverwriteResult
	for _, fill := range bc.Fills {
		r, err := overwriteOnce(g, fill)
		if err != nil {
			return nil, err
		}
		was = append(was, r)
	}
	r, err := report.New(name, "SDF host layer: throughput, capacity, write amplification, error cost")
	if err != nil {
		return nil, err
	}
	if err := addSDFBenchResults(r, bc, preset, opts, clean, noisy, noisyStats, capacity, was); err != nil {
		return nil, err
	}
	if top := pprofTop(ctx, profile, "-top", "-nodecount=16"); top != "" {
		r.Text("CPU profile of the last run's read on all %d channels (in its medians), `go tool pprof -top`:\n\n```\n%s\n```",
			g.Channels, top)
	}
	tl := report.Table{Caption: "Write amplification of synced appends (a write-ahead log: append one record, sync, repeat; " +
		"up to 1000 records each), same in-memory device", Header: []string{"record", "write amplification"}}
	for _, w := range walWA {
		tl.Rows = append(tl.Rows, []string{w.record.String(), fmt.Sprintf("%.2f", w.wa)})
	}
	if err := r.Table(tl); err != nil {
		return nil, err
	}
	r.Text("A sync programs the padded partial page (programmed again, out of place, by the next " +
		"sync); it writes no metadata, because open recovers synced pages of open zones from their OOB.")
	ti := report.Table{Caption: fmt.Sprintf("Identifying the data on die %s (Reparo section 6): in-memory device with the block "+
		"shape above (%d channels, %d blocks per die) filled to about 60%% with files of 8KiB-256KiB, a third of them "+
		"removed; all three agree: %t", ident.Die, min(g.Channels, 4), min(g.BlocksPerDie, 32), ident.AgreeEntrustScan),
		Header: []string{"identifier", "flash pages read", "map entries examined", "zones by scan", "time", "ranges"}}
	for _, row := range []struct {
		name string
		st   sdf.IdentifyStats
	}{{"IDR: file-table scan, 1 worker", ident.ScanOne}, {fmt.Sprintf("CDR: parallel scan, %d workers", ident.ScanWorkers), ident.ScanAll},
		{"CDR*: block-level P2L entrustment", ident.Entrustment}} {
		ti.Rows = append(ti.Rows, []string{row.name, fmt.Sprint(row.st.PagesRead), fmt.Sprint(row.st.Entries),
			fmt.Sprint(row.st.ZonesByScan), row.st.Elapsed.String(), fmt.Sprint(ident.Ranges)})
	}
	if err := r.Table(ti); err != nil {
		return nil, err
	}
	r.Text("CPU cost of the read path, measured without device timing on an in-memory device "+
		"(one channel, same page shape, so the numbers are CPU throughput on this machine): layer %.0f MB/s, raw device "+
		"reads %.0f MB/s. Verification (CRC32C over data and identity of every page) is most of the difference; where the "+
		"CPUs are saturated the layer's read throughput relative to raw falls towards this ratio (%.0f%%).",
		cpuLayer, cpuRaw, 100*cpuLayer/cpuRaw)
	r.Text("Load average (1, 5, 15 min) at the start: %s; at the end: %s. The machine is shared: "+
		"with real timing every page operation sleeps on the wall clock, so when the CPUs are saturated the throughput at many "+
		"channels is limited by the CPU, for the layer and the raw reads alike.", loadBefore, loadAverage())
	return r, nil
}

// benchMedian is the median of v (0 for none); v is left as it is.
func benchMedian(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return median(append([]float64(nil), v...))
}

type benchKey struct {
	test     string
	channels int
	request  base.Bytes
}

// benchSamples collects one throughput sample per run for every row.
type benchSamples struct {
	mbps   map[benchKey][]float64
	cpu    map[benchKey][]float64 // CPU-s per GB of each run
	errors map[benchKey]int64
	order  []benchKey
	// ratio holds, per channel count, the layer/raw read ratio of each run
	// (the two reads run back to back, so pairing them cancels slow drifts
	// in the machine's load).
	ratio map[int][]float64
	// plainRatio is the same for the read without read-ahead.
	plainRatio map[int][]float64
}

func newBenchSamples() *benchSamples {
	return &benchSamples{mbps: map[benchKey][]float64{}, cpu: map[benchKey][]float64{}, errors: map[benchKey]int64{}, ratio: map[int][]float64{},
		plainRatio: map[int][]float64{}}
}

func (b *benchSamples) add(rows []sdfRow) {
	for i, r := range rows {
		if r.Test == "seq-read" || r.Test == "seq-read-plain" {
			// Paired with the raw read of the same pages that follows.
			for _, q := range rows[i+1:] {
				if q.Test == "raw-read" && q.Channels == r.Channels {
					if q.MBps() > 0 {
						ratio := b.ratio
						if r.Test == "seq-read-plain" {
							ratio = b.plainRatio
						}
						ratio[r.Channels] = append(ratio[r.Channels], r.MBps()/q.MBps())
					}
					break
				}
			}
		}
		k := benchKey{r.Test, r.Channels, r.Request}
		if _, ok := b.mbps[k]; !ok {
			b.order = append(b.order, k)
		}
		b.mbps[k] = append(b.mbps[k], r.MBps())
		if r.CPU > 0 {
			b.cpu[k] = append(b.cpu[k], r.CPUSecondsPerGB())
		}
		b.errors[k] += r.Errors
	}
}

func (b *benchSamples) median(test string, ch int, req base.Bytes) float64 {
	return benchMedian(b.mbps[benchKey{test, ch, req}])
}

// cpuCost runs the one-channel sequential read of runSDFLoads without timing
// on an in-memory device with g's page shape and returns the layer's and
// the raw reads' median MB/s over 5 repetitions.
func cpuCost(g flash.Geometry) (layer, raw float64, err error) {
	g.Channels = 1
	g.BlocksPerDie = min(g.BlocksPerDie, 32)
	var ls, rs []float64
	for i := 0; i < 5; i++ {
		dev, err := flash.NewMemory(g, flash.Options{})
		if err != nil {
			return 0, 0, err
		}
		fs, err := sdf.Format(dev, sdf.Options{})
		if err != nil {
			return 0, 0, err
		}
		rows, err := runSDFLoads(dev, fs, sdfLoadOptions{Channels: []int{1}, RandomReads: 1, RandomReadBytes: []base.Bytes{base.Bytes(g.PageSize)}})
		err = errors.Join(err, fs.Close(), dev.Close())
		if err != nil {
			return 0, 0, err
		}
		for _, r := range rows {
			switch r.Test {
			case "seq-read":
				ls = append(ls, r.MBps())
			case "raw-read":
				rs = append(rs, r.MBps())
			}
		}
	}
	return benchMedian(ls), benchMedian(rs), nil
}

type walPoint struct {
	record base.Bytes
	wa     float64
}

// syncedAppendsOnce measures runSDFSyncedAppends for a few record sizes
// on an in-memory device with g's page shape.
func syncedAppendsOnce(g flash.Geometry) ([]walPoint, error) {
	g.Channels = min(g.Channels, 4)
	g.BlocksPerDie = min(g.BlocksPerDie, 32)
	var out []walPoint
	for _, rec := range []base.Bytes{128, 1 * base.KiB, 4 * base.KiB, 64 * base.KiB} {
		dev, err := flash.NewMemory(g, flash.Options{})
		if err != nil {
			return nil, err
		}
		fs, err := sdf.Format(dev, sdf.Options{})
		if err != nil {
			return nil, errors.Join(err, dev.Close())
		}
		// Up to 1000 records, bounded so the log fits in a quarter of
		// the device even before GC reclaims the superseded tail pages.
		n := int(min(1000, int64(fs.Stats().Usable)/(4*int64(max(rec, base.Bytes(g.PageSize))))))
		wa, err := runSDFSyncedAppends(fs, rec, max(n, 1))
		if err = errors.Join(err, fs.Close(), dev.Close()); err != nil {
			return nil, err
		}
		out = append(out, walPoint{rec, wa})
	}
	return out, nil
}

// identifyDieOnce fills an in-memory device with g's block shape and compares
// the identifiers of the data on die ch0/d0.
func identifyDieOnce(g flash.Geometry) (sdfIdentifyResult, error) {
	g.Channels = min(g.Channels, 4)
	g.BlocksPerDie = min(g.BlocksPerDie, 32)
	dev, err := flash.NewMemory(g, flash.Options{})
	if err != nil {
		return sdfIdentifyResult{}, err
	}
	defer dev.Close()
	fs, err := sdf.Format(dev, sdf.Options{})
	if err != nil {
		return sdfIdentifyResult{}, err
	}
	rng := rand.New(rand.NewSource(1))
	target := int64(float64(fs.Stats().Usable) * 0.6)
	buf := make([]byte, 256*base.KiB)
	var written int64
	for i := 0; written < target; i++ {
		n := 8*int(base.KiB) + rng.Intn(248*int(base.KiB))
		rng.Read(buf[:n])
		name := fmt.Sprintf("id/%d", i)
		f, err := fs.Create(name, sdf.Lifetime(rng.Intn(4)))
		if err != nil {
			return sdfIdentifyResult{}, errors.Join(err, fs.Close())
		}
		_, err = f.Write(buf[:n])
		if err = errors.Join(err, f.Close()); err != nil {
			return sdfIdentifyResult{}, errors.Join(err, fs.Close())
		}
		written += int64(n)
		if rng.Intn(3) == 0 {
			if err := fs.Remove(name); err != nil {
				return sdfIdentifyResult{}, errors.Join(err, fs.Close())
			}
			written -= int64(n)
		}
	}
	r, err := runSDFIdentify(fs, flash.DieAddr{})
	return r, errors.Join(err, fs.Close())
}

// loadAverage reads the first three fields of /proc/loadavg ("unknown"
// elsewhere).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// benchOnce opens the device with devOpts, formats it and runs runSDFLoads.
func benchOnce(dir string, g flash.Geometry, devOpts flash.Options, fsOpts sdf.Options, o sdfLoadOptions) ([]sdfRow, sdf.Stats, error) {
	dev, err := flash.OpenFile(dir, g, devOpts)
	if err != nil {
		return nil, sdf.Stats{}, err
	}
	fs, err := sdf.Format(dev, fsOpts)
	if err != nil {
		dev.Close()
		return nil, sdf.Stats{}, err
	}
	rows, err := runSDFLoads(dev, fs, o)
	st := fs.Stats()
	return rows, st, errors.Join(err, fs.Close(), dev.Close())
}

// overwriteOnce measures write amplification on an in-memory device with
// the block shape of g, at most 4 channels and 32 blocks per die (so the
// measurement stays a few seconds).
func overwriteOnce(g flash.Geometry, fill float64) (sdfOverwriteResult, error) {
	g.Channels = min(g.Channels, 4)
	g.BlocksPerDie = min(g.BlocksPerDie, 32)
	dev, err := flash.NewMemory(g, flash.Options{})
	if err != nil {
		return sdfOverwriteResult{}, err
	}
	defer dev.Close()
	fs, err := sdf.Format(dev, sdf.Options{})
	if err != nil {
		return sdfOverwriteResult{}, err
	}
	r, err := runSDFOverwrite(fs, fill, 4*base.Bytes(g.PageSize), 1, 1)
	return r, errors.Join(err, fs.Close())
}

func addSDFBenchResults(r *report.Report, bc SDFBenchConfig, preset catalog.Preset,
	o sdfLoadOptions, clean, noisy *benchSamples, noisyStats []sdf.Stats, capacity sdf.Stats, was []sdfOverwriteResult) error {
	g := bc.Geometry
	f1 := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	r.Text("The device has the geometry `flashmend flash format --dir DIR --preset %s --channels %d "+
		"--dies %d --blocks %d --pages %d --page-size %d --oob %d --seed %d` gives it; the benchmark formats it afresh for every run.",
		bc.Preset, g.Channels, g.DiesPerChannel, g.BlocksPerDie, g.PagesPerBlock, g.PageSize, g.OOBSize, bc.Seed)
	r.Text("Device: file-backed emulator, preset `%s` (%s), geometry %s, timing %s. "+
		"Every number is the median of %d runs. Sequential tests: one goroutine per channel, each on its own file pinned "+
		"to its channel (`sdf.FS.CreateOn`), %s per channel in %s requests (one zone, SDF's write unit); a reader asks for "+
		"read-ahead of one request (`sdf.File.SetReadAhead`), so its channel reads the next request while it handles the last, "+
		"and the same read without it is measured too. "+
		"`raw` reads the same physical pages straight from the device in the same run, one goroutine per die, without "+
		"verification: the device's own read bandwidth over this backing store.",
		bc.Preset, preset.Timing, g, bc.Timing, bc.Runs, o.BytesPerChannel, base.Bytes(g.DiesPerChannel*(g.PagesPerBlock-1)*g.PageSize))
	var chans []int
	seen := map[int]bool{}
	for _, k := range clean.order {
		if k.test == "seq-read" && !seen[k.channels] {
			chans = append(chans, k.channels)
			seen[k.channels] = true
		}
	}
	sort.Ints(chans)
	t := report.Table{Caption: "Sequential throughput against channels used (SDF Figure 7), MB/s (10^6 B/s); " +
		"read with read-ahead, read without it, raw read of the same pages, back to back in each run",
		Header: []string{"channels", "write", "read", "raw read", "read / raw (median of per-run ratios)",
			"read, no read-ahead", "no read-ahead / raw", "read CPU-s/GB", "raw CPU-s/GB"}}
	var cpuNote string
	var xs, w, rd, raw []float64
	for _, c := range chans {
		var req base.Bytes
		for _, k := range clean.order {
			if k.test == "seq-read" && k.channels == c {
				req = k.request
			}
		}
		sw := clean.median("seq-write", c, req)
		sr := clean.median("seq-read", c, req)
		rr := clean.median("raw-read", c, base.Bytes(g.PageSize))
		plain, plainRatio := "-", "-"
		if v := clean.mbps[benchKey{"seq-read-plain", c, req}]; len(v) > 0 {
			plain, plainRatio = f1(benchMedian(v)), fmt.Sprintf("%.1f%%", 100*benchMedian(clean.plainRatio[c]))
		}
		lc := benchMedian(clean.cpu[benchKey{"seq-read", c, req}])
		rc := benchMedian(clean.cpu[benchKey{"raw-read", c, base.Bytes(g.PageSize)}])
		t.Rows = append(t.Rows, []string{fmt.Sprint(c), f1(sw), f1(sr), f1(rr), fmt.Sprintf("%.1f%%", 100*benchMedian(clean.ratio[c])),
			plain, plainRatio, fmt.Sprintf("%.2f", lc), fmt.Sprintf("%.2f", rc)})
		if c == g.Channels && lc > 0 && rc > 0 && bc.Timing == flash.TimingReal {
			cpuNote = fmt.Sprintf("CPU is what the layer's read needs beyond the raw read: at %d channels the layer's read "+
				"costs %.2f CPU-s per GB against the raw read's %.2f (%.2fx; the whole process's CPU over each read), so keeping "+
				"up with the device's %.0f MB/s takes %.2f cores for the layer against %.2f for the raw read, of the "+
				"machine's %d, shared with other work (load averages below): while the others leave less than that, a channel "+
				"worker that waits for a CPU lets its dies idle (the emulator's timeline absorbs up to %v of lateness per "+
				"operation), and the layer, needing more CPU per byte, falls behind first.",
				c, lc, rc, lc/rc, rr, rr*lc/1e3, rr*rc/1e3, runtime.NumCPU(), flash.DefaultRealSlack)
		}
		xs, w, rd, raw = append(xs, float64(c)), append(w, sw), append(rd, sr), append(raw, rr)
	}
	if err := r.Table(t); err != nil {
		return err
	}
	if cpuNote != "" {
		r.Text("%s", cpuNote)
	}
	lp := report.LinePlot{Title: "SDF layer throughput against channels used",
		XLabel: "channels", YLabel: "MB/s", Series: []report.Series{
			{Name: "write", X: xs, Y: w, Points: true}, {Name: "read", X: xs, Y: rd, Points: true},
			{Name: "raw read", X: xs, Y: raw, Dashed: true}}}
	p, err := lp.Build()
	if err != nil {
		return err
	}
	if err := r.Plot("throughput", lp.Title, p); err != nil {
		return err
	}
	t4 := report.Table{Caption: fmt.Sprintf("Random reads on all %d channels (SDF Table 4 style), MB/s", g.Channels),
		Header: []string{"request", "read", fmt.Sprintf("read at UBER %g", bc.UBER), "ratio", "reads failed at UBER"}}
	for _, k := range clean.order {
		if k.test != "rand-read" {
			continue
		}
		c := benchMedian(clean.mbps[k])
		n := benchMedian(noisy.mbps[k])
		ratio := "-"
		if n > 0 {
			ratio = fmt.Sprintf("%.1f%%", 100*n/c)
		}
		t4.Rows = append(t4.Rows, []string{k.request.String(), f1(c), f1(n), ratio, fmt.Sprint(noisy.errors[k])})
	}
	if err := r.Table(t4); err != nil {
		return err
	}
	net := capacity.Raw - capacity.BadBytes - capacity.MetaReserved
	r.Text("%s", fmt.Sprintf("Usable capacity: %s of %s raw = %.2f%% of raw; %.2f%% of raw excluding bad blocks (%s) and the "+
		"metadata zones (%s). The only other reservation is the last page of every block (P2L entrustment); "+
		"there is no over-provisioning and no parity.",
		capacity.Usable, capacity.Raw, 100*capacity.UsableFraction(), 100*float64(capacity.Usable)/float64(net),
		capacity.BadBytes, capacity.MetaReserved))
	if bc.UBER > 0 {
		var seqKey benchKey
		for _, k := range noisy.order {
			if k.test == "seq-read" {
				seqKey = k
			}
		}
		c := clean.median("seq-read", g.Channels, seqKey.request)
		n := benchMedian(noisy.mbps[seqKey])
		// Each run's read at UBER follows that run's clean read: the
		// ratio is the median of the per-run ratios.
		var paired []float64
		for i, v := range noisy.mbps[seqKey] {
			if cl := clean.mbps[benchKey{"seq-read", g.Channels, seqKey.request}]; i < len(cl) && cl[i] > 0 {
				paired = append(paired, v/cl[i])
			}
		}
		var rereads, transients, visible int64
		for _, s := range noisyStats {
			rereads += s.Rereads
			transients += s.Transients
			visible += s.Corruptions
		}
		var reads int64
		for _, s := range noisyStats {
			for _, n := range s.ChannelReads {
				reads += n
			}
		}
		first := reads - rereads
		// A page fails verification when a flip lands in the bytes the
		// CRC covers (data and the 36-byte identity); a flip must hit both
		// reads of a page for the caller to see it (p squared), and for a
		// page read ahead, also both reads of the caller's own re-read of
		// it (p^4): first*p^2 is an upper bound.
		p := 1 - math.Pow(1-bc.UBER, float64(8*(g.PageSize+36)))
		r.Text("%s", fmt.Sprintf("Closed form for the same runs: %d first reads of a page, each failing its checksum with "+
			"probability p = 1-(1-UBER)^(8*(%d+36)) = %.2e, predict %.0f re-reads (measured %d) and at most %.1f errors visible "+
			"to the caller (p squared per page read by the caller; a page read ahead that fails both reads is read again by "+
			"its reader, p^4; measured %d).", first, g.PageSize, p, float64(first)*p, rereads,
			float64(first)*p*p, visible))
		r.Text("%s", fmt.Sprintf("Cost of the error model at UBER %g (transient flips, DIRECT's injection): sequential read on "+
			"all %d channels %.1f MB/s against %.1f MB/s without errors (medians; median of the per-run ratios %.1f%%). Over %d runs %d pages failed their checksum "+
			"and were re-read, %d verified on the re-read (transient flips absorbed by the layer), and %d reads returned a "+
			"CorruptionError to the caller (to be repaired from a replica by the layers above).",
			bc.UBER, g.Channels, n, c, 100*benchMedian(paired), bc.Runs, rereads, transients, visible))
	}
	tw := report.Table{Caption: "Write amplification under random overwrites (RewriteRange of random 4-page chunks, one full " +
		"pass over the live data, greedy GC), in-memory device with the same block shape",
		Header: []string{"fill", "total WA", "data-only WA", "GC pages copied", "zone resets"}}
	for _, a := range was {
		tw.Rows = append(tw.Rows, []string{fmt.Sprintf("%.0f%%", 100*a.Fill), fmt.Sprintf("%.3f", a.Amplification),
			fmt.Sprintf("%.3f", a.DataAmplification), fmt.Sprint(a.GCPages), fmt.Sprint(a.Resets)})
	}
	if err := r.Table(tw); err != nil {
		return err
	}
	r.Text("Total WA counts every page programmed (data, padding, GC copies, P2L pages, and both copies " +
		"of the metadata journal page each durable RewriteRange writes); data-only WA counts data pages.")
	return nil
}
