package experiments

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
)

// The object-store experiments (DIRECT 000 section 5, HDFS part) run on an
// in-process cluster (internal/client/devcluster: a coordinator with
// embedded etcd and storage nodes on 127.0.0.1), through the Go client, as
// a user would. This file is their shared harness.

// objClusterOptions configure an experiment cluster.
type objClusterOptions struct {
	Nodes int
	// MemoryStores keeps every node's chunks in memory (objstore.MemStore)
	// instead of files: the fault injector's persistent flips then cost a
	// memory write instead of a file rewrite, so that high UBERs measure the
	// read path and not the injector.
	MemoryStores bool
	// KV makes every node host the KV store too (shards cut at g, n, t,
	// as flashmend dev does).
	KV bool
	// NoRepairReserve turns the nodes' repair reserve off: a throughput
	// run on the machine's shared disk is not a test of a full device, and
	// with the default reserve (5% of the disk) every put is refused once
	// other work has filled the disk past 95%.
	NoRepairReserve bool
}

// objCluster is a running experiment cluster and its temporary directory.
type objCluster struct {
	dir string
	cl  *devcluster.Cluster
	// stores are the nodes' memory stores (MemoryStores), by node index:
	// read directly, beneath the fault injector, to inspect the layout.
	stores []*objstore.MemStore
}

// Bounds of the harness.
const (
	objMaxNodes       = 16
	objMaxObjectBytes = 64 * base.MiB
)

func startObjCluster(ctx context.Context, opts objClusterOptions) (*objCluster, error) {
	if opts.Nodes < 3 || opts.Nodes > objMaxNodes {
		return nil, base.InvalidArgumentf("experiment cluster of %d nodes outside [3, %d]", opts.Nodes, objMaxNodes)
	}
	dir, err := os.MkdirTemp("", "flashmend-experiment-")
	if err != nil {
		return nil, err
	}
	dcOpts := devcluster.Options{
		Dir: dir, Nodes: opts.Nodes, MaxObjectBytes: objMaxObjectBytes,
		// The coordinator's etcd holds only the index; its fsyncs would
		// time the disk, not the read path.
		UnsafeNoFsync: true,
	}
	if opts.NoRepairReserve {
		dcOpts.RepairReserve = -1
	}
	if opts.KV {
		dcOpts.KV, dcOpts.KVSplits = &kv.Options{}, []string{"g", "n", "t"}
	}
	c := &objCluster{dir: dir}
	if opts.MemoryStores {
		c.stores = make([]*objstore.MemStore, opts.Nodes)
		dcOpts.NodeStore = func(_ string, i int) (objstore.Store, error) {
			c.stores[i] = objstore.NewMemStore()
			return c.stores[i], nil
		}
	}
	cl, err := devcluster.Start(ctx, dcOpts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("experiment cluster: %w", err)
	}
	c.cl = cl
	return c, nil
}

// dial returns a new client. Readers each get their own, so that one
// reader's background hdfs re-replication (Client.WaitBackground) does not
// wait for another's.
func (c *objCluster) dial(ctx context.Context) (*client.Client, error) {
	return client.Dial(ctx, c.cl.Endpoint(), client.Options{})
}

// setUBER sets every node's injected bit error rate, persistent: a flip
// drawn on a read is also written into the stored file (DIRECT 000 section
// 5: one flip per 1/UBER bits read, damage on the device).
func (c *objCluster) setUBER(ctx context.Context, cli *client.Client, uber float64) error {
	for i := range c.cl.Nodes {
		n := c.cl.Node(i)
		if n == nil {
			return fmt.Errorf("experiment cluster: node %d is down", i+1)
		}
		if err := cli.InjectUBER(ctx, uint64(n.ID()), uber, true); err != nil {
			return fmt.Errorf("experiment cluster: inject UBER %g on node %d: %w", uber, n.ID(), err)
		}
	}
	return nil
}

func (c *objCluster) Close() error {
	err := c.cl.Close()
	if rmErr := os.RemoveAll(c.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// testObject is one object a reader owns: its content and current record.
type testObject struct {
	key  string
	data []byte
	rec  *objectpb.ObjectRecord
}

// putObjects writes count REP objects of size bytes under prefix, with
// content drawn from rng.
func putObjects(ctx context.Context, cli *client.Client, rng *rand.Rand, prefix string, count, size int) ([]*testObject, error) {
	objs := make([]*testObject, 0, count)
	for i := 0; i < count; i++ {
		o := &testObject{key: fmt.Sprintf("%s/%04d", prefix, i), data: make([]byte, size)}
		rng.Read(o.data)
		if err := o.restore(ctx, cli); err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// restore writes the object again as a new version: after a read that
// failed, its replicas hold damage no read repaired.
func (o *testObject) restore(ctx context.Context, cli *client.Client) error {
	rec, err := cli.Put(ctx, o.key, o.data, objectpb.Redundancy_REP)
	if err != nil {
		return fmt.Errorf("put %s: %w", o.key, err)
	}
	o.rec = rec
	return nil
}

// readOutcome is what one object read saw.
type readOutcome struct {
	Failed bool // an explicit data-loss error reached the application
	Voted  int  // chunks with a sector rebuilt by a majority vote (DIRECT)
	// AllCorrupt counts chunks read corrupt on every replica (DIRECT).
	AllCorrupt int
	Repaired   int
	Bytes      int64 // bytes returned (0 on failure)
}

// errWrongData marks a read that returned bytes different from what was
// written: the one outcome the system must never produce.
var errWrongData = errors.New("read returned wrong data")

// readObject reads o once in mode. A data-loss error is an outcome, not an
// error; any other error (operating failures) is returned. For hdfs it
// waits for the background re-replication the read started, so that the
// next read of o starts from clean replicas.
func readObject(ctx context.Context, cli *client.Client, o *testObject, mode string) (readOutcome, error) {
	data, rep, err := cli.ReadVersion(ctx, o.rec, mode)
	if mode == client.ModeHDFS {
		cli.WaitBackground()
	}
	if err != nil {
		if base.IsDataLoss(err) {
			return readOutcome{Failed: true}, nil
		}
		return readOutcome{}, err
	}
	if !bytes.Equal(data, o.data) {
		return readOutcome{}, base.AssertionFailedf("%s (%s): %w", o.key, mode, errWrongData)
	}
	if rep.RepairFailed > 0 {
		return readOutcome{}, fmt.Errorf("%s (%s): %d repairs failed", o.key, mode, rep.RepairFailed)
	}
	return readOutcome{Voted: rep.Voted, AllCorrupt: rep.AllCorrupt, Repaired: rep.Repaired, Bytes: int64(len(data))}, nil
}

// sumsLayout is how the object store keeps checksums apart from the data,
// as found in a node's store: what a chunk read fetches besides the chunk.
type sumsLayout struct {
	// RecordBits is the size, in bits, of one chunk's sums record: what of
	// the sums file decides whether this chunk's checksums are valid.
	RecordBits int64
	// ReadBitsPerChunk is the mean size, in bits, of what a chunk read
	// fetches of its sums file: its own record when the store reads ranges
	// (objstore.RangeReader), else the whole file, whose every bit the fault
	// injector may flip, its neighbours' records included.
	ReadBitsPerChunk int64
	// ChunksPerFile is the mean number of chunks whose records share a
	// sums file.
	ChunksPerFile float64
}

// sumsLayoutOf inspects node 0's store (beneath its fault injector, so
// nothing is flipped) for the sums files of objs' chunks.
func (c *objCluster) sumsLayoutOf(objs []*testObject) (sumsLayout, error) {
	if len(c.stores) == 0 || c.stores[0] == nil {
		return sumsLayout{}, base.InvalidArgumentf("sums layout: the cluster has no memory stores")
	}
	var bits, chunks int64
	files := map[string]bool{}
	for _, o := range objs {
		n := (len(o.data) + direct.ChunkSize - 1) / direct.ChunkSize
		for i := 0; i < n; i++ {
			name := objstore.SumsName(direct.ChunkID{Object: o.rec.Object, Version: o.rec.Version, Index: uint32(i)})
			b, err := c.stores[0].Get(name)
			if err != nil {
				return sumsLayout{}, fmt.Errorf("sums layout: %w", err)
			}
			bits += 8 * int64(len(b))
			chunks++
			files[name] = true
		}
	}
	if chunks == 0 {
		return sumsLayout{}, base.InvalidArgumentf("sums layout: no chunks")
	}
	id := direct.ChunkID{}
	record := sumsrec.Encode(id, direct.ChunkSize, direct.Sums(id, make([]byte, direct.ChunkSize)))
	layout := sumsLayout{RecordBits: 8 * int64(len(record)), ReadBitsPerChunk: bits / chunks,
		ChunksPerFile: float64(chunks) / float64(len(files))}
	if _, ok := any(c.stores[0]).(objstore.RangeReader); ok {
		layout.ReadBitsPerChunk = layout.RecordBits
	}
	return layout, nil
}
