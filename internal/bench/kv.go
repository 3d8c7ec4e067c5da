package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

// KV operations (KVOptions.Op).
const (
	KVOpPut   = "put"
	KVOpGet   = "get"
	KVOpRange = "range" // a scan of RangeKeys consecutive keys
)

// KV is the key-value store a KV run drives: kvclient.Client through
// KVClient, or a fake in tests.
type KV interface {
	Put(ctx context.Context, key, value []byte) error
	// Get returns the value (strongly consistent).
	Get(ctx context.Context, key []byte) (value []byte, found bool, err error)
	// Scan returns up to limit pairs from start on, below end.
	Scan(ctx context.Context, start, end []byte, limit int) (keys, values [][]byte, err error)
}

// KVClient adapts the KV store's Go client.
func KVClient(c *kvclient.Client) KV { return kvAdapter{c} }

type kvAdapter struct{ c *kvclient.Client }

func (a kvAdapter) Put(ctx context.Context, key, value []byte) error {
	_, err := a.c.Put(ctx, key, value)
	return err
}

func (a kvAdapter) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	return a.c.Get(ctx, key, kvclient.Strong())
}

func (a kvAdapter) Scan(ctx context.Context, start, end []byte, limit int) ([][]byte, [][]byte, error) {
	rows, err := a.c.Scan(ctx, start, end, limit, kvclient.Strong())
	keys, values := make([][]byte, len(rows)), make([][]byte, len(rows))
	for i, r := range rows {
		keys[i], values[i] = r.Key, r.Value
	}
	return keys, values, err
}

// KVOptions configures a KV run. Zero values take the defaults noted.
type KVOptions struct {
	Op          string
	ValueSize   int // bytes per value (default 800)
	Keys        int // distinct keys (default 5000)
	RangeKeys   int // keys per range read (default 10)
	Concurrency int // workers (default 1)
	Duration    time.Duration
	// Prefix of the keys (default "bench/<seed>/").
	Prefix string
	Seed   int64
	// Loaded skips the loading of get and range runs: an earlier run with
	// the same Prefix, Seed, Keys and ValueSize wrote every key.
	Loaded bool
}

func (o *KVOptions) defaults() error {
	switch o.Op {
	case KVOpPut, KVOpGet, KVOpRange:
	default:
		return base.InvalidArgumentf("bench: KV operation %q (want put, get or range)", o.Op)
	}
	if o.ValueSize == 0 {
		o.ValueSize = 800
	}
	if o.Keys == 0 {
		o.Keys = 5000
	}
	if o.RangeKeys == 0 {
		o.RangeKeys = 10
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("bench/%d/", o.Seed)
	}
	switch {
	case o.ValueSize < 8 || o.ValueSize > 1<<20:
		return base.InvalidArgumentf("bench: value size %d outside [8, 1 MiB]", o.ValueSize)
	case o.Keys < 1:
		return base.InvalidArgumentf("bench: %d keys", o.Keys)
	case o.RangeKeys < 1 || o.RangeKeys > 10000:
		return base.InvalidArgumentf("bench: %d keys per range outside [1, 10000]", o.RangeKeys)
	case o.Concurrency < 1 || o.Concurrency > 4096:
		return base.InvalidArgumentf("bench: concurrency %d outside [1, 4096]", o.Concurrency)
	case o.Duration < 0:
		return base.InvalidArgumentf("bench: negative duration %s", o.Duration)
	}
	return nil
}

// kvData is a run's keys and values. Key i is "<b>/<prefix>key-<i>" with
// b a letter (a-z) for 26 consecutive slices of the keys, so that the keys
// spread over shards cut at letters yet sort in index order; key i's value
// is a window of one random block starting at i mod 1024, its first 8
// bytes the key's index, so a value read back is checked without holding
// every value.
type kvData struct {
	prefix string
	block  []byte
	size   int
	keys   int
}

func (d kvData) bucket(i int) byte { return byte('a' + i*26/d.keys) }

func (d kvData) key(i int) []byte {
	return []byte(fmt.Sprintf("%c/%skey-%08d", d.bucket(i), d.prefix, i))
}

// rangeFrom is where a scan from key i stops (exclusive: the end of i's
// letter slice, no other run's keys inside) and how many rows it must
// return for a limit of n.
func (d kvData) rangeFrom(i, n int) (end []byte, want int) {
	want = 1
	for want < n && i+want < d.keys && d.bucket(i+want) == d.bucket(i) {
		want++
	}
	return []byte(fmt.Sprintf("%c/%skey-\xff", d.bucket(i), d.prefix)), want
}

func (d kvData) value(i int) []byte {
	v := append([]byte(nil), d.block[i%1024:i%1024+d.size]...)
	binary.LittleEndian.PutUint64(v, uint64(i))
	return v
}

// RunKV loads the keys (for get and range runs, before the clock starts),
// runs the workers for the duration and returns the figures: ops/s,
// latency percentiles, and the value bytes moved per second. A value read
// back that differs from what was written fails the run.
func RunKV(ctx context.Context, kv KV, o KVOptions) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	rng := rand.New(rand.NewSource(o.Seed))
	d := kvData{prefix: o.Prefix, block: make([]byte, 1024+o.ValueSize), size: o.ValueSize, keys: o.Keys}
	rng.Read(d.block)
	if o.Op != KVOpPut && !o.Loaded {
		if err := kvLoad(ctx, kv, d, o); err != nil {
			return Result{}, err
		}
	}
	var mu sync.Mutex
	var samples []sample
	var wrong error
	var moved int64
	start := time.Now()
	deadline := start.Add(o.Duration)
	var wg sync.WaitGroup
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			wrng := rand.New(rand.NewSource(o.Seed + int64(w) + 1))
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := wrng.Intn(o.Keys)
				t0 := time.Now()
				var err, bad error
				n := 1
				switch o.Op {
				case KVOpPut:
					err = kv.Put(ctx, d.key(i), d.value(i))
				case KVOpGet:
					var v []byte
					var found bool
					v, found, err = kv.Get(ctx, d.key(i))
					if err == nil && (!found || !bytes.Equal(v, d.value(i))) {
						bad = fmt.Errorf("bench: KV get %s: found %v, %d bytes, not the value written", d.key(i), found, len(v))
					}
				case KVOpRange:
					var keys, values [][]byte
					end, want := d.rangeFrom(i, o.RangeKeys)
					keys, values, err = kv.Scan(ctx, d.key(i), end, o.RangeKeys)
					n = len(keys)
					if err == nil {
						bad = checkRange(d, i, want, keys, values)
					}
				}
				lat := time.Since(t0)
				mu.Lock()
				if bad != nil && wrong == nil {
					wrong = bad
				}
				samples = append(samples, sample{get: o.Op != KVOpPut, latency: lat, err: err})
				if err == nil {
					moved += int64(n * o.ValueSize)
				}
				mu.Unlock()
				if bad != nil {
					return
				}
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if wrong != nil {
		return Result{}, wrong
	}
	r := Summarize(samples, elapsed, 0)
	r.Bytes = moved
	if r.DurationS > 0 {
		r.ThroughputBytesPerS = float64(moved) / r.DurationS
	}
	r.Store, r.Op, r.SizeBytes, r.Concurrency, r.CPUs = "kv", o.Op, o.ValueSize, o.Concurrency, runtime.NumCPU()
	return r, ctx.Err()
}

// checkRange checks a scan from key i: want consecutive keys with their
// values.
func checkRange(d kvData, i, want int, keys, values [][]byte) error {
	if len(keys) != want || len(values) != want {
		return fmt.Errorf("bench: KV range from %s: %d keys, want %d", d.key(i), len(keys), want)
	}
	for k := range keys {
		if !bytes.Equal(keys[k], d.key(i+k)) || !bytes.Equal(values[k], d.value(i+k)) {
			return fmt.Errorf("bench: KV range from %s: row %d is %q, not the key and value written", d.key(i), k, keys[k])
		}
	}
	return nil
}

// kvLoad writes every key once, Concurrency writers at a time. A put that
// fails is tried again, up to loadTries in all (writing the same value
// twice is harmless): the loading must complete for the run to check its
// reads.
const loadTries = 3

func kvLoad(ctx context.Context, kv KV, d kvData, o KVOptions) error {
	var wg sync.WaitGroup
	errs := make(chan error, o.Concurrency)
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < o.Keys; i += o.Concurrency {
				var err error
				for try := 0; try < loadTries && ctx.Err() == nil; try++ {
					if err = kv.Put(ctx, d.key(i), d.value(i)); err == nil {
						break
					}
				}
				if err != nil {
					errs <- fmt.Errorf("bench: loading %s (%d tries): %w", d.key(i), loadTries, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	return <-errs
}
