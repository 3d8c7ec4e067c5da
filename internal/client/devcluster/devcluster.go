package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/coord"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/metrics"
	"github.com/flashmend/flashmend/internal/node"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/tlsconf"
	"github.com/flashmend/flashmend/internal/wire"
)

// Options configures a dev cluster. Zero values take the defaults noted.
type Options struct {
	Dir   string
	Nodes int // default 6
	// NodeStore opens node i's store in dir; nil uses plain files.
	NodeStore func(dir string, i int) (objstore.Store, error)
	// SyncWrites fsyncs chunk writes on the default store.
	SyncWrites        bool
	LeaseTTLSeconds   int64         // default 5
	HeartbeatInterval time.Duration // default 500ms
	MaxObjectBytes    base.Bytes
	ReadMode          string
	// DieRepair is each node's die repair mode (node.Config.DieRepair).
	DieRepair string
	// RepairReserve is each node's repair reserve (node.Config.RepairReserve).
	// With no NodeStore the nodes keep plain files on the host's disk,
	// which other work shares: there 0 means no reserve, since 5% of a
	// shared disk free is not this cluster's to judge (tests failed with
	// "near full" whenever the machine's disk passed 95%). Set it to test
	// the reserve.
	RepairReserve float64
	// UnsafeNoFsync disables etcd's fsyncs (tests).
	UnsafeNoFsync bool
	// EtcdMembers is the coordinator's number of embedded etcd members (1
	// or 3; see coord.Config.EtcdMembers).
	EtcdMembers int
	// Scrub, when set, runs a scrubber in the background.
	Scrub *client.ScrubberOptions
	// KV, when set, makes every node host the KV store (node.Config.KV);
	// once the nodes serve, the coordinator places a layout cut at
	// KVSplits if it has none.
	KV       *kv.Options
	KVSplits []string
	Logf     func(format string, args ...any)
	// Wear turns the coordinator's wear balancer on (coord.WearConfig).
	Wear coord.WearConfig
	// Clock is the coordinator's clock (coord.Config.Clock; nil: the
	// system's). Tests that need pending writes to expire move it on.
	Clock base.Clock
	// WearMoveInterval, when set, runs a mover that carries out the wear
	// balancer's moves (client.RunWearMoves) at this period.
	WearMoveInterval time.Duration
	// Metrics, when set, receives the cluster's metrics: every node's
	// statistics, requests and KV repairs, and the scrubber's counters and
	// repairs. A registry serves one cluster.
	Metrics *metrics.Registry
	// TLS secures the coordinator's and the nodes' gRPC and every
	// connection among them and from the cluster's own clients (the
	// certificate must be for 127.0.0.1); nil: plaintext.
	TLS *tlsconf.Config
}

// Cluster is a running dev cluster.
type Cluster struct {
	opts  Options
	Coord *coord.Coordinator
	mu    sync.Mutex
	Nodes []*node.Node // nil entries are stopped nodes
	// dead holds why a node did not start (by index); the cluster runs
	// without it.
	dead map[int]error

	scrubber *client.Scrubber
	scrubCli *client.Client
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	moverCli    *client.Client
	moverCancel context.CancelFunc
}

// Start starts the coordinator and the nodes.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, base.InvalidArgumentf("devcluster: a directory is required")
	}
	if opts.Nodes == 0 {
		opts.Nodes = 6
	}
	if opts.Nodes < 1 || opts.Nodes > 64 {
		return nil, base.InvalidArgumentf("devcluster: %d nodes outside [1, 64]", opts.Nodes)
	}
	if opts.LeaseTTLSeconds == 0 {
		opts.LeaseTTLSeconds = 5
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = 500 * time.Millisecond
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Metrics != nil && opts.KV != nil {
		kvOpts := opts.Metrics.KVOptions(*opts.KV)
		opts.KV = &kvOpts
	}
	co, err := coord.Start(ctx, coord.Config{
		Dir: filepath.Join(opts.Dir, "coordinator"), LeaseTTLSeconds: opts.LeaseTTLSeconds,
		MaxObjectBytes: opts.MaxObjectBytes, ReadMode: opts.ReadMode, UnsafeNoFsync: opts.UnsafeNoFsync,
		EtcdMembers: opts.EtcdMembers, Wear: opts.Wear, Clock: opts.Clock, Logf: opts.Logf, TLS: opts.TLS,
	})
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, Coord: co, Nodes: make([]*node.Node, opts.Nodes), dead: map[int]error{}}
	// A node that cannot open is one dead node, not a dead cluster: the
	// others start and serve, and its data is served (and re-created) from
	// their redundancy.
	for i := range c.Nodes {
		if err := c.StartNode(ctx, i); err != nil {
			if ctx.Err() != nil {
				c.Close()
				return nil, err
			}
			opts.Logf("devcluster: %v; the other nodes serve without it", err)
		}
	}
	if dead := c.Dead(); len(dead) == opts.Nodes {
		var errs []error
		for _, d := range dead {
			errs = append(errs, d.Err)
		}
		c.Close()
		return nil, fmt.Errorf("devcluster: no node started: %w", errors.Join(errs...))
	}
	if opts.KV != nil {
		// Placed once every node that could start serves, so that the
		// shards spread over all of them. Too few live nodes: the nodes
		// wait for a layout ('flashmend ctl kv init' places one later).
		req := &coordpb.KVLayoutRequest{Create: true}
		for _, s := range opts.KVSplits {
			req.Splits = append(req.Splits, []byte(s))
		}
		if _, err := co.KVLayout(ctx, req); err != nil {
			opts.Logf("devcluster: kv layout: %v", wire.FromStatus(err))
		}
	}
	if opts.Scrub != nil {
		if err := c.startScrubber(ctx, *opts.Scrub); err != nil {
			c.Close()
			return nil, err
		}
	}
	if opts.WearMoveInterval > 0 {
		if err := c.startMover(ctx, opts.WearMoveInterval); err != nil {
			c.Close()
			return nil, err
		}
	}
	if m := opts.Metrics; m != nil {
		if err := errors.Join(m.AddNodes(c.running), m.AddScrubber(c.Scrubber)); err != nil {
			c.Close()
			return nil, fmt.Errorf("devcluster: metrics: %w", err)
		}
	}
	return c, nil
}

// running returns the nodes that run.
func (c *Cluster) running() []*node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node.Node
	for _, n := range c.Nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// startMover runs client.RunWearMoves every interval.
func (c *Cluster) startMover(ctx context.Context, interval time.Duration) error {
	cli, err := client.Dial(ctx, c.Endpoint(), client.Options{Logf: c.opts.Logf, TLS: c.opts.TLS})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.moverCli, c.moverCancel = cli, cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		tick, stop := base.NewTicker(c.opts.Clock, interval)
		defer stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick:
				if _, err := cli.RunWearMoves(runCtx, 100, nil); err != nil && runCtx.Err() == nil {
					c.opts.Logf("devcluster: wear mover: %v", err)
				}
			}
		}
	}()
	return nil
}

func (c *Cluster) nodeDir(i int) string { return NodeDir(c.opts.Dir, i) }

// NodeDir is node i's directory under a dev cluster's directory: node-ID,
// its ID being i+1.
func NodeDir(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("node-%d", i+1))
}

// StartNode starts (or restarts) node i (its ID is i+1). A node that does
// not start is recorded as dead (Dead) with an error that names the node,
// its directory and what failed.
func (c *Cluster) StartNode(ctx context.Context, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Nodes[i] != nil {
		return fmt.Errorf("devcluster: node %d is running", i+1)
	}
	n, err := c.startNodeLocked(ctx, i)
	if err != nil {
		err = fmt.Errorf("node %d (%s) did not start: %w", i+1, c.nodeDir(i), err)
		c.dead[i] = err
		return err
	}
	delete(c.dead, i)
	c.Nodes[i] = n
	return nil
}

func (c *Cluster) startNodeLocked(ctx context.Context, i int) (*node.Node, error) {
	dir := c.nodeDir(i)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var store objstore.Store
	if c.opts.NodeStore != nil {
		var err error
		if store, err = c.opts.NodeStore(dir, i); err != nil {
			return nil, err
		}
	}
	cfg := node.Config{
		Dir: dir, CoordinatorAddr: c.Coord.Addr(), NodeID: base.NodeID(i + 1), Store: store,
		SyncWrites: c.opts.SyncWrites, HeartbeatInterval: c.opts.HeartbeatInterval,
		FaultSeed: int64(i + 1), Logf: c.opts.Logf, DieRepair: c.opts.DieRepair, KV: c.opts.KV,
		RepairReserve: c.opts.RepairReserve, TLS: c.opts.TLS,
	}
	if store == nil && cfg.RepairReserve == 0 {
		cfg.RepairReserve = -1
	}
	if c.opts.Metrics != nil {
		cfg.ServerOptions = c.opts.Metrics.ServerOptions
	}
	return node.Start(ctx, cfg)
}

// DeadNode is a node that did not start.
type DeadNode struct {
	Index int
	ID    base.NodeID
	Dir   string
	Err   error // names the node, its directory and what failed
}

func (d DeadNode) String() string { return d.Err.Error() }

// Dead lists the nodes that did not start, by index.
func (c *Cluster) Dead() []DeadNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []DeadNode
	for i := range c.Nodes {
		if err, ok := c.dead[i]; ok {
			out = append(out, DeadNode{Index: i, ID: base.NodeID(i + 1), Dir: c.nodeDir(i), Err: err})
		}
	}
	return out
}

// KillNode stops node i as a crash would (its lease expires later).
func (c *Cluster) KillNode(i int) error {
	c.mu.Lock()
	n := c.Nodes[i]
	c.Nodes[i] = nil
	c.mu.Unlock()
	if n == nil {
		return fmt.Errorf("devcluster: node %d is not running", i+1)
	}
	return n.Kill()
}

// Node returns node i, nil when stopped.
func (c *Cluster) Node(i int) *node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Nodes[i]
}

// Dir is the cluster's directory (Options.Dir).
func (c *Cluster) Dir() string { return c.opts.Dir }

// Endpoint is the address clients dial.
func (c *Cluster) Endpoint() string { return c.Coord.Addr() }

// Scrubber returns the background scrubber, nil when not running.
func (c *Cluster) Scrubber() *client.Scrubber { return c.scrubber }

func (c *Cluster) startScrubber(ctx context.Context, opts client.ScrubberOptions) error {
	copts := client.Options{Logf: c.opts.Logf, TLS: c.opts.TLS}
	if c.opts.Metrics != nil {
		copts = c.opts.Metrics.ClientOptions(copts)
	}
	cli, err := client.Dial(ctx, c.Endpoint(), copts)
	if err != nil {
		return err
	}
	s, err := client.NewScrubber(cli, opts)
	if err != nil {
		cli.Close()
		return err
	}
	c.scrubber, c.scrubCli = s, cli
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := s.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			c.opts.Logf("devcluster: scrubber: %v", err)
		}
	}()
	return nil
}

// Close stops everything cleanly.
func (c *Cluster) Close() error {
	if c.moverCancel != nil {
		c.moverCancel()
	}
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	if c.scrubCli != nil {
		c.scrubCli.Close()
	}
	if c.moverCli != nil {
		c.moverCli.Close()
	}
	var errs []error
	c.mu.Lock()
	for i, n := range c.Nodes {
		if n != nil {
			errs = append(errs, n.Close())
			c.Nodes[i] = nil
		}
	}
	c.mu.Unlock()
	errs = append(errs, c.Coord.Close())
	return errors.Join(errs...)
}
