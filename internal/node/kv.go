package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvserver"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/sdfvfs"
	"github.com/flashmend/flashmend/internal/wire"
)

// kvLayoutFile is the metadata file (three checksummed copies) holding the
// shard map this node's replicas were opened with: a coordinator that lost
// its store takes it back (KVLayoutRequest.adopt).
const kvLayoutFile = "node/kv-layout"

// kvHost is the node's part of the KV store: its services are registered
// when the node starts, its replicas opened once the coordinator has a
// layout (until then the services answer unavailable).
type kvHost struct {
	svc kvserver.Service
	mu  sync.Mutex
	kn  *kvserver.Node // nil until opened
	// flashFS is the Pebble file system over the node's flash device (nil
	// when the KV store is on plain files).
	flashFS *sdfvfs.FS
}

// kvHeadroom is the space the node's object writes leave free on its flash
// device for the KV replicas sharing it (objstore.ChunkStore.
// SetSharedHeadroom): per replica, room to grow by a raft log's worth
// before it is compacted (LogCompactBytes) and two memtables (the flush
// and the compaction it triggers write before they delete), at most a
// quarter of the device. Without it object writes filled a small device
// to its repair reserve and the replicas' raft log syncs failed with "no
// space": the replicas fail-stopped and the shard lost quorum (found by
// the crash-point sweep on 128 MiB devices). 0 when the KV store is not on
// the device. perReplica is kvPerReplica of the node's KV options.
func (n *Node) kvHeadroom(perReplica base.Bytes) base.Bytes {
	sr, onFlash := n.inner.(*objstore.SDFStore)
	if !onFlash {
		return 0
	}
	replicas := 1 // until the replicas open, at least the first one's
	if kn := n.KV(); kn != nil {
		replicas = max(len(kn.Replicas()), 1)
	}
	capacity, _, err := sr.Space()
	if err != nil {
		return 0
	}
	return min(base.Bytes(replicas)*perReplica, capacity/4)
}

// kvPerReplica is the room one KV replica's headroom keeps (kvHeadroom).
func kvPerReplica(o kv.Options) (base.Bytes, error) {
	o, err := o.WithDefaults()
	if err != nil {
		return 0, err
	}
	return base.Bytes(o.LogCompactBytes) + 2*base.Bytes(o.MemTableBytes), nil
}

// KV returns the node's KV replicas, or nil while they are not open (no
// layout yet, or the node does not host the KV store).
func (n *Node) KV() *kvserver.Node {
	n.kv.mu.Lock()
	defer n.kv.mu.Unlock()
	return n.kv.kn
}

// kvLoop waits for the coordinator's KV layout (offering the one this node
// already holds), then opens the node's replicas and attaches them to the
// KV services.
func (n *Node) kvLoop(ctx context.Context) {
	defer n.wg.Done()
	local, err := n.loadKVLayout()
	if err != nil {
		n.cfg.Logf("node %s: %v", n.id, err)
	}
	conn, err := grpc.NewClient(n.cfg.CoordinatorAddr, n.coordinatorDialOptions()...)
	if err != nil {
		n.cfg.Logf("node %s: kv: coordinator: %v", n.id, err)
		return
	}
	defer conn.Close()
	cc := coordpb.NewCoordinatorClient(conn)
	var m *kvpb.ShardMap
	for m == nil {
		resp, err := cc.KVLayout(ctx, &coordpb.KVLayoutRequest{Adopt: local})
		switch err = wire.FromStatus(err); {
		case err == nil:
			m = resp.Layout
			continue
		case ctx.Err() != nil:
			return
		case !errors.Is(err, fs.ErrNotExist):
			n.cfg.Logf("node %s: kv layout: %v", n.id, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.cfg.HeartbeatInterval):
		}
	}
	layout, err := kvapi.LayoutFromProto(m)
	if err != nil {
		n.cfg.Logf("node %s: kv: the coordinator's layout: %v", n.id, err)
		return
	}
	if local != nil && !proto.Equal(local, m) {
		n.cfg.Logf("node %s: kv: the coordinator's layout differs from the one this node's replicas were opened with; following the coordinator's", n.id)
	}
	if local == nil || !proto.Equal(local, m) {
		if err := n.saveKVLayout(m); err != nil {
			n.cfg.Logf("node %s: %v", n.id, err)
		}
	}
	kvFS, kvDir, err := n.kvFiles()
	if err != nil {
		n.cfg.Logf("node %s: kv: %v", n.id, err)
		return
	}
	kn, err := kvserver.NewNode(kvserver.Config{
		ID: n.id, Layout: layout, Resolve: n.resolvePeer, DialOptions: n.peerDialOptions,
		FS: kvFS, Dir: kvDir, Options: *n.cfg.KV,
		OnFailure: func(f kvserver.ReplicaFailure) {
			n.cfg.Logf("node %s: kv: replica of %v", n.id, f)
		},
	})
	if err != nil {
		n.cfg.Logf("node %s: kv: %v", n.id, err)
		return
	}
	for _, f := range kn.Failures() {
		// One replica's failure is only that replica's: its peers keep
		// the shard.
		n.cfg.Logf("node %s: kv: replica of %v", n.id, f)
	}
	n.kv.mu.Lock()
	n.kv.kn = kn
	n.kv.mu.Unlock()
	n.kv.svc.Attach(kn)
}

// kvFiles says where the node keeps its KV replicas: on its emulated flash
// device when its store is one (internal/sdfvfs over the store's SDF file
// system, beside the chunks: a die failure then loses KV data too, and the
// die repair repairs it), else in DIR/kv on plain files. A node whose
// replicas were opened on plain files before (DIR/kv exists) keeps them
// there.
func (n *Node) kvFiles() (vfs.FS, string, error) {
	legacy := filepath.Join(n.cfg.Dir, "kv")
	sdfStore, onFlash := n.inner.(*objstore.SDFStore)
	if !onFlash {
		return vfs.Default, legacy, nil
	}
	if _, err := os.Stat(legacy); err == nil {
		n.cfg.Logf("node %s: kv: replicas stay on plain files in %s (opened there before)", n.id, legacy)
		return vfs.Default, legacy, nil
	}
	n.kv.mu.Lock()
	defer n.kv.mu.Unlock()
	if n.kv.flashFS == nil {
		fs, err := sdfvfs.New(sdfStore.FS(), sdfvfs.Options{MetadataRanges: sdfvfs.SSTMetadataRanges(engine.SSTReaderOptions())})
		if err != nil {
			return nil, "", fmt.Errorf("kv on flash: %w", err)
		}
		n.kv.flashFS = fs
	}
	return n.kv.flashFS, kvFlashDir, nil
}

// kvFlashDir is where the KV replicas live on the node's flash file system.
const kvFlashDir = "kv"

// closeKV closes the node's replicas (flushing their engines on a clean
// stop; as a crash would otherwise).
func (n *Node) closeKV(graceful bool) {
	kn := n.KV()
	if kn == nil {
		return
	}
	stop := kn.Crash
	if graceful {
		stop = kn.Close
	}
	if err := stop(); err != nil {
		n.cfg.Logf("node %s: kv: close: %v", n.id, err)
	}
}

// peerDialOptions are the options of a connection to a peer: TLS, then
// Config.PeerDialOptions.
func (n *Node) peerDialOptions(peer base.NodeID) []grpc.DialOption {
	opts := []grpc.DialOption{n.cfg.TLS.DialOption()}
	if n.cfg.PeerDialOptions != nil {
		opts = append(opts, n.cfg.PeerDialOptions(peer)...)
	}
	return opts
}

// resolvePeer finds a node's address from its liveness record: a node that
// restarted may listen on another port.
func (n *Node) resolvePeer(ctx context.Context, id base.NodeID) (string, error) {
	if id == n.id {
		return n.Addr(), nil
	}
	resp, err := n.etcd.Get(ctx, wire.LiveKey(id))
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("node %s is down (no lease)", id)
	}
	info := &coordpb.NodeInfo{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, info); err != nil || info.Addr == "" {
		return "", fmt.Errorf("node %s: bad liveness record: %v", id, err)
	}
	return info.Addr, nil
}

func (n *Node) loadKVLayout() (*kvpb.ShardMap, error) {
	res, err := n.chunks.Meta().Read(kvLayoutFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kv layout file: %w", err)
	}
	if res.Repaired > 0 {
		n.chunks.AddMetaRepairs(res.Repaired)
	}
	m := &kvpb.ShardMap{}
	if err := proto.Unmarshal(res.Payload, m); err != nil {
		return nil, base.CorruptionErrorf("kv layout file: %v", err)
	}
	return m, nil
}

func (n *Node) saveKVLayout(m *kvpb.ShardMap) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	if err := n.chunks.Meta().Write(kvLayoutFile, b); err != nil {
		return fmt.Errorf("kv layout file: %w", err)
	}
	return nil
}
