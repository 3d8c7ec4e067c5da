package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/klauspost/reedsolomon"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/tlsconf"
	"github.com/flashmend/flashmend/internal/wire"
)

// Read modes.
const (
	ModeDefault = ""       // the cluster's configured mode
	ModeDirect  = "direct" // DIRECT chunk repair
	ModeHDFS    = "hdfs"   // baseline: fail over, re-replicate whole objects
)

// Options configures a client. Zero values take the defaults noted.
type Options struct {
	// ReadMode overrides the cluster's read mode for this client.
	ReadMode string
	// ChunksInFlight bounds concurrent chunk RPCs per operation (default 16).
	ChunksInFlight int
	// WindowBytes bounds the object bytes one streamed PUT or GET holds
	// (default DefaultWindowBytes; at least two chunks or EC rows): a GET
	// fetches and verifies at most this far ahead of the bytes it has
	// delivered, a PUT has at most this much read from its source and not
	// yet acknowledged by every node. The package doc states the resulting
	// memory bound per request.
	WindowBytes int64
	// RPCTimeout bounds each chunk RPC (default 30s).
	RPCTimeout time.Duration
	// WriteAttempts is how many placements a write tries (default 3).
	WriteAttempts int
	// Logf receives operational messages; nil discards them.
	Logf func(format string, args ...any)
	// Clock stamps the blob entries a write records on the nodes and
	// dates the membership view (default the system clock).
	Clock base.Clock
	// OnRepair, when set, is called after each repair write this client
	// attempts (metrics: internal/metrics). It must not block.
	OnRepair func(RepairEvent)
	// TLS secures the connections to the coordinator and the nodes (and
	// the KV clients KVClient makes); nil: plaintext.
	TLS *tlsconf.Config
	// NodeDialOptions, when set, adds options to the connections to the
	// nodes: the coordinator's own client names itself with them, so that
	// the reliability harness can cut it off from a node
	// (internal/netfault).
	NodeDialOptions []grpc.DialOption
}

// DefaultWindowBytes is Options.WindowBytes' default.
const DefaultWindowBytes = 8 << 20

// Client is a flashmend client. It is safe for concurrent use.
type Client struct {
	opts    Options
	conn    *grpc.ClientConn
	coord   coordpb.CoordinatorClient
	info    *coordpb.ClusterInfoResponse
	enc     reedsolomon.Encoder
	bg      sync.WaitGroup
	bgCtx   context.Context
	bgStop  context.CancelFunc
	connMu  sync.Mutex
	conns   map[string]*grpc.ClientConn
	nodesMu sync.Mutex
	nodes   map[uint64]*coordpb.NodeInfo
	nodesAt time.Time
}

// Dial connects to the cluster whose coordinator listens at endpoint.
func Dial(ctx context.Context, endpoint string, opts Options) (*Client, error) {
	if endpoint == "" {
		return nil, base.InvalidArgumentf("client: empty endpoint (use --endpoint or FLASHMEND_ENDPOINT)")
	}
	if opts.ReadMode != ModeDefault && opts.ReadMode != ModeDirect && opts.ReadMode != ModeHDFS {
		return nil, base.InvalidArgumentf("client: unknown read mode %q", opts.ReadMode)
	}
	if opts.ChunksInFlight <= 0 {
		opts.ChunksInFlight = 16
	}
	if opts.WindowBytes <= 0 {
		opts.WindowBytes = DefaultWindowBytes
	}
	if opts.RPCTimeout <= 0 {
		opts.RPCTimeout = 30 * time.Second
	}
	if opts.WriteAttempts <= 0 {
		opts.WriteAttempts = 3
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Clock == nil {
		opts.Clock = base.SystemClock{}
	}
	conn, err := grpc.NewClient(endpoint, opts.TLS.DialOption())
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c := &Client{opts: opts, conn: conn, coord: coordpb.NewCoordinatorClient(conn), conns: map[string]*grpc.ClientConn{}}
	c.bgCtx, c.bgStop = context.WithCancel(context.Background())
	// NB: fail fast (no WaitForReady): a refused or unresolvable endpoint
	// fails the first call at once instead of retrying until the deadline.
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c.info, err = c.coord.ClusterInfo(ictx, &coordpb.ClusterInfoRequest{})
	if err != nil {
		conn.Close()
		if code := status.Code(err); code == codes.Unavailable || code == codes.DeadlineExceeded {
			reason, isTLS := unreachableReason(opts.TLS, err)
			return nil, &UnreachableError{Endpoint: endpoint, Reason: reason, TLS: isTLS}
		}
		return nil, fmt.Errorf("client: coordinator at %s: %w", endpoint, wire.FromStatus(err))
	}
	enc, err := reedsolomon.New(4, 2)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.enc = enc
	return c, nil
}

// checkUTF8 refuses a key that is not valid UTF-8 before it reaches the
// wire: keys are protobuf strings, and gRPC would refuse to marshal it with
// an internal error (the coordinator refuses such keys too, ValidateKey).
func checkUTF8(what, s string) error {
	if !utf8.ValidString(s) {
		return base.InvalidArgumentf("%s %q is not valid UTF-8 (keys are text)", what, s)
	}
	return nil
}

// UnreachableError is Dial's error when nothing answers at the endpoint.
type UnreachableError struct {
	Endpoint string
	// Reason is the cause in a few words ("connection refused", "no such
	// host", ...), without gRPC's wrapping.
	Reason string
	// TLS is set when the cause is a TLS mismatch between client and
	// server (Reason says what to change).
	TLS bool
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach a flashmend coordinator at %s: %s", e.Endpoint, e.Reason)
}

// unreachableReason reduces a gRPC connection error to its cause.
func unreachableReason(tc *tlsconf.Config, err error) (reason string, isTLS bool) {
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
		if st.Code() == codes.DeadlineExceeded {
			return "no answer before the deadline", false
		}
	}
	if reason, ok := tlsconf.Explain(tc, msg); ok {
		return reason, true
	}
	return unreachableCause(msg), false
}

// unreachableCause reduces a connection error's message to its cause.
func unreachableCause(msg string) string {
	for _, known := range []string{"connection refused", "no such host", "produced zero addresses",
		"connection reset by peer", "i/o timeout", "network is unreachable", "missing port in address",
		"too many colons in address", "invalid port", "EOF"} {
		if strings.Contains(msg, known) {
			if known == "produced zero addresses" {
				return "the host name does not resolve"
			}
			return known
		}
	}
	// The innermost part of a nested "desc = ...: ..." message.
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	return strings.Trim(msg, `"`)
}

// Close waits for background re-replications and closes connections.
func (c *Client) Close() error {
	c.bg.Wait()
	c.bgStop()
	c.connMu.Lock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.connMu.Unlock()
	return c.conn.Close()
}

// ClusterInfo returns what the coordinator said at Dial.
func (c *Client) ClusterInfo() *coordpb.ClusterInfoResponse { return c.info }

// readMode resolves the mode of a read.
func (c *Client) readMode(mode string) (string, error) {
	switch mode {
	case ModeDirect, ModeHDFS:
		return mode, nil
	case ModeDefault:
		if c.opts.ReadMode != ModeDefault {
			return c.opts.ReadMode, nil
		}
		return c.info.ReadMode, nil
	}
	return "", base.InvalidArgumentf("unknown read mode %q", mode)
}

// Nodes lists the cluster's members with liveness and statistics.
func (c *Client) Nodes(ctx context.Context) ([]*coordpb.NodeInfo, error) {
	resp, err := c.coord.ListNodes(ctx, &coordpb.ListNodesRequest{})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	c.nodesMu.Lock()
	c.nodes = map[uint64]*coordpb.NodeInfo{}
	for _, n := range resp.Nodes {
		c.nodes[n.Id] = n
	}
	c.nodesAt = c.opts.Clock.Now()
	c.nodesMu.Unlock()
	return resp.Nodes, nil
}

// nodeInfo returns a member, refreshing the membership view when it is
// older than a second or the node is unknown.
func (c *Client) nodeInfo(ctx context.Context, id uint64) (*coordpb.NodeInfo, error) {
	c.nodesMu.Lock()
	n, ok := c.nodes[id]
	fresh := c.opts.Clock.Now().Sub(c.nodesAt) < time.Second
	c.nodesMu.Unlock()
	if ok && fresh {
		return n, nil
	}
	if _, err := c.Nodes(ctx); err != nil {
		return nil, err
	}
	c.nodesMu.Lock()
	defer c.nodesMu.Unlock()
	if n, ok := c.nodes[id]; ok {
		return n, nil
	}
	return nil, base.InvalidArgumentf("unknown node %d", id)
}

// errNodeDown marks a node the coordinator does not see as live.
var errNodeDown = errors.New("node is down")

// nodeClient returns a client for a live member.
func (c *Client) nodeClient(ctx context.Context, id uint64) (nodepb.NodeClient, error) {
	return c.memberClient(ctx, id, true)
}

// memberClient returns a client for a member; with requireLive a member
// whose lease has expired is refused. Reads do not require a lease: a
// loaded node that missed a heartbeat can still serve its chunks, and a
// dead one fails fast.
func (c *Client) memberClient(ctx context.Context, id uint64, requireLive bool) (nodepb.NodeClient, error) {
	n, err := c.nodeInfo(ctx, id)
	if err != nil {
		return nil, err
	}
	if requireLive && !n.Live {
		return nil, fmt.Errorf("node %d: %w", id, errNodeDown)
	}
	c.connMu.Lock()
	defer c.connMu.Unlock()
	conn, ok := c.conns[n.Addr]
	if !ok {
		// Chunk messages take buffers from the data path's pool (wire).
		conn, err = grpc.NewClient(n.Addr, append([]grpc.DialOption{c.opts.TLS.DialOption(),
			experimental.WithBufferPool(wire.ChunkBufferPool)}, append(wire.DataPathDialOptions(), c.opts.NodeDialOptions...)...)...)
		if err != nil {
			return nil, err
		}
		c.conns[n.Addr] = conn
	}
	return nodepb.NewNodeClient(conn), nil
}

// Stat returns a key's current version record.
func (c *Client) Stat(ctx context.Context, key string) (*objectpb.ObjectRecord, error) {
	if err := checkUTF8("object key", key); err != nil {
		return nil, err
	}
	resp, err := c.coord.Lookup(ctx, &coordpb.LookupRequest{Key: key})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	return resp.Record, nil
}

// Delete removes a key. Its chunks are collected by the coordinator.
func (c *Client) Delete(ctx context.Context, key string) error {
	_, err := c.DeleteKey(ctx, key)
	return err
}

// DeleteKey is Delete, returning the version it removed.
func (c *Client) DeleteKey(ctx context.Context, key string) (*objectpb.ObjectRecord, error) {
	if err := checkUTF8("object key", key); err != nil {
		return nil, err
	}
	resp, err := c.coord.Delete(ctx, &coordpb.DeleteRequest{Key: key})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	return resp.Record, nil
}

// List returns every record whose key starts with prefix, in key order.
func (c *Client) List(ctx context.Context, prefix string) ([]*objectpb.ObjectRecord, error) {
	if err := checkUTF8("key prefix", prefix); err != nil {
		return nil, err
	}
	var out []*objectpb.ObjectRecord
	after := ""
	for {
		resp, err := c.coord.List(ctx, &coordpb.ListRequest{Prefix: prefix, StartAfter: after, Limit: 1000})
		if err != nil {
			return out, wire.FromStatus(err)
		}
		out = append(out, resp.Records...)
		if len(resp.Records) < 1000 {
			return out, nil
		}
		after = resp.Records[len(resp.Records)-1].Key
	}
}

// NodeStats returns every live node's device statistics.
func (c *Client) NodeStats(ctx context.Context) ([]*nodepb.StatsResponse, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []*nodepb.StatsResponse
	for _, n := range nodes {
		if !n.Live {
			continue
		}
		nc, err := c.nodeClient(ctx, n.Id)
		if err != nil {
			return out, err
		}
		st, err := nc.Stats(ctx, &nodepb.StatsRequest{})
		if err != nil {
			return out, fmt.Errorf("node %d: %w", n.Id, wire.FromStatus(err))
		}
		out = append(out, st)
	}
	return out, nil
}

// NodeReport is a member as the coordinator lists it (with the figures of
// its last heartbeat) and, when the node answered, its own figures now.
type NodeReport struct {
	Info *coordpb.NodeInfo
	// Stats is nil when the node is down or did not answer; Err says why
	// for a node the coordinator sees as live.
	Stats *nodepb.StatsResponse
	Err   error
}

// NodeReports lists the members and asks every live one for its
// statistics (with its repair history when withHistory), in parallel, each
// call bounded by perNode: a node that does not answer costs at most that
// and is reported with the figures of its last heartbeat.
func (c *Client) NodeReports(ctx context.Context, withHistory bool, perNode time.Duration) ([]NodeReport, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]NodeReport, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		out[i].Info = n
		if !n.Live {
			continue
		}
		wg.Add(1)
		go func(r *NodeReport) {
			defer wg.Done()
			nc, err := c.nodeClient(ctx, r.Info.Id)
			if err != nil {
				r.Err = err
				return
			}
			cctx, cancel := context.WithTimeout(ctx, perNode)
			defer cancel()
			st, err := nc.Stats(cctx, &nodepb.StatsRequest{WithHistory: withHistory})
			if err != nil {
				r.Err = fmt.Errorf("node %d: %w", r.Info.Id, wire.FromStatus(err))
				return
			}
			r.Stats = st
		}(&out[i])
	}
	wg.Wait()
	return out, nil
}

// InjectUBER sets a node's injected bit error rate on reads.
func (c *Client) InjectUBER(ctx context.Context, id uint64, rate float64, persistent bool) error {
	nc, err := c.nodeClient(ctx, id)
	if err != nil {
		return err
	}
	_, err = nc.InjectUBER(ctx, &nodepb.InjectUBERRequest{Rate: rate, Persistent: persistent})
	return wire.FromStatus(err)
}

// Fill fills a node's emulated flash device with ballast until at most
// leave bytes are free (the reliability harness's "device full" fault),
// and returns the ballast and free bytes; Unfill removes the ballast.
func (c *Client) Fill(ctx context.Context, id uint64, leave base.Bytes) (ballast, free base.Bytes, err error) {
	if leave < 0 {
		return 0, 0, base.InvalidArgumentf("fill: leave %d bytes is negative", leave)
	}
	nc, err := c.nodeClient(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	resp, err := nc.Fill(ctx, &nodepb.FillRequest{Fill: true, LeaveBytes: uint64(leave)})
	if err != nil {
		return 0, 0, wire.FromStatus(err)
	}
	return base.Bytes(resp.BallastBytes), base.Bytes(resp.FreeBytes), nil
}

// Unfill removes the ballast Fill wrote on a node's device.
func (c *Client) Unfill(ctx context.Context, id uint64) (free base.Bytes, err error) {
	nc, err := c.nodeClient(ctx, id)
	if err != nil {
		return 0, err
	}
	resp, err := nc.Fill(ctx, &nodepb.FillRequest{})
	if err != nil {
		return 0, wire.FromStatus(err)
	}
	return base.Bytes(resp.FreeBytes), nil
}

// FailDie fails one die of a node's emulated flash device.
func (c *Client) FailDie(ctx context.Context, id uint64, die int) error {
	if die < 0 {
		return base.InvalidArgumentf("die %d is negative", die)
	}
	nc, err := c.nodeClient(ctx, id)
	if err != nil {
		return err
	}
	_, err = nc.FailDie(ctx, &nodepb.FailDieRequest{Die: int32(die)})
	return wire.FromStatus(err)
}
