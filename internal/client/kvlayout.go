package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/wire"
)

// KVLayout returns the KV store's shard map, which the coordinator keeps;
// with create, and none stored yet, the coordinator first places one over
// the live nodes, cut at splits (3 replicas per shard). created says
// whether this call placed it. Without a layout and without create the
// error wraps fs.ErrNotExist.
func (c *Client) KVLayout(ctx context.Context, create bool, splits []string) (layout *kvpb.ShardMap, created bool, err error) {
	req := &coordpb.KVLayoutRequest{Create: create}
	for _, s := range splits {
		req.Splits = append(req.Splits, []byte(s))
	}
	resp, err := c.coord.KVLayout(ctx, req)
	if err != nil {
		return nil, false, wire.FromStatus(err)
	}
	return resp.Layout, resp.Created, nil
}

// KVClient returns a client of the KV store the cluster's storage nodes
// host: the coordinator gives the shard layout and the nodes' addresses.
// Without a layout the error wraps fs.ErrNotExist and says how to place
// one.
func (c *Client) KVClient(ctx context.Context, opts kvclient.Options) (*kvclient.Client, error) {
	m, _, err := c.KVLayout(ctx, false, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the cluster has no KV layout yet: place one with 'flashmend ctl kv init [--splits a,b,...]' (%w)", err)
	}
	if err != nil {
		return nil, err
	}
	layout, err := kvapi.LayoutFromProto(m)
	if err != nil {
		return nil, err
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	addrs := map[base.NodeID]string{}
	for _, n := range nodes {
		if n.Addr != "" {
			addrs[base.NodeID(n.Id)] = n.Addr
		}
	}
	if opts.TLS == nil {
		opts.TLS = c.opts.TLS
	}
	return kvclient.New(layout, addrs, opts)
}
