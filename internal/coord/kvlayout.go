package coord

import (
	"bytes"
	"context"
	"fmt"
	"github.com/flashmend/flashmend/internal/coord/hashring"
	"io/fs"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// kvLayoutKey holds the KV store's shard map (kvpb.ShardMap + CRC32C).
const kvLayoutKey = prefix + "kv/layout"

// defaultKVReplicas is the replicas per shard when a request names none.
const defaultKVReplicas = 3

// errNoKVLayout says that no KV layout was created yet.
var errNoKVLayout = fmt.Errorf("no KV layout yet (flashmend dev creates one; or 'flashmend ctl kv init'): %w", fs.ErrNotExist)

// KVLayout returns the KV store's shard placement. With req.Create (or
// req.Adopt) and none stored yet, it stores one first: the adopted map as
// it is, or shards cut at req.Splits with their replicas placed on the
// ring over the live members. The first layout stored wins; later calls
// return it unchanged (membership is static for now).
func (c *Coordinator) KVLayout(ctx context.Context, req *coordpb.KVLayoutRequest) (*coordpb.KVLayoutResponse, error) {
	m, err := c.readKVLayout(ctx)
	if err == nil {
		return &coordpb.KVLayoutResponse{Layout: m}, nil
	}
	if err != errNoKVLayout || (!req.Create && req.Adopt == nil) {
		return nil, rpcErr(err)
	}
	want := req.Adopt
	if want == nil {
		nodes, err := c.nodes(ctx)
		if err != nil {
			return nil, rpcErr(err)
		}
		var live []base.NodeID
		for id, n := range nodes {
			if n.Live {
				live = append(live, base.NodeID(id))
			}
		}
		if want, err = placeKVShards(live, req.Splits, int(req.Replicas)); err != nil {
			return nil, rpcErr(err)
		}
	}
	v, err := encodeValue(want)
	if err != nil {
		return nil, rpcErr(err)
	}
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(kvLayoutKey), "=", 0)).
		Then(clientv3.OpPut(kvLayoutKey, v)).
		Commit()
	if err != nil {
		return nil, rpcErr(err)
	}
	if !resp.Succeeded {
		m, err := c.readKVLayout(ctx) // another caller stored one first
		if err != nil {
			return nil, rpcErr(err)
		}
		return &coordpb.KVLayoutResponse{Layout: m}, nil
	}
	c.cfg.Logf("coordinator: KV layout stored (%d shards)", len(want.Shards))
	return &coordpb.KVLayoutResponse{Layout: want, Created: true}, nil
}

func (c *Coordinator) readKVLayout(ctx context.Context) (*kvpb.ShardMap, error) {
	resp, err := c.cli.Get(ctx, kvLayoutKey)
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, errNoKVLayout
	}
	m := &kvpb.ShardMap{}
	if err := decodeValue(kvLayoutKey, resp.Kvs[0].Value, m); err != nil {
		return nil, err
	}
	return m, nil
}

// placeKVShards cuts the key space at splits into shards 1..len(splits)+1
// and puts each shard's replicas on distinct members, in the order the
// consistent-hashing ring gives for the key "kv/shard/ID" (the same ring
// that places objects). A replica's raft ID is its node's ID.
func placeKVShards(members []base.NodeID, splits [][]byte, replicas int) (*kvpb.ShardMap, error) {
	if replicas == 0 {
		replicas = defaultKVReplicas
	}
	if replicas < 1 || replicas > 7 {
		return nil, base.InvalidArgumentf("kv layout: %d replicas per shard outside [1, 7]", replicas)
	}
	for i, s := range splits {
		if len(s) == 0 || (i > 0 && bytes.Compare(splits[i-1], s) >= 0) {
			return nil, base.InvalidArgumentf("kv layout: split keys must be non-empty and strictly increasing")
		}
	}
	members = append([]base.NodeID(nil), members...)
	sort.Slice(members, func(i, j int) bool { return members[i] < members[j] })
	if len(members) < replicas {
		return nil, &unavailableError{fmt.Sprintf("kv layout: %d replicas per shard need %d live nodes, %d are up", replicas, replicas, len(members))}
	}
	ring := hashring.NewRing(members)
	m := &kvpb.ShardMap{}
	start := []byte{}
	for i := 0; i <= len(splits); i++ {
		var end []byte
		if i < len(splits) {
			end = splits[i]
		}
		id := uint64(i + 1)
		p, err := ring.Place(fmt.Sprintf("kv/shard/%d", id), replicas, func(base.NodeID) bool { return true })
		if err != nil {
			return nil, err
		}
		sp := &kvpb.ShardPlacement{Id: id, Start: start, End: end, Replicas: map[uint64]uint64{}}
		for _, n := range p.Actual {
			sp.Replicas[uint64(n)] = uint64(n)
		}
		m.Shards = append(m.Shards, sp)
		start = end
	}
	return m, nil
}
