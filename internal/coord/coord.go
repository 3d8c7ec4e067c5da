package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/wear"
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
	etcds     []*embed.Etcd // the embedded store's members (none with external etcd)
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

// nodesCacheTTL bounds the staleness of the membership view used for
// placement (leases last seconds; a write to a node that just died fails
// and is placed again).
const nodesCacheTTL = 250 * time.Millisecond

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
	switch {
	case len(c.endpoints) > 0:
	case cfg.EtcdMembers <= 1:
		e, eps, err := c.startStore(ctx, filepath.Join(cfg.Dir, "etcd"))
		if err != nil {
			return nil, err
		}
		c.etcds, c.endpoints = []*embed.Etcd{e}, eps
	case cfg.EtcdMembers == 3 || cfg.EtcdMembers == 5:
		es, eps, err := c.startMembers(ctx, cfg.Dir, cfg.EtcdMembers)
		if err != nil {
			return nil, err
		}
		c.etcds, c.endpoints = es, eps
	default:
		return nil, base.InvalidArgumentf("coordinator: %d etcd members (want 1, 3 or 5)", cfg.EtcdMembers)
	}
	var err error
	c.cli, err = clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
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
	c.lis, err = listen(cfg.ListenAddr, cfg.Dir, cfg.Logf)
	if err != nil {
		c.closeEtcd()
		return nil, fmt.Errorf("coordinator: listen: %w", err)
	}
	c.srv = grpc.NewServer()
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
	var wg sync.WaitGroup
	for _, e := range c.etcds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			closeEtcdBounded(e)
		}()
	}
	wg.Wait()
}

func (c *Coordinator) ensureClusterID(ctx context.Context) (string, error) {
	var b [8]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(clusterIDKey), "=", 0)).
		Then(clientv3.OpPut(clusterIDKey, id)).
		Else(clientv3.OpGet(clusterIDKey)).Commit()
	if err != nil {
		return "", fmt.Errorf("coordinator: cluster id: %w", err)
	}
	if resp.Succeeded {
		return id, nil
	}
	return string(resp.Responses[0].GetResponseRange().Kvs[0].Value), nil
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

// Join registers a node as a permanent member (allocating its ID if asked)
// and tells it where etcd is.
func (c *Coordinator) Join(ctx context.Context, req *coordpb.JoinRequest) (*coordpb.JoinResponse, error) {
	if req.Addr == "" {
		return nil, rpcErr(base.InvalidArgumentf("join without an address"))
	}
	if req.ClusterId != "" {
		if err := c.adoptCluster(ctx, req.ClusterId); err != nil {
			return nil, rpcErr(err)
		}
	}
	id := req.NodeId
	if id == 0 {
		var err error
		if id, err = c.nextSeq(ctx, seqNodeKey); err != nil {
			return nil, rpcErr(err)
		}
	}
	v, err := encodeValue(&coordpb.NodeInfo{Id: id, Addr: req.Addr})
	if err != nil {
		return nil, rpcErr(err)
	}
	// Keep the node counter ahead of explicitly chosen IDs.
	if _, err := c.cli.Put(ctx, membersPrefix+strconv.FormatUint(id, 10), v); err != nil {
		return nil, rpcErr(err)
	}
	for {
		cur, rev, err := c.getSeq(ctx, seqNodeKey)
		if err != nil {
			return nil, rpcErr(err)
		}
		if cur >= id {
			break
		}
		ok, err := c.casSeq(ctx, seqNodeKey, rev, id)
		if err != nil {
			return nil, rpcErr(err)
		}
		if ok {
			break
		}
	}
	c.invalidateNodes()
	c.cfg.Logf("coordinator: node %d joined at %s", id, req.Addr)
	if c.recovering.Load() {
		c.kickRebuild()
	}
	return &coordpb.JoinResponse{NodeId: id, ClusterId: c.ClusterID(), EtcdEndpoints: c.endpoints, LeaseTtlSeconds: c.cfg.LeaseTTLSeconds}, nil
}

func (c *Coordinator) getSeq(ctx context.Context, key string) (uint64, int64, error) {
	resp, err := c.cli.Get(ctx, key)
	if err != nil {
		return 0, 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, 0, nil
	}
	v, err := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, 0, base.CorruptionErrorf("counter %s: %v", key, err)
	}
	return v, resp.Kvs[0].ModRevision, nil
}

func (c *Coordinator) casSeq(ctx context.Context, key string, rev int64, v uint64) (bool, error) {
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, strconv.FormatUint(v, 10))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

func (c *Coordinator) nextSeq(ctx context.Context, key string) (uint64, error) {
	for {
		cur, rev, err := c.getSeq(ctx, key)
		if err != nil {
			return 0, err
		}
		ok, err := c.casSeq(ctx, key, rev, cur+1)
		if err != nil {
			return 0, err
		}
		if ok {
			return cur + 1, nil
		}
	}
}

// ClusterInfo reports the cluster's identity and limits.
func (c *Coordinator) ClusterInfo(ctx context.Context, req *coordpb.ClusterInfoRequest) (*coordpb.ClusterInfoResponse, error) {
	return &coordpb.ClusterInfoResponse{
		ClusterId: c.ClusterID(), MaxObjectBytes: int64(c.cfg.MaxObjectBytes),
		ReadMode: c.cfg.ReadMode, EtcdEndpoints: c.endpoints,
	}, nil
}

// nodes returns every member with its liveness and latest statistics, at
// most nodesCacheTTL old. Callers must not modify the result.
func (c *Coordinator) nodes(ctx context.Context) (map[uint64]*coordpb.NodeInfo, error) {
	c.nodesMu.Lock()
	defer c.nodesMu.Unlock()
	if c.nodesCache != nil && c.cfg.Clock.Now().Sub(c.nodesAt) < nodesCacheTTL {
		return c.nodesCache, nil
	}
	nodes, err := c.readNodes(ctx)
	if err != nil {
		return nil, err
	}
	c.nodesCache, c.nodesAt = nodes, c.cfg.Clock.Now()
	return nodes, nil
}

// watchLiveness drops the membership cache as soon as a node's lease key
// appears or disappears (heartbeats that only refresh statistics do not).
func (c *Coordinator) watchLiveness(ctx context.Context) {
	defer c.wg.Done()
	for resp := range c.cli.Watch(clientv3.WithRequireLeader(ctx), wire.LivePrefix, clientv3.WithPrefix()) {
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete || ev.IsCreate() {
				c.invalidateNodes()
			}
		}
	}
}

// invalidateNodes drops the cached membership view.
func (c *Coordinator) invalidateNodes() {
	c.nodesMu.Lock()
	c.nodesCache = nil
	c.nodesMu.Unlock()
}

func (c *Coordinator) readNodes(ctx context.Context) (map[uint64]*coordpb.NodeInfo, error) {
	resp, err := c.cli.Get(ctx, membersPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[uint64]*coordpb.NodeInfo{}
	for _, kv := range resp.Kvs {
		info := &coordpb.NodeInfo{}
		if err := decodeValue(string(kv.Key), kv.Value, info); err != nil {
			return nil, err
		}
		out[info.Id] = info
	}
	live, err := c.cli.Get(ctx, wire.LivePrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	for _, kv := range live.Kvs {
		info := &coordpb.NodeInfo{}
		if err := proto.Unmarshal(kv.Value, info); err != nil {
			c.cfg.Logf("coordinator: bad liveness record %s: %v", kv.Key, err)
			continue
		}
		if m, ok := out[info.Id]; ok {
			info.Live = true
			proto.Merge(m, info)
		}
	}
	return out, nil
}

// ListNodes lists the members, live or not.
func (c *Coordinator) ListNodes(ctx context.Context, req *coordpb.ListNodesRequest) (*coordpb.ListNodesResponse, error) {
	nodes, err := c.readNodes(ctx)
	if err != nil {
		return nil, rpcErr(err)
	}
	resp := &coordpb.ListNodesResponse{}
	for _, n := range nodes {
		resp.Nodes = append(resp.Nodes, n)
	}
	slices.SortFunc(resp.Nodes, func(a, b *coordpb.NodeInfo) int { return int(a.Id) - int(b.Id) })
	return resp, nil
}

func (c *Coordinator) validatePut(key string, size int64, r objectpb.Redundancy) (int, error) {
	if err := ValidateKey(key, c.cfg.MaxKeyBytes); err != nil {
		return 0, err
	}
	if size < 0 || size > int64(c.cfg.MaxObjectBytes) {
		return 0, base.InvalidArgumentf("object size %d outside [0, %s]", size, c.cfg.MaxObjectBytes)
	}
	return Copies(r)
}

// BeginPut allocates a version and places its replicas or shards on live
// nodes; the write is recorded as pending until CommitPut.
func (c *Coordinator) BeginPut(ctx context.Context, req *coordpb.BeginPutRequest) (*coordpb.BeginPutResponse, error) {
	n, err := c.validatePut(req.Key, req.SizeBytes, req.Redundancy)
	if err != nil {
		return nil, rpcErr(err)
	}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return nil, rpcErr(err)
	}
	members := make([]base.NodeID, 0, len(nodes))
	for id := range nodes {
		members = append(members, base.NodeID(id))
	}
	usable := func(id base.NodeID) bool {
		return nodes[uint64(id)].GetLive() && !slices.Contains(req.Exclude, uint64(id))
	}
	var placed []base.NodeID
	var plan wear.WritePlan
	if c.wear != nil {
		// The wear balancer decides the redundancy and the placement.
		if plan, err = c.wearPlace(ctx, req.Key, req.Exclude, nodes); err != nil {
			return nil, rpcErr(err)
		}
		placed = plan.New.Nodes()
	} else {
		p, err := NewRing(members).Place(req.Key, n, usable)
		if err != nil {
			return nil, rpcErr(&unavailableError{err.Error()})
		}
		placed = p.Actual
	}
	version, err := c.allocateVersion(ctx)
	if err != nil {
		return nil, rpcErr(err)
	}
	pending := &objectpb.PendingPut{
		Key: req.Key, Object: KeyHash(req.Key), Version: version,
		DeadlineUnixMs: c.cfg.Clock.Now().Add(c.cfg.PendingTimeout).UnixMilli(),
	}
	resp := &coordpb.BeginPutResponse{Object: pending.Object, Version: version}
	if c.wear != nil {
		c.wear.rememberPlan(version, plan, c.cfg.Clock.Now())
		resp.Redundancy = redundancyOf(plan.New.Redundancy)
	}
	for _, id := range placed {
		pending.Placement = append(pending.Placement, uint64(id))
		resp.Placement = append(resp.Placement, nodes[uint64(id)])
	}
	v, err := encodeValue(pending)
	if err != nil {
		return nil, rpcErr(err)
	}
	if _, err := c.cli.Put(ctx, versionKey(pendingPrefix, version), v); err != nil {
		return nil, rpcErr(err)
	}
	return resp, nil
}

func (c *Coordinator) getPending(ctx context.Context, key string, version uint64) (*objectpb.PendingPut, int64, error) {
	resp, err := c.cli.Get(ctx, versionKey(pendingPrefix, version))
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, base.InvalidArgumentf("no pending write of version %d (expired, aborted or committed)", version)
	}
	p := &objectpb.PendingPut{}
	if err := decodeValue(string(resp.Kvs[0].Key), resp.Kvs[0].Value, p); err != nil {
		return nil, 0, err
	}
	if p.Key != key {
		return nil, 0, base.InvalidArgumentf("version %d belongs to another key", version)
	}
	return p, resp.Kvs[0].ModRevision, nil
}

// CommitPut makes a written version visible, atomically replacing the
// previous one (whose chunks become garbage) and updating the mapping table.
func (c *Coordinator) CommitPut(ctx context.Context, req *coordpb.CommitPutRequest) (*coordpb.CommitPutResponse, error) {
	if _, err := c.validatePut(req.Key, req.SizeBytes, req.Redundancy); err != nil {
		return nil, rpcErr(err)
	}
	pending, pendingRev, err := c.getPending(ctx, req.Key, req.Version)
	if err != nil {
		return nil, rpcErr(err)
	}
	if !slices.Equal(pending.Placement, req.Placement) {
		return nil, rpcErr(base.InvalidArgumentf("commit placement %v differs from the allocated %v", req.Placement, pending.Placement))
	}
	if c.wear != nil {
		if err := c.wear.checkCommit(req.Version, req.Redundancy, pending.Placement); err != nil {
			return nil, rpcErr(err)
		}
	}
	rec := &objectpb.ObjectRecord{
		Key: req.Key, Object: pending.Object, Version: req.Version, SizeBytes: req.SizeBytes,
		Redundancy: req.Redundancy, Placement: pending.Placement, CreatedUnixMs: c.cfg.Clock.Now().UnixMilli(),
	}
	mapOp, err := c.mappingOp(ctx, rec)
	if err != nil {
		return nil, rpcErr(err)
	}
	for {
		prev, prevRev, err := c.lookup(ctx, req.Key)
		if err != nil && !isNotFound(err) {
			return nil, rpcErr(err)
		}
		// The per-key version users see follows the version this commit
		// replaces; the transaction below fails if another commit got in
		// between, and the loop numbers again.
		rec.KeyVersion = 1
		if prev != nil {
			rec.KeyVersion = prev.KeyVersion + 1
		}
		recValue, err := encodeValue(rec)
		if err != nil {
			return nil, rpcErr(err)
		}
		ops := []clientv3.Op{
			clientv3.OpPut(objectsPrefix+req.Key, recValue),
			clientv3.OpDelete(versionKey(pendingPrefix, req.Version)),
			mapOp,
		}
		if prev != nil {
			op, err := garbageOp(prev.Key, prev.Object, prev.Version, prev.Placement)
			if err != nil {
				return nil, rpcErr(err)
			}
			ops = append(ops, op)
		}
		resp, err := c.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(versionKey(pendingPrefix, req.Version)), "=", pendingRev),
			clientv3.Compare(clientv3.ModRevision(objectsPrefix+req.Key), "=", prevRev),
		).Then(ops...).Commit()
		if err != nil {
			return nil, rpcErr(err)
		}
		if resp.Succeeded {
			if c.wear != nil {
				c.wear.committed(req.Version, req.SizeBytes)
			}
			return &coordpb.CommitPutResponse{Record: rec}, nil
		}
		if _, _, err := c.getPending(ctx, req.Key, req.Version); err != nil {
			return nil, rpcErr(err)
		}
	}
}

// mappingOp writes the mapping entry of an object whose placement or
// redundancy is not the default, and removes a stale one otherwise.
func (c *Coordinator) mappingOp(ctx context.Context, rec *objectpb.ObjectRecord) (clientv3.Op, error) {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return clientv3.Op{}, err
	}
	var members []base.NodeID
	for id := range nodes {
		members = append(members, base.NodeID(id))
	}
	walk := NewRing(members).Walk(rec.Key)
	def := make([]uint64, 0, len(rec.Placement))
	for i := 0; i < len(rec.Placement) && i < len(walk); i++ {
		def = append(def, uint64(walk[i]))
	}
	if rec.Redundancy == objectpb.Redundancy_REP && slices.Equal(def, rec.Placement) {
		return c.mapping.deleteOp(rec.Key), nil
	}
	return c.mapping.putOp(&objectpb.MappingEntry{
		Key: rec.Key, Version: rec.Version, Redundancy: rec.Redundancy,
		Placement: rec.Placement, DefaultPlacement: def,
	})
}

func garbageOp(key string, object, version uint64, placement []uint64) (clientv3.Op, error) {
	return garbageOpAt(versionKey(garbagePrefix, version), key, object, version, placement)
}

// garbageOpAt lists the blobs of version on placement as garbage under
// etcd key gk (a version's whole placement under versionKey, a single
// node's blob left behind by a replacement under replacedGarbageKey).
func garbageOpAt(gk, key string, object, version uint64, placement []uint64) (clientv3.Op, error) {
	v, err := encodeValue(&objectpb.PendingPut{Key: key, Object: object, Version: version, Placement: placement})
	if err != nil {
		return clientv3.Op{}, err
	}
	return clientv3.OpPut(gk, v), nil
}

// AbortPut drops a pending write; its chunks become garbage.
func (c *Coordinator) AbortPut(ctx context.Context, req *coordpb.AbortPutRequest) (*coordpb.AbortPutResponse, error) {
	pending, rev, err := c.getPending(ctx, req.Key, req.Version)
	if err != nil {
		return nil, rpcErr(err)
	}
	if c.wear != nil {
		c.wear.dropPlan(req.Version)
	}
	return &coordpb.AbortPutResponse{}, rpcErr(c.retirePending(ctx, versionKey(pendingPrefix, pending.Version), pending, rev))
}

// retirePending turns the pending entry at etcd key pk (a write or a
// replacement that never committed) into garbage.
func (c *Coordinator) retirePending(ctx context.Context, pk string, p *objectpb.PendingPut, rev int64) error {
	gk := versionKey(garbagePrefix, p.Version)
	if rest := strings.TrimPrefix(pk, versionKey(pendingPrefix, p.Version)); rest != "" {
		gk += rest // a replacement's target: its own garbage entry
	}
	op, err := garbageOpAt(gk, p.Key, p.Object, p.Version, p.Placement)
	if err != nil {
		return err
	}
	_, err = c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(pk), "=", rev)).
		Then(clientv3.OpDelete(pk), op).Commit()
	return err
}

type notFoundError struct{ key string }

func (e *notFoundError) Error() string { return fmt.Sprintf("object %q not found", e.key) }

func isNotFound(err error) bool {
	var nf *notFoundError
	return errors.As(err, &nf)
}

func (c *Coordinator) lookup(ctx context.Context, key string) (*objectpb.ObjectRecord, int64, error) {
	resp, err := c.cli.Get(ctx, objectsPrefix+key)
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, &notFoundError{key}
	}
	rec := &objectpb.ObjectRecord{}
	if err := decodeValue(string(resp.Kvs[0].Key), resp.Kvs[0].Value, rec); err != nil {
		c.requestHeal(err)
		return nil, 0, err
	}
	return rec, resp.Kvs[0].ModRevision, nil
}

func lookupErr(err error) error {
	if isNotFound(err) {
		return status.Error(codes.NotFound, err.Error())
	}
	return rpcErr(err)
}

// Lookup returns a key's current version.
func (c *Coordinator) Lookup(ctx context.Context, req *coordpb.LookupRequest) (*coordpb.LookupResponse, error) {
	if err := ValidateKey(req.Key, c.cfg.MaxKeyBytes); err != nil {
		return nil, rpcErr(err)
	}
	rec, _, err := c.lookup(ctx, req.Key)
	if err != nil {
		return nil, lookupErr(err)
	}
	return &coordpb.LookupResponse{Record: rec}, nil
}

// Delete removes a key; its chunks become garbage.
func (c *Coordinator) Delete(ctx context.Context, req *coordpb.DeleteRequest) (*coordpb.DeleteResponse, error) {
	if err := ValidateKey(req.Key, c.cfg.MaxKeyBytes); err != nil {
		return nil, rpcErr(err)
	}
	for {
		rec, rev, err := c.lookup(ctx, req.Key)
		if err != nil {
			return nil, lookupErr(err)
		}
		op, err := garbageOp(rec.Key, rec.Object, rec.Version, rec.Placement)
		if err != nil {
			return nil, rpcErr(err)
		}
		resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(objectsPrefix+req.Key), "=", rev)).
			Then(clientv3.OpDelete(objectsPrefix+req.Key), c.mapping.deleteOp(req.Key), op).Commit()
		if err != nil {
			return nil, rpcErr(err)
		}
		if resp.Succeeded {
			if c.wear != nil {
				c.wear.removed(rec.Object)
			}
			return &coordpb.DeleteResponse{Record: rec}, nil
		}
	}
}

// List lists keys by prefix, in key order, after StartAfter.
func (c *Coordinator) List(ctx context.Context, req *coordpb.ListRequest) (*coordpb.ListResponse, error) {
	limit := req.Limit
	if limit < 0 || limit > 10000 {
		return nil, rpcErr(base.InvalidArgumentf("list limit %d outside [0, 10000]", limit))
	}
	if limit == 0 {
		limit = 1000
	}
	from := objectsPrefix + req.Prefix
	if req.StartAfter != "" {
		if !strings.HasPrefix(req.StartAfter, req.Prefix) {
			return nil, rpcErr(base.InvalidArgumentf("start-after %q is not under prefix %q", req.StartAfter, req.Prefix))
		}
		from = objectsPrefix + req.StartAfter + "\x00"
	}
	end := clientv3.GetPrefixRangeEnd(objectsPrefix + req.Prefix)
	resp, err := c.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, rpcErr(err)
	}
	out := &coordpb.ListResponse{}
	for _, kv := range resp.Kvs {
		rec := &objectpb.ObjectRecord{}
		if err := decodeValue(string(kv.Key), kv.Value, rec); err != nil {
			return nil, rpcErr(err)
		}
		out.Records = append(out.Records, rec)
	}
	return out, nil
}

// ReportBadReplica records a replica that failed a read in hdfs mode; the
// reader re-replicates the whole version to it.
func (c *Coordinator) ReportBadReplica(ctx context.Context, req *coordpb.ReportBadReplicaRequest) (*coordpb.ReportBadReplicaResponse, error) {
	if err := ValidateKey(req.Key, c.cfg.MaxKeyBytes); err != nil {
		return nil, rpcErr(err)
	}
	if req.Version == 0 || req.NodeId == 0 {
		return nil, rpcErr(base.InvalidArgumentf("bad-replica report without version or node"))
	}
	k := fmt.Sprintf("%s/%d", versionKey(badPrefix, req.Version), req.NodeId)
	if _, err := c.cli.Put(ctx, k, req.Key); err != nil {
		return nil, rpcErr(err)
	}
	c.cfg.Logf("coordinator: replica of %q v%d on node %d reported bad", req.Key, req.Version, req.NodeId)
	return &coordpb.ReportBadReplicaResponse{}, nil
}

func (c *Coordinator) sweepLoop(ctx context.Context) {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.Sweep(ctx); err != nil && ctx.Err() == nil {
				c.cfg.Logf("coordinator: sweep: %v", err)
			}
		}
	}
}

// Sweep retires expired pending writes and deletes garbage versions from
// the live nodes that hold them. A garbage entry stays until every node of
// its placement has deleted its part.
func (c *Coordinator) Sweep(ctx context.Context) error {
	now := c.cfg.Clock.Now().UnixMilli()
	resp, err := c.cli.Get(ctx, pendingPrefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	for _, kv := range resp.Kvs {
		p := &objectpb.PendingPut{}
		if err := decodeValue(string(kv.Key), kv.Value, p); err != nil {
			c.cfg.Logf("coordinator: %v", err)
			continue
		}
		if p.DeadlineUnixMs < now {
			if err := c.retirePending(ctx, string(kv.Key), p, kv.ModRevision); err != nil {
				return err
			}
		}
	}
	resp, err = c.cli.Get(ctx, garbagePrefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	for _, kv := range resp.Kvs {
		g := &objectpb.PendingPut{}
		if err := decodeValue(string(kv.Key), kv.Value, g); err != nil {
			c.cfg.Logf("coordinator: %v", err)
			continue
		}
		done := true
		for _, id := range g.Placement {
			n := nodes[id]
			if !n.GetLive() {
				done = false
				continue
			}
			if err := c.deleteBlob(ctx, n.Addr, g.Object, g.Version); err != nil {
				done = false
			}
		}
		if done {
			if _, err := c.cli.Delete(ctx, string(kv.Key)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Coordinator) deleteBlob(ctx context.Context, addr string, object, version uint64) error {
	conn, err := c.conn(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = nodepb.NewNodeClient(conn).DeleteBlob(ctx, &nodepb.DeleteBlobRequest{Object: object, Version: version})
	return err
}

func (c *Coordinator) conn(addr string) (*grpc.ClientConn, error) {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if conn, ok := c.conns[addr]; ok {
		return conn, nil
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c.conns[addr] = conn
	return conn, nil
}
