package coord

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/coord/etcdstore"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/tlsconf"
	"github.com/flashmend/flashmend/internal/wire"
)

// Read modes: DIRECT chunk repair, or the hdfs baseline.
const (
	ReadModeDirect = "direct"
	ReadModeHDFS   = "hdfs"
)

// Config configures a coordinator. Zero values take the defaults noted.
type Config struct {
	// Dir holds the embedded etcd's data (Dir/etcd).
	Dir string
	// ListenAddr is the gRPC address. Empty: 127.0.0.1 on the port
	// remembered in Dir (chosen at run time the first time), so that the
	// cluster endpoint survives restarts; without Dir, a port chosen at run
	// time.
	ListenAddr string
	// EtcdEndpoints, when set, uses an external etcd cluster instead of the
	// embedded one.
	EtcdEndpoints []string
	// LeaseTTLSeconds is the node liveness lease (default 3).
	LeaseTTLSeconds int64
	// MaxObjectBytes bounds object sizes (default 1 GiB).
	MaxObjectBytes base.Bytes
	// MaxKeyBytes bounds key lengths (default 1024).
	MaxKeyBytes int
	// ReadMode is the cluster's default read mode, "direct" (default) or
	// "hdfs".
	ReadMode string
	// PendingTimeout is how long a write may stay uncommitted before its
	// chunks are collected (default 10 minutes).
	PendingTimeout time.Duration
	// SweepInterval is the period of the garbage sweeper (default 2s).
	SweepInterval time.Duration
	// UnsafeNoFsync disables the embedded etcd's fsyncs (tests only).
	UnsafeNoFsync bool
	// EtcdMembers is the number of embedded etcd members (1, 3 or 5;
	// default 1). With more than one, a member whose store is damaged or
	// lost is replaced from the others (members.go).
	EtcdMembers int
	// KeepDamagedStore makes a damaged embedded etcd store a start error
	// instead of setting it aside and rebuilding the index from the nodes.
	KeepDamagedStore bool
	// RecoveryWindow is how long after the coordinator adopts the nodes'
	// cluster (its own store lost) every joining node's local index is
	// merged into the index (default 10 minutes).
	RecoveryWindow time.Duration
	// Wear runs the wear balancer (wear.go); off by default.
	Wear WearConfig
	// TLS secures the gRPC server, the connections to the nodes and, for
	// https endpoints, to an external etcd; nil: plaintext.
	TLS *tlsconf.Config
	// NodeDialOptions, when set, adds options to the connections to the
	// nodes: with internal/netfault's Naming the coordinator names itself
	// on them, so that the reliability harness can cut it off from a node.
	NodeDialOptions []grpc.DialOption
	// Clock dates pending writes, records and the membership view's age
	// (default the system clock). The sweeper's period is a wall-clock
	// ticker.
	Clock base.Clock
	Logf  func(format string, args ...any)
}

// Coordinator is a running coordinator.
type Coordinator struct {
	coordpb.UnimplementedCoordinatorServer
	cfg       Config
	store     *etcdstore.Store // the embedded store (nil with external etcd)
	endpoints []string
	cli       *clientv3.Client
	mapping   *EtcdMappingTable
	idMu      sync.Mutex // guards clusterID (adopted from the nodes after a lost store)
	clusterID string
	// recovering: the store was lost and is being rebuilt from the nodes;
	// every join merges the node's local index (recoveryLoop).
	recovering    atomic.Bool
	healRequested atomic.Bool // a record failed its checksum: merge once
	rebuildKick   chan struct{}
	rebuildMu     sync.Mutex // one rebuild at a time
	// storeSetAside is where a damaged embedded store was moved at start.
	storeSetAside string
	lis           net.Listener
	srv           *grpc.Server
	cancel        context.CancelFunc
	wg            sync.WaitGroup

	connMu sync.Mutex
	conns  map[string]*grpc.ClientConn

	// A short-lived cache of the membership view: every put places its
	// object on it, and leases last seconds.
	nodesMu    sync.Mutex
	nodesCache map[uint64]*coordpb.NodeInfo
	nodesAt    time.Time

	wear *wearHost // nil when the wear balancer is off
}

// Start starts the coordinator: etcd (embedded unless external endpoints
// are given), the cluster identity, the gRPC service and the sweeper.
func Start(ctx context.Context, cfg Config) (*Coordinator, error) {
	if cfg.Dir == "" && len(cfg.EtcdEndpoints) == 0 {
		return nil, base.InvalidArgumentf("coordinator: a directory (for embedded etcd) or etcd endpoints are required")
	}
	if cfg.LeaseTTLSeconds <= 0 {
		cfg.LeaseTTLSeconds = 3
	}
	if cfg.MaxObjectBytes <= 0 {
		cfg.MaxObjectBytes = base.GiB
	}
	if cfg.MaxKeyBytes <= 0 {
		cfg.MaxKeyBytes = defaultKeyBytes
	}
	if cfg.ReadMode == "" {
		cfg.ReadMode = ReadModeDirect
	}
	if cfg.ReadMode != ReadModeDirect && cfg.ReadMode != ReadModeHDFS {
		return nil, base.InvalidArgumentf("coordinator: unknown read mode %q", cfg.ReadMode)
	}
	if cfg.PendingTimeout <= 0 {
		cfg.PendingTimeout = 10 * time.Minute
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = 2 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = base.SystemClock{}
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.RecoveryWindow <= 0 {
		cfg.RecoveryWindow = 10 * time.Minute
	}
	c := &Coordinator{cfg: cfg, conns: map[string]*grpc.ClientConn{}, rebuildKick: make(chan struct{}, 1)}
	c.endpoints = cfg.EtcdEndpoints
	if len(c.endpoints) == 0 {
		st, err := etcdstore.Start(ctx, etcdstore.Options{Dir: cfg.Dir, Members: max(cfg.EtcdMembers, 1), NoFsync: cfg.UnsafeNoFsync,
			KeepDamaged: cfg.KeepDamagedStore, Clock: cfg.Clock, Logf: cfg.Logf})
		if err != nil {
			return nil, err
		}
		c.store, c.endpoints, c.storeSetAside = st, st.Endpoints(), st.SetAside()
	}
	var err error
	c.cli, err = clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		TLS: cfg.TLS.ClientTLSFor(c.endpoints)})
	if err != nil {
		c.closeEtcd()
		return nil, fmt.Errorf("coordinator: etcd client: %w", err)
	}
	c.mapping = &EtcdMappingTable{kv: c.cli}
	if c.clusterID, err = c.ensureClusterID(ctx); err != nil {
		c.closeEtcd()
		return nil, err
	}
	if resp, err := c.cli.Get(ctx, recoveryKey); err != nil {
		c.closeEtcd()
		return nil, fmt.Errorf("coordinator: %w", err)
	} else if len(resp.Kvs) > 0 {
		c.recovering.Store(true) // restarted in the middle of a recovery
	}
	creds, err := cfg.TLS.ServerOption()
	if err != nil {
		c.closeEtcd()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	c.lis, err = listen(cfg.ListenAddr, cfg.Dir, cfg.Logf)
	if err != nil {
		c.closeEtcd()
		return nil, fmt.Errorf("coordinator: listen: %w", err)
	}
	c.srv = grpc.NewServer(creds)
	coordpb.RegisterCoordinatorServer(c.srv, c)
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		if err := c.srv.Serve(c.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			c.cfg.Logf("coordinator: serve: %v", err)
		}
	}()
	sweepCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.sweepLoop(sweepCtx)
	c.wg.Add(2)
	go c.watchLiveness(sweepCtx)
	go c.recoveryLoop(sweepCtx)
	if c.recovering.Load() {
		c.kickRebuild()
	}
	if err := c.startWear(ctx, sweepCtx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Addr is the coordinator's gRPC address: the cluster endpoint.
func (c *Coordinator) Addr() string { return c.lis.Addr().String() }

// EtcdEndpoints are the etcd client URLs.
func (c *Coordinator) EtcdEndpoints() []string { return c.endpoints }

// Mapping is the mapping table.
func (c *Coordinator) Mapping() MappingTable { return c.mapping }

// Close stops the coordinator and its embedded etcd.
func (c *Coordinator) Close() error {
	c.cancel()
	c.srv.Stop()
	c.wg.Wait()
	c.connMu.Lock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.connMu.Unlock()
	c.closeEtcd()
	return nil
}

func (c *Coordinator) closeEtcd() {
	if c.cli != nil {
		c.cli.Close()
	}
	if c.store != nil {
		c.store.Close()
	}
}

// rpcErr maps errors onto gRPC codes.
func rpcErr(err error) error {
	var unavailable *unavailableError
	if errors.As(err, &unavailable) {
		return status.Error(codes.Unavailable, err.Error())
	}
	return wire.ToStatus(err)
}

type unavailableError struct{ msg string }

func (e *unavailableError) Error() string { return e.msg }
