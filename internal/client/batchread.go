package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/client/objlayout"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/wire"
)

// batchReader serves the first read of each unit of one streamed GET from
// ReadChunks calls, one call per replica (REP) or data shard (EC) and batch
// of units, instead of one ReadChunk call per chunk. Only where the read
// starts changes: every chunk it returns goes through the same DIRECT
// decision (verify, fetch another replica or shard, vote, reconstruct,
// repair) as a chunk fetched alone, and every further fetch of that unit is
// a ReadChunk call.
//
// A call for batch k is started by the first unit of batch k that the GET's
// pipeline dispatches, and delivers its chunks into per-chunk slots as they
// arrive; so the units held beyond the pipeline's window are at most the
// rest of the last batch started (a batch is half the window: a GET holds
// at most 1.5 Options.WindowBytes of units). A call that fails, or stays silent
// for Options.RPCTimeout, fails its remaining chunks' reads, which DIRECT
// then takes elsewhere, as for a failed ReadChunk.
type batchReader struct {
	c     *Client
	l     objlayout.Layout
	ctx   context.Context // the GET's: cancelled when it ends
	units int             // units per batch

	mu    sync.Mutex
	calls map[batchKey]map[uint32]chan direct.ReplicaRead // slots not yet taken
}

type batchKey struct {
	replica int // REP replica or EC shard: the placement slot
	batch   int
}

func newBatchReader(ctx context.Context, c *Client, l objlayout.Layout) *batchReader {
	units := max(1, min(c.unitsAhead(l)/2, maxBatchChunks))
	return &batchReader{c: c, l: l, ctx: ctx, units: units, calls: map[batchKey]map[uint32]chan direct.ReplicaRead{}}
}

// maxBatchChunks bounds the units of one batch (a node answers at most
// node.MaxReadChunks chunks per call).
const maxBatchChunks = 256

// covers reports whether the batch calls read chunk i from replica (or
// shard) r: REP chunk i starts at replica i mod copies (readChunkREP's
// order), an EC row at its data shards.
func (b *batchReader) covers(r, i int) bool {
	if b.l.EC {
		return r < direct.DataShards
	}
	return i%b.l.Copies == r
}

// read returns unit i's chunk from replica (or shard) r, from its batch's
// call (started now when it is the batch's first); a chunk no call covers
// is read alone.
func (b *batchReader) read(ctx context.Context, r, i int) direct.ReplicaRead {
	shard := 0
	if b.l.EC {
		shard = r
	}
	id := b.l.ID(shard, i)
	if !b.covers(r, i) {
		return b.c.readChunk(ctx, b.l.Placement[r], id)
	}
	key := batchKey{replica: r, batch: i / b.units}
	b.mu.Lock()
	slots, ok := b.calls[key]
	if !ok {
		slots = b.start(key)
		b.calls[key] = slots
	}
	ch, ok := slots[uint32(i)]
	if ok {
		delete(slots, uint32(i))
		if len(slots) == 0 {
			delete(b.calls, key) // every slot taken: the key is done
		}
	}
	b.mu.Unlock()
	if !ok {
		// Taken before (a unit asks for its first chunk once; be safe).
		return b.c.readChunk(ctx, b.l.Placement[r], id)
	}
	select {
	case rr := <-ch:
		return rr
	case <-ctx.Done():
		return direct.ReplicaRead{Fetched: true, Err: ctx.Err()}
	}
}

// start makes the slots of one batch call and runs the call. Called with
// b.mu held.
func (b *batchReader) start(key batchKey) map[uint32]chan direct.ReplicaRead {
	lo, hi := key.batch*b.units, min((key.batch+1)*b.units, b.l.Chunks)
	var idx []uint32
	var chans []chan direct.ReplicaRead
	slots := map[uint32]chan direct.ReplicaRead{}
	for i := lo; i < hi; i++ {
		if b.covers(key.replica, i) {
			ch := make(chan direct.ReplicaRead, 1)
			idx = append(idx, uint32(i))
			chans = append(chans, ch)
			slots[uint32(i)] = ch
		}
	}
	go b.run(key.replica, idx, chans)
	return slots
}

// run makes one ReadChunks call and fills the slots in order; each slot
// gets exactly one read (its chunk, or the call's error).
func (b *batchReader) run(r int, idx []uint32, chans []chan direct.ReplicaRead) {
	node := b.l.Placement[r]
	shard := uint32(0)
	if b.l.EC {
		shard = uint32(r)
	}
	k := 0
	fail := func(err error) {
		for ; k < len(chans); k++ {
			id := b.l.ID(int(shard), int(idx[k]))
			chans[k] <- direct.ReplicaRead{Fetched: true, Err: fmt.Errorf("node %d: read %s: %w", node, id, err)}
		}
	}
	if len(idx) == 0 {
		return
	}
	nc, err := b.c.memberClient(b.ctx, node, false)
	if err != nil {
		fail(err)
		return
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	// A call that stays silent for RPCTimeout is given up: the timer is
	// reset at every chunk received.
	watchdog := time.AfterFunc(b.c.opts.RPCTimeout, cancel)
	defer watchdog.Stop()
	stream, err := nc.ReadChunks(ctx, &nodepb.ReadChunksRequest{Object: b.l.Object, Version: b.l.Version, Shard: shard, Indexes: idx})
	if err != nil {
		fail(wire.FromStatus(err))
		return
	}
	for k < len(chans) {
		resp, err := stream.Recv()
		if err != nil {
			fail(wire.FromStatus(err))
			return
		}
		watchdog.Reset(b.c.opts.RPCTimeout)
		id := b.l.ID(int(shard), int(idx[k]))
		if resp.Index != idx[k] {
			fail(fmt.Errorf("answer for chunk %d where %d was due", resp.Index, idx[k]))
			return
		}
		var rr direct.ReplicaRead
		switch {
		case resp.Missing:
			rr = direct.ReplicaRead{Fetched: true, Missing: true}
		case resp.Error != "" || resp.Chunk == nil:
			rr = direct.ReplicaRead{Fetched: true, Err: fmt.Errorf("node %d: read %s: %s", node, id, resp.Error)}
		default:
			rr = replicaReadOf(resp.Chunk)
		}
		chans[k] <- rr
		k++
	}
}
