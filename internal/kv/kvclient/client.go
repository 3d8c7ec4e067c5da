package kvclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv/keyspan"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/tlsconf"
)

// Options tunes the Go client.
type Options struct {
	// MaxAttempts bounds tries per request across replicas. Default 1000
	// (RetryTimeout is what ends retries in practice).
	MaxAttempts int
	// RetryTimeout bounds how long one request keeps retrying (a leader
	// election, a replica being repaired), within the caller's context.
	// Default 10s.
	RetryTimeout time.Duration
	// RetryBackoff is the first pause after a round over all replicas
	// (or after as many attempts as there are replicas, when leader hints
	// bounce); it doubles each round up to 500ms. Default 20ms.
	RetryBackoff time.Duration
	// AttemptTimeout bounds one attempt of a read (and of a transaction's
	// begin) on one replica; when it passes, the read goes to the next
	// replica. A replica that holds the connection but does not answer (a
	// paused process, a stalled disk) then costs one AttemptTimeout
	// instead of the caller's whole deadline. Writes are not cut short: an
	// attempt that timed out may have been proposed, so it is never re-sent
	// elsewhere. Default 2s; negative: none.
	AttemptTimeout time.Duration
	// TxnRetries bounds the re-runs of an aborted transaction. Default 20.
	TxnRetries int
	// Seed seeds replica choice for eventual reads.
	Seed int64
	// Clock ends RetryTimeout and times the backoffs between retries (nil:
	// the system's).
	Clock base.Clock
	// TLS secures the connections to the nodes; nil: plaintext.
	TLS *tlsconf.Config
}

// Client is the Go client: it routes keys to shards, finds leaders, and
// retries transparently on another replica when one reports corruption, so
// the application sees correct data (DIRECT 4.1: reads that hit corruption).
type Client struct {
	layout kvapi.Layout
	opts   Options

	mu      sync.Mutex
	conns   map[base.NodeID]*grpc.ClientConn
	addrs   map[base.NodeID]string
	leaders map[base.ShardID]base.NodeID
	rng     *rand.Rand
	// Retries counts requests re-sent to another replica.
	retries int
}

// New connects lazily to the nodes at addrs.
func New(layout kvapi.Layout, addrs map[base.NodeID]string, opts Options) (*Client, error) {
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 1000
	}
	if opts.RetryTimeout == 0 {
		opts.RetryTimeout = 10 * time.Second
	}
	if opts.RetryBackoff == 0 {
		opts.RetryBackoff = 20 * time.Millisecond
	}
	if opts.TxnRetries == 0 {
		opts.TxnRetries = 20
	}
	if opts.AttemptTimeout == 0 {
		opts.AttemptTimeout = 2 * time.Second
	}
	if opts.MaxAttempts < 1 || opts.TxnRetries < 1 || opts.RetryBackoff < 0 || opts.RetryTimeout < 0 {
		return nil, base.InvalidArgumentf("kv: bad client options %+v", opts)
	}
	if opts.Clock == nil {
		opts.Clock = base.SystemClock{}
	}
	return &Client{
		layout: layout, opts: opts, conns: map[base.NodeID]*grpc.ClientConn{},
		addrs: addrs, leaders: map[base.ShardID]base.NodeID{}, rng: rand.New(rand.NewSource(opts.Seed)),
	}, nil
}

// Layout returns the shard map the client routes by.
func (c *Client) Layout() *kvapi.Layout { return &c.layout }

// Close closes the connections.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		cc.Close()
	}
	c.conns = map[base.NodeID]*grpc.ClientConn{}
	return nil
}

// Retries returns how many requests were re-sent to another replica.
func (c *Client) Retries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retries
}

// KVClient returns the KV client of node n (requests sent as they are:
// no routing, no retries).
func (c *Client) KVClient(n base.NodeID) (kvpb.KVClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.conns[n]; ok {
		return kvpb.NewKVClient(cc), nil
	}
	addr, ok := c.addrs[n]
	if !ok {
		return nil, base.InvalidArgumentf("kv: no address for node %s", n)
	}
	cc, err := grpc.NewClient(addr, c.opts.TLS.DialOption())
	if err != nil {
		return nil, err
	}
	c.conns[n] = cc
	return kvpb.NewKVClient(cc), nil
}

// AdminClient returns the KVAdmin client of node n.
func (c *Client) AdminClient(n base.NodeID) (kvpb.KVAdminClient, error) {
	if _, err := c.KVClient(n); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return kvpb.NewKVAdminClient(c.conns[n]), nil
}

// order lists the nodes to try: the believed leader first for strong
// requests, a random replica first otherwise.
func (c *Client) order(shard kvapi.ShardSpec, preferLeader bool) []base.NodeID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var nodes []base.NodeID
	for _, n := range shard.Replicas {
		nodes = append(nodes, n)
	}
	// Deterministic base order, then rotate.
	for i := range nodes {
		for j := i + 1; j < len(nodes); j++ {
			if nodes[j] < nodes[i] {
				nodes[i], nodes[j] = nodes[j], nodes[i]
			}
		}
	}
	if preferLeader {
		if l, ok := c.leaders[shard.ID]; ok {
			for i, n := range nodes {
				if n == l {
					nodes[0], nodes[i] = nodes[i], nodes[0]
				}
			}
		}
		return nodes
	}
	k := c.rng.Intn(len(nodes))
	return append(nodes[k:], nodes[:k]...)
}

// retryable classifies an error: whether another replica (or the same one
// later) may succeed, and whether the request certainly did not take effect.
func retryable(err error, idempotent bool) (retry bool, leader base.NodeID) {
	var kerr *kvapi.Error
	if errors.As(err, &kerr) {
		switch kerr.Reason {
		case kvpb.ErrorDetail_NOT_LEADER, kvpb.ErrorDetail_REPLICA_UNAVAILABLE:
			return true, kerr.Leader
		}
		return false, 0
	}
	if base.IsCorruption(err) {
		return true, 0
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable {
		// The node is unreachable. A read can go elsewhere. A write may
		// already be in the log if the connection broke after sending, so
		// it is re-sent only if it never left: the dial itself failed.
		// NB: gRPC marks those failures only in the message.
		neverSent := strings.Contains(st.Message(), "while dialing")
		return idempotent || neverSent, 0
	}
	return false, 0
}

// gaveUp is the error of a request whose context ended while it was being
// retried: the context's error (errors.Is finds it), with what the
// replicas last answered, so the caller learns why the shard did not.
func gaveUp(ctx context.Context, shard kvapi.ShardSpec, attempts int, last error) error {
	if last == nil {
		return ctx.Err()
	}
	return fmt.Errorf("kv: %s: %w after %d attempts; last answer: %w", shard.ID, ctx.Err(), attempts, last)
}

// do runs call against the shard's replicas until one succeeds, a
// non-retryable error comes back, or attempts run out.
//
// A write (preferLeader and not a read) is re-sent only on errors that prove
// it was not proposed.
func (c *Client) do(ctx context.Context, shard kvapi.ShardSpec, preferLeader, idempotent bool, call func(context.Context, kvpb.KVClient) error) error {
	var last error
	var queue []base.NodeID
	deadline := c.opts.Clock.Now().Add(c.opts.RetryTimeout)
	backoff := c.opts.RetryBackoff
	sinceRest, replicas := 0, len(shard.Replicas)
	attempt := 0
	for ; attempt < c.opts.MaxAttempts; attempt++ {
		// Rest after a round over the replicas, or after as many attempts
		// as there are replicas (leader hints bouncing during an
		// election), so retries last RetryTimeout, not a burst.
		if attempt > 0 && (len(queue) == 0 || sinceRest >= replicas) {
			if !c.opts.Clock.Now().Before(deadline) {
				break
			}
			select {
			case <-base.After(c.opts.Clock, backoff):
			case <-ctx.Done():
				return gaveUp(ctx, shard, attempt, last)
			}
			backoff = min(2*backoff, 500*time.Millisecond)
			sinceRest = 0
		}
		sinceRest++
		if len(queue) == 0 {
			queue = c.order(shard, preferLeader)
		}
		n := queue[0]
		queue = queue[1:]
		kc, err := c.KVClient(n)
		if err != nil {
			return err
		}
		actx, cancel := ctx, context.CancelFunc(func() {})
		if idempotent && c.opts.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeout(ctx, c.opts.AttemptTimeout)
		}
		err = kvapi.FromStatus(call(actx, kc))
		// The server may end the call a moment before the client's timer
		// fires (the deadline travels with the call), so its
		// DeadlineExceeded counts as the attempt's timeout too.
		attemptTimedOut := actx != ctx && ctx.Err() == nil &&
			(actx.Err() != nil || status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded))
		cancel()
		if err != nil && attemptTimedOut {
			// The replica did not answer in time: a read tries the next.
			err = fmt.Errorf("kv: node %d did not answer within %v: %w", n, c.opts.AttemptTimeout, err)
		}
		if err == nil {
			if preferLeader {
				c.mu.Lock()
				c.leaders[shard.ID] = n
				c.mu.Unlock()
			}
			return nil
		}
		last = err
		retry, leader := retryable(err, idempotent)
		retry = retry || attemptTimedOut
		if !retry {
			return err
		}
		c.mu.Lock()
		c.retries++
		if leader != 0 {
			c.leaders[shard.ID] = leader
		}
		c.mu.Unlock()
		if leader != 0 && leader != n {
			// Try the hinted leader next.
			rest := []base.NodeID{leader}
			for _, q := range queue {
				if q != leader {
					rest = append(rest, q)
				}
			}
			queue = rest
		}
		if ctx.Err() != nil {
			return gaveUp(ctx, shard, attempt, last)
		}
	}
	return fmt.Errorf("kv: %s: gave up after %d attempts: %w", shard.ID, attempt, last)
}

// ReadOption sets a read's consistency.
type ReadOption func(*kvpb.ReadOptions)

// Strong reads from the leader after a read index (the default).
func Strong() ReadOption {
	return func(o *kvpb.ReadOptions) { o.Consistency = kvpb.Consistency_STRONG }
}

// AfterIndex reads from any replica that applied index (a write's result).
func AfterIndex(index uint64) ReadOption {
	return func(o *kvpb.ReadOptions) {
		o.Consistency = kvpb.Consistency_READ_AFTER_WRITE
		o.MinIndex = index
	}
}

// Eventual reads from any replica.
func Eventual() ReadOption {
	return func(o *kvpb.ReadOptions) { o.Consistency = kvpb.Consistency_EVENTUAL }
}

func readOptions(opts []ReadOption) *kvpb.ReadOptions {
	o := &kvpb.ReadOptions{}
	for _, f := range opts {
		f(o)
	}
	return o
}

// Get reads key. found is false if the key does not exist.
func (c *Client) Get(ctx context.Context, key []byte, opts ...ReadOption) (value []byte, found bool, err error) {
	if err := kvapi.ValidateKey(key); err != nil {
		return nil, false, err
	}
	shard := c.layout.ShardFor(key)
	ro := readOptions(opts)
	var resp *kvpb.GetResponse
	err = c.do(ctx, shard, ro.Consistency == kvpb.Consistency_STRONG, true, func(ctx context.Context, kc kvpb.KVClient) error {
		var err error
		resp, err = kc.Get(ctx, &kvpb.GetRequest{Shard: uint64(shard.ID), Key: key, Read: ro})
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return resp.Value, resp.Found, nil
}

// KeyValue is one row.
type KeyValue struct {
	Key, Value []byte
}

func (kv KeyValue) String() string { return fmt.Sprintf("%q=%q", kv.Key, kv.Value) }

// Scan returns up to limit rows of [start, end) (end nil: to the end),
// across shards; limit 0 means every row. It holds them all: ScanEach
// streams a large range instead.
func (c *Client) Scan(ctx context.Context, start, end []byte, limit int, opts ...ReadOption) ([]KeyValue, error) {
	var out []KeyValue
	err := c.ScanEach(ctx, start, end, limit, func(kv KeyValue) error {
		out = append(out, kv)
		return nil
	}, opts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScanEach calls fn for up to limit rows of [start, end) in key order
// (limit 0: every row), fetching them a page at a time: each page is
// bounded by rows (MaxScanRows) and bytes (DefaultScanPageBytes), so a
// range of any size is walked in bounded memory. Each page is read with
// the given consistency; a strong scan is linearizable page by page, not
// as a whole. An error from fn stops the scan and is returned.
func (c *Client) ScanEach(ctx context.Context, start, end []byte, limit int, fn func(KeyValue) error, opts ...ReadOption) error {
	if err := kvapi.ValidateRange(start, end); err != nil {
		return err
	}
	if limit < 0 {
		return base.InvalidArgumentf("kv: scan limit %d is negative", limit)
	}
	ro := readOptions(opts)
	seen := 0
	for _, shard := range c.layout.Shards {
		if !shard.Range.Overlaps(keyspan.Range{Start: start, End: end}) {
			continue
		}
		from := start
		for {
			if limit > 0 && seen >= limit {
				return nil
			}
			page := kvapi.MaxScanRows
			if limit > 0 {
				page = min(page, limit-seen)
			}
			var resp *kvpb.ScanResponse
			err := c.do(ctx, shard, ro.Consistency == kvpb.Consistency_STRONG, true, func(ctx context.Context, kc kvpb.KVClient) error {
				var err error
				resp, err = kc.Scan(ctx, &kvpb.ScanRequest{Shard: uint64(shard.ID), Start: from, End: end, Limit: uint32(page), Read: ro})
				return err
			})
			if err != nil {
				return err
			}
			for _, r := range resp.Rows {
				if err := fn(KeyValue{Key: r.Key, Value: r.Value}); err != nil {
					return err
				}
				seen++
			}
			if !resp.More || len(resp.Rows) == 0 {
				break
			}
			from = append(bytes.Clone(resp.Rows[len(resp.Rows)-1].Key), 0)
		}
	}
	return nil
}

// Op is one write of a batch.
type Op struct {
	Delete     bool
	Key, Value []byte
}

// Condition requires key to hold Value (Exists) or to be absent.
type Condition struct {
	Key    []byte
	Exists bool
	Value  []byte
}

// Batch applies ops atomically if every condition holds; all keys must be in
// one shard. It returns the log index (for AfterIndex reads), or
// ErrConditionFailed.
func (c *Client) Batch(ctx context.Context, ops []Op, conds []Condition) (uint64, error) {
	if len(ops) == 0 {
		return 0, base.InvalidArgumentf("kv: empty batch")
	}
	b := &kvpb.WriteBatch{}
	for _, op := range ops {
		kind := kvpb.Op_PUT
		if op.Delete {
			kind = kvpb.Op_DELETE
		}
		b.Ops = append(b.Ops, &kvpb.Op{Kind: kind, Key: op.Key, Value: op.Value})
	}
	for _, cd := range conds {
		b.Conditions = append(b.Conditions, &kvpb.Condition{Key: cd.Key, Exists: cd.Exists, Value: cd.Value})
	}
	if err := kvapi.ValidateBatch(b); err != nil {
		return 0, err
	}
	shard := c.layout.ShardFor(ops[0].Key)
	for _, op := range b.Ops {
		if !shard.Range.Contains(op.Key) {
			return 0, base.InvalidArgumentf("kv: batch spans shards (%q is not in %s)", op.Key, shard.ID)
		}
	}
	for _, cd := range b.Conditions {
		if !shard.Range.Contains(cd.Key) {
			return 0, base.InvalidArgumentf("kv: condition on %q is outside shard %s", cd.Key, shard.ID)
		}
	}
	var resp *kvpb.WriteResponse
	err := c.do(ctx, shard, true, false, func(ctx context.Context, kc kvpb.KVClient) error {
		var err error
		resp, err = kc.Write(ctx, &kvpb.WriteRequest{Shard: uint64(shard.ID), Batch: b})
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.Index, nil
}

// Put writes key=value.
func (c *Client) Put(ctx context.Context, key, value []byte) (uint64, error) {
	return c.Batch(ctx, []Op{{Key: key, Value: value}}, nil)
}

// Delete removes key.
func (c *Client) Delete(ctx context.Context, key []byte) (uint64, error) {
	return c.Batch(ctx, []Op{{Delete: true, Key: key}}, nil)
}

// CompareAndSet sets key to value if it currently holds old (old nil: if it
// is absent). It reports whether the swap happened.
func (c *Client) CompareAndSet(ctx context.Context, key, old, value []byte) (bool, error) {
	_, err := c.Batch(ctx, []Op{{Key: key, Value: value}}, []Condition{{Key: key, Exists: old != nil, Value: old}})
	if errors.Is(err, kvapi.ErrConditionFailed) {
		return false, nil
	}
	return err == nil, err
}

// Txn is an optimistic transaction within one shard: reads see one
// snapshot, writes are buffered, commit validates the reads through the log.
type Txn struct {
	c      *Client
	shard  kvapi.ShardSpec
	node   base.NodeID
	id     uint64
	writes []*kvpb.Op
	seen   map[string][]byte // buffered writes, nil value = deleted
}

// Get reads key as of the transaction's snapshot (or its own writes).
func (t *Txn) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if err := kvapi.ValidateKey(key); err != nil {
		return nil, false, err
	}
	if !t.shard.Range.Contains(key) {
		return nil, false, base.InvalidArgumentf("kv: %q is outside the transaction's shard %s", key, t.shard.ID)
	}
	if v, ok := t.seen[string(key)]; ok {
		return v, v != nil, nil
	}
	kc, err := t.c.KVClient(t.node)
	if err != nil {
		return nil, false, err
	}
	resp, err := kc.Get(ctx, &kvpb.GetRequest{Shard: uint64(t.shard.ID), Key: key, TxnId: t.id})
	if err != nil {
		return nil, false, kvapi.FromStatus(err)
	}
	return resp.Value, resp.Found, nil
}

// Scan reads rows of [start, end) as of the snapshot (buffered writes are
// not merged in).
func (t *Txn) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	kc, err := t.c.KVClient(t.node)
	if err != nil {
		return nil, err
	}
	resp, err := kc.Scan(ctx, &kvpb.ScanRequest{Shard: uint64(t.shard.ID), Start: start, End: end, Limit: uint32(limit), TxnId: t.id})
	if err != nil {
		return nil, kvapi.FromStatus(err)
	}
	out := make([]KeyValue, 0, len(resp.Rows))
	for _, r := range resp.Rows {
		out = append(out, KeyValue{Key: r.Key, Value: r.Value})
	}
	return out, nil
}

// Put buffers a write.
func (t *Txn) Put(key, value []byte) error {
	if err := kvapi.ValidateKey(key); err != nil {
		return err
	}
	if err := kvapi.ValidateValue(value); err != nil {
		return err
	}
	if !t.shard.Range.Contains(key) {
		return base.InvalidArgumentf("kv: %q is outside the transaction's shard %s", key, t.shard.ID)
	}
	t.writes = append(t.writes, &kvpb.Op{Kind: kvpb.Op_PUT, Key: key, Value: value})
	t.seen[string(key)] = bytes.Clone(value)
	if t.seen[string(key)] == nil {
		t.seen[string(key)] = []byte{}
	}
	return nil
}

// Delete buffers a delete.
func (t *Txn) Delete(key []byte) error {
	if err := kvapi.ValidateKey(key); err != nil {
		return err
	}
	if !t.shard.Range.Contains(key) {
		return base.InvalidArgumentf("kv: %q is outside the transaction's shard %s", key, t.shard.ID)
	}
	t.writes = append(t.writes, &kvpb.Op{Kind: kvpb.Op_DELETE, Key: key})
	t.seen[string(key)] = nil
	return nil
}

// Txn runs fn in a transaction on the shard holding shardKey, committing if
// fn returns nil. An abort (conflict, or a snapshot invalidated by a repair)
// re-runs fn, up to TxnRetries times. It returns the number of attempts.
func (c *Client) Txn(ctx context.Context, shardKey []byte, fn func(ctx context.Context, t *Txn) error) (int, error) {
	shard := c.layout.ShardFor(shardKey)
	for attempt := 1; attempt <= c.opts.TxnRetries; attempt++ {
		t := &Txn{c: c, shard: shard, seen: map[string][]byte{}}
		err := c.do(ctx, shard, true, true, func(ctx context.Context, kc kvpb.KVClient) error {
			resp, err := kc.TxnBegin(ctx, &kvpb.TxnBeginRequest{Shard: uint64(shard.ID)})
			if err != nil {
				return err
			}
			t.id = resp.TxnId
			return nil
		})
		if err != nil {
			return attempt, err
		}
		c.mu.Lock()
		t.node = c.leaders[shard.ID]
		c.mu.Unlock()
		err = fn(ctx, t)
		if err == nil {
			var kc kvpb.KVClient
			kc, err = c.KVClient(t.node)
			if err == nil {
				_, err = kc.TxnCommit(ctx, &kvpb.TxnCommitRequest{Shard: uint64(shard.ID), TxnId: t.id, Ops: t.writes})
				err = kvapi.FromStatus(err)
			}
			if err == nil {
				return attempt, nil
			}
		} else if kc, kerr := c.KVClient(t.node); kerr == nil {
			_, _ = kc.TxnAbort(ctx, &kvpb.TxnAbortRequest{Shard: uint64(shard.ID), TxnId: t.id})
		}
		if retry, _ := retryable(err, false); !errors.Is(err, kvapi.ErrTxnAborted) && !retry {
			return attempt, err
		}
		select {
		case <-base.After(c.opts.Clock, time.Duration(attempt)*time.Millisecond):
		case <-ctx.Done():
			return attempt, ctx.Err()
		}
	}
	return c.opts.TxnRetries, fmt.Errorf("kv: transaction aborted %d times: %w", c.opts.TxnRetries, kvapi.ErrTxnAborted)
}
