// Package clustertest starts a whole flashmend cluster inside the calling
// process, for tests and examples of programs that use package client
// (as net/http/httptest does for HTTP servers): an embedded etcd
// coordinator and storage nodes on 127.0.0.1 ports chosen at run time,
// each node's data under the given directory, every node hosting the KV
// store.
//
// It runs the same code as `flashmend dev` (internal/client/devcluster),
// with plain-file node stores and etcd's fsyncs off: durable across a
// clean Close and a restart on the same directory, not across power loss.
package clustertest

import (
	"context"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/kv"
)

// Options configures a cluster; the zero value is 6 nodes.
type Options struct {
	// Nodes is the number of storage nodes (default 6, at least 6 for
	// erasure-coded objects: Reed-Solomon 4+2 puts each shard on its own
	// node).
	Nodes int
	// MaxObjectBytes is the largest object accepted (default 64 MiB).
	MaxObjectBytes int64
	// Logf receives the cluster's operational messages (nil: discarded).
	Logf func(format string, args ...any)
}

// Cluster is a running in-process cluster.
type Cluster struct {
	c *devcluster.Cluster
}

// Start starts a cluster with its data under dir (a directory the caller
// owns, e.g. t.TempDir()) and returns once it serves, KV included.
func Start(ctx context.Context, dir string, opts Options) (*Cluster, error) {
	if opts.MaxObjectBytes == 0 {
		opts.MaxObjectBytes = 64 << 20
	}
	c, err := devcluster.Start(ctx, devcluster.Options{
		Dir: dir, Nodes: opts.Nodes, MaxObjectBytes: base.Bytes(opts.MaxObjectBytes), UnsafeNoFsync: true,
		KV: &kv.Options{}, Logf: opts.Logf,
	})
	if err != nil {
		return nil, err
	}
	return &Cluster{c: c}, nil
}

// Endpoint is the address to pass to client.Dial.
func (c *Cluster) Endpoint() string { return c.c.Endpoint() }

// Close stops the cluster cleanly (its data stays in the directory).
func (c *Cluster) Close() error { return c.c.Close() }
