package experiments

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/bench"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/report"
)

// datapath measures the object data path against its limits in one run
// (issue 14): single-client and concurrent GET and PUT of 8 MiB objects
// through flashmend bench's load generator on a 6-node in-process cluster
// on plain files (data in the page cache), and, right after each GET run,
// the page-cache read of the very data files (packs) that run read; the CPU the
// whole process (client, nodes, coordinator) spent per GB moved; and the
// CRC32C checksum rate of one core, the verification's own cost.
func datapath() Experiment {
	return Experiment{
		Name:        "datapath",
		Description: "object GET/PUT throughput of 8 MiB objects against the page-cache read of the same data files, CPU per GB, medians of repeated runs",
		Run:         runDatapath,
	}
}

type datapathCase struct {
	Op          string
	Red         objectpb.Redundancy
	Concurrency int
	// TargetBytesPerS is issue 14's target (0: none; PUT's is half of the
	// same redundancy's single-client GET, checked in the report).
	TargetBytesPerS float64
}

func (c datapathCase) String() string {
	return fmt.Sprintf("%s %s x%d", c.Op, redName(c.Red), c.Concurrency)
}

func redName(r objectpb.Redundancy) string {
	if r == objectpb.Redundancy_EC {
		return "ec"
	}
	return "rep"
}

type datapathPlan struct {
	SizeBytes   int
	Duration    time.Duration
	Repetitions int
	Cases       []datapathCase
	// KVCases run bench's KV mode against the same cluster's KV store
	// (the storage nodes host it), KVKeys keys of KVValueBytes.
	KVCases      []kvBenchCase
	KVKeys       int
	KVValueBytes int
	// LoopbackBytes is what the loopback TCP limit copies per repetition.
	LoopbackBytes int
	// Profile takes a CPU profile of one extra run of every single-client
	// case (not in the medians) and reports go tool pprof -top of it.
	Profile bool
}

type kvBenchCase struct {
	Op          string
	Concurrency int
}

func (c kvBenchCase) String() string { return fmt.Sprintf("kv %s x%d", c.Op, c.Concurrency) }

func datapathPlanFor(cfg Config) datapathPlan {
	rep, ec := objectpb.Redundancy_REP, objectpb.Redundancy_EC
	if cfg.Quick {
		return datapathPlan{SizeBytes: 1 << 20, Duration: 300 * time.Millisecond, Repetitions: 1, Cases: []datapathCase{
			{Op: bench.OpGet, Red: rep, Concurrency: 1}, {Op: bench.OpGet, Red: ec, Concurrency: 1}, {Op: bench.OpPut, Red: rep, Concurrency: 1},
		}, KVCases: []kvBenchCase{{bench.KVOpPut, 1}, {bench.KVOpGet, 2}}, KVKeys: 50, KVValueBytes: 800, LoopbackBytes: 8 << 20}
	}
	var kvCases []kvBenchCase
	for _, op := range []string{bench.KVOpPut, bench.KVOpGet} {
		for _, n := range []int{1, 16, 64} {
			kvCases = append(kvCases, kvBenchCase{op, n})
		}
	}
	return datapathPlan{SizeBytes: 8 << 20, Duration: 5 * time.Second, Repetitions: 3, Cases: []datapathCase{
		{Op: bench.OpGet, Red: rep, Concurrency: 1, TargetBytesPerS: 1e9},
		{Op: bench.OpGet, Red: ec, Concurrency: 1, TargetBytesPerS: 600e6},
		{Op: bench.OpGet, Red: rep, Concurrency: 4},
		{Op: bench.OpGet, Red: ec, Concurrency: 4},
		{Op: bench.OpPut, Red: rep, Concurrency: 1},
		{Op: bench.OpPut, Red: ec, Concurrency: 1},
	}, KVCases: kvCases, KVKeys: 5000, KVValueBytes: 800, LoopbackBytes: 256 << 20, Profile: true}
}

// datapathRun is one case in one repetition.
type datapathRun struct {
	Result bench.Result
	// CPUSecondsPerGB is the process's user+system CPU over the run per
	// GB of object bytes moved.
	CPUSecondsPerGB float64
	// LimitBytesPerS is the run's limit in object bytes per second: for
	// GET the single-threaded read of the pack files the run's objects
	// are stored in, read once before to warm the cache (page cache); for
	// PUT the single-threaded write of the bytes one object takes on the
	// nodes, one new file per replica or shard appended in 64 KiB writes
	// (the packed layout), in the same file system, right after the run.
	LimitBytesPerS float64
}

// kvRun is one KV case in one repetition.
type kvRun struct {
	Result bench.Result
	// CPUMsPerOp is the process's user+system CPU per operation.
	CPUMsPerOp float64
}

func runDatapath(ctx context.Context, cfg Config) (*report.Report, error) {
	pl := datapathPlanFor(cfg)
	load := loadAverage()
	cluster, err := startObjCluster(ctx, objClusterOptions{Nodes: 6, KV: len(pl.KVCases) > 0, NoRepairReserve: true})
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	c, err := cluster.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	runs := make([][]datapathRun, len(pl.Cases))
	kvRuns := make([][]kvRun, len(pl.KVCases))
	var loopback []float64
	var kvc bench.KV
	if len(pl.KVCases) > 0 {
		kc, err := c.KVClient(ctx, kvclient.Options{})
		if err != nil {
			return nil, err
		}
		defer kc.Close()
		kvc = bench.KVClient(kc)
	}
	kvLoaded := false
	if kvc != nil {
		// Warm up: the KV store's shards elect their leaders after the
		// nodes start; the first puts would time the election.
		if _, err := bench.RunKV(ctx, kvc, bench.KVOptions{Op: bench.KVOpPut, ValueSize: pl.KVValueBytes, Keys: pl.KVKeys,
			Concurrency: 4, Duration: pl.Duration / 2, Prefix: "datapath-warmup/", Seed: cfg.Seed}); err != nil {
			return nil, fmt.Errorf("kv warm-up: %w", err)
		}
	}
	for rep := 0; rep < pl.Repetitions; rep++ {
		lb, err := loopbackRate(pl.LoopbackBytes)
		if err != nil {
			return nil, err
		}
		loopback = append(loopback, lb)
		for k, dc := range pl.Cases {
			run, err := datapathCaseRun(ctx, cluster, c, pl, dc, fmt.Sprintf("datapath/%d/%d/", rep, k), cfg.Seed+int64(rep*100+k))
			if err != nil {
				return nil, err
			}
			runs[k] = append(runs[k], run)
		}
		for k, kc := range pl.KVCases {
			cpu0, err := processCPU()
			if err != nil {
				return nil, err
			}
			res, err := bench.RunKV(ctx, kvc, bench.KVOptions{Op: kc.Op, ValueSize: pl.KVValueBytes, Keys: pl.KVKeys,
				Concurrency: kc.Concurrency, Duration: pl.Duration, Prefix: "datapath/", Seed: cfg.Seed, Loaded: kvLoaded})
			if err != nil {
				return nil, fmt.Errorf("%v: %w", kc, err)
			}
			// A KV operation that fails (a proposal not applied in
			// time on a loaded machine; in a short run that can be
			// every one) is counted and reported, not fatal: wrong data
			// still is (RunKV's error above).
			kvLoaded = kvLoaded || kc.Op != bench.KVOpPut
			cpu1, err := processCPU()
			if err != nil {
				return nil, err
			}
			run := kvRun{Result: res}
			if res.Ops > 0 {
				run.CPUMsPerOp = float64((cpu1 - cpu0).Microseconds()) / 1e3 / float64(res.Ops)
			}
			kvRuns[k] = append(kvRuns[k], run)
		}
	}
	var profiles []datapathProfile
	if pl.Profile {
		for k, dc := range pl.Cases {
			if dc.Concurrency != 1 {
				continue
			}
			p, err := datapathProfileRun(ctx, cluster, c, pl, dc, fmt.Sprintf("datapath/prof/%d/", k), cfg.Seed+int64(1000+k))
			if err != nil {
				return nil, err
			}
			profiles = append(profiles, p)
		}
	}
	return datapathReport(cfg, pl, runs, kvRuns, loopback, profiles, load, crcRate())
}

// datapathCaseRun runs one object case and measures its limit right after.
func datapathCaseRun(ctx context.Context, cluster *objCluster, c *client.Client, pl datapathPlan, dc datapathCase, prefix string, seed int64) (datapathRun, error) {
	// NB: the CPU is counted from the moment the workers start: a GET
	// run first puts the objects it reads, and counting those puts (REP
	// puts cost several times a GET per byte) made a GET's CPU per GB
	// 1.6x what the GETs cost (3.52 against about 2.2 CPU-s/GB in the run
	// at 06d1632, its profiled run for the latter).
	var cpu0 time.Duration
	var cpuErr error
	res, err := bench.Run(ctx, c, bench.Options{Op: dc.Op, SizeBytes: pl.SizeBytes, Concurrency: dc.Concurrency,
		Duration: pl.Duration, Redundancy: dc.Red, Seed: seed, Prefix: prefix, Keep: dc.Op == bench.OpGet,
		Started: func() { cpu0, cpuErr = processCPU() }})
	if err != nil {
		return datapathRun{}, fmt.Errorf("%v: %w", dc, err)
	}
	if cpuErr != nil {
		return datapathRun{}, cpuErr
	}
	if res.Errors > 0 {
		return datapathRun{}, fmt.Errorf("%v: %d operations failed (first: %s)", dc, res.Errors, res.FirstError)
	}
	cpu1, err := processCPU()
	if err != nil {
		return datapathRun{}, err
	}
	run := datapathRun{Result: res}
	if res.Bytes > 0 {
		run.CPUSecondsPerGB = (cpu1 - cpu0).Seconds() / (float64(res.Bytes) / 1e9)
	}
	if dc.Op == bench.OpGet {
		run.LimitBytesPerS, err = cluster.pageCacheRead(ctx, c, prefix)
	} else {
		run.LimitBytesPerS, err = cluster.fileWriteRate(pl.SizeBytes, dc.Red)
	}
	return run, err
}

// datapathProfile is go tool pprof -top of one profiled run.
type datapathProfile struct {
	Case   datapathCase
	Result bench.Result
	Top    string
	// Syscalls is go tool pprof -top -cum of the samples under system
	// calls: which paths make them.
	Syscalls string
}

// datapathProfileRun runs one case once more under the CPU profiler and
// returns go tool pprof -top of the profile (or why there is none).
func datapathProfileRun(ctx context.Context, cluster *objCluster, c *client.Client, pl datapathPlan, dc datapathCase, prefix string, seed int64) (datapathProfile, error) {
	p := datapathProfile{Case: dc}
	f, err := os.CreateTemp("", "flashmend-datapath-*.pprof")
	if err != nil {
		return p, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	// The profile starts once a GET run's objects are in place: it covers
	// the workers only.
	var profErr error
	started := false
	res, err := bench.Run(ctx, c, bench.Options{Op: dc.Op, SizeBytes: pl.SizeBytes, Concurrency: dc.Concurrency,
		Duration: pl.Duration, Redundancy: dc.Red, Seed: seed, Prefix: prefix, Started: func() {
			profErr = pprof.StartCPUProfile(f)
			started = profErr == nil
		}})
	if started {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return p, fmt.Errorf("%v (profiled): %w", dc, err)
	}
	if !started {
		p.Top = fmt.Sprintf("(no profile: %v)", profErr)
		return p, nil
	}
	p.Result = res
	p.Top = pprofTop(ctx, f.Name(), "-top", "-nodecount=18")
	p.Syscalls = pprofTop(ctx, f.Name(), "-top", "-cum", "-focus=linux.Syscall6$", "-nodecount=24")
	return p, nil
}

// pprofTop runs go tool pprof with args on a profile and returns its table
// without the header lines about the file and build.
func pprofTop(ctx context.Context, profile string, args ...string) string {
	out, err := exec.CommandContext(ctx, "go", append(append([]string{"tool", "pprof"}, args...), profile)...).Output()
	if err != nil {
		return fmt.Sprintf("(go tool pprof failed: %v)", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Time:") || strings.HasPrefix(l, "Type:") {
			continue
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// fileWriteRate is the PUT limit: the object bytes per second at which
// one thread writes, in the nodes' file system (no fsync, as the nodes
// here), the bytes one object of size bytes takes on the nodes (three
// replicas, or six shards of a quarter) as the nodes store them: one new
// file per replica or shard (the blob's pack), appended in 64 KiB writes.
func (oc *objCluster) fileWriteRate(size int, red objectpb.Redundancy) (float64, error) {
	dir, err := os.MkdirTemp(oc.dir, "write-limit-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	blobs, chunks := 3, (size+direct.ChunkSize-1)/direct.ChunkSize
	if red == objectpb.Redundancy_EC {
		blobs, chunks = 6, (size+4*direct.ChunkSize-1)/(4*direct.ChunkSize)
	}
	buf := make([]byte, direct.ChunkSize)
	for i := range buf {
		buf[i] = byte(i * 13)
	}
	start := time.Now()
	for b := 0; b < blobs; b++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("b%d", b)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return 0, err
		}
		for i := 0; i < chunks && err == nil; i++ {
			_, err = f.Write(buf)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, err
		}
	}
	return float64(size) / time.Since(start).Seconds(), nil
}

// loopbackRate is the bytes per second one TCP connection over 127.0.0.1
// carries (256 KiB writes, the reader discarding): the network limit of a
// single-client GET or PUT whose bytes cross loopback once.
func loopbackRate(n int) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		_, err = io.Copy(io.Discard, conn)
		done <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 256<<10)
	start := time.Now()
	for sent := 0; sent < n; sent += len(buf) {
		if _, err := conn.Write(buf); err != nil {
			conn.Close()
			return 0, err
		}
	}
	conn.Close()
	if err := <-done; err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// pageCacheRead reads, single-threaded, every chunk file on every node of
// the objects under prefix (twice: the first read warms the cache, the
// second is timed), deletes the objects, and returns the bytes per second.
func (oc *objCluster) pageCacheRead(ctx context.Context, c *client.Client, prefix string) (float64, error) {
	recs, err := c.List(ctx, prefix)
	if err != nil {
		return 0, err
	}
	var files []string
	for _, rec := range recs {
		for i := 0; i < 6; i++ {
			dir := filepath.Join(devcluster.NodeDir(oc.dir, i), "store", "d", fmt.Sprintf("%016x.%d", rec.Object, rec.Version))
			ents, err := os.ReadDir(dir)
			if err != nil && !os.IsNotExist(err) {
				return 0, err
			}
			for _, e := range ents {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("datapath: no chunk files found for %s under %s", prefix, oc.dir)
	}
	buf := make([]byte, direct.ChunkSize)
	var rate float64
	for pass := 0; pass < 2; pass++ {
		var n int64
		start := time.Now()
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				return 0, err
			}
			for {
				k, err := f.Read(buf)
				n += int64(k)
				if err != nil || k == 0 {
					break
				}
			}
			f.Close()
		}
		rate = float64(n) / time.Since(start).Seconds()
	}
	for _, rec := range recs {
		if err := c.Delete(ctx, rec.Key); err != nil {
			return 0, err
		}
	}
	return rate, nil
}

// crcRate is the bytes per second one core checksums (direct.Sums over
// 64 KiB chunks), the verification's cost on both sides of the wire.
func crcRate() float64 {
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	best := 0.0
	for rep := 0; rep < 5; rep++ {
		start := time.Now()
		for off := 0; off < len(data); off += direct.ChunkSize {
			direct.Sums(direct.ChunkID{Index: uint32(off)}, data[off:off+direct.ChunkSize])
		}
		best = max(best, float64(len(data))/time.Since(start).Seconds())
	}
	return best
}

func medianOf(runs []datapathRun, f func(datapathRun) float64) (med, lo, hi float64) {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	slices.Sort(xs)
	return median(xs), xs[0], xs[len(xs)-1]
}

func datapathReport(cfg Config, pl datapathPlan, runs [][]datapathRun, kvRuns [][]kvRun, loopback []float64, profiles []datapathProfile, load string, crc float64) (*report.Report, error) {
	r, err := report.New("datapath", "Object data path against its limits")
	if err != nil {
		return nil, err
	}
	r.Text("Issue 14. One process runs a 6-node cluster (coordinator with embedded etcd, nodes on plain files in a temporary directory without fsync, so the data is in the page cache, without the repair reserve, which the machine's shared disk would otherwise eat into; every node also hosts the KV store) and `flashmend bench`'s load generator (internal/bench) through the Go client: every GET's bytes are compared with what was put. Objects of %d MiB; each case runs %s, %d repetitions, cases interleaved within each repetition; figures are medians (min-max). The limits are measured in the same run, each right after its case: for a GET the single-threaded read of the pack files that run read (every replica or shard on every node), once to warm the cache and once timed (page cache); for a PUT the single-threaded write of the bytes the nodes store for one object, one new file per replica or shard (three, or six) appended in 64 KiB writes as the nodes' packs are, in the same file system (file write); both in object bytes per second. CPU per GB is the whole process's user+system CPU (client, nodes and coordinator share it) over the bytes moved. Machine: %d CPUs, shared with other work (load average at start: %s); nothing else is controlled, so the absolute figures move with the load, the ratios less.",
		pl.SizeBytes>>20, pl.Duration, pl.Repetitions, runtime.NumCPU(), load)
	r.Text("Two of issue 14's targets are measured by reports of their own, each side by side in one run: the SDF layer's " +
		"sequential read against the emulated device's raw read at 1 to 44 channels, and at UBER 1e-7 against its error-free " +
		"read, with each read's CPU-s per GB and a profile ([sdf](sdf.md), `flashmend experiments run sdf`); the KV store's " +
		"puts and strong gets at concurrency 1, 16 and 64 against a 3-member etcd in the same process " +
		"([kv-throughput](kv-throughput.md), `flashmend experiments run kv-throughput`). The KV rows below are the KV " +
		"store this cluster's nodes host, measured in this run.")
	var getRep1 [3]float64 // median throughput of single-client GET by redundancy
	rows := [][]string{}
	for k, dc := range pl.Cases {
		tp, tpLo, tpHi := medianOf(runs[k], func(d datapathRun) float64 { return d.Result.ThroughputBytesPerS })
		ops, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.Result.OpsPerS })
		p50, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.Result.LatencyMsP50 })
		p99, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.Result.LatencyMsP99 })
		cpu, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.CPUSecondsPerGB })
		lim, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.LimitBytesPerS })
		rt, _, _ := medianOf(runs[k], func(d datapathRun) float64 {
			return d.Result.ThroughputBytesPerS / max(1, d.LimitBytesPerS)
		})
		limitKind := "page cache"
		if dc.Op == bench.OpPut {
			limitKind = "file write"
		}
		if dc.Op == bench.OpGet && dc.Concurrency == 1 {
			getRep1[dc.Red] = tp
		}
		target := "-"
		switch {
		case dc.TargetBytesPerS > 0:
			target = fmt.Sprintf("%.0f MB/s: %s", dc.TargetBytesPerS/1e6, metOrNot(tp >= dc.TargetBytesPerS))
		case dc.Op == bench.OpPut && getRep1[dc.Red] > 0:
			target = fmt.Sprintf("half of GET x1 (%.0f MB/s): %s", getRep1[dc.Red]/2e6, metOrNot(tp >= getRep1[dc.Red]/2))
		}
		rows = append(rows, []string{dc.String(), fmt.Sprintf("%.0f (%.0f-%.0f)", tp/1e6, tpLo/1e6, tpHi/1e6),
			fmt.Sprintf("%.1f", ops), fmt.Sprintf("%.1f", p50), fmt.Sprintf("%.1f", p99), fmt.Sprintf("%.2f", cpu),
			fmt.Sprintf("%.2f", tp/1e9*cpu), fmt.Sprintf("%.0f", float64(runtime.NumCPU())/max(cpu, 1e-9)*1e3),
			fmt.Sprintf("%s %.0f", limitKind, lim/1e6), fmt.Sprintf("%.3f", rt), target})
	}
	if err := r.Table(report.Table{
		Caption: "Throughput in MB/s of object bytes (median, min-max); latency in ms (medians of the runs' p50 and p99); CPU-s/GB of the whole process; cores busy = throughput x CPU-s/GB; CPU ceiling: the MB/s the machine's CPUs would allow at that cost if the process had them all (CPUs / CPU-s/GB); limit: MB/s of object bytes of the page-cache read (GET) or file write (PUT) of the same files, measured right after the case; ratio: throughput over limit, median of the per-repetition ratios.",
		Header:  []string{"case", "MB/s", "ops/s", "p50 ms", "p99 ms", "CPU-s/GB", "cores busy", "CPU ceiling MB/s", "limit MB/s", "ratio", "target"},
		Rows:    rows,
	}); err != nil {
		return nil, err
	}
	r.Text("%s", datapathAnalysis(pl, runs))
	lb := append([]float64(nil), loopback...)
	slices.Sort(lb)
	r.Text("The network limit, measured at the start of every repetition: one TCP connection over 127.0.0.1 carries %.0f MB/s (median; %.0f-%.0f; %d MiB in 256 KiB writes, the reader discarding). A single-client GET crosses loopback once with the object's bytes, a REP PUT three times, an EC PUT one and a half times. The verification's own cost: one core computes the 512 B sector CRC32Cs (with the chunk identity, direct.Sums) at %.0f MB/s, measured in the same run. A GET checksums every byte once (the client); a PUT twice (the client computes, each node verifies before it acknowledges, three nodes for REP).",
		median(append([]float64(nil), lb...))/1e6, lb[0]/1e6, lb[len(lb)-1]/1e6, pl.LoopbackBytes>>20, crc/1e6)
	if len(pl.KVCases) > 0 {
		var kvRows [][]string
		var kvErrors []string
		for k, kc := range pl.KVCases {
			ops, lo, hi := medianOf2(kvRuns[k], func(d kvRun) float64 { return d.Result.OpsPerS })
			p50, _, _ := medianOf2(kvRuns[k], func(d kvRun) float64 { return d.Result.LatencyMsP50 })
			p99, _, _ := medianOf2(kvRuns[k], func(d kvRun) float64 { return d.Result.LatencyMsP99 })
			cpu, _, _ := medianOf2(kvRuns[k], func(d kvRun) float64 { return d.CPUMsPerOp })
			errs, first := 0, ""
			for _, d := range kvRuns[k] {
				errs += d.Result.Errors
				if first == "" {
					first = d.Result.FirstError
				}
			}
			if first != "" {
				kvErrors = append(kvErrors, fmt.Sprintf("`%s`: %s", kc, first))
			}
			kvRows = append(kvRows, []string{kc.String(), fmt.Sprintf("%.0f (%.0f-%.0f)", ops, lo, hi),
				fmt.Sprintf("%.2f", p50), fmt.Sprintf("%.2f", p99), fmt.Sprintf("%.2f", cpu), fmt.Sprint(errs)})
		}
		if err := r.Table(report.Table{
			Caption: fmt.Sprintf("KV store through `flashmend bench --kv` (internal/bench RunKV) against the same cluster's KV store (every node hosts it: shards cut at g, n, t, three replicas each, Pebble on plain files), %d keys spread over the shards, %d B values; puts write random keys, gets are strongly consistent and every value read is compared with what was written. Ops/s median (min-max) of the repetitions; latency medians of the runs' p50 and p99 (operations that succeeded); CPU ms per operation of the whole process.", pl.KVKeys, pl.KVValueBytes),
			Header:  []string{"case", "ops/s", "p50 ms", "p99 ms", "CPU ms/op", "failed ops (all runs)"},
			Rows:    kvRows,
		}); err != nil {
			return nil, err
		}
		if len(kvErrors) > 0 {
			r.Text("Failed KV operations (counted above, left out of the latencies), the first error of each case: %s.", strings.Join(kvErrors, "; "))
		}
	}
	for _, p := range profiles {
		r.Text("CPU profile of one more `%s` run under the profiler (not in the medians; %.0f MB/s), `go tool pprof -top` of the whole process (client, nodes and coordinator). Largest self times: %s.\n\n```\n%s\n```\n\nWhere its system calls come from (`go tool pprof -top -cum -focus='linux.Syscall6$'`, the same profile):\n\n```\n%s\n```", p.Case, p.Result.ThroughputBytesPerS/1e6, topFlat(p.Top, 4), p.Top, p.Syscalls)
	}
	return r, nil
}

// datapathAnalysis says, for every case whose target is not met, what
// bounds it in this run: the CPU cost (the target is above the CPU
// ceiling: only fewer CPU-seconds per GB help), or the CPU the process got
// on the shared machine (the ceiling is above the target, the cores busy
// below the machine's), and for PUT how close it came to the file-write
// limit of the same files.
func datapathAnalysis(pl datapathPlan, runs [][]datapathRun) string {
	cpus := float64(runtime.NumCPU())
	var getX1 [3]float64
	var out []string
	for k, dc := range pl.Cases {
		tp, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.Result.ThroughputBytesPerS })
		cpu, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.CPUSecondsPerGB })
		rt, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.Result.ThroughputBytesPerS / max(1, d.LimitBytesPerS) })
		target := dc.TargetBytesPerS
		if dc.Op == bench.OpGet && dc.Concurrency == 1 {
			getX1[dc.Red] = tp
		}
		if dc.Op == bench.OpPut {
			target = getX1[dc.Red] / 2
		}
		if target <= 0 || tp >= target {
			continue
		}
		ceiling := cpus / max(cpu, 1e-9) * 1e9
		busy := tp / 1e9 * cpu
		var why string
		if ceiling < target {
			why = fmt.Sprintf("its cost, %.2f CPU-s/GB, caps it at %.0f MB/s with both CPUs, below the target's %.0f MB/s: it needs %.1fx fewer CPU-seconds per GB", cpu, ceiling/1e6, target/1e6, target/ceiling)
		} else {
			why = fmt.Sprintf("at %.2f CPU-s/GB both CPUs would carry %.0f MB/s, above the target's %.0f MB/s, but the process had %.2f of them (the machine's load)", cpu, ceiling/1e6, target/1e6, busy)
		}
		if dc.Op == bench.OpPut {
			why += fmt.Sprintf("; it runs at %.0f%% of the single-threaded file write of the same files", 100*rt)
		}
		out = append(out, fmt.Sprintf("`%s` (%.0f MB/s): %s.", dc, tp/1e6, why))
	}
	if len(out) == 0 {
		return "Every target is met in this run."
	}
	s := "Targets not met, and what bounds each in this run: " + strings.Join(out, " ")
	if pl.Profile {
		s += " The profiles below name where the CPU goes."
	}
	return s
}

// topFlat names the first n entries of a pprof -top table (by self
// time) with their shares.
func topFlat(top string, n int) string {
	var out []string
	in := false
	for _, l := range strings.Split(top, "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && f[0] == "flat" && f[1] == "flat%" {
			in = true
			continue
		}
		if !in || len(f) < 6 || len(out) == n {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s", strings.Join(f[5:], " "), f[1]))
	}
	if len(out) == 0 {
		return "none (no profile)"
	}
	return strings.Join(out, ", ")
}

func medianOf2(runs []kvRun, f func(kvRun) float64) (med, lo, hi float64) {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	slices.Sort(xs)
	return median(xs), xs[0], xs[len(xs)-1]
}

func metOrNot(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
