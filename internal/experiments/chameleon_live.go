package experiments

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/coord"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/wear"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func chameleonLive() Experiment {
	return Experiment{
		Name: "chameleon-live",
		Description: "Chameleon on a live local cluster (emulated flash): skewed puts with the balancer off, then on; " +
			"erase-count sigma over time, bytes moved, every object intact, a node killed mid-run",
		Run: runChameleonLive,
	}
}

// liveParams size the live experiment.
type liveParams struct {
	nodes, objects, objectBytes int
	putsPerPhase, writers       int
	epoch, moveEvery            time.Duration
	sampleEvery                 int
}

func liveParamsFor(cfg Config) liveParams {
	if cfg.Quick {
		return liveParams{nodes: 8, objects: 24, objectBytes: 64 << 10, putsPerPhase: 240, writers: 2,
			epoch: 300 * time.Millisecond, moveEvery: 200 * time.Millisecond, sampleEvery: 60}
	}
	return liveParams{nodes: 8, objects: 160, objectBytes: 128 << 10, putsPerPhase: 4000, writers: 2,
		epoch: 3 * time.Second, moveEvery: time.Second, sampleEvery: 250}
}

// liveSample is one point of the erase-count timeline.
type liveSample struct {
	puts         int
	phase        string
	mean, sigma  float64
	moved, moves int64
}

// liveObjects remembers the content of every object's latest version by
// the seed it was generated from.
type liveObjects struct {
	mu    sync.Mutex // guards seeds and locks
	seeds map[string]int64
	locks map[string]*sync.Mutex
	size  int
}

// lock serializes the writers of one key, so that the seed recorded last
// is the content of the version committed last.
func (o *liveObjects) lock(k string) *sync.Mutex {
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.locks[k]
	if !ok {
		l = &sync.Mutex{}
		o.locks[k] = l
	}
	return l
}

func (o *liveObjects) content(seed int64) []byte {
	b := make([]byte, o.size)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func runChameleonLive(ctx context.Context, cfg Config) (*report.Report, error) {
	p := liveParamsFor(cfg)
	dir, err := os.MkdirTemp("", "flashmend-chameleon-live-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Every node on its own emulated flash device of 64 MiB (the dev
	// geometry with 16 blocks per die), so that puts wear it out visibly.
	g := objstore.DevGeometry()
	g.BlocksPerDie = 16
	deviceBytes := int64(g.BlockSize()) * int64(g.Dies()) * int64(g.BlocksPerDie)
	// FLASHMEND_LIVE_LOG=1 prints the cluster's and the client's log lines
	// (epochs, moves, re-placed puts) to stderr.
	logf := func(f string, a ...any) {
		if os.Getenv("FLASHMEND_LIVE_LOG") != "" {
			fmt.Fprintf(os.Stderr, f+"\n", a...)
		}
	}
	opts := devcluster.Options{
		Dir: dir, Nodes: p.nodes, UnsafeNoFsync: true, MaxObjectBytes: 4 * base.MiB, Logf: logf,
		NodeStore: func(d string, i int) (objstore.Store, error) {
			return objstore.OpenSDFStore(filepath.Join(d, "sdf"), objstore.SDFStoreOptions{Geometry: g, Seed: int64(i + 1)})
		},
	}
	objs := &liveObjects{seeds: map[string]int64{}, locks: map[string]*sync.Mutex{}, size: p.objectBytes}
	rng := rand.New(rand.NewSource(cfg.Seed))
	zipf, err := newScrambledZipfian(int64(p.objects))
	if err != nil {
		return nil, err
	}
	var samples []liveSample
	base0 := map[uint64]int64{} // erase counts before the first phase's puts
	type phaseResult struct {
		name         string
		erases       map[uint64]int64 // during the phase
		moved, moves int64
		superseded   int64
		failed       int64
		failedBy     []string // "count reason"
		killed       uint64
		// At the kill: objects in an intermediate state (a conversion or
		// an offload begun and not finished) and moves handed out and not
		// yet reported.
		killIntermediate, killPending int64
		putErrors                     int
		pauses                        int
		paused                        time.Duration
		wallTime                      time.Duration
		mean, sigmaCum                float64
		states                        map[string]int64
		verified, wrong               int
	}
	var phases []phaseResult
	clock := base.Clock(base.SystemClock{})
	totalPuts := 0

	for phaseIdx, policy := range []string{"ec", "chameleon"} {
		opts.Wear = coord.WearConfig{Policy: policy, Redundancy: "ec", Epoch: p.epoch}
		opts.WearMoveInterval = 0
		if policy == "chameleon" {
			opts.WearMoveInterval = p.moveEvery
		}
		cl, err := devcluster.Start(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("phase %s: %w", policy, err)
		}
		cli, err := client.Dial(ctx, cl.Endpoint(), client.Options{Logf: logf})
		if err != nil {
			cl.Close()
			return nil, err
		}
		res := phaseResult{name: policy, erases: map[uint64]int64{}, states: map[string]int64{}}
		start := clock.Now()
		erasesNow := func() (map[uint64]int64, error) {
			reports, err := cli.NodeReports(ctx, true, 5*time.Second)
			if err != nil {
				return nil, err
			}
			out := map[uint64]int64{}
			for _, r := range reports {
				if r.Info.Live {
					out[r.Info.Id] = r.Info.EraseCountTotal
				}
			}
			return out, nil
		}
		phaseStart, err := erasesNow()
		if err != nil {
			cli.Close()
			cl.Close()
			return nil, err
		}
		if phaseIdx == 0 {
			// The data set, written once before the measured puts.
			for i := 0; i < p.objects; i++ {
				seed := rng.Int63()
				k := fmt.Sprintf("obj-%04d", i)
				if _, err := cli.Put(ctx, k, objs.content(seed), objectpb.Redundancy_EC); err != nil {
					cli.Close()
					cl.Close()
					return nil, fmt.Errorf("load: %w", err)
				}
				objs.seeds[k] = seed
			}
			if base0, err = erasesNow(); err != nil {
				cli.Close()
				cl.Close()
				return nil, err
			}
			phaseStart = base0
		}
		sample := func() error {
			now, err := erasesNow()
			if err != nil {
				return err
			}
			var vals []float64
			for id, e := range now {
				vals = append(vals, float64(e-base0[id]))
			}
			mean, sigma := meanSigma(vals)
			st, err := cli.WearStatus(ctx)
			if err != nil {
				return err
			}
			samples = append(samples, liveSample{puts: totalPuts, phase: policy, mean: mean, sigma: sigma, moved: st.BytesMoved, moves: st.MovesDone})
			return nil
		}
		if err := sample(); err != nil {
			cli.Close()
			cl.Close()
			return nil, err
		}
		// Skewed puts: writers draw keys from a scrambled Zipf (0.99); in
		// the balanced phase a node is killed half way (once a conversion
		// is under way) and restarted at 3/4.
		var mu sync.Mutex
		done := 0
		var firstErr error
		next := func() (string, int64, bool) {
			mu.Lock()
			defer mu.Unlock()
			if done >= p.putsPerPhase || firstErr != nil {
				return "", 0, false
			}
			done++
			return fmt.Sprintf("obj-%04d", zipf.next(rng)), rng.Int63(), true
		}
		// Back-pressure: the coordinator's sweeper deletes replaced versions
		// behind the puts; when a node's live bytes pass 50% of its device
		// the writers pause until they are under 30% again.
		var gate sync.RWMutex
		var wg sync.WaitGroup
		for w := 0; w < p.writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					k, seed, ok := next()
					if !ok {
						return
					}
					gate.RLock()
					l := objs.lock(k)
					l.Lock()
					_, err := cli.Put(ctx, k, objs.content(seed), objectpb.Redundancy_EC)
					if err == nil {
						objs.mu.Lock()
						objs.seeds[k] = seed
						objs.mu.Unlock()
					}
					l.Unlock()
					gate.RUnlock()
					if err != nil {
						// A put the cluster refuses (no room on enough
						// live nodes) changes nothing: counted, and the
						// run goes on; anything else, or too many, ends it.
						mu.Lock()
						res.putErrors++
						if (status.Code(err) != codes.Unavailable || res.putErrors > p.putsPerPhase/10) && firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
				}
			}()
		}
		// The driver: samples, and the kill and restart in the second phase.
		// The kill comes once a conversion or offload is under way (an
		// object in an intermediate state or a move pending), or at 5/8
		// of the puts if none is by then.
		underway := func() (intermediate, pending int64, ok bool) {
			st, err := cli.WearStatus(ctx)
			if err != nil {
				return 0, 0, false
			}
			for _, c := range st.States {
				for _, s := range wear.States() {
					if s.Intermediate() && s.String() == c.State {
						intermediate += c.Objects
					}
				}
			}
			return intermediate, st.MovesPending, true
		}
		lastSample, lastGate := 0, 0
		gateEvery := max(p.sampleEvery/5, 1)
		killedIdx := -1
		for {
			mu.Lock()
			d, failed := done, firstErr
			mu.Unlock()
			if failed != nil {
				break
			}
			if d-lastSample >= p.sampleEvery {
				totalPuts += d - lastSample
				lastSample = d
				if err := sample(); err != nil {
					firstErr = err
					break
				}
			}
			if d-lastGate >= gateEvery {
				lastGate = d
				if u, err := maxUtilization(ctx, cli); err == nil && u > 0.5 {
					gate.Lock()
					pauseStart := clock.Now()
					for clock.Now().Sub(pauseStart) < 5*time.Minute {
						if u, err := maxUtilization(ctx, cli); err != nil || u < 0.3 {
							break
						}
						time.Sleep(500 * time.Millisecond)
					}
					res.pauses++
					res.paused += clock.Now().Sub(pauseStart)
					gate.Unlock()
				}
			}
			if policy == "chameleon" && killedIdx < 0 && d >= p.putsPerPhase/2 {
				intermediate, pending, ok := underway()
				now, err := erasesNow()
				if err == nil && ok && (intermediate+pending > 0 || d >= p.putsPerPhase*5/8) {
					res.killIntermediate, res.killPending = intermediate, pending
					var most uint64
					for id, e := range now {
						if most == 0 || e > now[most] || (e == now[most] && id < most) {
							most = id
						}
					}
					killedIdx = int(most) - 1
					res.killed = most
					if err := cl.KillNode(killedIdx); err != nil {
						firstErr = err
						break
					}
				}
			}
			if killedIdx >= 0 && cl.Node(killedIdx) == nil && d >= p.putsPerPhase*3/4 {
				if err := cl.StartNode(ctx, killedIdx); err != nil {
					firstErr = err
					break
				}
			}
			if d >= p.putsPerPhase {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		wg.Wait()
		if firstErr != nil {
			// Say what the balancer saw of the nodes.
			if st, err := cli.WearStatus(ctx); err == nil {
				for _, n := range st.Nodes {
					firstErr = fmt.Errorf("%w; node %d live %v utilization %.2f erases %d", firstErr, n.Id, n.Live, n.Utilization, n.Erases)
				}
			}
			cli.Close()
			cl.Close()
			return nil, fmt.Errorf("phase %s: %w", policy, firstErr)
		}
		mu.Lock()
		totalPuts += done - lastSample
		mu.Unlock()
		if killedIdx >= 0 && cl.Node(killedIdx) == nil {
			if err := cl.StartNode(ctx, killedIdx); err != nil {
				cli.Close()
				cl.Close()
				return nil, err
			}
		}
		// Let the balancer finish what it started, then take the figures.
		if policy == "chameleon" {
			time.Sleep(2*p.epoch + 2*p.moveEvery)
		}
		if err := waitAllLive(ctx, cli, p.nodes); err != nil {
			cli.Close()
			cl.Close()
			return nil, err
		}
		if err := sample(); err != nil {
			cli.Close()
			cl.Close()
			return nil, err
		}
		end, err := erasesNow()
		if err != nil {
			cli.Close()
			cl.Close()
			return nil, err
		}
		var cum []float64
		for id, e := range end {
			res.erases[id] = e - phaseStart[id]
			cum = append(cum, float64(e-base0[id]))
		}
		res.mean, res.sigmaCum = meanSigma(cum)
		st, err := cli.WearStatus(ctx)
		if err != nil {
			cli.Close()
			cl.Close()
			return nil, err
		}
		res.moved, res.moves, res.superseded, res.failed = st.BytesMoved, st.MovesDone, st.MovesSuperseded, st.MovesFailed
		for _, c := range st.MovesFailedByReason {
			res.failedBy = append(res.failedBy, fmt.Sprintf("%d %s", c.Moves, c.Reason))
		}
		for _, s := range st.States {
			res.states[s.State] = s.Objects
		}
		// Every object, byte for byte.
		for k, seed := range objs.seeds {
			got, err := cli.Get(ctx, k)
			res.verified++
			if err != nil || !bytes.Equal(got, objs.content(seed)) {
				res.wrong++
			}
		}
		res.wallTime = clock.Now().Sub(start)
		phases = append(phases, res)
		cli.Close()
		if err := cl.Close(); err != nil {
			return nil, err
		}
	}

	r, err := report.New("chameleon-live", "Chameleon on a live cluster")
	if err != nil {
		return nil, err
	}
	r.Text("A local cluster run by `internal/client/devcluster`: a coordinator with embedded etcd and %d storage "+
		"nodes on 127.0.0.1 with real gRPC, each node's chunks on its own emulated flash device of %s (internal/"+
		"flash under internal/sdf: zones, host GC, erase counts per block). %d objects of %s are written once, then "+
		"%d puts per phase pick their key from a scrambled Zipf (0.99) distribution with %d writers. Phase 1 runs the "+
		"coordinator with wear policy `ec` (every object EC, nothing balanced: the EC baseline); the whole cluster "+
		"is then restarted on the same directories with policy `chameleon` (objects start EC, %v epochs on the "+
		"nodes' heartbeats, a mover every %v), and phase 2 repeats the workload; half way through it, as soon as "+
		"a conversion or an offload is under way (an object in an intermediate state or a move pending; at 5/8 of the puts "+
		"if none is), the most worn node is killed, and it is restarted at 3/4. Erase counts are the nodes' device totals since the "+
		"data set was loaded; the balancer balances these cumulative counts, so phase 2 has to undo phase 1's "+
		"imbalance. The writers pause whenever a node's live bytes pass 50%% of its device, until the coordinator's "+
		"sweeper has deleted enough replaced versions to bring it under 30%% (on this shared machine it falls "+
		"behind the puts); a put the cluster refuses for want of room on enough live nodes is counted, not retried. Wall-clock times are this machine's (below), which other people's builds and tests shared while it ran: "+
		"timings, and so when the sweeper falls behind and where a move meets a put, vary from run to run; the counts of "+
		"objects wrong do not. Seed %d.",
		p.nodes, base.Bytes(deviceBytes), p.objects, base.Bytes(p.objectBytes), p.putsPerPhase, p.writers,
		p.epoch, p.moveEvery, cfg.Seed)
	t := report.Table{Caption: "Per phase: erases during the phase per node, and the cumulative figures at its end",
		Header: []string{"phase", "erases per node (node: count)", "cumulative mean", "cumulative sigma (sigma/mean)", "moves done / superseded / failed", "bytes moved", "node killed", "puts refused", "objects verified / wrong", "pauses (time)", "wall"}}
	for _, ph := range phases {
		ids := make([]uint64, 0, len(ph.erases))
		for id := range ph.erases {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		var cells string
		for i, id := range ids {
			if i > 0 {
				cells += " "
			}
			cells += fmt.Sprintf("%d:%d", id, ph.erases[id])
		}
		killed := "-"
		if ph.killed != 0 {
			killed = fmt.Sprint(ph.killed)
		}
		cv := 0.0
		if ph.mean > 0 {
			cv = ph.sigmaCum / ph.mean
		}
		t.Rows = append(t.Rows, []string{ph.name, cells, fmt.Sprintf("%.0f", ph.mean), fmt.Sprintf("%.1f (%.3f)", ph.sigmaCum, cv),
			fmt.Sprintf("%d / %d / %d", ph.moves, ph.superseded, ph.failed), base.Bytes(ph.moved).String(), killed, fmt.Sprint(ph.putErrors),
			fmt.Sprintf("%d / %d", ph.verified, ph.wrong), fmt.Sprintf("%d (%s)", ph.pauses, ph.paused.Round(time.Second)),
			ph.wallTime.Round(time.Second).String()})
	}
	if err := r.Table(t); err != nil {
		return nil, err
	}
	ft := report.Table{Caption: "Failed moves by reason (the coordinator's classification, `ctl wear`): a move superseded by a newer put, a removal or a re-protection is not a failure and is counted apart",
		Header: []string{"phase", "failed moves (count reason)"}}
	for _, ph := range phases {
		if ph.name == "chameleon" {
			cell := "none"
			if len(ph.failedBy) > 0 {
				cell = strings.Join(ph.failedBy, "; ")
			}
			ft.Rows = append(ft.Rows, []string{ph.name, cell})
		}
	}
	if err := r.Table(ft); err != nil {
		return nil, err
	}
	st := report.Table{Caption: "Objects per state at the end of each phase", Header: []string{"phase"}}
	for _, s := range wear.States() {
		st.Header = append(st.Header, s.String())
	}
	for _, ph := range phases {
		row := []string{ph.name}
		for _, s := range wear.States() {
			row = append(row, fmt.Sprint(ph.states[s.String()]))
		}
		st.Rows = append(st.Rows, row)
	}
	if err := r.Table(st); err != nil {
		return nil, err
	}
	var series []report.Series
	for _, name := range []string{"ec", "chameleon"} {
		s := report.Series{Name: "phase " + name, Points: true}
		for _, x := range samples {
			if x.phase == name {
				s.X = append(s.X, float64(x.puts))
				s.Y = append(s.Y, x.sigma)
			}
		}
		series = append(series, s)
	}
	pl, err := report.LinePlot{Title: "Standard deviation of the nodes' erase counts", XLabel: "puts since the data set was loaded",
		YLabel: "sigma of cumulative block erases", Series: series}.Build()
	if err != nil {
		return nil, err
	}
	if err := r.Plot("sigma", "erase-count standard deviation over the run (balancer off, then on)", pl); err != nil {
		return nil, err
	}
	if len(phases) == 2 {
		a, b := phases[0], phases[1]
		kill := "No node was killed (its erase counts could not be read). "
		if b.killed != 0 {
			kill = fmt.Sprintf("When node %d was killed, %d objects were in an intermediate state (late-REP, late-EC, "+
				"REP-EWO or EC-EWO: a conversion or an offload begun, its next put or move not yet made) and %d moves "+
				"were pending. ", b.killed, b.killIntermediate, b.killPending)
		}
		r.Text("The cumulative standard deviation went from %.1f at the end of the unbalanced phase to %.1f at the end "+
			"of the balanced one (coefficient of variation %.3f to %.3f); the balancer moved %s in %d moves; %d moves were "+
			"superseded (a put of a newer version, which in an EWO state writes the part to its destination itself, "+
			"committed first: the move is dropped, the newer version kept) and %d failed (reasons above; a failed move "+
			"is not retried until a later epoch issues it again). "+
			"%sObjects read back wrong or not at all: %d after phase 1, %d after phase 2 (of %d).",
			a.sigmaCum, b.sigmaCum, safeDiv(a.sigmaCum, a.mean), safeDiv(b.sigmaCum, b.mean), base.Bytes(b.moved), b.moves, b.superseded, b.failed,
			kill, a.wrong, b.wrong, b.verified)
		if a.wrong+b.wrong > 0 {
			return r, errors.New("chameleon-live: objects read back wrong (see the report)")
		}
	}
	return r, nil
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func meanSigma(xs []float64) (mean, sigma float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var sum, sumSq float64
	for _, x := range xs {
		sum += x
		sumSq += x * x
	}
	n := float64(len(xs))
	mean = sum / n
	return mean, math.Sqrt(math.Max(0, sumSq/n-mean*mean))
}

// maxUtilization is the highest live-bytes share of a live node's device.
func maxUtilization(ctx context.Context, cli *client.Client) (float64, error) {
	reports, err := cli.NodeReports(ctx, true, 5*time.Second)
	if err != nil {
		return 0, err
	}
	u := 0.0
	for _, r := range reports {
		if r.Info.Live && r.Info.CapacityBytes > 0 {
			u = math.Max(u, float64(r.Info.UsedBytes)/float64(r.Info.CapacityBytes))
		}
	}
	return u, nil
}

// waitAllLive waits until n nodes are live.
func waitAllLive(ctx context.Context, cli *client.Client, n int) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		nodes, err := cli.Nodes(ctx)
		live := 0
		for _, info := range nodes {
			if info.Live {
				live++
			}
		}
		if err == nil && live == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes live after a minute: %v", live, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
