package experiments

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/report"
)

// directRepairLatency measures how long a read takes when it has to repair:
// a chunk repair (one replica's copy corrupt), a majority-vote repair (all
// three copies corrupt at different bits), and for contrast the hdfs
// baseline's failover plus whole-object re-replication (DIRECT 000 section
// 5, Figure 11 and the chunk tail latency discussed in 001 section 5).
func directRepairLatency() Experiment {
	return Experiment{
		Name:        "direct-repair-latency",
		Description: "latency distribution of DIRECT chunk repair and majority-vote repair (and hdfs re-replication) under persistent corruption",
		Run:         runDirectRepairLatency,
	}
}

type latencyPlan struct {
	Samples     int // per kind
	ObjectBytes int // the larger object of the object-level kinds
}

func latencyPlanFor(cfg Config) latencyPlan {
	if cfg.Quick {
		return latencyPlan{Samples: 4, ObjectBytes: 4 * direct.ChunkSize}
	}
	return latencyPlan{Samples: 300, ObjectBytes: 16 * direct.ChunkSize}
}

// latencyKind is one kind of timed read.
type latencyKind struct {
	Name string
	// Large selects the multi-chunk object instead of the one-chunk one.
	Large bool
	Mode  string
	// corrupt damages the object before the timed read and returns what
	// the read's report must show.
	corrupt func(ctx context.Context, cli *client.Client, o *testObject, rng *rand.Rand) (check func(*client.ReadReport) error, err error)
}

// corruptChunk flips one bit, persistently, at byte within of chunk of
// replica's stored copy.
func corruptChunk(ctx context.Context, cli *client.Client, o *testObject, replica, chunk int, within int64) error {
	return cli.Corrupt(ctx, o.key, replica, int64(chunk)*direct.ChunkSize+within, 1)
}

func latencyKinds(objectBytes int) []latencyKind {
	expect := func(repaired, voted, failovers int) func(*client.ReadReport) error {
		return func(r *client.ReadReport) error {
			if r.Repaired != repaired || r.Voted != voted || r.Failovers != failovers {
				return base.AssertionFailedf("read report %s; want repaired=%d voted=%d failovers=%d", r, repaired, voted, failovers)
			}
			return nil
		}
	}
	chunks := objectBytes / direct.ChunkSize
	return []latencyKind{
		{Name: "clean read, 64 KiB", Mode: client.ModeDirect,
			corrupt: func(context.Context, *client.Client, *testObject, *rand.Rand) (func(*client.ReadReport) error, error) {
				return expect(0, 0, 0), nil
			}},
		{Name: "chunk repair, 64 KiB", Mode: client.ModeDirect,
			corrupt: func(ctx context.Context, cli *client.Client, o *testObject, rng *rand.Rand) (func(*client.ReadReport) error, error) {
				// Chunk 0 is read from replica 0 first (client: chunk i
				// starts at replica i mod 3).
				return expect(1, 0, 0), corruptChunk(ctx, cli, o, 0, 0, rng.Int63n(direct.ChunkSize))
			}},
		{Name: "sector merge, 64 KiB", Mode: client.ModeDirect,
			corrupt: func(ctx context.Context, cli *client.Client, o *testObject, rng *rand.Rand) (func(*client.ReadReport) error, error) {
				// Every copy corrupt, each in a different 512 B sector:
				// the chunk is merged from sectors that verify, no vote.
				sectors := rng.Perm(direct.SectorsPerChunk)[:3]
				for r, sec := range sectors {
					off := int64(sec*direct.SectorSize + rng.Intn(direct.SectorSize))
					if err := corruptChunk(ctx, cli, o, r, 0, off); err != nil {
						return nil, err
					}
				}
				return expect(3, 0, 0), nil
			}},
		{Name: "majority vote, 64 KiB", Mode: client.ModeDirect,
			corrupt: func(ctx context.Context, cli *client.Client, o *testObject, rng *rand.Rand) (func(*client.ReadReport) error, error) {
				// Every copy corrupt in the same sector, at three distinct
				// bytes: the sector is voted, no bit is wrong on two copies.
				sec := rng.Intn(direct.SectorsPerChunk)
				for r, b := range rng.Perm(direct.SectorSize)[:3] {
					if err := corruptChunk(ctx, cli, o, r, 0, int64(sec*direct.SectorSize+b)); err != nil {
						return nil, err
					}
				}
				return expect(3, 1, 0), nil
			}},
		{Name: fmt.Sprintf("clean read, %s", base.Bytes(objectBytes)), Large: true, Mode: client.ModeDirect,
			corrupt: func(context.Context, *client.Client, *testObject, *rand.Rand) (func(*client.ReadReport) error, error) {
				return expect(0, 0, 0), nil
			}},
		{Name: fmt.Sprintf("DIRECT, one bad chunk in %s", base.Bytes(objectBytes)), Large: true, Mode: client.ModeDirect,
			corrupt: func(ctx context.Context, cli *client.Client, o *testObject, rng *rand.Rand) (func(*client.ReadReport) error, error) {
				c := rng.Intn(chunks)
				return expect(1, 0, 0), corruptChunk(ctx, cli, o, c%3, c, rng.Int63n(direct.ChunkSize))
			}},
		{Name: fmt.Sprintf("hdfs, one bad chunk in %s (failover + re-replication)", base.Bytes(objectBytes)), Large: true, Mode: client.ModeHDFS,
			corrupt: func(ctx context.Context, cli *client.Client, o *testObject, rng *rand.Rand) (func(*client.ReadReport) error, error) {
				c := rng.Intn(chunks)
				return expect(0, 0, 1), corruptChunk(ctx, cli, o, 0, c, rng.Int63n(direct.ChunkSize))
			}},
	}
}

func runDirectRepairLatency(ctx context.Context, cfg Config) (*report.Report, error) {
	pl := latencyPlanFor(cfg)
	rng := rand.New(rand.NewSource(cfg.Seed))
	// Plain files (no fsync), as `flashmend dev` runs: a repair's write
	// goes through the file system.
	cluster, err := startObjCluster(ctx, objClusterOptions{Nodes: 3})
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	cli, err := cluster.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	small, err := putObjects(ctx, cli, rng, "latency/small", 1, direct.ChunkSize)
	if err != nil {
		return nil, err
	}
	large, err := putObjects(ctx, cli, rng, "latency/large", 1, pl.ObjectBytes)
	if err != nil {
		return nil, err
	}
	kinds := latencyKinds(pl.ObjectBytes)
	samples := make([][]time.Duration, len(kinds))
	start := time.Now()
	// One read at a time (no queueing behind other reads), the kinds
	// interleaved so that load drifts of the shared machine hit all alike.
	for i := 0; i < pl.Samples; i++ {
		for k, kind := range kinds {
			o := small[0]
			if kind.Large {
				o = large[0]
			}
			check, err := kind.corrupt(ctx, cli, o, rng)
			if err != nil {
				return nil, fmt.Errorf("%s: corrupt: %w", kind.Name, err)
			}
			t0 := time.Now()
			data, rep, err := cli.ReadVersion(ctx, o.rec, kind.Mode)
			if kind.Mode == client.ModeHDFS {
				cli.WaitBackground() // the re-replication is hdfs's repair
			}
			elapsed := time.Since(t0)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", kind.Name, err)
			}
			if string(data) != string(o.data) {
				return nil, base.AssertionFailedf("%s: %v", kind.Name, errWrongData)
			}
			if err := check(rep); err != nil {
				return nil, fmt.Errorf("%s: %w", kind.Name, err)
			}
			samples[k] = append(samples[k], elapsed)
		}
	}
	return latencyReport(pl, kinds, samples, time.Since(start))
}

func latencyReport(pl latencyPlan, kinds []latencyKind, samples [][]time.Duration, elapsed time.Duration) (*report.Report, error) {
	r, err := report.New("direct-repair-latency", "DIRECT repair latency on flashmend: chunk repair and majority vote")
	if err != nil {
		return nil, err
	}
	r.Text("**What is measured.** An in-process cluster (coordinator with embedded etcd, 3 storage nodes on "+
		"127.0.0.1, chunks in plain files without fsync, as `flashmend dev` runs) holds a REP-3 object of one "+
		"64 KiB chunk and one of %s. Before each timed read, persistent damage is written into the stored "+
		"files through the nodes' fault-injection RPC (`client.Corrupt`, untimed): one bit of the replica read "+
		"first (*chunk repair*: the client reads the next replica and rewrites the bad chunk out of place), "+
		"one bit in each of the three replicas in different 512 B sectors (*sector merge*: all three reads "+
		"fail verification, each node re-reads once, the client assembles the chunk from sectors that verify "+
		"and rewrites all three copies), or one bit in each replica at different bytes of the same sector "+
		"(*majority vote*: that sector is voted bit by bit, the result verified against the stored "+
		"checksums, all three copies rewritten). The timed span is the whole client read, from the "+
		"request to verified data with every repair write acknowledged (DIRECT repairs synchronously); for "+
		"hdfs it also includes the background re-replication of the whole object, its repair. Every read's "+
		"report is checked (chunks repaired, voted, failovers) and its data compared with what was written. "+
		"Reads run one at a time, the %d kinds interleaved, %d samples each (%s in all), on a shared 2-core "+
		"machine: the tails include other engineers' load.",
		base.Bytes(pl.ObjectBytes), len(kinds), pl.Samples, elapsed.Round(time.Second))
	table := report.Table{
		Caption: "Read latency (ms), including the repair",
		Header:  []string{"kind", "n", "p50", "p90", "p99", "max", "p50 added over its clean read"},
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }
	summaries := make([]latencySummary, len(kinds))
	for k := range kinds {
		s, err := summarizeLatencies(samples[k])
		if err != nil {
			return nil, err
		}
		summaries[k] = s
	}
	cleanOf := func(k int) latencySummary {
		for j, kind := range kinds {
			if kind.Large == kinds[k].Large && j < k {
				return summaries[j]
			}
		}
		return summaries[k]
	}
	for k, kind := range kinds {
		s := summaries[k]
		added := "(baseline)"
		if c := cleanOf(k); c != s {
			added = ms(s.P50 - c.P50)
		}
		table.Rows = append(table.Rows, []string{kind.Name, fmt.Sprint(s.N), ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max), added})
	}
	if err := r.Table(table); err != nil {
		return nil, err
	}
	var series []report.Series
	for k, kind := range kinds {
		x := make([]float64, len(samples[k]))
		y := make([]float64, len(samples[k]))
		for i, d := range samples[k] { // sorted by summarizeLatencies
			x[i] = float64(d) / 1e6
			y[i] = float64(i+1) / float64(len(samples[k]))
		}
		series = append(series, report.Series{Name: kind.Name, X: x, Y: y, Dashed: kind.Large})
	}
	fig, err := report.LinePlot{
		Title:  "CDF of read latency with persistent corruption",
		XLabel: "read latency (ms)", YLabel: "fraction of reads at or below",
		LogX: true, Series: series,
	}.Build()
	if err != nil {
		return nil, err
	}
	if err := r.Plot("cdf", "CDF of read latency, repair included", fig); err != nil {
		return nil, err
	}
	clean, chunk, merge, vote := summaries[0], summaries[1], summaries[2], summaries[3]
	cleanLarge, directSum, hdfs := summaries[4], summaries[5], summaries[6]
	r.Text("**Discussion.** A chunk repair added %s ms to the median 64 KiB read (%s ms clean), a sector "+
		"merge %s ms and a majority vote %s ms: merge and vote read all three copies, each node reads its "+
		"copy twice (the re-read that tells a transient flip from damage), and three repair writes follow. "+
		"In the %s object, DIRECT's repair of "+
		"one chunk added %s ms to the median (p50 %s ms against %s ms clean), while the hdfs "+
		"baseline pays for the failover and for rewriting all %d chunks of the failed replica (p50 %s ms, "+
		"%.1fx DIRECT's): the error amplification DIRECT removes, measured. Tail percentiles (p99, max) on this "+
		"shared machine are dominated by scheduling noise; compare medians.",
		ms(chunk.P50-clean.P50), ms(clean.P50), ms(merge.P50-clean.P50), ms(vote.P50-clean.P50), base.Bytes(pl.ObjectBytes),
		ms(directSum.P50-cleanLarge.P50), ms(directSum.P50), ms(cleanLarge.P50), pl.ObjectBytes/direct.ChunkSize, ms(hdfs.P50),
		ratioOrNaN(float64(hdfs.P50), float64(directSum.P50)))
	return r, nil
}

func ratioOrNaN(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}
