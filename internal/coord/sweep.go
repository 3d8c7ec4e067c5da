package coord

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

func (c *Coordinator) sweepLoop(ctx context.Context) {
	defer c.wg.Done()
	tick, stop := base.NewTicker(c.cfg.Clock, c.cfg.SweepInterval)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
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
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{c.cfg.TLS.DialOption()}, c.cfg.NodeDialOptions...)...)
	if err != nil {
		return nil, err
	}
	c.conns[addr] = conn
	return conn, nil
}
