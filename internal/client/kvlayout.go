package client

import (
	"context"

	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
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
