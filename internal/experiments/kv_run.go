package experiments

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/flipfs"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/sdfvfs"
)

// kvRunParams is one measured run of the KV store: a 3-node in-memory
// loopback cluster, loaded with Records records, then driven by Clients
// closed-loop YCSB clients for Duration while internal/flipfs flips bits in sstable
// reads.
type kvRunParams struct {
	Mode       kv.RepairMode
	Mix        ycsbMix
	Records    int64
	ValueBytes int
	Shards     int
	Clients    int
	Duration   time.Duration
	// UBER is the flip probability per bit read from an sstable; 0 is the
	// error-free reference.
	UBER       float64
	Persistent bool
	// ProtectMeta models local duplication of sstable metadata blocks
	// (flips there never reach Pebble). The KV store now keeps real copies
	// (internal/guardfs); the experiments leave this off.
	ProtectMeta bool
	// AtRest also flips bits in every stored file (raft logs, MANIFEST,
	// OPTIONS, markers, sstables, protection copies) at UBER before the
	// measured run, and restarts the cluster on them: faults where they
	// land, not only in the sstable reads the run makes.
	AtRest bool
	// CacheBytes is each replica's Pebble block cache: small, so that reads
	// reach the (emulated) device as they do when data outgrows memory.
	CacheBytes    int64
	MemTableBytes int64
	// OpTimeout bounds each client operation.
	OpTimeout time.Duration
	Seed      int64
}

func (p kvRunParams) String() string {
	kind := "transient"
	if p.Persistent {
		kind = "persistent"
	}
	if p.ProtectMeta {
		kind += ", metadata duplicated"
	}
	if p.AtRest {
		kind += ", every file flipped at rest before the run"
	}
	return fmt.Sprintf("mode=%s ycsb=%s records=%d value=%dB shards=%d clients=%d duration=%v uber=%g (%s) cache=%dKiB memtable=%dKiB seed=%d",
		p.Mode, p.Mix.Name, p.Records, p.ValueBytes, p.Shards, p.Clients, p.Duration, p.UBER, kind,
		p.CacheBytes>>10, p.MemTableBytes>>10, p.Seed)
}

func (p kvRunParams) validate() error {
	switch {
	case p.Records < 100 || p.Records > 1<<22:
		return base.InvalidArgumentf("kv run: %d records outside [100, 2^22]", p.Records)
	case p.ValueBytes < 16 || p.ValueBytes > 64<<10:
		return base.InvalidArgumentf("kv run: value of %d bytes outside [16, 64KiB]", p.ValueBytes)
	case p.Shards < 1 || p.Shards > 16:
		return base.InvalidArgumentf("kv run: %d shards outside [1, 16]", p.Shards)
	case p.Clients < 1 || p.Clients > 64:
		return base.InvalidArgumentf("kv run: %d clients outside [1, 64]", p.Clients)
	case p.Duration <= 0 || p.Duration > 10*time.Minute:
		return base.InvalidArgumentf("kv run: duration %v outside (0, 10m]", p.Duration)
	case p.OpTimeout <= 0 || p.OpTimeout > time.Minute:
		return base.InvalidArgumentf("kv run: op timeout %v outside (0, 1m]", p.OpTimeout)
	case !(p.Mix.ReadFraction >= 0 && p.Mix.ReadFraction <= 1):
		return base.InvalidArgumentf("kv run: read fraction %g outside [0, 1]", p.Mix.ReadFraction)
	}
	return nil
}

// kvRunResult is what one run measured.
type kvRunResult struct {
	Params  kvRunParams
	Elapsed time.Duration
	// Reads and Updates issued in the measured phase; ReadErrors and
	// UpdateErrors returned an error to the application (after the client's
	// retries on other replicas); WrongReads returned another record's data
	// (must be 0).
	Reads, Updates, ReadErrors, UpdateErrors, WrongReads int64
	// MissingReads is the part of WrongReads that found no value at all
	// (every record exists: a row lost by a repair).
	MissingReads int64
	// ReadRetries counts reads re-sent to another replica because one
	// refused or failed them: the errors ZippyDB's clients saw before their
	// retry (paper 001 Table 4 counts those).
	ReadRetries int64
	// CPU is the process's user+system CPU time in the measured phase (all
	// three nodes and the clients share the process).
	CPU time.Duration
	// Replica counters summed over every replica.
	Detected, Patches, Rebuilds uint64
	// OwnBytes is what patches read of their replica's own rows to carry
	// them through a wide excise; OwnFailures the patch pieces whose read
	// met new damage and were requested again (kv.ReplicaStats).
	OwnBytes, OwnFailures uint64
	// WaitTimeouts counts patch entries at which a replica's apply worker
	// waited a whole patch timeout for its peers (kv.ReplicaStats).
	WaitTimeouts uint64
	// DownAtEnd counts replicas still rebuilding (refusing reads) when the
	// measured phase ended.
	DownAtEnd int
	// PendingAtEnd counts the patch requests the replicas still waited
	// for when the run ended (kv.Replica status, PendingRepairs).
	PendingAtEnd int
	Flips        flipfs.Stats
	// AtRest is what the flips at rest before the run did (AtRest runs).
	AtRest bitrot.Report
	// Repairs completed in the measured phase (kv.Options.OnRepair).
	Repairs []kv.RepairEvent
	// ShardBytes is the logical size of each shard's state (rows x row
	// size) at the end; SSTBytes the sizes of every live sstable file.
	ShardBytes []uint64
	SSTBytes   []int64
	// PerSecond counts, for each second of the measured phase, completed
	// operations, reads re-sent to another replica, and errors returned to
	// the application.
	PerSecond []kvSecond
}

// kvSecond is one second of a run.
type kvSecond struct {
	Ops, ReadRetries, AppErrors int64
}

// MedianOpsPerSecond is the median of the per-second throughput (whole
// seconds only): robust to a neighbour's burst on a shared machine.
func (r kvRunResult) MedianOpsPerSecond() float64 {
	var xs []float64
	for i, s := range r.PerSecond {
		if float64(i+1) <= r.Elapsed.Seconds() {
			xs = append(xs, float64(s.Ops))
		}
	}
	if len(xs) == 0 {
		return r.OpsPerSecond()
	}
	sort.Float64s(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// OpsPerSecond is the measured throughput.
func (r kvRunResult) OpsPerSecond() float64 {
	return float64(r.Reads+r.Updates) / r.Elapsed.Seconds()
}

// CPUPerKOp is CPU milliseconds per thousand operations.
func (r kvRunResult) CPUPerKOp() float64 {
	ops := r.Reads + r.Updates
	if ops == 0 {
		return 0
	}
	return float64(r.CPU.Milliseconds()) / float64(ops) * 1000
}

func (r kvRunResult) String() string {
	return fmt.Sprintf("%s: %.0f ops/s reads=%d readErrors=%d readRetries=%d wrong=%d updates=%d updateErrors=%d cpu=%v detected=%d patches=%d rebuilds=%d flips=%d",
		r.Params.Mode, r.OpsPerSecond(), r.Reads, r.ReadErrors, r.ReadRetries, r.WrongReads, r.Updates, r.UpdateErrors,
		r.CPU, r.Detected, r.Patches, r.Rebuilds, r.Flips.Flips)
}

// repairLog collects kv.RepairEvents from every replica's apply worker.
type repairLog struct {
	mu       sync.Mutex
	measured atomic.Bool
	events   []kv.RepairEvent
}

func (l *repairLog) record(e kv.RepairEvent) {
	if !l.measured.Load() {
		return
	}
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *repairLog) take() []kv.RepairEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]kv.RepairEvent(nil), l.events...)
}

// processCPU is the process's user plus system CPU time so far.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// runKV runs one measurement. The cluster lives in memory and is closed
// before it returns.
func runKV(ctx context.Context, p kvRunParams) (kvRunResult, error) {
	res := kvRunResult{Params: p}
	if err := p.validate(); err != nil {
		return res, err
	}
	var protect sdfvfs.RangesFunc
	if p.ProtectMeta {
		protect = sdfvfs.SSTMetadataRanges(engine.SSTReaderOptions())
	}
	flips, err := flipfs.New(vfs.NewMem(), flipfs.Options{UBER: p.UBER, Persistent: p.Persistent, ProtectMeta: protect, Seed: p.Seed})
	if err != nil {
		return res, err
	}
	log := &repairLog{}
	c, err := kvcluster.Start(kvcluster.Config{
		Nodes: 3, Splits: ycsbSplits(p.Records, p.Shards), FS: flips,
		Options: kv.Options{
			Mode: p.Mode, CacheBytes: p.CacheBytes, MemTableBytes: p.MemTableBytes, OnRepair: log.record,
		},
	})
	if err != nil {
		return res, err
	}
	defer func() {
		c.Close()
		runtime.GC() // the next run starts from a clean heap
	}()
	for _, s := range c.Layout.Shards {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := c.WaitLeader(wctx, s.ID)
		cancel()
		if err != nil {
			return res, err
		}
	}
	if err := kvLoad(ctx, c, p); err != nil {
		return res, fmt.Errorf("kv run: load: %w", err)
	}
	// Eventual reads may go to any replica: wait until every replica has
	// applied the load, so that a record found missing is an error, not a
	// follower that is behind.
	if err := kvWaitCaughtUp(ctx, c); err != nil {
		return res, err
	}
	if p.AtRest && p.UBER > 0 {
		for _, id := range c.NodeIDs() {
			if err := c.StopNode(id); err != nil {
				return res, err
			}
		}
		rep, err := bitrot.Flip(flips.FS, "cluster", p.UBER, rand.New(rand.NewSource(p.Seed+7)))
		if err != nil {
			return res, err
		}
		res.AtRest = rep
		for _, id := range c.NodeIDs() {
			if err := c.RestartNode(id); err != nil {
				return res, fmt.Errorf("kv run: restart after flips at rest: %w", err)
			}
		}
		for _, s := range c.Layout.Shards {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := c.WaitLeader(wctx, s.ID)
			cancel()
			if err != nil {
				return res, err
			}
		}
	}

	flips.Enable(true)
	log.measured.Store(true)
	cpu0, err := processCPU()
	if err != nil {
		return res, err
	}
	start := time.Now()
	tallies, seconds, err := kvDrive(ctx, c, p)
	res.Elapsed = time.Since(start)
	cpu1, cpuErr := processCPU()
	flips.Enable(false)
	log.measured.Store(false)
	if err != nil {
		return res, err
	}
	if cpuErr != nil {
		return res, cpuErr
	}
	res.CPU = cpu1 - cpu0
	res.PerSecond = seconds
	for _, t := range tallies {
		res.Reads += t.reads
		res.Updates += t.updates
		res.ReadErrors += t.readErrors
		res.UpdateErrors += t.updateErrors
		res.WrongReads += t.wrongReads
		res.MissingReads += t.missingReads
		res.ReadRetries += t.readRetries
	}
	res.Flips = flips.Stats()
	res.Repairs = log.take()
	for _, id := range c.NodeIDs() {
		n := c.Node(id)
		if n == nil {
			continue
		}
		for _, s := range c.Layout.Shards {
			if r := n.Replica(s.ID); r != nil {
				st := r.Stats()
				res.Detected += st.CorruptionsDetected
				res.Patches += st.PatchesApplied
				res.Rebuilds += st.Rebuilds
				res.OwnBytes += st.OwnBytesRead
				res.OwnFailures += st.OwnReadFailures
				res.WaitTimeouts += st.PatchWaitTimeouts
				if status, err := r.Status(); err == nil {
					if strings.HasPrefix(status.State, "rebuilding") {
						res.DownAtEnd++
					}
					res.PendingAtEnd += int(status.PendingRepairs)
				}
			}
		}
	}
	rowBytes := uint64(len(ycsbKey(0)) + p.ValueBytes)
	for _, s := range c.Layout.Shards {
		lead, err := c.WaitLeader(ctx, s.ID)
		if err != nil {
			return res, err
		}
		st, err := c.Node(lead).Replica(s.ID).Status()
		if err != nil {
			return res, err
		}
		res.ShardBytes = append(res.ShardBytes, st.Keys*rowBytes)
	}
	res.SSTBytes, err = sstSizes(flips.FS, "cluster")
	return res, err
}

// kvWaitCaughtUp waits until every replica of every shard has applied the
// same index.
func kvWaitCaughtUp(ctx context.Context, c *kvcluster.Cluster) error {
	deadline := time.Now().Add(time.Minute)
	for _, s := range c.Layout.Shards {
		for {
			indexes := map[uint64]bool{}
			for _, id := range c.NodeIDs() {
				st, err := c.Node(id).Replica(s.ID).Status()
				if err != nil {
					return err
				}
				indexes[st.AppliedIndex] = true
			}
			if len(indexes) == 1 {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("kv run: replicas of %s did not catch up: applied %v", s.ID, indexes)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// kvLoad inserts every record, in batches that stay within one shard.
func kvLoad(ctx context.Context, c *kvcluster.Cluster, p kvRunParams) error {
	cl, err := c.NewClient(kvclient.Options{Seed: p.Seed})
	if err != nil {
		return err
	}
	defer cl.Close()
	const batch = 64
	var ops []kvclient.Op
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		// Loading writes the same values again on a retry, so a batch whose
		// outcome is unknown (a slow apply on a loaded machine) is re-sent.
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err = cl.Batch(bctx, ops, nil)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
		}
		ops = ops[:0]
		return err
	}
	layout := cl.Layout()
	for i := int64(0); i < p.Records; i++ {
		k := ycsbKey(i)
		if len(ops) > 0 && (len(ops) == batch || layout.ShardFor(k).ID != layout.ShardFor(ops[0].Key).ID) {
			if err := flush(); err != nil {
				return err
			}
		}
		ops = append(ops, kvclient.Op{Key: k, Value: ycsbValue(i, 0, p.ValueBytes)})
	}
	return flush()
}

type kvTally struct {
	reads, updates, readErrors, updateErrors, wrongReads, missingReads, readRetries int64
}

// kvDrive runs the closed-loop clients until the duration is over.
func kvDrive(ctx context.Context, c *kvcluster.Cluster, p kvRunParams) ([]kvTally, []kvSecond, error) {
	keys, err := newScrambledZipfian(p.Records)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	deadline := start.Add(p.Duration)
	nsec := int(p.Duration/time.Second) + 2
	secOps, secRetries, secErrors := make([]atomic.Int64, nsec), make([]atomic.Int64, nsec), make([]atomic.Int64, nsec)
	second := func() int { return min(int(time.Since(start)/time.Second), nsec-1) }
	tallies := make([]kvTally, p.Clients)
	errs := make([]error, p.Clients)
	var wg sync.WaitGroup
	for w := 0; w < p.Clients; w++ {
		cl, err := c.NewClient(kvclient.Options{Seed: p.Seed + int64(w) + 1})
		if err != nil {
			return nil, nil, err
		}
		defer cl.Close()
		wg.Add(1)
		go func(w int, cl *kvclient.Client) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(p.Seed*1000 + int64(w)))
			t := &tallies[w]
			version := int64(0)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				i := keys.next(rng)
				octx, cancel := context.WithTimeout(ctx, p.OpTimeout)
				if rng.Float64() < p.Mix.ReadFraction {
					before := cl.Retries()
					v, found, err := cl.Get(octx, ycsbKey(i), kvclient.Eventual())
					sec := second()
					t.reads++
					retries := int64(cl.Retries() - before)
					t.readRetries += retries
					secRetries[sec].Add(retries)
					switch {
					case err != nil:
						t.readErrors++
						secErrors[sec].Add(1)
					case !found:
						t.wrongReads++
						t.missingReads++
					case !bytes.HasPrefix(v, []byte(fmt.Sprintf("%d:", i))):
						t.wrongReads++
					}
					secOps[sec].Add(1)
				} else {
					version++
					_, err := cl.Put(octx, ycsbKey(i), ycsbValue(i, int64(w)<<32|version, p.ValueBytes))
					sec := second()
					t.updates++
					if err != nil {
						t.updateErrors++
						secErrors[sec].Add(1)
					}
					secOps[sec].Add(1)
				}
				cancel()
			}
			errs[w] = ctx.Err()
		}(w, cl)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	seconds := make([]kvSecond, 0, nsec)
	for i := 0; i < nsec; i++ {
		seconds = append(seconds, kvSecond{Ops: secOps[i].Load(), ReadRetries: secRetries[i].Load(), AppErrors: secErrors[i].Load()})
	}
	for len(seconds) > 0 && seconds[len(seconds)-1] == (kvSecond{}) {
		seconds = seconds[:len(seconds)-1]
	}
	return tallies, seconds, nil
}

// sstSizes lists the sizes of every sstable under dir.
func sstSizes(fs vfs.FS, dir string) ([]int64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []int64
	for _, name := range names {
		path := fs.PathJoin(dir, name)
		st, err := fs.Stat(path)
		if err != nil {
			continue // removed by a compaction meanwhile
		}
		if st.IsDir() {
			sub, err := sstSizes(fs, path)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		if strings.HasSuffix(name, ".sst") {
			out = append(out, st.Size())
		}
	}
	return out, nil
}
