package nemesis

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/report"
)

// CrashOptions configures a crash-point run (RunCrashPoints).
type CrashOptions struct {
	// Argv runs the flashmend binary (argv[0] and any leading arguments).
	Argv []string
	// Dir holds the cluster's directories and every process's log.
	Dir  string
	Seed int64
	// Store is the nodes' store: "sdf" (emulated flash, the default; the
	// KV replicas on it too) or "file"; DeviceSize each node's device.
	Store, DeviceSize string
	// Nodes is the number of storage nodes (at least 4; 6 or more also
	// stores EC objects). Default 6.
	Nodes int
	// Points are the crash points tried, in this order (default every
	// registered point, crashpoint.Points; with Store "file", those not of
	// the SDF layer).
	Points []string
	// Warmup is how long the workload runs before each arming (default
	// 4s); Bound how long an armed node may run without reaching its point
	// before it is reported as not reached (default 60s).
	Warmup, Bound time.Duration
	// MaxAt: the hit a node crashes at is drawn from 1..MaxAt (default 3).
	MaxAt int
	// KVClients work on Keys registers (strong gets, puts, compare-and-
	// sets; porcupine checks the history).
	KVClients, Keys int
	// ObjClients each overwrite ObjKeys objects of their own (REP, and EC
	// on 6 nodes or more), at most ObjSize bytes each.
	ObjClients, ObjKeys, ObjSize int
	// CheckTimeout bounds each linearizability check.
	CheckTimeout time.Duration
	// Logf narrates the run (nil: quiet).
	Logf func(format string, args ...any)
}

// Validate fills in the defaults (6 nodes on 256 MiB emulated flash, every
// crash point of the store's layers) and checks the options.
func (o *CrashOptions) Validate() error {
	if len(o.Argv) == 0 || o.Dir == "" {
		return base.InvalidArgumentf("crashpoints: Argv and Dir are required")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Nodes, 6)
	def(&o.MaxAt, 3)
	def(&o.KVClients, 3)
	def(&o.Keys, 4)
	def(&o.ObjClients, 2)
	def(&o.ObjKeys, 6)
	def(&o.ObjSize, 256<<10)
	if o.Store == "" {
		o.Store = "sdf"
	}
	if o.DeviceSize == "" {
		o.DeviceSize = "256MiB"
	}
	if o.Warmup == 0 {
		o.Warmup = 4 * time.Second
	}
	if o.Bound == 0 {
		o.Bound = time.Minute
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = time.Minute
	}
	if o.Points == nil {
		for _, p := range crashpoint.Points {
			// The SDF layer's points sit under the flash store only.
			if o.Store == "sdf" || !strings.HasPrefix(p.Layer, "sdf") {
				o.Points = append(o.Points, p.Name)
			}
		}
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Store != "file" && o.Store != "sdf" {
		return base.InvalidArgumentf("crashpoints: unknown store %q (file or sdf)", o.Store)
	}
	for _, p := range o.Points {
		if _, ok := crashpoint.Lookup(p); !ok {
			return base.InvalidArgumentf("crashpoints: unknown crash point %q (known: %s)", p, strings.Join(crashpoint.Names(), ", "))
		}
	}
	if o.Nodes < 4 || len(o.Points) == 0 || o.MaxAt < 1 || o.Warmup < 0 || o.Bound <= 0 || o.KVClients < 0 || o.Keys < 1 ||
		o.ObjClients < 0 || o.ObjKeys < 1 || o.ObjSize < 1 || o.CheckTimeout <= 0 {
		return base.InvalidArgumentf("crashpoints: need at least 4 nodes, one point, one key, a positive bound, hit count and sizes (got %d nodes, %d points, %d keys, bound %v, max hit %d)",
			o.Nodes, len(o.Points), o.Keys, o.Bound, o.MaxAt)
	}
	return nil
}

// Outcomes of one crash point.
const (
	CrashOK         = "ok"          // reached; the node restarted, rejoined, every check held
	CrashRepaired   = "repaired"    // as ok, but a scrub rewrote chunks of the crashed node
	CrashNotReached = "not reached" // the armed node ran Bound without hitting the point
	CrashFailed     = "FAILED"      // a check failed (Detail says which)
)

// CrashPoint is what happened at one point.
type CrashPoint struct {
	Point, Layer string
	Node         base.NodeID // the node armed
	At           int64       // the hit it was armed to crash at
	Reached      bool
	// ReachedAfter is how long the armed node ran before it crashed.
	ReachedAfter time.Duration
	// RepairedOnVictim counts chunks the scrub after the restart rewrote on
	// the crashed node (it lost or tore them).
	RepairedOnVictim int
	Outcome          string
	Detail           string
	Elapsed          time.Duration
}

// CrashResult is what a crash-point run found.
type CrashResult struct {
	Seed       int64
	Store      string
	DeviceSize string
	Nodes      int
	Points     []CrashPoint
	// KV history over the whole run and porcupine's verdict after the last
	// point ("Ok", "Illegal", "Unknown").
	KVOps, KVUnknown int
	Linearizable     string
	Visualization    string
	// Objects: puts acknowledged and failed over the run; objects checked
	// after the last point.
	ObjPuts, ObjPutFailed, ObjChecked int
	Elapsed                           time.Duration
	// Errors the harness met that are not verdicts on one point.
	Errors []string
}

// Passed says whether no point failed and the KV history is linearizable.
func (r *CrashResult) Passed() bool {
	for _, p := range r.Points {
		if p.Outcome == CrashFailed {
			return false
		}
	}
	return r.Linearizable == string(porcupine.Ok) && len(r.Errors) == 0
}

// Summary is one line for a combined report (torture.md): points
// reached, failed and not reached, and the KV verdict.
func (r *CrashResult) Summary() string {
	reached, failed, notReached := 0, 0, 0
	for _, p := range r.Points {
		switch {
		case p.Outcome == CrashFailed:
			failed++
		case !p.Reached:
			notReached++
		}
		if p.Reached {
			reached++
		}
	}
	return fmt.Sprintf("%d of %d crash points reached, %d failed, %d not reached; KV history %s; %d object puts acknowledged",
		reached, len(r.Points), failed, notReached, r.Linearizable, r.ObjPuts)
}

// objKey is one object key a client overwrites, and what a read of it may
// return: the last acknowledged put, or any put not acknowledged since (it
// may have applied), never anything else, never absent once a put was
// acknowledged.
type objKey struct {
	acked *[32]byte
	maybe map[[32]byte]bool
}

type crashHarness struct {
	*harness
	copts   CrashOptions
	objMu   sync.Mutex
	objs    map[string]*objKey
	objPuts int
	objFail int
}

var reachedLine = regexp.MustCompile(`^crashpoint: (\S+)@(\d+) reached`)

// RunCrashPoints starts a coordinator and opts.Nodes storage nodes as
// separate processes and, for each point in turn while KV and object
// clients work: restarts one node (drawn from the seed) armed at the
// point's n-th hit (n drawn from 1..MaxAt), waits until it dies there (or
// Bound passes: not reached), restarts it unarmed from what was on its
// disk, and checks that it rejoins, every key answers, every object reads
// back as its last acknowledged put or a later unacknowledged one (never
// absent after an acknowledgement, never other bytes), a scrub of every
// object finds what the crashed node lost, and the KV history so far is
// linearizable. An error means the harness could not run (the cluster
// did not start); what the checks found is in the result.
func RunCrashPoints(ctx context.Context, opts CrashOptions) (*CrashResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	nopts := Options{Argv: opts.Argv, Dir: opts.Dir, Seed: opts.Seed, Store: opts.Store, DeviceSize: opts.DeviceSize,
		Nodes: opts.Nodes, KVClients: opts.KVClients, Keys: opts.Keys, ObjSize: opts.ObjSize, CheckTimeout: opts.CheckTimeout,
		Logf: opts.Logf}
	h := &crashHarness{
		harness: &harness{opts: nopts, start: time.Now(), http: &http.Client{Timeout: 10 * time.Second}, parts: map[int]map[link]bool{}},
		copts:   opts, objs: map[string]*objKey{},
	}
	res := &CrashResult{Seed: opts.Seed, Store: opts.Store, DeviceSize: opts.DeviceSize, Nodes: opts.Nodes}
	defer h.shutdown()
	if err := h.startCluster(ctx); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(opts.Seed))
	for _, name := range opts.Points {
		if ctx.Err() != nil {
			break
		}
		victim := h.nodes[rng.Intn(len(h.nodes))]
		at := 1 + rng.Int63n(int64(opts.MaxAt))
		workSeed := rng.Int63()
		cp := h.point(ctx, crashpoint.Spec{Name: name, At: at}, victim, workSeed)
		h.logf("crash point %s@%d on node %d: %s %s", name, cp.At, victim.id, cp.Outcome, cp.Detail)
		res.Points = append(res.Points, cp)
	}
	h.mu.Lock()
	res.KVOps, res.KVUnknown, res.Linearizable, res.Visualization = h.res.KVOps, h.res.KVUnknown, h.res.Linearizable, h.res.Visualization
	res.Errors = append(res.Errors, h.res.Errors...)
	h.mu.Unlock()
	h.objMu.Lock()
	res.ObjPuts, res.ObjPutFailed, res.ObjChecked = h.objPuts, h.objFail, len(h.objs)
	h.objMu.Unlock()
	res.Elapsed = time.Since(h.start)
	return res, ctx.Err()
}

// point runs one crash point on victim and checks what followed. A point
// armed at a later hit and not reached is armed once more at its first.
func (h *crashHarness) point(ctx context.Context, spec crashpoint.Spec, victim *nodeProc, workSeed int64) CrashPoint {
	start := time.Now()
	p, _ := crashpoint.Lookup(spec.Name)
	cp := CrashPoint{Point: spec.Name, Layer: p.Layer, Node: victim.id, At: spec.At}
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	stopWork := h.startWork(ctx, workSeed)
	sleep(ctx, h.copts.Warmup)
	// A clean stop, so that the only crash of the round is the point's.
	victim.p.stop(20 * time.Second)
	bound := h.copts.Bound
	stopAid := func() {}
	if spec.Name == "sdf-gc-move" && h.opts.Store == "sdf" {
		// Host GC moves pages only when a device runs short of empty
		// zones: churn big objects over a small live set (old versions
		// become garbage) until the devices need it.
		stopAid = h.startChurn(ctx)
		bound *= 4
	}
	if spec.Name == "patch-ingest" || spec.Name == "patch-applied" {
		// A KV patch is ingested only where a replica found damage:
		// damage the victim's replicas' blocks and read them there.
		stopAid = h.startKVDamage(ctx, victim.id)
	}
	reached, after, err := h.runArmed(ctx, victim, spec, bound)
	if !reached && err == nil && spec.At > 1 {
		// Some points are hit once per replica or per start (a log's
		// rewrite when it opens): give the first hit a chance too.
		h.logf("crash point %s not reached on node %d; armed at its first hit instead", spec, victim.id)
		spec.At, cp.At = 1, 1
		reached, after, err = h.runArmed(ctx, victim, spec, bound)
	}
	stopAid() // the checks run on a quiet cluster
	cp.Reached, cp.ReachedAfter = reached, after
	if err != nil {
		fail("armed node: %v", err)
	}
	if err := h.startNode(ctx, victim); err != nil {
		fail("did not restart from its disk: %v%s", err, logTail(victim.dir+".log", 600))
	} else if err := h.awaitLive(ctx); err != nil {
		fail("did not rejoin: %v", err)
	}
	sleep(ctx, 2*time.Second) // the workload goes on with the node back
	stopWork()

	if err := waitUntil(ctx, 2*time.Minute, func() bool { return h.kvAnswers(ctx) }); err != nil {
		fail("a KV key did not answer a strong read within 2m of the restart: %s", h.kvStuck(ctx))
	}
	if msg := h.checkReplicas(ctx); msg != "" {
		fail("%s", msg)
	}
	wrong, lost, repaired := h.checkObjects(ctx, victim.id)
	cp.RepairedOnVictim = repaired
	problems = append(problems, wrong...)
	if lost > 0 {
		fail("%d acknowledged objects unreadable", lost)
	}
	h.finalReads(ctx)
	if verdict := h.checkHistory(); verdict != porcupine.Ok {
		fail("KV history %s", verdict)
	}
	cp.Elapsed = time.Since(start)
	switch {
	case len(problems) > 0:
		cp.Outcome = CrashFailed
		cp.Detail = strings.Join(problems, "; ")
	case !reached:
		cp.Outcome = CrashNotReached
		cp.Detail = fmt.Sprintf("no hit in %v", bound)
	case repaired > 0:
		cp.Outcome = CrashRepaired
		cp.Detail = fmt.Sprintf("crashed after %v; the scrub rewrote %d chunks on node %d", after.Round(time.Millisecond), repaired, victim.id)
	default:
		cp.Outcome = CrashOK
		cp.Detail = fmt.Sprintf("crashed after %v", after.Round(time.Millisecond))
	}
	return cp
}

// runArmed starts victim armed at spec and waits until it dies at the
// point (reached), or Bound passes (it is stopped: not reached). An
// error is an armed node that died otherwise.
func (h *crashHarness) runArmed(ctx context.Context, n *nodeProc, spec crashpoint.Spec, bound time.Duration) (reached bool, after time.Duration, err error) {
	started := time.Now()
	p, err := startProcEnv(fmt.Sprintf("node %d (armed %s)", n.id, spec), h.opts.Argv, n.dir+".log",
		[]string{crashpoint.Env + "=" + spec.String()}, h.nodeArgs(n)...)
	if err != nil {
		return false, 0, err
	}
	n.p = p
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	select {
	case <-p.done:
	case <-deadline.C:
		p.stop(20 * time.Second)
		return false, 0, nil
	case <-ctx.Done():
		p.kill()
		return false, 0, ctx.Err()
	}
	after = time.Since(started)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if m := reachedLine.FindStringSubmatch(l); m != nil && m[1] == spec.Name {
			return true, after, nil
		}
	}
	return false, after, fmt.Errorf("exited (%v) without reaching %s%s", p.err, spec, logTail(n.dir+".log", 600))
}

// awaitLive waits until the coordinator sees every node live.
func (h *crashHarness) awaitLive(ctx context.Context) error {
	return waitUntil(ctx, time.Minute, func() bool {
		ns, err := h.cl.Nodes(ctx)
		live := 0
		for _, n := range ns {
			if n.Live {
				live++
			}
		}
		return err == nil && live == len(h.nodes)
	})
}

// startWork starts the KV and object clients; the returned func stops
// them and waits.
func (h *crashHarness) startWork(ctx context.Context, seed int64) (stop func()) {
	rng := rand.New(rand.NewSource(seed))
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < h.copts.KVClients; i++ {
		wg.Add(1)
		go func(i int, seed int64) { defer wg.Done(); h.kvWorker(wctx, i, rand.New(rand.NewSource(seed))) }(i, rng.Int63())
	}
	for i := 0; i < h.copts.ObjClients; i++ {
		wg.Add(1)
		go func(i int, seed int64) { defer wg.Done(); h.overwriter(wctx, i, rand.New(rand.NewSource(seed))) }(i, rng.Int63())
	}
	return func() { cancel(); wg.Wait() }
}

// startKVDamage damages, every second, the sstable block holding each
// register on the victim's replica of its shard (KVAdmin CorruptBlock,
// which flushes the memtable first) and reads the register with eventual
// reads, which reach that replica among others: the replica detects the
// damage and has it patched through raft (a patch entry, then
// IngestAndExcise). The returned func stops it and waits.
func (h *crashHarness) startKVDamage(ctx context.Context, victim base.NodeID) (stop func()) {
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for dctx.Err() == nil {
			for k := 0; k < h.opts.Keys && dctx.Err() == nil; k++ {
				key := []byte(kvKey(k))
				shard := h.kv.Layout().ShardFor(key)
				for rid, node := range shard.Replicas {
					if node != victim {
						continue
					}
					if ac, err := h.kv.AdminClient(node); err == nil {
						cctx, cancel := context.WithTimeout(dctx, 5*time.Second)
						_, _ = ac.CorruptBlock(cctx, &kvpb.CorruptBlockRequest{Shard: uint64(shard.ID), Replica: uint64(rid), Key: key})
						cancel()
					}
					for i := 0; i < 8; i++ {
						cctx, cancel := context.WithTimeout(dctx, 2*time.Second)
						_, _, _ = h.kv.Get(cctx, key, kvclient.Eventual())
						cancel()
					}
				}
			}
			sleep(dctx, time.Second)
		}
	}()
	return func() { cancel(); <-done }
}

// churnKeys and churnBytes: the churn overwrites churnKeys objects of
// churnBytes each (EC on 6 nodes or more: every node gets a shard).
const (
	churnKeys  = 16
	churnBytes = 4 << 20
)

// startChurn starts two clients overwriting big objects (checked like
// the others); the returned func stops them and waits.
func (h *crashHarness) startChurn(ctx context.Context) (stop func()) {
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			h.overwrite(cctx, fmt.Sprintf("crash/churn-%d", i), churnKeys/2, churnBytes, rand.New(rand.NewSource(int64(i)+h.opts.Seed)))
		}(i)
	}
	return func() { cancel(); wg.Wait() }
}

// overwriter puts objects over its own ObjKeys keys in turn (REP, and EC
// on 6 nodes or more), so that old versions become garbage the SDF layer
// collects, and records what each key may read back as.
func (h *crashHarness) overwriter(ctx context.Context, id int, rng *rand.Rand) {
	h.overwrite(ctx, fmt.Sprintf("crash/obj-%d", id), h.copts.ObjKeys, h.copts.ObjSize, rng)
}

// overwrite puts objects of 1..size bytes over keys <prefix>-0 ..
// <prefix>-<keys-1> in turn until ctx ends.
func (h *crashHarness) overwrite(ctx context.Context, prefix string, keys, size int, rng *rand.Rand) {
	for seq := rng.Intn(keys); ctx.Err() == nil; seq++ {
		key := fmt.Sprintf("%s-%d", prefix, seq%keys)
		data := make([]byte, 1+rng.Intn(size))
		rng.Read(data)
		sum := sha256.Sum256(data)
		red := objectpb.Redundancy_REP
		if h.opts.Nodes >= 6 && rng.Intn(2) == 1 {
			red = objectpb.Redundancy_EC
		}
		h.objMu.Lock()
		k := h.objs[key]
		if k == nil {
			k = &objKey{maybe: map[[32]byte]bool{}}
			h.objs[key] = k
		}
		k.maybe[sum] = true // from its call on, it may be read
		h.objMu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := h.cl.Put(cctx, key, data, red)
		cancel()
		h.objMu.Lock()
		if err == nil {
			k.acked, k.maybe = &sum, map[[32]byte]bool{}
			h.objPuts++
		} else if ctx.Err() == nil {
			h.objFail++
		}
		h.objMu.Unlock()
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
		}
	}
}

// checkObjects reads every object key back: absent only if no put was
// acknowledged, else the bytes of the last acknowledged put or of one not
// acknowledged since. Then it scrubs each key's current version and counts
// the chunks rewritten on victim.
func (h *crashHarness) checkObjects(ctx context.Context, victim base.NodeID) (wrong []string, lost, repairedOnVictim int) {
	h.objMu.Lock()
	keys := make([]string, 0, len(h.objs))
	for k := range h.objs {
		keys = append(keys, k)
	}
	h.objMu.Unlock()
	sort.Strings(keys)
	for _, key := range keys {
		h.objMu.Lock()
		k := h.objs[key]
		acked, maybe := k.acked, make(map[[32]byte]bool, len(k.maybe))
		for s := range k.maybe {
			maybe[s] = true
		}
		h.objMu.Unlock()
		var got []byte
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			got, err = h.cl.Get(cctx, key)
			cancel()
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
		}
		switch {
		case errors.Is(err, fs.ErrNotExist) && acked == nil:
			continue // never acknowledged, and absent: fine
		case errors.Is(err, fs.ErrNotExist):
			lost++
			wrong = append(wrong, fmt.Sprintf("object %s: absent after an acknowledged put", key))
			continue
		case err != nil:
			lost++
			continue
		}
		sum := sha256.Sum256(got)
		if !(acked != nil && sum == *acked) && !maybe[sum] {
			wrong = append(wrong, fmt.Sprintf("object %s: %d bytes read back are neither its acknowledged put nor one in flight", key, len(got)))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		rec, err := h.cl.Stat(cctx, key)
		if err == nil {
			var r *client.ReadReport
			r, err = h.cl.ScrubObject(cctx, rec, nil, nil)
			if r != nil {
				repairedOnVictim += r.RepairsByNode[uint64(victim)]
			}
		}
		cancel()
		if err != nil {
			h.logf("scrub of %s: %v", key, err)
		}
	}
	return wrong, lost, repairedOnVictim
}

// kvStuck says which registers do not answer a strong read, why, and what
// their shard's replicas say of themselves (for a failure's detail).
func (h *crashHarness) kvStuck(ctx context.Context) string {
	var out []string
	for k := 0; k < h.opts.Keys; k++ {
		key := []byte(kvKey(k))
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _, err := h.kv.Get(cctx, key, kvclient.Strong())
		cancel()
		if err == nil {
			continue
		}
		shard := h.kv.Layout().ShardFor(key)
		line := fmt.Sprintf("%s (shard %s): %v; replicas:", key, shard.ID, err)
		rids := make([]base.ReplicaID, 0, len(shard.Replicas))
		for rid := range shard.Replicas {
			rids = append(rids, rid)
		}
		sort.Slice(rids, func(i, j int) bool { return rids[i] < rids[j] })
		for _, rid := range rids {
			node := shard.Replicas[rid]
			ac, err := h.kv.AdminClient(node)
			if err != nil {
				line += fmt.Sprintf(" node %d: %v;", node, err)
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := ac.ReplicaStatus(cctx, &kvpb.ReplicaStatusRequest{Shard: uint64(shard.ID)})
			cancel()
			if err != nil {
				line += fmt.Sprintf(" node %d: %v;", node, err)
				continue
			}
			line += fmt.Sprintf(" node %d: state %q leader %v applied %d raft log %q failed %q;", node, st.State, st.Leader,
				st.AppliedIndex, st.RaftLog, st.Failed)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return "every key answers now"
	}
	return strings.Join(out, " | ")
}

// checkReplicas waits (with the workload stopped) until the replicas of
// every shard have applied the same index, then compares their contents'
// checksums: a crashed replica that lost or doubled part of what it
// applied differs from its peers. It returns what differs ("" if
// nothing).
func (h *crashHarness) checkReplicas(ctx context.Context) string {
	var problems []string
	for _, shard := range h.kv.Layout().Shards {
		var last string
		err := waitUntil(ctx, time.Minute, func() bool {
			var applied []uint64
			var crcs []uint32
			var nodes []base.NodeID
			var states []string
			for _, node := range shard.Replicas {
				ac, err := h.kv.AdminClient(node)
				if err != nil {
					last = fmt.Sprintf("node %d: %v", node, err)
					return false
				}
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				st, err := ac.ReplicaStatus(cctx, &kvpb.ReplicaStatusRequest{Shard: uint64(shard.ID)})
				cancel()
				if err != nil {
					last = fmt.Sprintf("node %d: %v", node, err)
					return false
				}
				applied, crcs, nodes = append(applied, st.AppliedIndex), append(crcs, st.ContentCrc), append(nodes, node)
				states = append(states, fmt.Sprintf("n%d: %q leader %v pending repairs %d last detection %q raft log %q",
					node, st.State, st.Leader, st.PendingRepairs, st.LastDetection, st.RaftLog))
			}
			for i := range applied {
				if applied[i] != applied[0] {
					last = fmt.Sprintf("applied indexes %v on nodes %v (%s)", applied, nodes, strings.Join(states, "; "))
					return false
				}
			}
			for i := range crcs {
				if crcs[i] != crcs[0] {
					last = fmt.Sprintf("content checksums %08x at applied index %d on nodes %v", crcs, applied[0], nodes)
					problems = append(problems, fmt.Sprintf("shard %s: replicas differ: %s", shard.ID, last))
					return true
				}
			}
			return true
		})
		if err != nil {
			problems = append(problems, fmt.Sprintf("shard %s: replicas did not converge within 1m: %s", shard.ID, last))
		}
	}
	return strings.Join(problems, "; ")
}

// finalReads reads every register once more into the history.
func (h *crashHarness) finalReads(ctx context.Context) {
	for k := 0; k < h.opts.Keys; k++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		call := h.now()
		v, _, err := h.kv.Get(cctx, []byte(kvKey(k)), kvclient.Strong())
		cancel()
		if err == nil {
			h.record(-1, kvInput{op: "get", key: kvKey(k)}, kvOutput{value: string(v)}, call, h.now())
		}
	}
}

// checkHistory checks the KV history recorded so far.
func (h *crashHarness) checkHistory() porcupine.CheckResult {
	h.mu.Lock()
	history := append([]porcupine.Operation(nil), h.history...)
	h.mu.Unlock()
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, h.opts.CheckTimeout)
	h.mu.Lock()
	h.res.Linearizable = string(res)
	if res == porcupine.Illegal && h.res.Visualization == "" {
		path := filepath.Join(h.opts.Dir, "crashpoints-history.html")
		if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
			h.res.Visualization = path
		}
	}
	h.mu.Unlock()
	return res
}

// logTail returns the last n bytes of a process's log, for a detail.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return " (log tail: " + strings.Join(strings.Fields(string(b)), " ") + ")"
}

// Markdown renders the run as a report section: one row per point.
func (r *CrashResult) Markdown() string {
	var b strings.Builder
	verdict := "passed"
	if !r.Passed() {
		verdict = "FAILED"
	}
	store := "plain files"
	if r.Store == "sdf" {
		store = "emulated flash (SDF, " + r.DeviceSize + " per node; the KV replicas on it too)"
	}
	reached := 0
	for _, p := range r.Points {
		if p.Reached {
			reached++
		}
	}
	fmt.Fprintf(&b, "Seed %d, %d storage nodes on %s and a coordinator, each its own process. For each point in turn, while KV and object clients work, one node is restarted armed at the point's n-th hit (`%s=<point>@<n>`), dies there (SIGKILL, by itself), and is restarted unarmed from what was on its disk; then it must rejoin, every key must answer, every object must read back as its last acknowledged put or a put still in flight (never absent after an acknowledgement, never other bytes), a scrub of every object counts what the crashed node lost, the replicas of every KV shard must hold the same contents once at the same applied index, and porcupine checks the KV history so far. %d of %d points reached; %v in all. Verdict: **%s**.\n\n",
		r.Seed, r.Nodes, store, crashpoint.Env, reached, len(r.Points), r.Elapsed.Round(time.Second), verdict)
	b.WriteString("| point | layer | node | crash at hit | reached | outcome | detail |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, p := range r.Points {
		yes := "no"
		if p.Reached {
			yes = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s |\n", p.Point, p.Layer, p.Node, p.At, yes, p.Outcome, report.Cell(p.Detail, 0))
	}
	b.WriteString("\n| point | where it is (package crashpoint's registry) |\n| --- | --- |\n")
	for _, p := range crashpoint.Points {
		fmt.Fprintf(&b, "| %s | %s |\n", p.Name, p.Doc)
	}
	fmt.Fprintf(&b, "\n| whole run | count |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| KV operations recorded (strong get, put, compare-and-set) | %d |\n", r.KVOps)
	fmt.Fprintf(&b, "| put or cas with unknown outcome (may have applied) | %d |\n", r.KVUnknown)
	fmt.Fprintf(&b, "| porcupine after the last point | %s |\n", r.Linearizable)
	fmt.Fprintf(&b, "| object puts acknowledged | %d |\n", r.ObjPuts)
	fmt.Fprintf(&b, "| object puts failed (not acknowledged) | %d |\n", r.ObjPutFailed)
	fmt.Fprintf(&b, "| object keys checked after each point | %d |\n", r.ObjChecked)
	if r.Visualization != "" {
		fmt.Fprintf(&b, "\nThe illegal history: %s\n", r.Visualization)
	}
	if len(r.Errors) > 0 {
		b.WriteString("\nHarness errors:\n\n")
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}
	return b.String()
}
