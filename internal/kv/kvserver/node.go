package kvserver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
)

// Config configures the KV part of one storage node.
type Config struct {
	ID     base.NodeID
	Layout kvapi.Layout
	// Addrs gives every node's gRPC address (loopback in tests); Resolve,
	// when set, is asked instead, whenever the node connects to a peer
	// (nodes that listen on a port chosen at start move when they
	// restart).
	Addrs   map[base.NodeID]string
	Resolve func(ctx context.Context, id base.NodeID) (string, error)
	// DialOptions, when set, adds options to the connection to a peer
	// (the reliability harness's partition switch, internal/netfault).
	DialOptions func(peer base.NodeID) []grpc.DialOption
	// FS and Dir hold the node's replicas: Dir/shard-N/{raft,pebble}. Any
	// vfs.FS works (vfs.Default, vfs.NewMem(), later sdfvfs).
	FS  vfs.FS
	Dir string
	// OnFailure, if set, is told of every replica failure after NewNode
	// returned (a replica that fail-stopped and what replaced it), from a
	// goroutine of the node's.
	OnFailure func(ReplicaFailure)
	kv.Options
}

// Node hosts this node's replicas of every shard (multi-raft), batches
// their raft messages per destination node, and serves the KV,
// Replication and KVAdmin gRPC services.
type Node struct {
	cfg Config
	// replicas holds the node's replicas; rmu guards it (a replica that
	// fail-stops is replaced while the node runs).
	rmu      sync.RWMutex
	replicas map[base.ShardID]*kv.Replica
	// failures records replicas that could not open as they were (see
	// NewNode): what failed, and whether a fresh replica replaced them.
	failures []ReplicaFailure
	// guard is the protection layer every replica's files go through.
	guard *guardfs.FS

	mu    sync.Mutex
	peers map[base.NodeID]*peer
	conns map[base.NodeID]*peerConn
	stop  chan struct{}
	wg    sync.WaitGroup
	// replacing counts replacements of fail-stopped replicas under way;
	// close waits for them before it closes the replicas.
	replacing sync.WaitGroup
}

var _ kv.Transport = (*Node)(nil)

// NewNode opens (or creates) the node's replicas and starts them.
func NewNode(cfg Config) (*Node, error) {
	if cfg.ID == 0 {
		return nil, base.InvalidArgumentf("kv: node id 0")
	}
	if cfg.FS == nil || cfg.Dir == "" {
		return nil, base.InvalidArgumentf("kv: node needs FS and Dir")
	}
	if err := cfg.Layout.Validate(); err != nil {
		return nil, err
	}
	opts, err := cfg.Options.WithDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Options = opts
	// Pebble's own files (MANIFEST, OPTIONS, markers, sstable metadata)
	// are protected on whatever file system the node runs on (DIRECT
	// policy 2 for the engine); the raft logs protect themselves and pass
	// through.
	guard, err := guardfs.New(cfg.FS, guardfs.Options{SSTReaderOptions: engine.SSTReaderOptions()})
	if err != nil {
		return nil, fmt.Errorf("kv: %s: guardfs: %w", cfg.ID, err)
	}
	n := &Node{
		cfg: cfg, replicas: map[base.ShardID]*kv.Replica{},
		peers: map[base.NodeID]*peer{}, conns: map[base.NodeID]*peerConn{},
		stop: make(chan struct{}), guard: guard,
	}
	for _, s := range cfg.Layout.Shards {
		rid, ok := s.ReplicaOn(cfg.ID)
		if !ok {
			continue
		}
		dir := cfg.FS.PathJoin(cfg.Dir, fmt.Sprintf("shard-%d", uint64(s.ID)))
		r, err := kv.OpenReplica(n.replicaConfig(s, rid, dir, false))
		if err != nil {
			// One replica's failure is only that replica's: keep its files
			// aside for inspection and start it afresh; it rejoins its
			// group, takes a peer's state and votes for no one until it
			// holds every committed entry (raftlog's vote floor).
			r, err = n.replaceReplica(s, rid, dir, err)
			if err != nil {
				continue
			}
		}
		n.replicas[s.ID] = r
	}
	return n, nil
}

// ReplicaFailure is a replica that could not open from its files.
type ReplicaFailure struct {
	Shard base.ShardID
	// Dir is the replica's directory; Quarantine is where its files were
	// moved ("" if they could not be).
	Dir, Quarantine string
	// Err is what failed.
	Err error
	// Replaced is set if a fresh replica took its place (it rebuilds from
	// its peers); otherwise the node runs without it.
	Replaced   bool
	ReplaceErr error
	// Reopened is set if the replica, which fail-stopped because its
	// device had no space, was opened again from its own files.
	Reopened bool
}

func (f ReplicaFailure) String() string {
	s := fmt.Sprintf("%s in %s: %v", f.Shard, f.Dir, f.Err)
	if f.Quarantine != "" {
		s += "; files kept in " + f.Quarantine
	}
	if f.Reopened {
		s += "; reopened from its files once the device took writes again"
	} else if f.Replaced {
		s += "; replaced by a fresh replica that rebuilds from its peers"
	} else if f.ReplaceErr != nil {
		s += fmt.Sprintf("; not replaced: %v", f.ReplaceErr)
	}
	return s
}

// Failures lists the replicas this node could not open from their files.
func (n *Node) Failures() []ReplicaFailure {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]ReplicaFailure(nil), n.failures...)
}

// replaceReplica moves a replica that cannot open out of the way and
// starts a fresh one in its place.
func (n *Node) replaceReplica(s kvapi.ShardSpec, rid base.ReplicaID, dir string, openErr error) (*kv.Replica, error) {
	f := ReplicaFailure{Shard: s.ID, Dir: dir, Err: openErr}
	defer func() {
		n.mu.Lock()
		n.failures = append(n.failures, f)
		n.mu.Unlock()
	}()
	if err := n.setAside(dir, &f); err != nil {
		return nil, err
	}
	r, err := kv.OpenReplica(n.replicaConfig(s, rid, dir, true))
	if err != nil {
		f.ReplaceErr = err
		return nil, err
	}
	f.Replaced = true
	return r, nil
}

// replicaConfig is the configuration of this node's replica rid of s.
func (n *Node) replicaConfig(s kvapi.ShardSpec, rid base.ReplicaID, dir string, replaced bool) kv.ReplicaConfig {
	return kv.ReplicaConfig{Transport: n, Node: n.cfg.ID, Shard: s, ID: rid, FS: n.guard, Dir: dir,
		Options: n.cfg.Options, Replaced: replaced, OnFail: n.replicaFailed}
}

// setAside moves a failed replica's files out of dir (keeping them for
// inspection in f.Quarantine), or removes them. One quarantine is kept
// per shard (the newest: older ones are removed, so a replica that fails
// again and again does not fill the device with copies), and none when
// the failure was no space: a copy kept then takes the room the fresh
// replica needs to rebuild.
func (n *Node) setAside(dir string, f *ReplicaFailure) error {
	fs := n.cfg.FS
	n.removeQuarantines(dir)
	if base.IsNoSpace(f.Err) {
		if err := fs.RemoveAll(dir); err != nil {
			f.ReplaceErr = fmt.Errorf("cannot remove %s: %v", dir, err)
			return f.ReplaceErr
		}
		return nil
	}
	q := dir + fmt.Sprintf("%s%d", quarantineSuffix, n.cfg.Clock.Now().UnixNano())
	if err := fs.Rename(dir, q); err != nil {
		// Rename may not work on every vfs.FS: remove instead (the peers
		// hold the shard).
		if rerr := fs.RemoveAll(dir); rerr != nil {
			f.ReplaceErr = fmt.Errorf("cannot move or remove %s: %v, %v", dir, err, rerr)
			return f.ReplaceErr
		}
	} else {
		f.Quarantine = q
	}
	return nil
}

// quarantineSuffix names a failed replica's files set aside: the
// replica's directory, this suffix, the time.
const quarantineSuffix = ".failed-"

// removeQuarantines removes the quarantines of the replica kept in dir
// (best effort: one that cannot be removed stays, and is tried again at
// the next failure).
func (n *Node) removeQuarantines(dir string) {
	fs := n.cfg.FS
	parent, own := fs.PathDir(dir), fs.PathBase(dir)
	names, err := fs.List(parent)
	if err != nil {
		return
	}
	for _, name := range names {
		if strings.HasPrefix(name, own+quarantineSuffix) {
			_ = fs.RemoveAll(fs.PathJoin(parent, name))
		}
	}
}

// failedCloseTimeout bounds the wait for a fail-stopped replica to close.
// Its loops end at once; what can keep one waiting is a write Pebble
// stalled before the failure (a full memtable whose flush now fails
// forever), which nothing can end.
const failedCloseTimeout = 30 * time.Second

// replicaFailed (kv.ReplicaConfig.OnFail) replaces a replica that
// fail-stopped while the node runs: it is closed, its files set aside, and
// a fresh replica opened in its place, which rejoins its group under a
// vote floor and rebuilds from its peers (as one that could not open, see
// NewNode). Opening the fresh one is retried (the device may still refuse
// writes) until it opens or the node stops. A replica that fail-stopped
// on "no space" is reopened from its own files instead (reopen).
// Meanwhile the shard's other replicas serve, and this node's other
// replicas are untouched.
func (n *Node) replicaFailed(r *kv.Replica, failErr error) {
	n.mu.Lock()
	select {
	case <-n.stop:
		n.mu.Unlock()
		return // the node is closing and closes r itself
	default:
	}
	n.replacing.Add(1)
	n.mu.Unlock()
	defer n.replacing.Done()
	s := r.Shard()
	n.rmu.Lock()
	if n.replicas[s.ID] != r {
		n.rmu.Unlock()
		return
	}
	delete(n.replicas, s.ID)
	n.rmu.Unlock()
	dir := n.cfg.FS.PathJoin(n.cfg.Dir, fmt.Sprintf("shard-%d", uint64(s.ID)))
	f := ReplicaFailure{Shard: s.ID, Dir: dir, Err: fmt.Errorf("fail-stopped while running: %w", failErr)}
	report := func() {
		n.mu.Lock()
		n.failures = append(n.failures, f)
		n.mu.Unlock()
		if n.cfg.OnFailure != nil {
			n.cfg.OnFailure(f)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case cerr := <-closed:
		if cerr != nil {
			f.Err = fmt.Errorf("%w (closing it: %v)", f.Err, cerr)
		}
	case <-base.After(n.cfg.Clock, failedCloseTimeout):
		f.ReplaceErr = fmt.Errorf("the failed replica did not stop within %v (a write Pebble stalled on its failed flush); not replaced until the node restarts", failedCloseTimeout)
		report()
		return
	}
	backoff := 100 * time.Millisecond
	if base.IsNoSpace(failErr) && n.reopen(s, r.ID(), dir, &f, &backoff) {
		report()
		return
	}
	if err := n.setAside(dir, &f); err != nil {
		report()
		return
	}
	for {
		nr, err := kv.OpenReplica(n.replicaConfig(s, r.ID(), dir, true))
		if err == nil {
			if !n.install(s.ID, nr) {
				return
			}
			f.Replaced, f.ReplaceErr = true, nil
			report()
			return
		}
		f.ReplaceErr = err
		// A fresh replica that could not open left what it created: its
		// engine's files are removed before the next try; its raft log
		// stays, holding the vote floor (kv.OpenReplica writes it first),
		// so that a restart meanwhile still votes for no one.
		_ = n.cfg.FS.RemoveAll(n.cfg.FS.PathJoin(dir, "pebble"))
		select {
		case <-n.stop:
			report()
			return
		case <-base.After(n.cfg.Clock, backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// reopen opens a replica that fail-stopped because its device had no
// space again from its own files, as after a crash, trying until the
// device takes writes again or the node stops; true once it has done so
// (the replica is in place, or the node is stopping). Its files are
// intact: a write the device refused changed nothing it had synced, and
// the replica acknowledged nothing it had not synced (raftnode's
// invariant). It must not be replaced by a fresh replica instead: a fresh
// one votes for no one until it has rebuilt from a leader, so a fill of
// two of a shard's three devices (the nemesis on flash, seed 20261125)
// left the shard without a leader for good. A reopen that fails with
// anything but "no space" (files that do not open) returns false with
// f.ReplaceErr set: the replica is then set aside and replaced.
func (n *Node) reopen(s kvapi.ShardSpec, rid base.ReplicaID, dir string, f *ReplicaFailure, backoff *time.Duration) bool {
	for {
		nr, err := kv.OpenReplica(n.replicaConfig(s, rid, dir, false))
		if err == nil {
			if n.install(s.ID, nr) {
				f.Reopened, f.ReplaceErr = true, nil
			}
			return true
		}
		f.ReplaceErr = err
		if !base.IsNoSpace(err) {
			return false
		}
		select {
		case <-n.stop:
			return true
		case <-base.After(n.cfg.Clock, *backoff):
		}
		*backoff = min(2**backoff, 5*time.Second)
	}
}

// install puts nr in place as this node's replica of shard, unless the
// node is stopping: then nr is closed and install returns false.
func (n *Node) install(shard base.ShardID, nr *kv.Replica) bool {
	n.mu.Lock()
	select {
	case <-n.stop:
		n.mu.Unlock()
		_ = nr.Close()
		return false
	default:
	}
	n.mu.Unlock()
	n.rmu.Lock()
	n.replicas[shard] = nr
	n.rmu.Unlock()
	return true
}

// GuardStats returns the protection layer's counters (what it repaired).
func (n *Node) GuardStats() guardfs.Stats { return n.guard.Stats() }

// ID returns the node's ID.
func (n *Node) ID() base.NodeID { return n.cfg.ID }

// Replica returns this node's replica of shard, or nil (none, or one that
// fail-stopped is being replaced).
func (n *Node) Replica(shard base.ShardID) *kv.Replica {
	n.rmu.RLock()
	defer n.rmu.RUnlock()
	return n.replicas[shard]
}

// Replicas returns this node's replicas in shard order (metrics).
func (n *Node) Replicas() []*kv.Replica {
	n.rmu.RLock()
	defer n.rmu.RUnlock()
	out := make([]*kv.Replica, 0, len(n.replicas))
	for _, r := range n.replicas {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard().ID < out[j].Shard().ID })
	return out
}

// RegisterServices registers the KV, Replication and KVAdmin services for
// this node.
func (n *Node) RegisterServices(s *grpc.Server) {
	svc := &Service{}
	svc.Attach(n)
	svc.RegisterServices(s)
}

// Service holds the gRPC services of a Node that may not exist yet:
// internal/node registers services (Config.RegisterServices) before it
// serves, while a KV Node needs every peer's address, known only once the
// storage nodes listen. Until Attach, requests fail as unavailable.
type Service struct {
	n atomic.Pointer[Node]
	// drained is closed by Drain (made on first use).
	drainMu sync.Mutex
	drained chan struct{}
}

// RegisterServices fits internal/node's Config.RegisterServices hook.
func (svc *Service) RegisterServices(s *grpc.Server) {
	kvpb.RegisterKVServer(s, &kvServer{svc: svc})
	kvpb.RegisterReplicationServer(s, &replicationServer{svc: svc})
	kvpb.RegisterKVAdminServer(s, &adminServer{svc: svc})
}

// Attach makes the services serve node n.
func (svc *Service) Attach(n *Node) { svc.n.Store(n) }

func (svc *Service) replica(shard uint64) (*kv.Replica, error) {
	n := svc.n.Load()
	if n == nil {
		return nil, kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "kv service not attached to a node yet")
	}
	return n.replica(shard)
}

// Close stops the replicas and the transport; each replica's engine is
// flushed first, so a restart replays little of the raft log.
func (n *Node) Close() error { return n.close(false) }

// Crash stops the node as a crash would: engines are closed without a
// flush (Pebble runs without a WAL, so what is only in memtables is gone
// and the raft logs must bring it back). Files stay as they are.
func (n *Node) Crash() error { return n.close(true) }

func (n *Node) close(crash bool) error {
	n.mu.Lock()
	select {
	case <-n.stop:
		n.mu.Unlock()
		return nil
	default:
	}
	close(n.stop)
	n.mu.Unlock()
	// Replacements under way see the stop and end (closing what they
	// opened); then the replicas are the map's.
	n.replacing.Wait()
	var first error
	n.rmu.RLock()
	defer n.rmu.RUnlock()
	for _, r := range n.replicas {
		stop := r.Close
		if crash {
			stop = r.Crash
		}
		if err := stop(); err != nil && first == nil {
			first = err
		}
	}
	n.wg.Wait()
	n.mu.Lock()
	for _, c := range n.conns {
		c.cc.Close()
	}
	n.mu.Unlock()
	return first
}

// peerConn is a connection to a peer and the address it was made to.
type peerConn struct {
	addr string
	cc   *grpc.ClientConn
	// stale is set when a call failed as unavailable: the next use asks
	// for the peer's address again.
	stale bool
}

func (n *Node) conn(to base.NodeID) (*grpc.ClientConn, error) {
	n.mu.Lock()
	pc, ok := n.conns[to]
	if ok && !pc.stale {
		n.mu.Unlock()
		return pc.cc, nil
	}
	n.mu.Unlock()
	// NB: the lookup may ask another process (Config.Resolve); n.mu is not
	// held meanwhile.
	addr, err := n.addr(to)
	n.mu.Lock()
	defer n.mu.Unlock()
	if cur, ok := n.conns[to]; ok && (err != nil || cur.addr == addr) {
		cur.stale = false // keep what we have: same address, or none better
		return cur.cc, nil
	} else if ok {
		cur.cc.Close()
	}
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if n.cfg.DialOptions != nil {
		opts = append(opts, n.cfg.DialOptions(to)...)
	}
	c, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	n.conns[to] = &peerConn{addr: addr, cc: c}
	return c, nil
}

// addr finds peer to's address.
func (n *Node) addr(to base.NodeID) (string, error) {
	if n.cfg.Resolve != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return n.cfg.Resolve(ctx, to)
	}
	addr, ok := n.cfg.Addrs[to]
	if !ok {
		return "", base.InvalidArgumentf("kv: no address for node %s", to)
	}
	return addr, nil
}

// noteErr marks the connection to peer to for a fresh address lookup when
// a call on it found the peer unavailable.
func (n *Node) noteErr(to base.NodeID, err error) {
	if status.Code(err) != codes.Unavailable {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if pc, ok := n.conns[to]; ok {
		pc.stale = true
	}
}

// SendPatch sends a patch to a peer in the background (kv.Transport).
func (n *Node) SendPatch(to base.NodeID, p *kvpb.Patch) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		c, err := n.conn(to)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = kvpb.NewReplicationClient(c).SendPatch(ctx, p)
		n.noteErr(to, err)
	}()
}

// FetchEntries asks a peer for raft log entries (kv.Transport).
func (n *Node) FetchEntries(ctx context.Context, from base.NodeID, req *kvpb.FetchEntriesRequest) (*kvpb.FetchEntriesResponse, error) {
	c, err := n.conn(from)
	if err != nil {
		return nil, err
	}
	resp, err := kvpb.NewReplicationClient(c).FetchEntries(ctx, req, grpc.MaxCallRecvMsgSize(64<<20))
	n.noteErr(from, err)
	return resp, kvapi.FromStatus(err)
}

// FetchBlock asks a peer for its copies of an sstable data block
// (kv.Transport).
func (n *Node) FetchBlock(ctx context.Context, from base.NodeID, req *kvpb.FetchBlockRequest) (*kvpb.FetchBlockResponse, error) {
	c, err := n.conn(from)
	if err != nil {
		return nil, err
	}
	resp, err := kvpb.NewReplicationClient(c).FetchBlock(ctx, req, grpc.MaxCallRecvMsgSize(256<<20))
	n.noteErr(from, err)
	return resp, kvapi.FromStatus(err)
}

// FetchState asks a peer for its whole state of shard (kv.Transport).
func (n *Node) FetchState(ctx context.Context, from base.NodeID, shard base.ShardID) (*kvpb.FetchStateResponse, error) {
	c, err := n.conn(from)
	if err != nil {
		return nil, err
	}
	resp, err := kvpb.NewReplicationClient(c).FetchState(ctx, &kvpb.FetchStateRequest{Shard: uint64(shard)}, grpc.MaxCallRecvMsgSize(1<<30))
	n.noteErr(from, err)
	return resp, kvapi.FromStatus(err)
}

func (n *Node) replica(shard uint64) (*kv.Replica, error) {
	n.rmu.RLock()
	r, ok := n.replicas[base.ShardID(shard)]
	n.rmu.RUnlock()
	if !ok {
		if _, known := n.cfg.Layout.Shard(base.ShardID(shard)); known {
			return nil, kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "node %s holds no replica of %s", n.cfg.ID, base.ShardID(shard))
		}
		return nil, base.InvalidArgumentf("kv: unknown shard %d", shard)
	}
	return r, nil
}

// ---- Replication service -------------------------------------------------------

type replicationServer struct {
	kvpb.UnimplementedReplicationServer
	svc *Service
}

func (s *replicationServer) SendPatch(_ context.Context, p *kvpb.Patch) (*kvpb.PatchAck, error) {
	r, err := s.svc.replica(p.Shard)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	if base.ReplicaID(p.ToReplica) != r.ID() {
		return nil, kvapi.ToStatus(base.InvalidArgumentf("kv: patch for r%d delivered to %s", p.ToReplica, r))
	}
	return &kvpb.PatchAck{}, kvapi.ToStatus(r.DeliverPatch(p))
}

func (s *replicationServer) FetchState(_ context.Context, req *kvpb.FetchStateRequest) (*kvpb.FetchStateResponse, error) {
	r, err := s.svc.replica(req.Shard)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	resp, err := r.StateForPeer()
	return resp, kvapi.ToStatus(err)
}

func (s *replicationServer) FetchEntries(_ context.Context, req *kvpb.FetchEntriesRequest) (*kvpb.FetchEntriesResponse, error) {
	r, err := s.svc.replica(req.Shard)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	if req.Lo == 0 || req.Hi < req.Lo {
		return nil, kvapi.ToStatus(base.InvalidArgumentf("kv: fetch entries [%d, %d]", req.Lo, req.Hi))
	}
	resp, err := r.EntriesForPeer(req)
	return resp, kvapi.ToStatus(err)
}

func (s *replicationServer) FetchBlock(_ context.Context, req *kvpb.FetchBlockRequest) (*kvpb.FetchBlockResponse, error) {
	r, err := s.svc.replica(req.Shard)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	resp, err := r.BlockForPeer(req)
	return resp, kvapi.ToStatus(err)
}

// ---- Admin service -------------------------------------------------------------

type adminServer struct {
	kvpb.UnimplementedKVAdminServer
	svc *Service
}

func (s *adminServer) CorruptBlock(_ context.Context, req *kvpb.CorruptBlockRequest) (*kvpb.CorruptBlockResponse, error) {
	r, err := s.svc.replica(req.Shard)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	if err := kvapi.ValidateKey(req.Key); err != nil {
		return nil, kvapi.ToStatus(err)
	}
	file, off, err := r.CorruptBlock(req.Key)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	return &kvpb.CorruptBlockResponse{File: file, BlockOffset: off}, nil
}

func (s *adminServer) ReplicaStatus(_ context.Context, req *kvpb.ReplicaStatusRequest) (*kvpb.ReplicaStatusResponse, error) {
	r, err := s.svc.replica(req.Shard)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	st, err := r.Status()
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	if n := s.svc.n.Load(); n != nil {
		for _, f := range n.Failures() {
			if uint64(f.Shard) == req.Shard {
				st.Failed = f.String()
			}
		}
	}
	return st, nil
}
