// Package client is flashmend's public Go client: objects (put, get, stat,
// list, delete) and the replicated KV store, for programs in other modules.
//
// It is a thin, stable facade over the client flashmend's own tools use
// (internal/client and internal/kv/kvclient): every read runs DIRECT's
// repair loop (a chunk that fails its checksum is served from redundancy
// and rewritten on the node that had it wrong), every write is verified by
// the nodes before it is acknowledged. The types here are plain Go values
// (no generated protobuf types), so that the internal wire format can
// change without breaking callers.
//
// Connect with Dial to a cluster's endpoint (the coordinator's address,
// which `flashmend dev` prints and writes to DIR/endpoint). Errors wrap
// the sentinels below: test them with errors.Is.
package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	iclient "github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/tlsconf"
)

// Errors the client's errors wrap (test with errors.Is).
var (
	// ErrNotFound: no such object (or, for KV, no layout yet).
	ErrNotFound = fs.ErrNotExist
	// ErrInvalidArgument: the request was malformed (a key that is not
	// UTF-8, an object over the cluster's size limit, an unknown option).
	ErrInvalidArgument = base.ErrInvalidArgument
	// ErrNoSpace: no node could take the write.
	ErrNoSpace = base.ErrNoSpace
	// ErrDataLoss: no redundant copy of some data verifies; nothing wrong
	// is ever returned in its place.
	ErrDataLoss = base.ErrDataLoss
)

// Redundancy is how an object is stored.
type Redundancy int

const (
	// Replicated stores three full copies (REP).
	Replicated Redundancy = iota + 1
	// ErasureCoded stores Reed-Solomon 4+2 shards (EC): 1.5x the bytes,
	// any two shards may be lost.
	ErasureCoded
)

func (r Redundancy) String() string {
	switch r {
	case Replicated:
		return "rep"
	case ErasureCoded:
		return "ec"
	}
	return fmt.Sprintf("Redundancy(%d)", int(r))
}

func (r Redundancy) proto() (objectpb.Redundancy, error) {
	switch r {
	case Replicated, 0:
		return objectpb.Redundancy_REP, nil
	case ErasureCoded:
		return objectpb.Redundancy_EC, nil
	}
	return 0, base.InvalidArgumentf("unknown redundancy %d", int(r))
}

func redundancyOf(r objectpb.Redundancy) Redundancy {
	if r == objectpb.Redundancy_EC {
		return ErasureCoded
	}
	return Replicated
}

// Options configures a Client. The zero value is the default.
type Options struct {
	// ChunksInFlight bounds the concurrent chunk requests of one
	// operation (default 16).
	ChunksInFlight int
	// RPCTimeout bounds each chunk request (default 30s).
	RPCTimeout time.Duration
	// WindowBytes bounds the object bytes one streamed put or get (PutReader,
	// GetTo, Open) holds in memory, whatever the object's size (default
	// 8 MiB).
	WindowBytes int64
	// TLS, when set, connects over TLS: to the coordinator and to every
	// storage node (objects and KV), verified against TLS.RootCAs (the
	// cluster's CA; nil: the system's roots), presenting
	// TLS.Certificates[0] to servers that require a client certificate
	// (mutual TLS). Nil: plaintext.
	TLS *tls.Config
}

// Client is a connection to a flashmend cluster. It is safe for concurrent
// use.
type Client struct {
	c *iclient.Client
}

// Dial connects to the cluster whose coordinator listens at endpoint
// (host:port).
func Dial(ctx context.Context, endpoint string, opts Options) (*Client, error) {
	c, err := iclient.Dial(ctx, endpoint, iclient.Options{ChunksInFlight: opts.ChunksInFlight, RPCTimeout: opts.RPCTimeout, WindowBytes: opts.WindowBytes,
		TLS: tlsconf.FromClientTLS(opts.TLS)})
	if err != nil {
		return nil, err
	}
	return &Client{c: c}, nil
}

// Close releases the client's connections.
func (c *Client) Close() error { return c.c.Close() }

// MaxObjectBytes is the largest object the cluster accepts.
func (c *Client) MaxObjectBytes() int64 { return c.c.ClusterInfo().MaxObjectBytes }

// ObjectInfo describes one version of an object.
type ObjectInfo struct {
	Key string
	// Version is 1 for a key's first version and grows by one with each
	// overwrite (it starts again at 1 after a delete).
	Version    uint64
	Size       int64
	Redundancy Redundancy
	Created    time.Time
}

func (o ObjectInfo) String() string {
	return fmt.Sprintf("%s version %d %dB %s", o.Key, o.Version, o.Size, o.Redundancy)
}

func infoOf(rec *objectpb.ObjectRecord) ObjectInfo {
	return ObjectInfo{Key: rec.Key, Version: rec.KeyVersion, Size: rec.SizeBytes, Redundancy: redundancyOf(rec.Redundancy),
		Created: time.UnixMilli(rec.CreatedUnixMs)}
}

// PutOptions are a write's options; nil takes the defaults.
type PutOptions struct {
	// Redundancy defaults to Replicated.
	Redundancy Redundancy
}

// Put writes data as a new version of key. It returns once every chunk is
// durable and verified on every replica or shard and the version is
// visible.
func (c *Client) Put(ctx context.Context, key string, data []byte, opts *PutOptions) (ObjectInfo, error) {
	var red Redundancy
	if opts != nil {
		red = opts.Redundancy
	}
	pr, err := red.proto()
	if err != nil {
		return ObjectInfo{}, err
	}
	rec, err := c.c.Put(ctx, key, data, pr)
	if err != nil {
		return ObjectInfo{}, err
	}
	return infoOf(rec), nil
}

// PutReader writes the bytes src yields as a new version of key,
// streaming: memory stays within Options.WindowBytes whatever the size.
// size is the number of bytes src yields, or -1 when unknown (src is read
// to io.EOF). When a node fails mid-write the write is placed again from
// the start of src if src is an io.Seeker (a file is); otherwise it fails.
func (c *Client) PutReader(ctx context.Context, key string, src io.Reader, size int64, opts *PutOptions) (ObjectInfo, error) {
	var red Redundancy
	if opts != nil {
		red = opts.Redundancy
	}
	pr, err := red.proto()
	if err != nil {
		return ObjectInfo{}, err
	}
	rec, err := c.c.PutReader(ctx, key, src, size, pr)
	if err != nil {
		return ObjectInfo{}, err
	}
	return infoOf(rec), nil
}

// GetTo streams the current version of key to w, verified bytes only and
// in order, within Options.WindowBytes of memory. If it fails after bytes
// reached w, w holds a prefix of the object.
func (c *Client) GetTo(ctx context.Context, key string, w io.Writer) (ObjectInfo, ReadReport, error) {
	rec, rep, err := c.c.GetTo(ctx, key, iclient.ModeDefault, w)
	var info ObjectInfo
	if rec != nil {
		info = infoOf(rec)
	}
	return info, reportOf(rep), err
}

// ObjectReader streams one object (Open). Read returns verified bytes
// only; a read that cannot be verified or repaired ends with its error
// instead of io.EOF.
type ObjectReader struct {
	r *iclient.ObjectReader
}

// Open starts streaming the current version of key; Close the reader.
func (c *Client) Open(ctx context.Context, key string) (*ObjectReader, error) {
	r, err := c.c.Open(ctx, key, iclient.ModeDefault)
	if err != nil {
		return nil, err
	}
	return &ObjectReader{r: r}, nil
}

// Read reads verified object bytes.
func (r *ObjectReader) Read(p []byte) (int, error) { return r.r.Read(p) }

// Close stops the read (if not finished) and releases it.
func (r *ObjectReader) Close() error { return r.r.Close() }

// Info and Report describe the version read and what the read repaired;
// they are set once Read returned io.EOF or an error.
func (r *ObjectReader) Info() ObjectInfo {
	if rec := r.r.Record(); rec != nil {
		return infoOf(rec)
	}
	return ObjectInfo{}
}

// Report: see Info.
func (r *ObjectReader) Report() ReadReport { return reportOf(r.r.Report()) }

// ReadReport says what a read found and repaired on its way.
type ReadReport struct {
	// Repaired counts chunks rewritten on the nodes that had them wrong
	// or missing; Voted the chunks no replica of which verified, rebuilt
	// by majority vote; Reconstructed the erasure-coded rows rebuilt from
	// parity.
	Repaired, Voted, Reconstructed int
	// RepairFailed counts repairs that could not be written (the data
	// returned is still correct; the next read or scrub repairs them).
	RepairFailed int
}

// Get returns the current version of key. Damage a read meets is repaired
// from redundancy; data that cannot be verified is never returned
// (ErrDataLoss).
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	data, _, err := c.GetWithReport(ctx, key)
	return data, err
}

// GetWithReport is Get, saying what the read repaired.
func (c *Client) GetWithReport(ctx context.Context, key string) ([]byte, ReadReport, error) {
	data, rep, err := c.c.GetWithReport(ctx, key, iclient.ModeDefault)
	return data, reportOf(rep), err
}

func reportOf(rep *iclient.ReadReport) ReadReport {
	if rep == nil {
		return ReadReport{}
	}
	return ReadReport{Repaired: rep.Repaired, Voted: rep.Voted, Reconstructed: rep.Reconstructed, RepairFailed: rep.RepairFailed}
}

// Stat describes the current version of key.
func (c *Client) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	rec, err := c.c.Stat(ctx, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	return infoOf(rec), nil
}

// Delete removes key (its storage is reclaimed in the background). A key
// that does not exist is ErrNotFound.
func (c *Client) Delete(ctx context.Context, key string) error { return c.c.Delete(ctx, key) }

// List describes every object whose key starts with prefix, in key order.
func (c *Client) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	recs, err := c.c.List(ctx, prefix)
	out := make([]ObjectInfo, 0, len(recs))
	for _, r := range recs {
		out = append(out, infoOf(r))
	}
	return out, err
}

// KV is a client of the cluster's replicated key-value store (raft shards
// on the storage nodes). Reads are linearizable; a replica that reports
// corruption is skipped and repaired through the raft log.
type KV struct {
	c *kvclient.Client
}

// KV connects to the cluster's KV store. Without a KV layout (the cluster
// was started without one and 'flashmend ctl kv init' has not run) the
// error wraps ErrNotFound. Close the KV when done.
func (c *Client) KV(ctx context.Context) (*KV, error) {
	kc, err := c.c.KVClient(ctx, kvclient.Options{})
	if err != nil {
		return nil, err
	}
	return &KV{c: kc}, nil
}

// Close releases the KV client's connections.
func (k *KV) Close() error { return k.c.Close() }

// Get returns key's value and whether it exists.
func (k *KV) Get(ctx context.Context, key []byte) (value []byte, found bool, err error) {
	return k.c.Get(ctx, key)
}

// Put sets key to value.
func (k *KV) Put(ctx context.Context, key, value []byte) error {
	_, err := k.c.Put(ctx, key, value)
	return err
}

// Delete removes key (deleting a missing key is not an error).
func (k *KV) Delete(ctx context.Context, key []byte) error {
	_, err := k.c.Delete(ctx, key)
	return err
}

// CompareAndSet sets key to value if it holds old (old nil: if it is
// absent) and reports whether it did.
func (k *KV) CompareAndSet(ctx context.Context, key, old, value []byte) (bool, error) {
	return k.c.CompareAndSet(ctx, key, old, value)
}

// KeyValue is one row of a Scan.
type KeyValue struct {
	Key, Value []byte
}

// Scan returns the rows with start <= key < end (end nil: to the end of
// the key space), in key order, at most limit of them (0: no limit).
func (k *KV) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	if limit < 0 {
		return nil, base.InvalidArgumentf("scan limit %d is negative", limit)
	}
	rows, err := k.c.Scan(ctx, start, end, limit)
	out := make([]KeyValue, 0, len(rows))
	for _, r := range rows {
		out = append(out, KeyValue{Key: r.Key, Value: r.Value})
	}
	return out, err
}
