package experiments

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/flashmend/flashmend/internal/bench"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/report"
)

// datapath measures the object data path against its limits in one run
// (issue 14): single-client and concurrent GET and PUT of 8 MiB objects
// through flashmend bench's load generator on a 6-node in-process cluster
// on plain files (data in the page cache), and, right after each GET run,
// the page-cache read of the very chunk files that run read; the CPU the
// whole process (client, nodes, coordinator) spent per GB moved; and the
// CRC32C checksum rate of one core, the verification's own cost.
func datapath() Experiment {
	return Experiment{
		Name:        "datapath",
		Description: "object GET/PUT throughput of 8 MiB objects against the page-cache read of the same chunk files, CPU per GB, medians of repeated runs",
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
}

func datapathPlanFor(cfg Config) datapathPlan {
	rep, ec := objectpb.Redundancy_REP, objectpb.Redundancy_EC
	if cfg.Quick {
		return datapathPlan{SizeBytes: 1 << 20, Duration: 300 * time.Millisecond, Repetitions: 1, Cases: []datapathCase{
			{Op: bench.OpGet, Red: rep, Concurrency: 1}, {Op: bench.OpGet, Red: ec, Concurrency: 1}, {Op: bench.OpPut, Red: rep, Concurrency: 1},
		}}
	}
	return datapathPlan{SizeBytes: 8 << 20, Duration: 5 * time.Second, Repetitions: 3, Cases: []datapathCase{
		{Op: bench.OpGet, Red: rep, Concurrency: 1, TargetBytesPerS: 1e9},
		{Op: bench.OpGet, Red: ec, Concurrency: 1, TargetBytesPerS: 600e6},
		{Op: bench.OpGet, Red: rep, Concurrency: 4},
		{Op: bench.OpGet, Red: ec, Concurrency: 4},
		{Op: bench.OpPut, Red: rep, Concurrency: 1},
		{Op: bench.OpPut, Red: ec, Concurrency: 1},
	}}
}

// datapathRun is one case in one repetition.
type datapathRun struct {
	Result bench.Result
	// CPUSecondsPerGB is the process's user+system CPU over the run per
	// GB of object bytes moved.
	CPUSecondsPerGB float64
	// PageCacheBytesPerS is the single-threaded read of the chunk files
	// the run's objects are stored in (GET runs), read once before to
	// warm the cache.
	PageCacheBytesPerS float64
}

func runDatapath(ctx context.Context, cfg Config) (*report.Report, error) {
	pl := datapathPlanFor(cfg)
	load := loadAverage()
	cluster, err := startObjCluster(ctx, objClusterOptions{Nodes: 6})
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
	for rep := 0; rep < pl.Repetitions; rep++ {
		for k, dc := range pl.Cases {
			prefix := fmt.Sprintf("datapath/%d/%d/", rep, k)
			cpu0, err := processCPU()
			if err != nil {
				return nil, err
			}
			res, err := bench.Run(ctx, c, bench.Options{Op: dc.Op, SizeBytes: pl.SizeBytes, Concurrency: dc.Concurrency,
				Duration: pl.Duration, Redundancy: dc.Red, Seed: cfg.Seed + int64(rep*100+k), Prefix: prefix, Keep: dc.Op == bench.OpGet})
			if err != nil {
				return nil, fmt.Errorf("%v: %w", dc, err)
			}
			if res.Errors > 0 {
				return nil, fmt.Errorf("%v: %d operations failed (first: %s)", dc, res.Errors, res.FirstError)
			}
			cpu1, err := processCPU()
			if err != nil {
				return nil, err
			}
			cpu := cpu1 - cpu0
			run := datapathRun{Result: res}
			if res.Bytes > 0 {
				run.CPUSecondsPerGB = cpu.Seconds() / (float64(res.Bytes) / 1e9)
			}
			if dc.Op == bench.OpGet {
				if run.PageCacheBytesPerS, err = cluster.pageCacheRead(ctx, c, prefix); err != nil {
					return nil, err
				}
			}
			runs[k] = append(runs[k], run)
		}
	}
	return datapathReport(cfg, pl, runs, load, crcRate())
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

func datapathReport(cfg Config, pl datapathPlan, runs [][]datapathRun, load string, crc float64) (*report.Report, error) {
	r, err := report.New("datapath", "Object data path against its limits")
	if err != nil {
		return nil, err
	}
	r.Text("Issue 14. One process runs a 6-node cluster (coordinator with embedded etcd, nodes on plain files in a temporary directory, so the data is in the page cache) and `flashmend bench`'s load generator (internal/bench) through the Go client: every GET's bytes are compared with what was put. Objects of %d MiB; each case runs %s, %d repetitions, cases interleaved within each repetition; figures are medians (min-max). Right after each GET run, the chunk files that run read (every replica or shard on every node) are read single-threaded, once to warm the cache and once timed: the page-cache limit of the same bytes, measured seconds apart. CPU per GB is the whole process's user+system CPU (client, nodes and coordinator share it) over the bytes moved. Machine: %d CPUs, shared with other work (load average at start: %s); nothing else is controlled, so the absolute figures move with the load, the ratios less.",
		pl.SizeBytes>>20, pl.Duration, pl.Repetitions, runtime.NumCPU(), load)
	var getRep1 [3]float64 // median throughput of single-client GET by redundancy
	rows := [][]string{}
	for k, dc := range pl.Cases {
		tp, tpLo, tpHi := medianOf(runs[k], func(d datapathRun) float64 { return d.Result.ThroughputBytesPerS })
		ops, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.Result.OpsPerS })
		p50, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.Result.LatencyMsP50 })
		p99, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.Result.LatencyMsP99 })
		cpu, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.CPUSecondsPerGB })
		limit, ratio, target := "-", "-", "-"
		if dc.Op == bench.OpGet {
			pc, _, _ := medianOf(runs[k], func(d datapathRun) float64 { return d.PageCacheBytesPerS })
			rt, _, _ := medianOf(runs[k], func(d datapathRun) float64 {
				return d.Result.ThroughputBytesPerS / max(1, d.PageCacheBytesPerS)
			})
			limit, ratio = fmt.Sprintf("%.0f", pc/1e6), fmt.Sprintf("%.3f", rt)
			if dc.Concurrency == 1 {
				getRep1[dc.Red] = tp
			}
		}
		switch {
		case dc.TargetBytesPerS > 0:
			target = fmt.Sprintf("%.0f MB/s: %s", dc.TargetBytesPerS/1e6, metOrNot(tp >= dc.TargetBytesPerS))
		case dc.Op == bench.OpPut && getRep1[dc.Red] > 0:
			target = fmt.Sprintf("half of GET x1 (%.0f MB/s): %s", getRep1[dc.Red]/2e6, metOrNot(tp >= getRep1[dc.Red]/2))
		}
		rows = append(rows, []string{dc.String(), fmt.Sprintf("%.0f (%.0f-%.0f)", tp/1e6, tpLo/1e6, tpHi/1e6),
			fmt.Sprintf("%.1f", ops), fmt.Sprintf("%.1f", p50), fmt.Sprintf("%.1f", p99), fmt.Sprintf("%.2f", cpu),
			fmt.Sprintf("%.2f", tp/1e9*cpu), fmt.Sprintf("%.0f", float64(runtime.NumCPU())/max(cpu, 1e-9)*1e3), limit, ratio, target})
	}
	if err := r.Table(report.Table{
		Caption: "Throughput in MB/s of object bytes (median, min-max); latency in ms (medians of the runs' p50 and p99); CPU-s/GB of the whole process; cores busy = throughput x CPU-s/GB; CPU ceiling: the MB/s the machine's CPUs would allow at that cost if the process had them all (CPUs / CPU-s/GB); page cache: MB/s of the timed single-threaded read of the same chunk files; ratio: GET over page cache, median of the per-repetition ratios.",
		Header:  []string{"case", "MB/s", "ops/s", "p50 ms", "p99 ms", "CPU-s/GB", "cores busy", "CPU ceiling MB/s", "page cache MB/s", "ratio", "target"},
		Rows:    rows,
	}); err != nil {
		return nil, err
	}
	r.Text("The verification's own cost: one core computes the 512 B sector CRC32Cs (with the chunk identity, direct.Sums) at %.0f MB/s, measured in the same run. A GET checksums every byte once (the client); a PUT twice (the client computes, each node verifies before it acknowledges, three nodes for REP).", crc/1e6)
	r.Text("Where the time goes: the path's cost is CPU. When the cores busy column is below the machine's %d CPUs, the rest went to other work on this shared machine; the CPU ceiling column is what the cost allows even with every CPU, so a target above it cannot be met on this machine by scheduling, only by spending fewer CPU-seconds per GB; each chunk of 64 KiB is one gRPC call (protobuf marshalling, HTTP/2 framing, a buffer from gRPC's pool that it zeroes) and, on the node, two file reads (chunk and sums record). A CPU profile of the in-process GET benchmark (`go test -run xxx -bench 'BenchmarkGet/(REP|EC)/direct/uber=0$' -cpuprofile cpu.out ./internal/client/`, `go tool pprof -top`) puts the largest shares in gRPC's buffer allocation and clearing (runtime.memclrNoHeapPointers under mem.(*sizedBufferPool).Get), system calls (network and files), and memmove; CRC32C is a few percent. For PUT (`-bench 'BenchmarkPut/REP'`) the nodes' plain-file store dominates: about two thirds of the samples are system calls under objstore.(*FileStore).Put, the open of a new file (about a third of all samples), its write and the rename, twice per chunk and replica (the chunk file, and the sums file rewritten whole, out of place, for each of its seven records); gRPC and the client's checksums and encoding are small beside it. The PUT target is therefore not a client or wire matter on plain files: it needs fewer file creations per chunk on the node (records appended or ranged instead of files rewritten).", runtime.NumCPU())
	return r, nil
}

func metOrNot(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
