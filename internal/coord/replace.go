package coord

import (
	"context"
	"fmt"
	"github.com/flashmend/flashmend/internal/coord/hashring"
	"slices"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// Re-protection: a replica or shard whose node is dead is re-created on
// another node and the version's placement moves to it. The coordinator
// picks the target (BeginReplace, recorded as a pending write of that one
// blob, so a re-creation that never commits is collected like an abandoned
// put) and swaps the placement in one transaction (CommitReplace), which
// also lists the blob left on the dead node as garbage: if that node comes
// back, the sweeper deletes it there.

// replacePendingKey is the pending entry of a replacement of slot.
func replacePendingKey(version uint64, slot uint32) string {
	return versionKey(pendingPrefix, version) + "/replace/" + strconv.FormatUint(uint64(slot), 10)
}

// replacedGarbageKey is the garbage entry of the blob a replacement left on
// node from.
func replacedGarbageKey(version, from uint64) string {
	return versionKey(garbagePrefix, version) + "/replaced/" + strconv.FormatUint(from, 10)
}

// checkReplace validates a replacement request against the current record.
func (c *Coordinator) checkReplace(ctx context.Context, key string, version uint64, slot uint32, from uint64) (*objectpb.ObjectRecord, int64, error) {
	if err := ValidateKey(key, c.cfg.MaxKeyBytes); err != nil {
		return nil, 0, err
	}
	rec, rev, err := c.lookup(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	if rec.Version != version {
		return nil, 0, base.InvalidArgumentf("replace in %q: version %d is not current (%d is)", key, version, rec.Version)
	}
	if int(slot) >= len(rec.Placement) || rec.Placement[slot] != from {
		return nil, 0, base.InvalidArgumentf("replace in %q v%d: slot %d is not on node %d (placement %v)", key, version, slot, from, rec.Placement)
	}
	return rec, rev, nil
}

// BeginReplace picks a live node to re-create slot req.Slot of a version on:
// the first usable member on the key's ring walk that holds no part of the
// version (and no garbage of it) and is not the node being replaced.
func (c *Coordinator) BeginReplace(ctx context.Context, req *coordpb.BeginReplaceRequest) (*coordpb.BeginReplaceResponse, error) {
	rec, _, err := c.checkReplace(ctx, req.Key, req.Version, req.Slot, req.From)
	if err != nil {
		return nil, lookupErr(err)
	}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return nil, rpcErr(err)
	}
	if req.To != 0 {
		return c.beginWearReplace(ctx, rec, req, nodes)
	}
	if nodes[req.From].GetLive() && !req.Retired {
		return nil, rpcErr(base.InvalidArgumentf("replace in %q v%d: node %d is live", req.Key, req.Version, req.From))
	}
	busy, asOf, err := c.replaceBusy(ctx, rec, req.Slot)
	if err != nil {
		return nil, rpcErr(err)
	}
	members := make([]base.NodeID, 0, len(nodes))
	for id := range nodes {
		members = append(members, base.NodeID(id))
	}
	var target *coordpb.NodeInfo
	for _, id := range hashring.NewRing(members).Walk(req.Key) {
		if n := nodes[uint64(id)]; n.GetLive() && !busy[uint64(id)] {
			target = n
			break
		}
	}
	if target == nil {
		return nil, rpcErr(&unavailableError{fmt.Sprintf("replace in %q v%d: no live node outside the placement %v", req.Key, req.Version, rec.Placement)})
	}
	if err := c.putReplacePending(ctx, rec, req.Slot, target.Id, asOf); err != nil {
		return nil, rpcErr(err)
	}
	return &coordpb.BeginReplaceResponse{Target: target}, nil
}

// CommitReplace moves slot req.Slot of the current version from req.From to
// req.To, which BeginReplace picked and which now holds the replica or
// shard, and lists the blob on req.From as garbage, in one transaction.
func (c *Coordinator) CommitReplace(ctx context.Context, req *coordpb.CommitReplaceRequest) (*coordpb.CommitReplaceResponse, error) {
	rec, rev, err := c.checkReplace(ctx, req.Key, req.Version, req.Slot, req.From)
	if err != nil {
		return nil, lookupErr(err)
	}
	pk := replacePendingKey(req.Version, req.Slot)
	resp, err := c.cli.Get(ctx, pk)
	if err != nil {
		return nil, rpcErr(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, rpcErr(base.InvalidArgumentf("replace in %q v%d: no pending replacement of slot %d (expired or committed)", req.Key, req.Version, req.Slot))
	}
	pending := &objectpb.PendingPut{}
	if err := decodeValue(pk, resp.Kvs[0].Value, pending); err != nil {
		return nil, rpcErr(err)
	}
	if !slices.Equal(pending.Placement, []uint64{req.To}) {
		return nil, rpcErr(base.InvalidArgumentf("replace in %q v%d: slot %d was to move to %v, not %d", req.Key, req.Version, req.Slot, pending.Placement, req.To))
	}
	next := proto.Clone(rec).(*objectpb.ObjectRecord)
	next.Placement[req.Slot] = req.To
	recValue, err := encodeValue(next)
	if err != nil {
		return nil, rpcErr(err)
	}
	mapOp, err := c.mappingOp(ctx, next)
	if err != nil {
		return nil, rpcErr(err)
	}
	gop, err := garbageOpAt(replacedGarbageKey(rec.Version, req.From), rec.Key, rec.Object, rec.Version, []uint64{req.From})
	if err != nil {
		return nil, rpcErr(err)
	}
	txn, err := c.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(objectsPrefix+req.Key), "=", rev),
		clientv3.Compare(clientv3.ModRevision(pk), "=", resp.Kvs[0].ModRevision),
	).Then(clientv3.OpPut(objectsPrefix+req.Key, recValue), clientv3.OpDelete(pk), mapOp, gop).Commit()
	if err != nil {
		return nil, rpcErr(err)
	}
	if !txn.Succeeded {
		return nil, rpcErr(&unavailableError{fmt.Sprintf("replace in %q v%d: the record changed meanwhile; try again", req.Key, req.Version)})
	}
	if c.wear != nil {
		c.wear.replaced(next, int(req.Slot), req.To, c.cfg.Clock.Now(), c.cfg.Logf)
	}
	c.cfg.Logf("coordinator: %q v%d slot %d moved from node %d to node %d", req.Key, req.Version, req.Slot, req.From, req.To)
	return &coordpb.CommitReplaceResponse{Record: next}, nil
}

// replaceBusy lists the nodes a part of rec's version may not be re-created
// on: those holding a part (the placement), garbage of the version (the
// sweeper deletes a version's blob on a node whole, so a new part there
// would go with it), or the target of another slot's pending replacement,
// as of the etcd revision it returns (putReplacePending checks that none of
// these changed since).
func (c *Coordinator) replaceBusy(ctx context.Context, rec *objectpb.ObjectRecord, slot uint32) (map[uint64]bool, int64, error) {
	busy := map[uint64]bool{}
	for _, id := range rec.Placement {
		busy[id] = true
	}
	own := replacePendingKey(rec.Version, slot)
	var asOf int64
	for _, p := range []string{versionKey(garbagePrefix, rec.Version), versionKey(pendingPrefix, rec.Version)} {
		opts := []clientv3.OpOption{clientv3.WithPrefix()}
		if asOf > 0 {
			opts = append(opts, clientv3.WithRev(asOf)) // both reads at one revision
		}
		resp, err := c.cli.Get(ctx, p, opts...)
		if err != nil {
			return nil, 0, err
		}
		if asOf == 0 {
			asOf = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if string(kv.Key) == own {
				continue
			}
			g := &objectpb.PendingPut{}
			if err := decodeValue(string(kv.Key), kv.Value, g); err == nil {
				for _, id := range g.Placement {
					busy[id] = true
				}
			}
		}
	}
	return busy, asOf, nil
}

// putReplacePending records the replacement of slot by a part on target. A
// pending replacement of the same slot left by an earlier attempt to
// another node becomes garbage there in the same transaction (what reached
// that node is deleted by the sweeper; that attempt can no longer commit).
// The write is refused (unavailable: try again) if the version's garbage
// or pending entries changed after revision asOf, when the target was
// chosen against them: two replacements of one version cannot both pick a
// node free at the time.
func (c *Coordinator) putReplacePending(ctx context.Context, rec *objectpb.ObjectRecord, slot uint32, target uint64, asOf int64) error {
	pk := replacePendingKey(rec.Version, slot)
	pending := &objectpb.PendingPut{
		Key: rec.Key, Object: rec.Object, Version: rec.Version, Placement: []uint64{target},
		DeadlineUnixMs: c.cfg.Clock.Now().Add(c.cfg.PendingTimeout).UnixMilli(),
	}
	v, err := encodeValue(pending)
	if err != nil {
		return err
	}
	prev, err := c.cli.Get(ctx, pk)
	if err != nil {
		return err
	}
	ops := []clientv3.Op{clientv3.OpPut(pk, v)}
	cmp := clientv3.Compare(clientv3.ModRevision(pk), "=", 0)
	if len(prev.Kvs) > 0 {
		cmp = clientv3.Compare(clientv3.ModRevision(pk), "=", prev.Kvs[0].ModRevision)
		old := &objectpb.PendingPut{}
		if err := decodeValue(pk, prev.Kvs[0].Value, old); err == nil && !slices.Equal(old.Placement, pending.Placement) {
			gop, err := garbageOpAt(versionKey(garbagePrefix, rec.Version)+"/replace/"+strconv.FormatUint(uint64(slot), 10)+
				"/"+strconv.FormatInt(prev.Kvs[0].ModRevision, 10), rec.Key, rec.Object, rec.Version, old.Placement)
			if err != nil {
				return err
			}
			ops = append(ops, gop)
		}
	}
	cmps := []clientv3.Cmp{cmp}
	for _, p := range []string{versionKey(garbagePrefix, rec.Version), versionKey(pendingPrefix, rec.Version)} {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(p), "<", asOf+1).WithPrefix())
	}
	txn, err := c.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return err
	}
	if !txn.Succeeded {
		return &unavailableError{fmt.Sprintf("replace in %q v%d: slot %d's replacement, or another part's, changed meanwhile; try again", rec.Key, rec.Version, slot)}
	}
	return nil
}
