package experiments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flashmend/flashmend/internal/bench"
	"github.com/flashmend/flashmend/internal/coord/etcdstore"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/report"
)

// kvThroughput is issue 14's KV comparison (docs/results/kv-throughput.md):
// the KV store's puts and strongly consistent gets against a 3-member etcd
// embedded in the same process on the same machine, and against the KV
// store itself unbatched (kv.Options.ProposalBatch 1: no group commit,
// one raft read index per strong read),
// side by side in one run.
func kvThroughput() Experiment {
	return Experiment{
		Name:        "kv-throughput",
		Description: "KV puts and strong gets against a 3-member embedded etcd, with and without batching (group commit, read index groups)",
		Run: func(ctx context.Context, cfg Config) (*report.Report, error) {
			p := kvtpPlan{Concurrency: []int{1, 16, 64}, Duration: 5 * time.Second, Reps: 3, Keys: 5000, ValueBytes: 800}
			if cfg.Quick {
				p = kvtpPlan{Concurrency: []int{4}, Duration: 200 * time.Millisecond, Reps: 1, Keys: 100, ValueBytes: 800, NoSync: true}
			}
			return runKVThroughput(ctx, cfg, p)
		},
	}
}

type kvtpPlan struct {
	Concurrency []int
	Duration    time.Duration
	Reps        int
	Keys        int
	ValueBytes  int
	// NoSync (quick runs only) puts the KV store in memory and turns
	// etcd's fsyncs off: a smoke test of the harness, not a measurement.
	NoSync bool
}

// kvtpSystem is one store under test.
type kvtpSystem struct {
	name  string
	kv    bench.KV
	close func() error
	// syncs counts the KV store's syncs (nil for etcd, whose files this
	// process does not see).
	syncs *syncCountFS
}

type etcdKV struct{ c *clientv3.Client }

func (e etcdKV) Put(ctx context.Context, key, value []byte) error {
	_, err := e.c.Put(ctx, string(key), string(value))
	return err
}

func (e etcdKV) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	resp, err := e.c.Get(ctx, string(key)) // linearizable by default
	if err != nil || len(resp.Kvs) == 0 {
		return nil, false, err
	}
	return resp.Kvs[0].Value, true, nil
}

func (e etcdKV) Scan(ctx context.Context, start, end []byte, limit int) ([][]byte, [][]byte, error) {
	resp, err := e.c.Get(ctx, string(start), clientv3.WithRange(string(end)), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, nil, err
	}
	var keys, values [][]byte
	for _, kv := range resp.Kvs {
		keys, values = append(keys, kv.Key), append(values, kv.Value)
	}
	return keys, values, nil
}

// startKVSystem starts the KV store (3 nodes, shards cut at g, n and t,
// Pebble and raft logs on real files in dir, with their syncs) with
// proposal batch batch.
func startKVSystem(ctx context.Context, name, dir string, batch int, noSync bool) (*kvtpSystem, error) {
	fs := &syncCountFS{FS: vfs.Default}
	if noSync {
		fs.FS = vfs.NewMem()
	}
	c, err := kvcluster.Start(kvcluster.Config{Nodes: 3, Splits: []string{"g", "n", "t"}, FS: fs, Dir: dir,
		Options: kv.Options{ProposalBatch: batch}})
	if err != nil {
		return nil, err
	}
	for _, s := range c.Layout.Shards {
		if _, err := c.WaitLeader(ctx, s.ID); err != nil {
			c.Close()
			return nil, err
		}
	}
	kc, err := c.NewClient(kvclient.Options{})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &kvtpSystem{name: name, kv: bench.KVClient(kc), close: func() error { kc.Close(); return c.Close() }, syncs: fs}, nil
}

// startEtcdSystem starts a 3-member etcd in this process (with its fsyncs)
// in dir.
func startEtcdSystem(ctx context.Context, dir string, noSync bool) (*kvtpSystem, error) {
	st, err := etcdstore.Start(ctx, etcdstore.Options{Dir: dir, Members: 3, NoFsync: noSync})
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: st.Endpoints(), DialTimeout: 10 * time.Second})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &kvtpSystem{name: "etcd, 3 members", kv: etcdKV{cli}, close: func() error { err := cli.Close(); st.Close(); return err }}, nil
}

type kvtpCase struct {
	op          string
	concurrency int
}

func (c kvtpCase) String() string { return fmt.Sprintf("%s x%d", c.op, c.concurrency) }

func runKVThroughput(ctx context.Context, cfg Config, p kvtpPlan) (*report.Report, error) {
	dir, err := os.MkdirTemp("", "flashmend-kv-throughput-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	load := loadAverage()
	var systems []*kvtpSystem
	defer func() {
		for _, s := range systems {
			_ = s.close()
		}
	}()
	for i, start := range []func() (*kvtpSystem, error){
		func() (*kvtpSystem, error) {
			return startKVSystem(ctx, "flashmend KV, batched", filepath.Join(dir, "kv"), 0, p.NoSync)
		},
		func() (*kvtpSystem, error) {
			return startKVSystem(ctx, "flashmend KV, unbatched", filepath.Join(dir, "kv1"), 1, p.NoSync)
		},
		func() (*kvtpSystem, error) { return startEtcdSystem(ctx, filepath.Join(dir, "etcd"), p.NoSync) },
	} {
		s, err := start()
		if err != nil {
			return nil, fmt.Errorf("kv-throughput: system %d: %w", i, err)
		}
		systems = append(systems, s)
		// Load every key once (the gets read them back and compare).
		if _, err := bench.RunKV(ctx, s.kv, bench.KVOptions{Op: bench.KVOpGet, ValueSize: p.ValueBytes, Keys: p.Keys,
			Concurrency: 16, Duration: time.Millisecond, Prefix: "tp/", Seed: cfg.Seed}); err != nil {
			return nil, fmt.Errorf("kv-throughput: loading %s: %w", s.name, err)
		}
	}
	var cases []kvtpCase
	for _, op := range []string{bench.KVOpPut, bench.KVOpGet} {
		for _, n := range p.Concurrency {
			cases = append(cases, kvtpCase{op, n})
		}
	}
	// results[case][system] are the repetitions' results; syncs[case][system]
	// the raft log and all syncs per operation of each repetition.
	results := make([][][]bench.Result, len(cases))
	syncs := make([][][][2]float64, len(cases))
	for c := range results {
		results[c] = make([][]bench.Result, len(systems))
		syncs[c] = make([][][2]float64, len(systems))
	}
	var fsyncs []float64 // the fsync probe's median of each repetition, µs
	// Every run has the same seed: a key's value is a function of the seed
	// (bench.RunKV), so the gets check what the puts wrote.
	for rep := 0; rep < p.Reps; rep++ {
		fl, err := fsyncLatency(dir, 200)
		if err != nil {
			return nil, fmt.Errorf("kv-throughput: fsync probe: %w", err)
		}
		fsyncs = append(fsyncs, float64(fl.Microseconds()))
		for c, kc := range cases {
			for s, sys := range systems {
				var raft0, all0 int64
				if sys.syncs != nil {
					raft0, all0 = sys.syncs.raft.Load(), sys.syncs.all.Load()
				}
				res, err := bench.RunKV(ctx, sys.kv, bench.KVOptions{Op: kc.op, ValueSize: p.ValueBytes, Keys: p.Keys,
					Concurrency: kc.concurrency, Duration: p.Duration, Prefix: "tp/", Seed: cfg.Seed, Loaded: true})
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					return nil, fmt.Errorf("kv-throughput: %s on %s: %w", kc, sys.name, err)
				}
				results[c][s] = append(results[c][s], res)
				if sys.syncs != nil && res.Ops > 0 {
					syncs[c][s] = append(syncs[c][s], [2]float64{
						float64(sys.syncs.raft.Load()-raft0) / float64(res.Ops),
						float64(sys.syncs.all.Load()-all0) / float64(res.Ops)})
				}
			}
		}
	}
	r, err := kvThroughputReport(cfg, p, systems, cases, results, load)
	if err != nil {
		return nil, err
	}
	return r, kvSyncsSection(r, systems, cases, results, syncs, fsyncs)
}

func kvtpMedian(v []float64) (med, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return benchMedian(s), s[0], s[len(s)-1]
}

func kvThroughputReport(cfg Config, p kvtpPlan, systems []*kvtpSystem, cases []kvtpCase, results [][][]bench.Result, load string) (*report.Report, error) {
	r, err := report.New("kv-throughput", "KV store throughput against etcd, batched and unbatched")
	if err != nil {
		return nil, err
	}
	r.Text("Issue 14. Three systems run in this one process, each on real files with their syncs in a temporary directory of "+
		"the same file system: the KV store as it runs by default (3 nodes on loopback gRPC, shards cut at g, n and t, three replicas "+
		"each, Pebble and the duplicated raft log per replica; batched: group commit of raft log syncs, one raft read index per group of "+
		"queued strong reads, and the leader sending a Ready while it persists it), the same KV store unbatched (kv.Options.ProposalBatch 1: one raft Ready, so one raft log write "+
		"with its syncs, per proposal, persisted before it is sent, and one raft read index per strong read, as before), and a "+
		"3-member etcd embedded in the process (internal/coord/etcdstore, the coordinator's store) through its Go client. "+
		"`flashmend bench --kv`'s load generator (internal/bench RunKV) drives each: %d keys of %d B values, loaded first; "+
		"puts write random keys, gets are linearizable (the KV store's Strong read, etcd's default) and every value read is compared "+
		"with what was written. Each case runs %s per system, the systems one after the other within a case and the cases "+
		"interleaved within each of %d repetitions; figures are medians (min-max) of the repetitions, ratios medians of the "+
		"per-repetition ratios (measured minutes apart at most). Machine: shared 2-core box (load average at start %s, at end %s): "+
		"absolute figures move with the load, the ratios less.",
		p.Keys, p.ValueBytes, p.Duration, p.Reps, load, loadAverage())
	header := []string{"case"}
	for _, s := range systems {
		header = append(header, s.name+" ops/s", "p50/p99 ms")
	}
	header = append(header, "batched / unbatched", "batched / etcd")
	t := report.Table{Caption: "Operations per second (median, min-max) and latency (medians of the runs' p50 and p99)", Header: header}
	for c, kc := range cases {
		row := []string{kc.String()}
		for s := range systems {
			var ops, p50, p99 []float64
			for _, res := range results[c][s] {
				ops, p50, p99 = append(ops, res.OpsPerS), append(p50, res.LatencyMsP50), append(p99, res.LatencyMsP99)
			}
			m, lo, hi := kvtpMedian(ops)
			m50, _, _ := kvtpMedian(p50)
			m99, _, _ := kvtpMedian(p99)
			errs := 0
			for _, res := range results[c][s] {
				errs += res.Errors
			}
			cell := fmt.Sprintf("%.0f (%.0f-%.0f)", m, lo, hi)
			if errs > 0 {
				cell += fmt.Sprintf(", %d failed", errs)
			}
			row = append(row, cell, fmt.Sprintf("%.2f / %.2f", m50, m99))
		}
		for _, other := range []int{1, 2} {
			var ratios []float64
			for rep := range results[c][0] {
				if d := results[c][other][rep].OpsPerS; d > 0 {
					ratios = append(ratios, results[c][0][rep].OpsPerS/d)
				}
			}
			m, _, _ := kvtpMedian(ratios)
			row = append(row, fmt.Sprintf("%.2f", m))
		}
		t.Rows = append(t.Rows, row)
	}
	if err := r.Table(t); err != nil {
		return nil, err
	}
	var firsts []string
	for c, kc := range cases {
		for s, sys := range systems {
			for _, res := range results[c][s] {
				if res.FirstError != "" {
					firsts = append(firsts, fmt.Sprintf("`%s` on %s: %s", kc, sys.name, res.FirstError))
					break
				}
			}
		}
	}
	if len(firsts) > 0 {
		r.Text("Failed operations (counted above, left out of the latencies), the first error of each: %s.", joinSemi(firsts))
	}
	return r, nil
}

// kvSyncsSection states what bounds a put: the syncs it costs, counted,
// and the file system's fsync latency, measured in the same run.
func kvSyncsSection(r *report.Report, systems []*kvtpSystem, cases []kvtpCase, results [][][]bench.Result, syncs [][][][2]float64, fsyncs []float64) error {
	fm, flo, fhi := kvtpMedian(fsyncs)
	header := []string{"case"}
	for _, s := range systems {
		if s.syncs != nil {
			header = append(header, s.name+": raft log syncs / op", "all syncs / op")
		}
	}
	t := report.Table{Caption: "Syncs per operation of the KV store (all nodes, all replicas; medians of the repetitions), counted by a file system wrapper under its files", Header: header}
	for c, kc := range cases {
		row := []string{kc.String()}
		for s, sys := range systems {
			if sys.syncs == nil {
				continue
			}
			var raft, all []float64
			for _, v := range syncs[c][s] {
				raft, all = append(raft, v[0]), append(all, v[1])
			}
			rm, _, _ := kvtpMedian(raft)
			am, _, _ := kvtpMedian(all)
			row = append(row, fmt.Sprintf("%.2f", rm), fmt.Sprintf("%.2f", am))
		}
		t.Rows = append(t.Rows, row)
	}
	if err := r.Table(t); err != nil {
		return err
	}
	var put1 [3]float64
	for c, kc := range cases {
		if kc.op == bench.KVOpPut && kc.concurrency == 1 {
			for s := range systems {
				var p50 []float64
				for _, res := range results[c][s] {
					p50 = append(p50, res.LatencyMsP50)
				}
				put1[s], _, _ = kvtpMedian(p50)
			}
		}
	}
	r.Text("What bounds a put. An fsync after a 1 KiB append on this file system takes %.0f µs (median of the repetitions' medians of 200; %.0f-%.0f), "+
		"measured at the start of every repetition. A KV put is durable on a majority before it applies: the leader's raft log write "+
		"overlaps the followers', and each replica syncs copy 0 of its duplicated raft log before it answers; copy 1 gets the same bytes "+
		"only after that (a crash then tears only one copy, which is how a torn tail is told from damage) and is written and synced "+
		"behind the put by its own goroutine, several appends to a sync under load (internal/raftlog copyWriter). So one fsync on "+
		"the path of every put, as etcd's WAL has, but two per replica in all (the syncs table), where etcd has one per member. A "+
		"commit index that moved alone costs no sync (it rides with the next write). Raft messages between nodes go on one gRPC "+
		"stream per peer. Single-client put latency (p50, this run): flashmend KV batched %.2f ms, unbatched %.2f ms, etcd %.2f ms; "+
		"one fsync is %.2f ms of that. The rest is two loopback round trips, the apply to Pebble and the scheduler of a shared machine.",
		fm, flo, fhi, put1[0], put1[1], put1[2], fm/1000)
	return nil
}

func joinSemi(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}
