package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/wire"
)

// nodesCacheTTL bounds the staleness of the membership view used for
// placement (leases last seconds; a write to a node that just died fails
// and is placed again).
const nodesCacheTTL = 250 * time.Millisecond

func (c *Coordinator) ensureClusterID(ctx context.Context) (string, error) {
	// NB: the cluster ID names this cluster against every other, so it
	// comes from crypto/rand, not from a seeded source (a seed shared by
	// two test clusters would give them one ID). crypto/rand.Read never
	// returns an error (it panics if the OS has no randomness).
	var b [8]byte
	_, _ = rand.Read(b[:])
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
