package coord

import (
	"context"
	"fmt"
	"github.com/flashmend/flashmend/internal/coord/indexrebuild"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// The coordinator is not a single point of loss: when its store is lost
// (a new, empty store where nodes that belong to a cluster join) or damaged
// (set aside at start, see internal/coord/etcdstore), it adopts the nodes' cluster
// identity and rebuilds the object index and the mapping table from the
// nodes' local indexes (internal/coord/indexrebuild), again each time another node
// joins during the recovery window. RebuildIndex runs the same merge on
// demand (flashmend ctl rebuild-index).

const (
	// recoveryKey exists while the coordinator rebuilds its index from
	// the nodes after its store was lost: its value is the unix ms the
	// recovery started.
	recoveryKey = prefix + "recovery"
	// versionBaseKey is added to the etcd revision to make a version: a
	// store rebuilt from the nodes starts its revisions at 1 again, so
	// the base moves above every version the nodes hold.
	versionBaseKey = prefix + "seq/version-base"
	// versionBaseGap is how far above the largest version seen the base
	// moves: nodes that join later may hold versions up to the lost
	// store's last revision, which the ones seen so far do not show.
	versionBaseGap = 1 << 32
)

// ClusterID is the cluster's identity.
func (c *Coordinator) ClusterID() string {
	c.idMu.Lock()
	defer c.idMu.Unlock()
	return c.clusterID
}

// adoptCluster makes the coordinator take the cluster identity a joining
// node's store belongs to, when the coordinator's own store holds nothing
// (it was lost or set aside): the nodes are the cluster, the store is
// rebuilt from them. A store that holds objects never changes identity.
func (c *Coordinator) adoptCluster(ctx context.Context, id string) error {
	c.idMu.Lock()
	defer c.idMu.Unlock()
	if id == c.clusterID {
		return nil
	}
	for _, p := range []string{objectsPrefix, pendingPrefix, garbagePrefix} {
		resp, err := c.cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if resp.Count > 0 {
			return base.InvalidArgumentf("the node's store belongs to cluster %s, this coordinator runs cluster %s and holds objects", id, c.clusterID)
		}
	}
	now := strconv.FormatInt(c.cfg.Clock.Now().UnixMilli(), 10)
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(clusterIDKey), "=", c.clusterID)).
		Then(clientv3.OpPut(clusterIDKey, id), clientv3.OpPut(recoveryKey, now)).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return &unavailableError{"the cluster identity changed meanwhile; join again"}
	}
	c.cfg.Logf("coordinator: store holds no objects and node stores belong to cluster %s (was %s): adopting it and rebuilding the object index from the nodes", id, c.clusterID)
	c.clusterID = id
	c.recovering.Store(true)
	return nil
}

// requestHeal asks for a merge of the nodes' local indexes outside a
// recovery: a record in the index failed its checksum (etcd keeps no
// checksums of its own values), and the merge restores it from the nodes.
func (c *Coordinator) requestHeal(why error) {
	if !c.healRequested.Swap(true) {
		c.cfg.Logf("coordinator: %v; restoring the index from the nodes", why)
	}
	c.kickRebuild()
}

// kickRebuild asks the recovery loop for another merge (it coalesces).
func (c *Coordinator) kickRebuild() {
	select {
	case c.rebuildKick <- struct{}{}:
	default:
	}
}

// recoveryLoop merges the nodes' local indexes into the index after each
// join while the coordinator recovers from a lost store, and ends the
// recovery after Config.RecoveryWindow.
func (c *Coordinator) recoveryLoop(ctx context.Context) {
	defer c.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.rebuildKick:
		}
		if !c.recovering.Load() && !c.healRequested.Swap(false) {
			continue
		}
		// Let the other nodes starting with this one join first.
		select {
		case <-ctx.Done():
			return
		case <-base.After(c.cfg.Clock, 500*time.Millisecond):
		}
		resp, err := c.rebuild(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			c.cfg.Logf("coordinator: rebuilding the index from the nodes: %v", err)
		case err == nil:
			c.cfg.Logf("coordinator: index rebuilt from %d of %d nodes: %d objects restored, %d kept, %d versions to collect, %d entries unrestorable%s",
				resp.NodesAnswered, resp.NodesAsked, resp.ObjectsRestored, resp.ObjectsKept, resp.VersionsGarbage, resp.BlobsUnrestorable,
				errorsSuffix(resp.Errors))
		}
		c.endRecoveryIfDue(ctx)
	}
}

func errorsSuffix(errs []string) string {
	if len(errs) == 0 {
		return ""
	}
	return " (" + strings.Join(errs, "; ") + ")"
}

// endRecoveryIfDue ends the recovery window.
func (c *Coordinator) endRecoveryIfDue(ctx context.Context) {
	resp, err := c.cli.Get(ctx, recoveryKey)
	if err != nil || len(resp.Kvs) == 0 {
		return
	}
	started, _ := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if c.cfg.Clock.Now().Sub(time.UnixMilli(started)) < c.cfg.RecoveryWindow {
		return
	}
	if _, err := c.cli.Delete(ctx, recoveryKey); err == nil {
		c.recovering.Store(false)
		c.cfg.Logf("coordinator: recovery window over: nodes joining from now on are not merged into the index (flashmend ctl rebuild-index does it on demand)")
	}
}

// RebuildIndex merges the nodes' local indexes into the object index and
// the mapping table (see indexrebuild.Merge).
func (c *Coordinator) RebuildIndex(ctx context.Context, req *coordpb.RebuildIndexRequest) (*coordpb.RebuildIndexResponse, error) {
	resp, err := c.rebuild(ctx)
	if err != nil {
		return nil, rpcErr(err)
	}
	return resp, nil
}

func (c *Coordinator) rebuild(ctx context.Context) (*coordpb.RebuildIndexResponse, error) {
	c.rebuildMu.Lock()
	defer c.rebuildMu.Unlock()
	resp := &coordpb.RebuildIndexResponse{}
	members, err := c.readNodes(ctx)
	if err != nil {
		return nil, err
	}
	var reports []indexrebuild.Report
	for id, n := range members {
		resp.NodesAsked++
		blobs, err := c.listBlobs(ctx, n.Addr)
		if err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("node %d: %v", id, err))
			continue
		}
		resp.NodesAnswered++
		for _, b := range blobs {
			reports = append(reports, indexrebuild.Report{Node: id, Info: b})
		}
	}
	resp.Blobs = int64(len(reports))
	current := map[string]*objectpb.ObjectRecord{}
	revs := map[string]int64{}
	objs, err := c.cli.Get(ctx, objectsPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	for _, kv := range objs.Kvs {
		key := strings.TrimPrefix(string(kv.Key), objectsPrefix)
		revs[key] = kv.ModRevision
		rec := &objectpb.ObjectRecord{}
		if err := decodeValue(string(kv.Key), kv.Value, rec); err != nil || rec.Key != key {
			continue // a record that fails its checksum is restored from the nodes
		}
		current[key] = rec
	}
	pending, err := c.versionsUnder(ctx, pendingPrefix)
	if err != nil {
		return nil, err
	}
	garbage, err := c.versionsUnder(ctx, garbagePrefix)
	if err != nil {
		return nil, err
	}
	plan := indexrebuild.Merge(reports, current, pending, garbage)
	resp.ObjectsKept = int64(plan.Kept)
	resp.BlobsUnrestorable = int64(plan.Unrestorable)
	// Versions allocated from now on must be above every version found.
	if err := c.raiseVersionBase(ctx, plan.MaxVersion); err != nil {
		return nil, err
	}
	if err := c.raiseSeq(ctx, seqNodeKey, plan.MaxNode); err != nil {
		return nil, err
	}
	for _, g := range plan.Garbage {
		gk := versionKey(garbagePrefix, g.Version) + "/rebuild"
		op, err := garbageOpAt(gk, g.Key, g.Object, g.Version, g.Placement)
		if err != nil {
			return nil, err
		}
		if _, err := c.cli.Do(ctx, op); err != nil {
			return nil, err
		}
		resp.VersionsGarbage++
	}
	for _, rec := range plan.Restore {
		ok, err := c.restoreRecord(ctx, rec, revs[rec.Key])
		if err != nil {
			return nil, err
		}
		if ok {
			resp.ObjectsRestored++
		} else {
			resp.Errors = append(resp.Errors, fmt.Sprintf("%q changed during the rebuild; left as it is", rec.Key))
		}
	}
	return resp, nil
}

// restoreRecord writes a restored record (with its mapping entry) if the
// key's record is still the one the plan saw.
func (c *Coordinator) restoreRecord(ctx context.Context, rec *objectpb.ObjectRecord, rev int64) (bool, error) {
	v, err := encodeValue(rec)
	if err != nil {
		return false, err
	}
	mapOp, err := c.mappingOp(ctx, rec)
	if err != nil {
		return false, err
	}
	txn, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(objectsPrefix+rec.Key), "=", rev)).
		Then(clientv3.OpPut(objectsPrefix+rec.Key, v), mapOp).Commit()
	if err != nil {
		return false, err
	}
	return txn.Succeeded, nil
}

// versionsUnder lists the versions named by the keys under p (pending or
// garbage entries: p + %020d version [+ suffix]).
func (c *Coordinator) versionsUnder(ctx context.Context, p string) (map[uint64]bool, error) {
	resp, err := c.cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	out := map[uint64]bool{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), p)
		if len(rest) >= 20 {
			if v, err := strconv.ParseUint(rest[:20], 10, 64); err == nil {
				out[v] = true
			}
		}
	}
	return out, nil
}

// listBlobs asks a node for its local index.
func (c *Coordinator) listBlobs(ctx context.Context, addr string) ([]*nodepb.BlobInfo, error) {
	conn, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := nodepb.NewNodeClient(conn).ListBlobs(ctx, &nodepb.ListBlobsRequest{})
	if err != nil {
		return nil, err
	}
	return resp.Blobs, nil
}

// versionBase reads the version base and allocates a version: the
// revision of a write to the version counter plus the base.
func (c *Coordinator) allocateVersion(ctx context.Context) (uint64, error) {
	resp, err := c.cli.Txn(ctx).Then(clientv3.OpPut(seqVersionKey, ""), clientv3.OpGet(versionBaseKey)).Commit()
	if err != nil {
		return 0, err
	}
	var b uint64
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		if b, err = strconv.ParseUint(string(kvs[0].Value), 10, 64); err != nil {
			return 0, base.CorruptionErrorf("version base: %v", err)
		}
	}
	return uint64(resp.Header.Revision) + b, nil
}

// raiseVersionBase makes every version allocated from now on larger than
// max (by versionBaseGap, see there) when the revisions alone would not be.
func (c *Coordinator) raiseVersionBase(ctx context.Context, max uint64) error {
	for {
		resp, err := c.cli.Get(ctx, versionBaseKey)
		if err != nil {
			return err
		}
		var cur uint64
		var rev int64
		if len(resp.Kvs) > 0 {
			if cur, err = strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64); err != nil {
				return base.CorruptionErrorf("version base: %v", err)
			}
			rev = resp.Kvs[0].ModRevision
		}
		if uint64(resp.Header.Revision)+cur > max {
			return nil
		}
		next := max + versionBaseGap
		txn, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(versionBaseKey), "=", rev)).
			Then(clientv3.OpPut(versionBaseKey, strconv.FormatUint(next, 10))).Commit()
		if err != nil {
			return err
		}
		if txn.Succeeded {
			c.cfg.Logf("coordinator: versions now start above %d (nodes hold versions up to %d)", next, max)
			return nil
		}
	}
}

// raiseSeq keeps a counter at least v.
func (c *Coordinator) raiseSeq(ctx context.Context, key string, v uint64) error {
	for {
		cur, rev, err := c.getSeq(ctx, key)
		if err != nil || cur >= v {
			return err
		}
		ok, err := c.casSeq(ctx, key, rev, v)
		if err != nil || ok {
			return err
		}
	}
}

// PendingGarbage counts the garbage entries not yet collected (tests and
// status).
func (c *Coordinator) PendingGarbage(ctx context.Context) (int64, error) {
	resp, err := c.cli.Get(ctx, garbagePrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}
