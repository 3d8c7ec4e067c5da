package kvcluster

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/grpc"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvserver"
)

// Config describes an in-process cluster on loopback: real gRPC
// servers on 127.0.0.1 ports chosen at run time, one Node each, serving
// only the KV store (the storage nodes of internal/node host it in a full
// cluster). Tests, `flashmend kv serve` and experiments use it.
type Config struct {
	// Nodes is the number of nodes (default 3); every shard has a replica on
	// every node.
	Nodes int
	// Splits are the shard boundaries (none: one shard).
	Splits []string
	// FS holds every node's files under Dir/nN (default vfs.NewMem()).
	FS  vfs.FS
	Dir string
	// NodeFS, if set, gives each node its own file system (for example
	// internal/sdfvfs over the node's emulated flash); FS is then unused.
	// It is called once per node; restarts reuse the result.
	NodeFS func(base.NodeID) (vfs.FS, error)
	kv.Options
}

// Cluster is a running in-process cluster.
type Cluster struct {
	cfg    Config
	Layout kvapi.Layout
	Addrs  map[base.NodeID]string

	mu    sync.Mutex
	nodes map[base.NodeID]*localNode
	fss   map[base.NodeID]vfs.FS
}

type localNode struct {
	node *kvserver.Node
	srv  *grpc.Server
	done chan struct{}
}

// Start starts the nodes.
func Start(cfg Config) (*Cluster, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Nodes < 1 || cfg.Nodes > 64 {
		return nil, base.InvalidArgumentf("kv: %d nodes outside [1, 64]", cfg.Nodes)
	}
	if cfg.FS == nil {
		cfg.FS = vfs.NewMem()
	}
	if cfg.Dir == "" {
		cfg.Dir = "cluster"
	}
	var ids []base.NodeID
	c := &Cluster{cfg: cfg, Addrs: map[base.NodeID]string{}, nodes: map[base.NodeID]*localNode{}, fss: map[base.NodeID]vfs.FS{}}
	listeners := map[base.NodeID]net.Listener{}
	for i := 1; i <= cfg.Nodes; i++ {
		id := base.NodeID(i)
		ids = append(ids, id)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return nil, err
		}
		listeners[id] = lis
		c.Addrs[id] = lis.Addr().String()
	}
	c.Layout = kvapi.UniformLayout(ids, cfg.Splits...)
	if err := c.Layout.Validate(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := c.startNode(id, listeners[id]); err != nil {
			for _, l := range listeners {
				l.Close()
			}
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Config returns the configuration the cluster was started with (defaults
// filled in).
func (c *Cluster) Config() Config { return c.cfg }

// NodeFS returns the file system of node id.
func (c *Cluster) NodeFS(id base.NodeID) (vfs.FS, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fs, ok := c.fss[id]; ok {
		return fs, nil
	}
	fs := c.cfg.FS
	if c.cfg.NodeFS != nil {
		var err error
		if fs, err = c.cfg.NodeFS(id); err != nil {
			return nil, err
		}
	}
	c.fss[id] = fs
	return fs, nil
}

func (c *Cluster) startNode(id base.NodeID, lis net.Listener) error {
	fs, err := c.NodeFS(id)
	if err != nil {
		return err
	}
	n, err := kvserver.NewNode(kvserver.Config{
		ID: id, Layout: c.Layout, Addrs: c.Addrs, FS: fs,
		Dir: fs.PathJoin(c.cfg.Dir, fmt.Sprintf("n%d", uint64(id))), Options: c.cfg.Options,
	})
	if err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(1<<30))
	n.RegisterServices(srv)
	ln := &localNode{node: n, srv: srv, done: make(chan struct{})}
	go func() {
		defer close(ln.done)
		_ = srv.Serve(lis)
	}()
	c.mu.Lock()
	c.nodes[id] = ln
	c.mu.Unlock()
	return nil
}

// Node returns a running node, or nil if it is stopped.
func (c *Cluster) Node(id base.NodeID) *kvserver.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ln, ok := c.nodes[id]; ok {
		return ln.node
	}
	return nil
}

// NodeIDs lists the cluster's nodes.
func (c *Cluster) NodeIDs() []base.NodeID {
	var ids []base.NodeID
	for id := range c.Addrs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// StopNode stops a node's server and closes its replicas (files stay).
func (c *Cluster) StopNode(id base.NodeID) error { return c.stopNode(id, false) }

// CrashNode stops a node as a crash would (Node.Crash): what its engines
// held only in memory is gone.
func (c *Cluster) CrashNode(id base.NodeID) error { return c.stopNode(id, true) }

func (c *Cluster) stopNode(id base.NodeID, crash bool) error {
	c.mu.Lock()
	ln, ok := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if !ok {
		return base.InvalidArgumentf("kv: node %s is not running", id)
	}
	ln.srv.Stop()
	<-ln.done
	if crash {
		return ln.node.Crash()
	}
	return ln.node.Close()
}

// RestartNode starts a stopped node again on its old address and files.
func (c *Cluster) RestartNode(id base.NodeID) error {
	addr, ok := c.Addrs[id]
	if !ok {
		return base.InvalidArgumentf("kv: unknown node %s", id)
	}
	var lis net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if lis, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("kv: relisten on %s: %w", addr, err)
	}
	if err := c.startNode(id, lis); err != nil {
		lis.Close()
		return err
	}
	return nil
}

// NewClient returns a client of the cluster.
func (c *Cluster) NewClient(opts kvclient.Options) (*kvclient.Client, error) {
	return kvclient.New(c.Layout, c.Addrs, opts)
}

// WaitLeader waits until the shard has a leader known to a running node.
func (c *Cluster) WaitLeader(ctx context.Context, shard base.ShardID) (base.NodeID, error) {
	for {
		for _, id := range c.NodeIDs() {
			n := c.Node(id)
			if n == nil {
				continue
			}
			if r := n.Replica(shard); r != nil && r.IsLeader() {
				return id, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("kv: no leader for %s: %w", shard, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WaitApplied waits until every running replica of shard has applied
// index: eventual reads from any of them then see every write up to it (a
// write is acknowledged once a quorum holds it, which may leave a replica
// behind).
func (c *Cluster) WaitApplied(ctx context.Context, shard base.ShardID, index uint64) error {
	for {
		behind := ""
		for _, id := range c.NodeIDs() {
			if n := c.Node(id); n != nil {
				if r := n.Replica(shard); r != nil && r.AppliedIndex() < index {
					behind = fmt.Sprintf("%s at %d", r, r.AppliedIndex())
				}
			}
		}
		if behind == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kv: %s has not applied %d: %w", behind, index, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Close stops every node.
func (c *Cluster) Close() error {
	var first error
	for _, id := range c.NodeIDs() {
		c.mu.Lock()
		_, running := c.nodes[id]
		c.mu.Unlock()
		if running {
			if err := c.StopNode(id); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
