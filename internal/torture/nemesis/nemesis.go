package nemesis

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/netfault"
)

// Fault kinds the nemesis injects.
const (
	FaultKill          = "kill"           // SIGKILL a node, restart it from its directory
	FaultPause         = "pause"          // SIGSTOP a node, SIGCONT it
	FaultPartitionOne  = "partition-one"  // cut one node off from every other node
	FaultPartitionHalf = "partition-half" // cut the nodes into two groups
	FaultUBER          = "uber"           // persistent bit errors on a node's chunk reads
	// FaultFill fills a node's emulated flash device with ballast
	// (node.Node.Fill), then removes it: object writes there are refused
	// with no space, its KV replicas fail-stop and are replaced. sdf
	// store only (a plain-file store has no device of its own to fill).
	FaultFill      = "fill"
	FaultKillCoord = "kill-coordinator"
	// FaultPauseCoord SIGSTOPs the coordinator (and its embedded etcd),
	// then SIGCONTs it.
	FaultPauseCoord = "pause-coordinator"
	// FaultPartitionCoord cuts one to half of the nodes off from the
	// coordinator and its etcd (their heartbeats stop; they still reach
	// each other and clients reach them).
	FaultPartitionCoord = "partition-coordinator"
)

// AllFaults lists every fault kind, in report order.
var AllFaults = []string{FaultKill, FaultPause, FaultPartitionOne, FaultPartitionHalf, FaultUBER, FaultFill, FaultKillCoord,
	FaultPauseCoord, FaultPartitionCoord}

// faultsFor is the default fault list of a store: every fault, less fill
// on plain files.
func faultsFor(store string) []string {
	var out []string
	for _, f := range AllFaults {
		if f != FaultFill || store == "sdf" {
			out = append(out, f)
		}
	}
	return out
}

// Options configures one nemesis run.
type Options struct {
	// Argv runs the flashmend binary (argv[0] and any leading arguments);
	// the harness appends "coordinator ..." and "node ...".
	Argv []string
	// Dir holds the cluster's directories and every process's log.
	Dir  string
	Seed int64
	// Store is the nodes' store: "file" (plain files, the default) or
	// "sdf" (an emulated flash device per node, of DeviceSize bytes, which
	// holds the node's KV replicas too).
	Store      string
	DeviceSize string
	// Nodes is the number of storage nodes (at least 4; 6 or more also
	// stores EC objects).
	Nodes int
	// Duration is how long faults are injected, after a warm-up of the
	// workload and before the final check.
	Duration time.Duration
	// Hold is the longest a fault lasts (each lasts Hold/2 to Hold), and
	// the pause between faults is Hold/2 to Hold.
	Hold time.Duration
	// Faults are the kinds injected (default AllFaults).
	Faults []string
	// Concurrency is how many faults may be held at once (default 1);
	// each on victims no other fault holds.
	Concurrency int
	// KVClients and Keys: concurrent KV clients doing strong gets, puts and
	// compare-and-sets on Keys registers.
	KVClients, Keys int
	// ObjClients put new objects and read each one back (ObjSize bytes at
	// most).
	ObjClients, ObjSize int
	// CheckTimeout bounds the linearizability check.
	CheckTimeout time.Duration
	// Logf narrates the run (nil: quiet).
	Logf func(format string, args ...any)
}

func (o *Options) validate() error {
	if len(o.Argv) == 0 || o.Dir == "" {
		return base.InvalidArgumentf("nemesis: Argv and Dir are required")
	}
	if o.Nodes == 0 {
		o.Nodes = 6
	}
	if o.Store == "" {
		o.Store = "file"
	}
	if o.Faults == nil {
		o.Faults = faultsFor(o.Store)
	}
	if o.DeviceSize == "" {
		o.DeviceSize = "512MiB"
	}
	if o.Store != "file" && o.Store != "sdf" {
		return base.InvalidArgumentf("nemesis: unknown store %q (file or sdf)", o.Store)
	}
	for _, f := range o.Faults {
		if !contains(AllFaults, f) {
			return base.InvalidArgumentf("nemesis: unknown fault %q (known: %s)", f, strings.Join(AllFaults, ", "))
		}
		if f == FaultFill && o.Store != "sdf" {
			return base.InvalidArgumentf("nemesis: fault %q needs --store sdf (a plain-file store has no device of its own to fill)", f)
		}
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.KVClients == 0 {
		o.KVClients = 4
	}
	if o.Keys == 0 {
		o.Keys = 6
	}
	if o.ObjSize == 0 {
		o.ObjSize = 256 << 10
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = 2 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Concurrency < 1 || o.Concurrency > o.Nodes {
		return base.InvalidArgumentf("nemesis: concurrency %d: want 1 to the number of nodes (%d)", o.Concurrency, o.Nodes)
	}
	if o.Nodes < 4 || o.Duration <= 0 || o.Hold <= 0 || o.KVClients < 0 || o.Keys < 1 || o.ObjClients < 0 || o.ObjSize < 1 || len(o.Faults) == 0 {
		return base.InvalidArgumentf("nemesis: need at least 4 nodes, a positive duration and hold, at least one key and one fault kind (got %d nodes, %v, %v, %d keys, %d faults)",
			o.Nodes, o.Duration, o.Hold, o.Keys, len(o.Faults))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Injected is one fault as it happened.
type Injected struct {
	Kind    string
	Nodes   []base.NodeID // the victims (partition-half: the smaller side)
	At, For time.Duration // since the start of the run
	// Cuts counts the calls and stream messages a partition failed (the
	// nodes' partition switches, read before the heal): a partition that
	// cut nothing would test nothing.
	Cuts uint64
	Err  string // the fault could not be injected or healed
}

func (f *Injected) who() string {
	if len(f.Nodes) == 0 {
		return "the coordinator"
	}
	return fmt.Sprint(f.Nodes)
}

// Result is what a run recorded and what the checks found.
type Result struct {
	Seed                    int64
	Nodes, Concurrency      int
	Store                   string
	Duration, Hold, Elapsed time.Duration
	Faults                  []Injected

	// KV history: operations by outcome, and porcupine's verdict ("Ok",
	// "Illegal" or "Unknown" when the check timed out).
	KVOps, KVOK, KVFailed, KVUnknown int
	Linearizable                     string
	// Visualization is porcupine's HTML of an illegal history, if any.
	Visualization string
	// KVRecovery is how long after the last heal every key answered a
	// strong read again; KVLongestStall the longest time during the run
	// in which no KV operation completed (what a client saw of the
	// faults).
	KVRecovery, KVLongestStall time.Duration

	// Objects: puts acknowledged, puts failed (unknown outcome), reads
	// right after an acknowledged put that failed (unavailable) or
	// returned other bytes (wrong), and at the end: acknowledged objects
	// read back intact, lost (absent or unreadable) or wrong.
	ObjPuts, ObjPutFailed, ObjReadUnavailable, ObjReadWrong int
	ObjFinalOK, ObjFinalLost, ObjFinalWrong                 int
	// Errors the harness met that are not verdicts on the system (a
	// restart that failed, ...).
	Errors []string
}

// Passed says whether the run found nothing wrong.
func (r *Result) Passed() bool {
	return r.Linearizable == string(porcupine.Ok) && r.ObjReadWrong == 0 && r.ObjFinalLost == 0 &&
		r.ObjFinalWrong == 0 && len(r.Errors) == 0
}

type nodeProc struct {
	id      base.NodeID
	dir     string
	addr    string // gRPC, kept across restarts
	control string // the partition switch's URL, new each start
	p       *proc
	// Under harness.faultMu: held by a node fault (kill, pause, uber);
	// down (killed or paused: its switch cannot answer).
	held, down bool
}

type harness struct {
	opts  Options
	start time.Time
	coord *proc
	ep    string
	nodes []*nodeProc
	cl    *client.Client
	kv    *kvclient.Client
	http  *http.Client

	mu      sync.Mutex
	res     Result
	history []porcupine.Operation

	// faultMu guards what the faults hold: the nodes' held and down
	// flags, the coordinator's, and the partitions (their cut links).
	faultMu              sync.Mutex
	coordHeld, coordDown bool
	parts                map[int]map[link]bool
	partSeq              int
	// netMu serializes the updates of the partition switches.
	netMu sync.Mutex
}

// Run starts a coordinator and opts.Nodes storage nodes as separate
// processes, runs the KV and object workloads while the nemesis injects
// faults, heals everything, checks the histories and returns what it
// found. An error means the harness itself could not run (the cluster did
// not start); what the checks found is in the Result.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	h := &harness{opts: opts, start: time.Now(), http: &http.Client{Timeout: 10 * time.Second}, parts: map[int]map[link]bool{}}
	h.res = Result{Seed: opts.Seed, Nodes: opts.Nodes, Concurrency: opts.Concurrency, Store: opts.Store, Duration: opts.Duration, Hold: opts.Hold}
	defer h.shutdown()
	if err := h.startCluster(ctx); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(opts.Seed))
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < opts.KVClients; i++ {
		wg.Add(1)
		go func(i int, seed int64) { defer wg.Done(); h.kvWorker(wctx, i, rand.New(rand.NewSource(seed))) }(i, rng.Int63())
	}
	acked := newAckedSet()
	for i := 0; i < opts.ObjClients; i++ {
		wg.Add(1)
		go func(i int, seed int64) {
			defer wg.Done()
			h.objWorker(wctx, i, rand.New(rand.NewSource(seed)), acked)
		}(i, rng.Int63())
	}
	h.nemesis(ctx, rng)
	stopWork()
	wg.Wait()
	if err := h.heal(ctx); err != nil {
		h.errorf("the final heal: %v", err)
	}
	h.finalChecks(ctx, acked)
	h.res.Elapsed = time.Since(h.start)
	return &h.res, ctx.Err()
}

func (h *harness) logf(format string, args ...any) {
	h.opts.Logf("nemesis %6.1fs: "+format, append([]any{time.Since(h.start).Seconds()}, args...)...)
}

func (h *harness) errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.logf("error: %s", msg)
	h.mu.Lock()
	h.res.Errors = append(h.res.Errors, msg)
	h.mu.Unlock()
}

var (
	coordLine   = regexp.MustCompile(`serving on (\S+)`)
	nodeLine    = regexp.MustCompile(`^node \S+ serving on (\S+)`)
	controlLine = regexp.MustCompile(`^nemesis control: (http://\S+)`)
)

func (h *harness) startCluster(ctx context.Context) error {
	dir := h.opts.Dir
	if err := h.startCoordinator(ctx); err != nil {
		return err
	}
	for i := 1; i <= h.opts.Nodes; i++ {
		n := &nodeProc{id: base.NodeID(i), dir: filepath.Join(dir, fmt.Sprintf("node-%d", i)), addr: "127.0.0.1:0"}
		h.nodes = append(h.nodes, n)
		if err := h.startNode(ctx, n); err != nil {
			return err
		}
	}
	var err error
	h.cl, err = client.Dial(ctx, h.ep, client.Options{})
	if err != nil {
		return err
	}
	// Every node must be a live member before the KV layout is cut, or it
	// places the shards on fewer nodes.
	if err := waitUntil(ctx, 2*time.Minute, func() bool {
		ns, err := h.cl.Nodes(ctx)
		live := 0
		for _, n := range ns {
			if n.Live {
				live++
			}
		}
		return err == nil && live == h.opts.Nodes
	}); err != nil {
		return fmt.Errorf("nemesis: the %d nodes did not all join: %w", h.opts.Nodes, err)
	}
	// One shard per register, so that the shards' replicas (three each)
	// spread over every node and every partition cuts raft traffic.
	var splits []string
	for k := 1; k < h.opts.Keys; k++ {
		splits = append(splits, kvKey(k))
	}
	if _, _, err := h.cl.KVLayout(ctx, true, splits); err != nil {
		return fmt.Errorf("nemesis: kv layout: %w", err)
	}
	h.kv, err = h.cl.KVClient(ctx, kvclient.Options{RetryTimeout: 5 * time.Second, Seed: h.opts.Seed})
	if err != nil {
		return err
	}
	// The KV store answers once every shard has elected a leader.
	if err := waitUntil(ctx, 2*time.Minute, func() bool { return h.kvAnswers(ctx) }); err != nil {
		return fmt.Errorf("nemesis: the KV store never answered: %w", err)
	}
	h.logf("cluster up: coordinator %s, %d nodes", h.ep, len(h.nodes))
	return nil
}

// startCoordinator starts (or restarts) the coordinator on its directory:
// it keeps the port it chose the first time (and its embedded etcd's data).
func (h *harness) startCoordinator(ctx context.Context) error {
	p, err := startProc("coordinator", h.opts.Argv, filepath.Join(h.opts.Dir, "coordinator.log"),
		"coordinator", "--dir", filepath.Join(h.opts.Dir, "coordinator"), "--metrics", "off", "--nemesis")
	if err != nil {
		return err
	}
	h.coord = p
	m, err := p.await(ctx, coordLine, 2*time.Minute)
	if err != nil {
		return err
	}
	if h.ep != "" && m[1] != h.ep {
		return fmt.Errorf("nemesis: the coordinator came back on %s, not %s", m[1], h.ep)
	}
	h.ep = m[1]
	return nil
}

// startNode starts (or restarts) a node on its directory and address.
func (h *harness) startNode(ctx context.Context, n *nodeProc) error {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		p, err := startProc(fmt.Sprintf("node %d", n.id), h.opts.Argv, n.dir+".log", h.nodeArgs(n)...)
		if err != nil {
			return err
		}
		c, err := p.await(ctx, controlLine, time.Minute)
		if err == nil {
			var m []string
			if m, err = p.await(ctx, nodeLine, 2*time.Minute); err == nil {
				n.p, n.addr, n.control = p, m[1], c[1]
				return nil
			}
		}
		// Its address may have been taken meanwhile by another process.
		lastErr = err
		p.kill()
		time.Sleep(time.Second)
	}
	return fmt.Errorf("nemesis: node %d did not start: %w", n.id, lastErr)
}

// nodeArgs are the arguments that start (or restart) node n.
func (h *harness) nodeArgs(n *nodeProc) []string {
	return []string{"node", "--dir", n.dir, "--coordinator", h.ep, "--id", strconv.Itoa(int(n.id)), "--listen", n.addr,
		"--metrics", "off", "--repair-reserve", "0", "--nemesis-control", "127.0.0.1:0",
		"--store", h.opts.Store, "--device-size", h.opts.DeviceSize}
}

func (h *harness) kvAnswers(ctx context.Context) bool {
	for k := 0; k < h.opts.Keys; k++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _, err := h.kv.Get(cctx, []byte(kvKey(k)), kvclient.Strong())
		cancel()
		if err != nil {
			return false
		}
	}
	return true
}

func kvKey(k int) string { return fmt.Sprintf("nemesis/register-%03d", k) }

func waitUntil(ctx context.Context, within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

func (h *harness) now() int64 { return int64(time.Since(h.start)) }

func (h *harness) record(client int, in kvInput, out kvOutput, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history = append(h.history, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	h.res.KVOps++
	if out.unknown {
		h.res.KVUnknown++
	} else {
		h.res.KVOK++
	}
}

func (h *harness) kvFailed() {
	h.mu.Lock()
	h.res.KVFailed++
	h.mu.Unlock()
}

// kvWorker does strong gets, puts and compare-and-sets on the registers
// until ctx ends. A get that fails had no effect and is left out; a put or
// cas that fails may have applied, so it is recorded as unknown.
func (h *harness) kvWorker(ctx context.Context, id int, rng *rand.Rand) {
	for seq := 0; ctx.Err() == nil; seq++ {
		key := kvKey(rng.Intn(h.opts.Keys))
		value := fmt.Sprintf("c%d-%d", id, seq)
		cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
		call := h.now()
		switch r := rng.Intn(10); {
		case r < 4:
			v, _, err := h.kv.Get(cctx, []byte(key), kvclient.Strong())
			if err != nil {
				h.kvFailed()
				break
			}
			h.record(id, kvInput{op: "get", key: key}, kvOutput{value: string(v)}, call, h.now())
		case r < 8:
			_, err := h.kv.Put(cctx, []byte(key), []byte(value))
			if err != nil {
				h.record(id, kvInput{op: "put", key: key, value: value}, kvOutput{unknown: true}, call, math.MaxInt64)
				break
			}
			h.record(id, kvInput{op: "put", key: key, value: value}, kvOutput{}, call, h.now())
		default:
			// Compare against a value this client may have seen: its own
			// last write or a neighbour's, so that some swaps succeed.
			old := fmt.Sprintf("c%d-%d", rng.Intn(h.opts.KVClients), seq-1-rng.Intn(2))
			ok, err := h.kv.CompareAndSet(cctx, []byte(key), []byte(old), []byte(value))
			if err != nil {
				h.record(id, kvInput{op: "cas", key: key, old: old, value: value}, kvOutput{unknown: true}, call, math.MaxInt64)
				break
			}
			h.record(id, kvInput{op: "cas", key: key, old: old, value: value}, kvOutput{ok: ok}, call, h.now())
		}
		cancel()
		if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			h.logf("kv client %d: an operation took its whole 8s", id)
		}
	}
}

// ackedSet holds the objects whose put was acknowledged, with the digest
// of their bytes.
type ackedSet struct {
	mu   sync.Mutex
	objs map[string][32]byte
}

func newAckedSet() *ackedSet { return &ackedSet{objs: map[string][32]byte{}} }

// objWorker puts new objects (REP, and EC on 6 nodes or more) and reads
// each one back right after its acknowledgement (read-your-writes).
func (h *harness) objWorker(ctx context.Context, id int, rng *rand.Rand, acked *ackedSet) {
	for seq := 0; ctx.Err() == nil; seq++ {
		key := fmt.Sprintf("nemesis/obj-%d-%d", id, seq)
		data := make([]byte, 1+rng.Intn(h.opts.ObjSize))
		rng.Read(data)
		red := objectpb.Redundancy_REP
		if h.opts.Nodes >= 6 && seq%2 == 1 {
			red = objectpb.Redundancy_EC
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := h.cl.Put(cctx, key, data, red)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				h.mu.Lock()
				h.res.ObjPutFailed++
				h.mu.Unlock()
			}
			// A put refused at once (the coordinator is down) is not
			// retried in a tight loop.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		sum := sha256.Sum256(data)
		acked.mu.Lock()
		acked.objs[key] = sum
		acked.mu.Unlock()
		cctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		got, err := h.cl.Get(cctx, key)
		cancel()
		h.mu.Lock()
		switch {
		case err != nil && ctx.Err() == nil:
			h.res.ObjReadUnavailable++
		case err == nil && !bytes.Equal(got, data):
			h.res.ObjReadWrong++
			h.res.Errors = append(h.res.Errors, fmt.Sprintf("object %s read back right after its put: %d bytes, not the %d put", key, len(got), len(data)))
		}
		h.res.ObjPuts++
		h.mu.Unlock()
	}
}

// nemesis injects faults until the run's duration is over: at most
// Concurrency at once, each on victims no other fault holds (a node is
// killed, paused or given bit errors by one fault at a time; partitions
// overlap as the union of their cuts). Every choice comes from rng in this
// goroutine, so a seed gives one schedule; each fault runs, is held and
// undone in a goroutine of its own.
func (h *harness) nemesis(ctx context.Context, rng *rand.Rand) {
	span := func() time.Duration { return h.opts.Hold/2 + time.Duration(rng.Int63n(int64(h.opts.Hold/2)+1)) }
	sleep(ctx, span()) // warm-up: the workload runs fault-free first
	end := time.Now().Add(h.opts.Duration)
	slots := make(chan struct{}, h.opts.Concurrency)
	var wg sync.WaitGroup
	for ctx.Err() == nil && time.Now().Before(end) {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		f := h.pick(rng)
		hold, rest := span(), span()
		if f == nil { // every victim is held by another fault
			<-slots
			sleep(ctx, rest/4)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.hold(ctx, f, hold)
			sleep(ctx, rest) // the gap before the slot takes another fault
			<-slots
		}()
		if h.opts.Concurrency > 1 {
			// Stagger the starts, so that faults overlap in every phase.
			sleep(ctx, span()/time.Duration(h.opts.Concurrency))
		}
	}
	wg.Wait()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// fault is one fault being held: what pick chose.
type fault struct {
	idx   int // in Result.Faults
	kind  string
	nodes []*nodeProc
	part  int // partitions: its key in harness.parts
}

// pick chooses the next fault's kind and victims among those no other
// fault holds, marks them held and records the fault; nil when none is
// free.
func (h *harness) pick(rng *rand.Rand) *fault {
	h.faultMu.Lock()
	defer h.faultMu.Unlock()
	order := rng.Perm(len(h.opts.Faults))
	perm := rng.Perm(len(h.nodes))
	var free []*nodeProc
	for _, i := range perm {
		if !h.nodes[i].held {
			free = append(free, h.nodes[i])
		}
	}
	for _, k := range order {
		f := &fault{kind: h.opts.Faults[k]}
		switch f.kind {
		case FaultKill, FaultPause, FaultUBER, FaultFill:
			if len(free) == 0 {
				continue
			}
			f.nodes = free[:1]
			f.nodes[0].held = true
		case FaultKillCoord, FaultPauseCoord:
			if h.coordHeld {
				continue
			}
			h.coordHeld = true
		case FaultPartitionOne, FaultPartitionHalf, FaultPartitionCoord:
			size := 1
			switch f.kind {
			case FaultPartitionHalf:
				size = len(h.nodes) / 2
			case FaultPartitionCoord:
				size = 1 + rng.Intn(len(h.nodes)/2)
			}
			for _, i := range perm[:size] {
				f.nodes = append(f.nodes, h.nodes[i])
			}
			h.partSeq++
			f.part = h.partSeq
			h.parts[f.part] = h.links(f.kind, f.nodes)
		}
		inj := Injected{Kind: f.kind, At: time.Since(h.start)}
		for _, n := range f.nodes {
			inj.Nodes = append(inj.Nodes, n.id)
		}
		sort.Slice(inj.Nodes, func(i, j int) bool { return inj.Nodes[i] < inj.Nodes[j] })
		h.mu.Lock()
		f.idx = len(h.res.Faults)
		h.res.Faults = append(h.res.Faults, inj)
		h.mu.Unlock()
		return f
	}
	return nil
}

// links returns the links a partition cuts: every pair across its sides,
// both ways (each end blocks the other).
func (h *harness) links(kind string, side []*nodeProc) map[link]bool {
	cut := map[link]bool{}
	in := map[base.NodeID]bool{}
	for _, n := range side {
		in[n.id] = true
	}
	for _, n := range side {
		if kind == FaultPartitionCoord {
			cut[link{n.id, netfault.Coordinator}] = true
			continue
		}
		for _, o := range h.nodes {
			if !in[o.id] {
				cut[link{n.id, o.id}], cut[link{o.id, n.id}] = true, true
			}
		}
	}
	return cut
}

// link is one direction of a connection cut: node from blocks peer to.
type link struct{ from, to base.NodeID }

// hold injects f, holds it for d and undoes it, recording what happened.
func (h *harness) hold(ctx context.Context, f *fault, d time.Duration) {
	h.logf("%s on %s for %v", f.kind, h.who(f), d.Round(time.Millisecond))
	var undo func() error
	var err error
	var cutsBefore uint64
	switch f.kind {
	case FaultKill:
		n := f.nodes[0]
		h.setDown(n, true)
		n.p.kill()
		undo = func() error {
			// A node starts by joining the coordinator: wait for one.
			h.awaitCoordinator(ctx)
			if err := h.startNode(ctx, n); err != nil {
				return err
			}
			h.setDown(n, false)
			return h.applyNet(ctx, n)
		}
	case FaultPause:
		n := f.nodes[0]
		h.setDown(n, true)
		if err = n.p.signal(syscall.SIGSTOP); err != nil {
			h.setDown(n, false)
		}
		undo = func() error {
			if err := n.p.signal(syscall.SIGCONT); err != nil {
				return err
			}
			h.setDown(n, false)
			return h.applyNet(ctx, n)
		}
	case FaultPartitionOne, FaultPartitionHalf, FaultPartitionCoord:
		cutsBefore = h.cuts(ctx)
		err = h.applyNet(ctx, h.nodes...)
		undo = func() error {
			h.mu.Lock()
			h.res.Faults[f.idx].Cuts = sub(h.cuts(ctx), cutsBefore)
			h.mu.Unlock()
			h.faultMu.Lock()
			delete(h.parts, f.part)
			h.faultMu.Unlock()
			return h.applyNet(ctx, h.nodes...)
		}
	case FaultKillCoord:
		h.setCoordDown(true)
		h.coord.kill()
		undo = func() error {
			if err := h.startCoordinator(ctx); err != nil {
				return err
			}
			h.setCoordDown(false)
			return nil
		}
	case FaultPauseCoord:
		h.setCoordDown(true)
		if err = h.coord.signal(syscall.SIGSTOP); err != nil {
			h.setCoordDown(false)
		}
		undo = func() error {
			err := h.coord.signal(syscall.SIGCONT)
			if err == nil {
				h.setCoordDown(false)
			}
			return err
		}
	case FaultUBER:
		n := f.nodes[0]
		err = h.injectUBER(ctx, n.id, 1e-6)
		undo = func() error { return h.injectUBER(ctx, n.id, 0) }
	case FaultFill:
		n := f.nodes[0]
		err = h.fill(ctx, n.id, true)
		undo = func() error { return h.fill(ctx, n.id, false) }
	}
	if err == nil {
		sleep(ctx, d)
		err = undo()
	}
	h.mu.Lock()
	h.res.Faults[f.idx].For = d
	if err != nil {
		h.res.Faults[f.idx].Err = err.Error()
	}
	h.mu.Unlock()
	if err != nil {
		h.errorf("%s on %s: %v", f.kind, h.who(f), err)
	}
	h.faultMu.Lock()
	for _, n := range f.nodes {
		if f.kind == FaultKill || f.kind == FaultPause || f.kind == FaultUBER || f.kind == FaultFill {
			n.held = false
		}
	}
	if f.kind == FaultKillCoord || f.kind == FaultPauseCoord {
		h.coordHeld = false
	}
	h.faultMu.Unlock()
}

func sub(a, b uint64) uint64 {
	if a < b { // a node restarted meanwhile: its switch counts afresh
		return 0
	}
	return a - b
}

func (h *harness) who(f *fault) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.res.Faults[f.idx].who()
}

// setDown marks a node killed or paused (its partition switch cannot
// answer), or back.
func (h *harness) setDown(n *nodeProc, down bool) {
	h.faultMu.Lock()
	n.down = down
	h.faultMu.Unlock()
}

func (h *harness) setCoordDown(down bool) {
	h.faultMu.Lock()
	h.coordDown = down
	h.faultMu.Unlock()
}

// awaitCoordinator waits while the coordinator is killed or paused.
func (h *harness) awaitCoordinator(ctx context.Context) {
	for ctx.Err() == nil {
		h.faultMu.Lock()
		down := h.coordDown
		h.faultMu.Unlock()
		if !down {
			return
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// injectUBER sets a node's injected UBER. The harness's own call is
// retried for a while: a node restarted a moment ago is served, but the
// client's connection to it may still be in gRPC's reconnect backoff.
func (h *harness) injectUBER(ctx context.Context, id base.NodeID, rate float64) error {
	return retryNode(ctx, func() error { return h.cl.InjectUBER(ctx, uint64(id), rate, true) })
}

// fill fills a node's device with ballast (leaving nothing free), or
// removes the ballast; retried like injectUBER.
func (h *harness) fill(ctx context.Context, id base.NodeID, on bool) error {
	return retryNode(ctx, func() error {
		if !on {
			_, err := h.cl.Unfill(ctx, uint64(id))
			return err
		}
		ballast, free, err := h.cl.Fill(ctx, uint64(id), 0)
		if err == nil {
			h.opts.Logf("nemesis: fill: node %d: %s of ballast, %s free", id, ballast, free)
		}
		return err
	})
}

// retryNode calls call until it succeeds, 30 s pass or ctx ends, every
// 250 ms, and returns its last error.
func retryNode(ctx context.Context, call func() error) error {
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := call()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// applyNet sets the partition switch of each of nodes to the union of the
// partitions held now. A node killed or paused is skipped: it gets its
// set when it is back (the peers' ends of its links are cut meanwhile;
// only its link to the coordinator, cut at its end alone, may pass for the
// moment between its restart and this call).
func (h *harness) applyNet(ctx context.Context, nodes ...*nodeProc) error {
	h.netMu.Lock()
	defer h.netMu.Unlock()
	var errs []error
	for _, n := range nodes {
		h.faultMu.Lock()
		down := n.down
		var peers []string
		seen := map[base.NodeID]bool{}
		for _, cut := range h.parts {
			for l := range cut {
				if l.from == n.id && !seen[l.to] {
					seen[l.to] = true
					name := strconv.FormatUint(uint64(l.to), 10)
					if l.to == netfault.Coordinator {
						name = "coordinator"
					}
					peers = append(peers, name)
				}
			}
		}
		h.faultMu.Unlock()
		if down {
			continue
		}
		sort.Strings(peers)
		if err := h.control(ctx, n, "/set?peers="+strings.Join(peers, ",")); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// heal ends every partition, resumes paused processes and restarts dead
// ones (the faults undo themselves; this is the last word after them).
func (h *harness) heal(ctx context.Context) error {
	var errs []error
	select {
	case <-h.coord.done:
		if err := h.startCoordinator(ctx); err != nil {
			errs = append(errs, err)
		}
	default:
		if err := h.coord.signal(syscall.SIGCONT); err != nil {
			errs = append(errs, err)
		}
	}
	h.faultMu.Lock()
	clear(h.parts)
	h.coordDown = false
	h.faultMu.Unlock()
	for _, n := range h.nodes {
		select {
		case <-n.p.done:
			if err := h.startNode(ctx, n); err != nil {
				errs = append(errs, err)
			}
			h.setDown(n, false)
			continue
		default:
		}
		if err := n.p.signal(syscall.SIGCONT); err != nil {
			errs = append(errs, err)
		}
		h.setDown(n, false)
		if err := h.control(ctx, n, "/heal"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cuts sums what the partition switches of the nodes that can answer have
// failed so far.
func (h *harness) cuts(ctx context.Context) uint64 {
	var total uint64
	for _, n := range h.nodes {
		h.faultMu.Lock()
		down := n.down
		h.faultMu.Unlock()
		if down {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.control+"/", nil)
		if err != nil {
			continue
		}
		resp, err := h.http.Do(req)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if i := strings.LastIndex(string(body), "cuts "); i >= 0 {
			c, _ := strconv.ParseUint(strings.TrimSpace(string(body[i+5:])), 10, 64)
			total += c
		}
	}
	return total
}

func (h *harness) control(ctx context.Context, n *nodeProc, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.control+path, nil)
	if err != nil {
		return err
	}
	resp, err := h.http.Do(req)
	if err != nil {
		return fmt.Errorf("node %d's partition switch: %w", n.id, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %d's partition switch: %s: %s", n.id, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// finalChecks waits for the healed cluster to answer, reads every
// register once more (into the history) and every acknowledged object, and
// checks the KV history.
func (h *harness) finalChecks(ctx context.Context, acked *ackedSet) {
	healed := time.Now()
	if err := waitUntil(ctx, 3*time.Minute, func() bool { return h.kvAnswers(ctx) }); err != nil {
		h.errorf("the KV store did not answer every key within 3 minutes of the last heal: %v", err)
	}
	h.res.KVRecovery = time.Since(healed)
	for k := 0; k < h.opts.Keys; k++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		call := h.now()
		v, _, err := h.kv.Get(cctx, []byte(kvKey(k)), kvclient.Strong())
		cancel()
		if err == nil {
			h.record(-1, kvInput{op: "get", key: kvKey(k)}, kvOutput{value: string(v)}, call, h.now())
		}
	}
	acked.mu.Lock()
	keys := make([]string, 0, len(acked.objs))
	for k := range acked.objs {
		keys = append(keys, k)
	}
	acked.mu.Unlock()
	sort.Strings(keys)
	for _, key := range keys {
		var got []byte
		var err error
		for attempt := 0; attempt < 3; attempt++ { // availability back after at most a few retries
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			got, err = h.cl.Get(cctx, key)
			cancel()
			if err == nil {
				break
			}
		}
		switch {
		case err != nil:
			h.res.ObjFinalLost++
			h.errorf("acknowledged object %s: %v", key, err)
		case sha256.Sum256(got) != acked.objs[key]:
			h.res.ObjFinalWrong++
			h.errorf("acknowledged object %s: other bytes read back", key)
		default:
			h.res.ObjFinalOK++
		}
	}
	var done []int64
	for _, op := range h.history {
		if !op.Output.(kvOutput).unknown {
			done = append(done, op.Return)
		}
	}
	sort.Slice(done, func(i, j int) bool { return done[i] < done[j] })
	for i := 1; i < len(done); i++ {
		if gap := time.Duration(done[i] - done[i-1]); gap > h.res.KVLongestStall {
			h.res.KVLongestStall = gap
		}
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, h.history, h.opts.CheckTimeout)
	h.res.Linearizable = string(res)
	if res == porcupine.Illegal {
		path := filepath.Join(h.opts.Dir, "nemesis-history.html")
		if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
			h.res.Visualization = path
		}
	}
	h.logf("checked %d KV operations: %s; %d objects read back", len(h.history), res, len(keys))
}

func (h *harness) shutdown() {
	if h.kv != nil {
		h.kv.Close()
	}
	if h.cl != nil {
		h.cl.Close()
	}
	var wg sync.WaitGroup
	for _, n := range h.nodes {
		if n.p != nil {
			wg.Add(1)
			go func(p *proc) { defer wg.Done(); p.stop(20 * time.Second) }(n.p)
		}
	}
	wg.Wait()
	if h.coord != nil {
		h.coord.stop(20 * time.Second)
	}
}
