package coord

import (
	"context"
	"errors"
	"fmt"
	"github.com/flashmend/flashmend/internal/coord/hashring"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/wear"
)

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
		p, err := hashring.NewRing(members).Place(req.Key, n, usable)
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
		Key: req.Key, Object: hashring.KeyHash(req.Key), Version: version,
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
	walk := hashring.NewRing(members).Walk(rec.Key)
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
