package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/filestore"
	"github.com/flashmend/flashmend/internal/tlsconf"
	"github.com/flashmend/flashmend/internal/wire"
)

// Config configures a node. Zero values take the defaults noted.
type Config struct {
	// Dir holds the node's store (unless Store is given) and nothing else.
	Dir string
	// ListenAddr defaults to 127.0.0.1:0 (a port chosen at run time).
	ListenAddr string
	// CoordinatorAddr is the coordinator's gRPC address; empty runs the node
	// standalone (then NodeID must be set).
	CoordinatorAddr string
	// NodeID, when non-zero, must match the identity file if one exists.
	NodeID base.NodeID
	// Store overrides the default plain-file store under Dir/store.
	Store objstore.Store
	// SyncWrites fsyncs every chunk write (the default store only).
	SyncWrites bool
	// HeartbeatInterval defaults to 1s; the lease TTL comes from the
	// coordinator.
	HeartbeatInterval time.Duration
	// FaultSeed seeds the fault injector's generator.
	FaultSeed int64
	// DieRepair is what a failed flash die costs: "reparo" (default)
	// repairs only what the die held; "rebuild" is the baseline that
	// retires the whole device and re-creates all of its data on other
	// nodes (what RAID rebuild and HDFS do).
	DieRepair string
	// RegisterServices, when set, registers more gRPC services on the
	// node's server before it starts serving.
	RegisterServices func(*grpc.Server)
	// ServerOptions, when set, adds options to the node's gRPC server once
	// its ID is known (the metrics interceptors, internal/metrics).
	ServerOptions func(id base.NodeID) []grpc.ServerOption
	// AdvertiseAddr is the address the node registers for clients and
	// peers to dial (default: the address it listens on): a name its TLS
	// certificate carries, or a routable address when it listens on a
	// wildcard. A host without a port takes the listener's port.
	AdvertiseAddr string
	// TLS secures the node's gRPC server and its connections to the
	// coordinator, its peers and etcd (https endpoints); nil: plaintext.
	TLS *tlsconf.Config
	// Metrics, when set, returns the process's Prometheus metrics in the
	// text exposition format; the node serves them over gRPC (the
	// coordinator's dashboard gathers them). Nil: the Metrics RPC is
	// Unimplemented.
	Metrics func() ([]byte, error)
	// PeerDialOptions, when set, adds options to the node's connections to
	// its peers (the KV store's raft traffic): the reliability harness's
	// partition switch (internal/netfault) is one.
	PeerDialOptions func(peer base.NodeID) []grpc.DialOption
	// CoordinatorDialOptions, when set, adds options to the node's
	// connections to the coordinator and to its etcd (the heartbeats): the
	// reliability harness cuts a node off from the coordinator with them.
	CoordinatorDialOptions []grpc.DialOption
	// KV, when set, makes the node host the KV store (internal/kv/kvserver)
	// on the same server and port: its replicas of the shards the
	// coordinator placed on it, in Dir/kv, opened once the coordinator has
	// a layout. It needs a coordinator and a Dir.
	KV *kv.Options
	// RepairReserve is the fraction of the device kept free for repairs
	// (default 0.05; negative: none): a new chunk write that would leave
	// less free is refused with an error wrapping base.ErrNoSpace (the
	// client places the write elsewhere), while repairs may use the
	// reserve (objstore.ChunkStore.SetRepairReserve).
	RepairReserve float64
	// Logf receives operational messages; nil discards them.
	Logf func(format string, args ...any)
}

// DefaultRepairReserve is Config.RepairReserve's default.
const DefaultRepairReserve = 0.05

// identity is the node's identity and version file.
type identity struct {
	ClusterID     string `json:"cluster_id"`
	NodeID        uint64 `json:"node_id"`
	FormatVersion int    `json:"format_version"`
}

const formatVersion = 1
const identityFile = "node/identity"

// Node is a running storage node.
type Node struct {
	cfg Config
	id  base.NodeID
	lis net.Listener
	// addr is the address the node registers (Addr).
	addr   string
	srv    *grpc.Server
	chunks *objstore.ChunkStore
	fault  *objstore.FaultStore
	inner  objstore.Store
	// dir is Config.Dir made absolute ("" without one), shown to operators.
	dir string
	// fillMu serializes Fill and Unfill (the ballast of the "device full"
	// fault).
	fillMu sync.Mutex

	// history is the durable repair history; metaSeen is the count of
	// metadata copy repairs it has recorded.
	history    *history
	metaMu     sync.Mutex
	metaSeen   int64
	histCancel context.CancelFunc

	// dies holds the die-repair jobs (die.go).
	dies dieRepairs

	etcd    *clientv3.Client
	leaseID clientv3.LeaseID
	ttl     int64
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	closeOnce sync.Once

	// kv is the node's part of the KV store (Config.KV).
	kv kvHost
}

// Start opens the node's store, checks (and repairs) its identity file,
// starts serving, and joins the cluster when a coordinator is configured.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Store == nil && cfg.Dir == "" {
		return nil, base.InvalidArgumentf("node: a data directory or a store is required")
	}
	if cfg.KV != nil && (cfg.CoordinatorAddr == "" || cfg.Dir == "") {
		return nil, base.InvalidArgumentf("node: the KV store needs a coordinator and a data directory")
	}
	if cfg.CoordinatorAddr == "" && cfg.NodeID == 0 {
		return nil, base.InvalidArgumentf("node: standalone node needs a node ID")
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	switch {
	case cfg.RepairReserve == 0:
		cfg.RepairReserve = DefaultRepairReserve
	case cfg.RepairReserve < 0:
		cfg.RepairReserve = 0
	}
	switch cfg.DieRepair {
	case "":
		cfg.DieRepair = DieRepairReparo
	case DieRepairReparo, DieRepairRebuild:
	default:
		return nil, base.InvalidArgumentf("node: die repair mode %q (want %s or %s)", cfg.DieRepair, DieRepairReparo, DieRepairRebuild)
	}
	inner := cfg.Store
	if inner == nil {
		fs, err := filestore.Open(filepath.Join(cfg.Dir, "store"), cfg.SyncWrites)
		if err != nil {
			return nil, err
		}
		fs.SetLogf(cfg.Logf)
		inner = fs
	}
	n := &Node{cfg: cfg, inner: inner}
	if cfg.Dir != "" {
		if abs, err := filepath.Abs(cfg.Dir); err == nil {
			n.dir = abs
		} else {
			n.dir = cfg.Dir
		}
	}
	n.fault = objstore.NewFaultStore(inner, cfg.FaultSeed)
	n.chunks = objstore.NewChunkStore(n.fault)
	if err := n.chunks.SetRepairReserve(cfg.RepairReserve); err != nil {
		inner.Close()
		return nil, fmt.Errorf("node: %w", err)
	}
	if cfg.KV != nil {
		// Options the KV server will refuse (and say so) keep no headroom.
		if per, err := kvPerReplica(*cfg.KV); err == nil {
			n.chunks.SetSharedHeadroom(func() base.Bytes { return n.kvHeadroom(per) })
		}
	}

	ident, err := n.loadIdentity()
	if err != nil {
		inner.Close()
		return nil, err
	}
	// Verify every local metadata file at start (DIRECT 000 section 4.2.2):
	// a corrupt copy of a local index entry is rewritten from a good one.
	before := n.chunks.Stats().MetaRepaired
	if blobs, err := n.chunks.Blobs(); err != nil {
		cfg.Logf("node: local object index: %v", err)
	} else if fixed := n.chunks.Stats().MetaRepaired - before; fixed > 0 {
		cfg.Logf("node: local object index: %d entries, rewrote %d corrupt copies", len(blobs), fixed)
	}
	n.history = loadHistory(n.chunks.Meta(), time.Now, cfg.Logf)
	n.noteMetaRepairs()
	if err := n.history.flush(false); err != nil {
		cfg.Logf("node: %v", err)
	}
	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		inner.Close()
		return nil, fmt.Errorf("node: listen: %w", err)
	}
	n.lis = lis
	if n.addr, err = advertised(cfg.AdvertiseAddr, lis.Addr()); err != nil {
		lis.Close()
		inner.Close()
		return nil, err
	}
	if cfg.CoordinatorAddr != "" {
		if err := n.join(ctx, &ident); err != nil {
			lis.Close()
			inner.Close()
			return nil, err
		}
	} else {
		if ident.NodeID == 0 {
			ident.NodeID = uint64(cfg.NodeID)
			if err := n.saveIdentity(ident); err != nil {
				lis.Close()
				inner.Close()
				return nil, err
			}
		}
		n.id = base.NodeID(ident.NodeID)
	}
	// Chunk messages take buffers from the data path's pool (wire).
	creds, err := cfg.TLS.ServerOption()
	if err != nil {
		lis.Close()
		inner.Close()
		return nil, fmt.Errorf("node: %w", err)
	}
	srvOpts := append([]grpc.ServerOption{creds, experimental.BufferPool(wire.ChunkBufferPool)}, wire.DataPathServerOptions()...)
	if cfg.KV != nil {
		// Patches and raft batches of the KV store; a peer's whole shard
		// (FetchState) goes out in one message.
		srvOpts = append(srvOpts, grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(1<<30))
	}
	if cfg.ServerOptions != nil {
		srvOpts = append(srvOpts, cfg.ServerOptions(n.id)...)
	}
	n.srv = grpc.NewServer(srvOpts...)
	nodepb.RegisterNodeServer(n.srv, &service{n: n})
	if cfg.KV != nil {
		n.kv.svc.RegisterServices(n.srv)
	}
	if cfg.RegisterServices != nil {
		cfg.RegisterServices(n.srv)
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			cfg.Logf("node %s: serve: %v", n.id, err)
		}
	}()
	histCtx, histCancel := context.WithCancel(context.Background())
	n.histCancel = histCancel
	n.wg.Add(1)
	go n.historyLoop(histCtx)
	n.dies.jobs = map[uint64]*dieJob{}
	if dr, ok := inner.(objstore.DieReporter); ok {
		n.wg.Add(1)
		go n.dieLoop(histCtx, dr)
	}
	if n.etcd != nil {
		hbCtx, cancel := context.WithCancel(context.Background())
		n.cancel = cancel
		if err := n.heartbeat(ctx); err != nil {
			n.Close()
			return nil, err
		}
		n.wg.Add(1)
		go n.heartbeatLoop(hbCtx)
		if cfg.KV != nil {
			n.wg.Add(1)
			go n.kvLoop(hbCtx)
		}
	}
	return n, nil
}

func (n *Node) loadIdentity() (identity, error) {
	var ident identity
	res, err := n.chunks.Meta().Read(identityFile)
	if objstore.IsNotFound(err) {
		return ident, nil
	}
	if err != nil {
		return ident, fmt.Errorf("node: identity file %s on %s: %w", identityFile, n.inner.Name(), err)
	}
	if res.Repaired > 0 {
		n.chunks.AddMetaRepairs(res.Repaired)
		n.cfg.Logf("node: rewrote %d corrupt copies of the identity file", res.Repaired)
	}
	if err := json.Unmarshal(res.Payload, &ident); err != nil {
		return ident, base.CorruptionErrorf("node: identity file %s on %s: %v", identityFile, n.inner.Name(), err)
	}
	if ident.FormatVersion != formatVersion {
		return ident, fmt.Errorf("node: store format %d, this binary reads %d", ident.FormatVersion, formatVersion)
	}
	if n.cfg.NodeID != 0 && ident.NodeID != 0 && base.NodeID(ident.NodeID) != n.cfg.NodeID {
		return ident, base.InvalidArgumentf("node: store belongs to node %d, not %d", ident.NodeID, n.cfg.NodeID)
	}
	return ident, nil
}

func (n *Node) saveIdentity(ident identity) error {
	ident.FormatVersion = formatVersion
	b, err := json.Marshal(ident)
	if err != nil {
		return err
	}
	return n.chunks.Meta().Write(identityFile, b)
}

// join asks the coordinator for (or confirms) the node ID and the etcd
// endpoints, then opens the etcd client.
func (n *Node) join(ctx context.Context, ident *identity) error {
	conn, err := grpc.NewClient(n.cfg.CoordinatorAddr, n.coordinatorDialOptions()...)
	if err != nil {
		return fmt.Errorf("node: coordinator: %w", err)
	}
	defer conn.Close()
	want := ident.NodeID
	if want == 0 {
		want = uint64(n.cfg.NodeID)
	}
	resp, err := coordpb.NewCoordinatorClient(conn).Join(ctx, &coordpb.JoinRequest{NodeId: want, Addr: n.Addr(), ClusterId: ident.ClusterID})
	if err != nil {
		if reason, ok := tlsconf.Explain(n.cfg.TLS, err.Error()); ok {
			return fmt.Errorf("node: join the coordinator at %s: %s", n.cfg.CoordinatorAddr, reason)
		}
		return fmt.Errorf("node: join: %w", wire.FromStatus(err))
	}
	if ident.ClusterID != "" && ident.ClusterID != resp.ClusterId {
		return base.InvalidArgumentf("node: store belongs to cluster %s, coordinator runs %s", ident.ClusterID, resp.ClusterId)
	}
	if ident.NodeID != resp.NodeId || ident.ClusterID != resp.ClusterId {
		ident.NodeID, ident.ClusterID = resp.NodeId, resp.ClusterId
		if err := n.saveIdentity(*ident); err != nil {
			return err
		}
	}
	n.id = base.NodeID(resp.NodeId)
	n.ttl = resp.LeaseTtlSeconds
	n.etcd, err = clientv3.New(clientv3.Config{
		Endpoints:   resp.EtcdEndpoints,
		DialTimeout: 5 * time.Second,
		Logger:      nopLogger(),
		TLS:         n.cfg.TLS.ClientTLSFor(resp.EtcdEndpoints),
		DialOptions: n.cfg.CoordinatorDialOptions,
	})
	if err != nil {
		return fmt.Errorf("node: etcd: %w", err)
	}
	return nil
}

// coordinatorDialOptions are the options of a connection to the
// coordinator: TLS, then Config.CoordinatorDialOptions.
func (n *Node) coordinatorDialOptions() []grpc.DialOption {
	return append([]grpc.DialOption{n.cfg.TLS.DialOption()}, n.cfg.CoordinatorDialOptions...)
}

func (n *Node) heartbeatLoop(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := n.heartbeat(ctx); err != nil && ctx.Err() == nil {
				n.cfg.Logf("node %s: heartbeat: %v", n.id, err)
			}
		}
	}
}

// heartbeat renews the lease (granting a new one if it expired) and
// publishes the node's address and statistics under it.
func (n *Node) heartbeat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if n.leaseID != 0 {
		if _, err := n.etcd.KeepAliveOnce(ctx, n.leaseID); err != nil {
			n.leaseID = 0
		}
	}
	if n.leaseID == 0 {
		g, err := n.etcd.Grant(ctx, n.ttl)
		if err != nil {
			return err
		}
		n.leaseID = g.ID
	}
	st := n.Stats()
	info := &coordpb.NodeInfo{
		Id: uint64(n.id), Addr: n.Addr(), Live: true, Dir: n.dir,
		CapacityBytes: st.CapacityBytes, UsedBytes: st.UsedBytes,
		HeartbeatUnixMs: time.Now().UnixMilli(),
	}
	// Repair figures are the durable history's, not this run's.
	counts := n.history.counts()
	info.ChunksRead, info.Transient, info.Persistent = counts[CountChunksRead], counts[KindTransient], counts[KindPersistent]
	info.Repaired = counts[KindRepaired] + counts[KindMissingRepaired]
	for _, d := range st.Devices {
		info.WearBlocks += d.WearBlocks
		info.EraseCountTotal += d.EraseCountTotal
		info.EraseCountMax = max(info.EraseCountMax, d.EraseCountMax)
	}
	b, err := proto.Marshal(info)
	if err != nil {
		return err
	}
	_, err = n.etcd.Put(ctx, wire.LiveKey(n.id), string(b), clientv3.WithLease(n.leaseID))
	return err
}

// historyLoop writes new repair history events every
// historyFlushInterval.
func (n *Node) historyLoop(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(historyFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.noteMetaRepairs()
			if err := n.history.flush(false); err != nil {
				n.cfg.Logf("node %s: %v", n.id, err)
			}
		}
	}
}

// noteMetaRepairs records the metadata copies the chunk store rewrote
// since the last call (local index entries, the identity file).
func (n *Node) noteMetaRepairs() {
	n.metaMu.Lock()
	defer n.metaMu.Unlock()
	total := n.chunks.Stats().MetaRepaired
	if d := total - n.metaSeen; d > 0 {
		n.history.record(KindMetaRepaired, nil, fmt.Sprintf("%d metadata copies rewritten", d))
	}
	n.metaSeen = total
}

// RepairHistory returns the node's durable repair history, recent events
// resolved to keys where the local index still names them.
func (n *Node) RepairHistory() *nodepb.RepairHistory {
	n.noteMetaRepairs()
	return n.history.snapshot(func(object, version uint64, shard uint32) string {
		info, err := n.chunks.BlobInfoOf(object, version, shard)
		if err != nil {
			return ""
		}
		return info.Key
	})
}

// RepairCounts returns the totals of the node's durable repair history
// (the counts 'ctl repairs' prints), keyed by the Kind* and Count* names.
func (n *Node) RepairCounts() map[string]int64 {
	n.noteMetaRepairs()
	return n.history.counts()
}

// Dir is the node's data directory (absolute; "" when it has none).
func (n *Node) Dir() string { return n.dir }

// ID is the node's ID.
func (n *Node) ID() base.NodeID { return n.id }

// Addr is the node's gRPC address, as it registers it (Config.AdvertiseAddr).
func (n *Node) Addr() string { return n.addr }

// advertised is the address a node registers: adv (a host alone takes the
// listener's port), else the listener's.
func advertised(adv string, lis net.Addr) (string, error) {
	if adv == "" {
		return lis.String(), nil
	}
	_, port, err := net.SplitHostPort(lis.String())
	if err != nil {
		return "", err
	}
	host, advPort, err := net.SplitHostPort(adv)
	if err != nil {
		// A host alone (an IPv6 address without brackets too).
		host, advPort = strings.Trim(adv, "[]"), ""
	}
	if host == "" {
		return "", base.InvalidArgumentf("node: advertised address %q has no host", adv)
	}
	if advPort == "" || advPort == "0" {
		advPort = port
	}
	return net.JoinHostPort(host, advPort), nil
}

// Chunks is the node's chunk store.
func (n *Node) Chunks() *objstore.ChunkStore { return n.chunks }

// Store returns the node's device store (under the fault injector).
func (n *Node) Store() objstore.Store { return n.inner }

// Stats returns the node's statistics.
func (n *Node) Stats() *nodepb.StatsResponse {
	cs := n.chunks.Stats()
	resp := &nodepb.StatsResponse{NodeId: uint64(n.id), Addr: n.Addr(), Dir: n.dir}
	if u, err := n.inner.Usage(); err == nil {
		resp.CapacityBytes, resp.UsedBytes = int64(u.CapacityBytes), int64(u.UsedBytes)
	}
	resp.Devices = []*nodepb.DeviceStats{{
		Device: cs.Device, ChunksWritten: cs.ChunksWritten, BytesWritten: cs.BytesWritten,
		ChunksRead: cs.ChunksRead, BytesRead: cs.BytesRead, Transient: cs.Transient,
		Persistent: cs.Persistent, Repaired: cs.Repaired, Rejected: cs.Rejected,
		MetaRepaired: cs.MetaRepaired, InjectedFlips: n.fault.Flips(), MissingRepaired: cs.MissingRepaired,
		RefusedFull: cs.RefusedFull, RepairFailed: cs.RepairFailed,
	}}
	if wr, ok := n.inner.(objstore.WearReporter); ok {
		w := wr.Wear()
		d := resp.Devices[0]
		d.WearBlocks, d.EraseCountTotal, d.EraseCountMax = w.Blocks, w.EraseCountTotal, w.EraseCountMax
		d.DieEraseCounts = w.DieErases
	}
	if hr, ok := n.inner.(objstore.HealthReporter); ok {
		h := hr.Health()
		d := resp.Devices[0]
		d.FailedDies, d.Degraded, d.DegradedReason = int64(h.FailedDies), h.Degraded, h.Reason
	}
	return resp
}

// Close stops the node cleanly: it stops serving, revokes its lease (so the
// coordinator sees it leave at once) and closes its store.
func (n *Node) Close() error { return n.stop(true) }

// Kill stops the node as a crash would: connections drop, the lease is left
// to expire.
func (n *Node) Kill() error { return n.stop(false) }

func (n *Node) stop(graceful bool) error {
	var err error
	n.closeOnce.Do(func() {
		if n.cancel != nil {
			n.cancel()
		}
		if n.histCancel != nil {
			n.histCancel()
		}
		if n.srv != nil {
			if graceful {
				// Peers' raft streams never end on their own, and a
				// graceful stop waits for every open stream.
				n.kv.svc.Drain()
				done := make(chan struct{})
				go func() { n.srv.GracefulStop(); close(done) }()
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					n.srv.Stop()
				}
			} else {
				n.srv.Stop()
			}
		}
		n.lis.Close()
		n.wg.Wait()
		n.closeKV(graceful)
		// A clean stop writes the last events and the read count; a crash
		// (Kill) loses what came after the last flush, as a real one would.
		if graceful && n.history != nil {
			n.noteMetaRepairs()
			if ferr := n.history.flush(true); ferr != nil {
				n.cfg.Logf("node %s: %v", n.id, ferr)
			}
		}
		if n.etcd != nil {
			if graceful && n.leaseID != 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if _, err := n.etcd.Revoke(ctx, n.leaseID); err != nil {
					// The lease then expires on its own.
					n.cfg.Logf("node %s: revoke lease: %v", n.id, err)
				}
				cancel()
			}
			n.etcd.Close()
		}
		err = n.inner.Close()
	})
	return err
}
