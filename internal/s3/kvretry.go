package s3

import (
	"bytes"
	"context"
	"errors"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

// kvAttempts bounds the tries of one KV operation.
const kvAttempts = 3

// retryKV is the gateway's KV store: the KV client's operations, each sent
// again when its outcome is unknown (a proposal not applied within its
// deadline on a loaded machine, a leader change), up to kvAttempts times.
// Reads, puts and deletes are idempotent; a compare-and-set or conditional
// delete whose earlier attempt may have applied is resolved by reading the
// key back.
type retryKV struct {
	c    *kvclient.Client
	logf func(format string, args ...any)
}

// retryable reports whether err leaves the outcome unknown.
func retryable(err error) bool {
	return err != nil && !base.IsInvalidArgument(err) && !errors.Is(err, kvapi.ErrConditionFailed)
}

func (k *retryKV) do(ctx context.Context, what string, op func() error) error {
	var err error
	for attempt := 1; attempt <= kvAttempts; attempt++ {
		if err = op(); !retryable(err) || ctx.Err() != nil {
			return err
		}
		if attempt < kvAttempts {
			k.logf("s3: kv %s: %v (trying again)", what, err)
		}
	}
	return err
}

func (k *retryKV) Get(ctx context.Context, key []byte) (v []byte, found bool, err error) {
	err = k.do(ctx, "get", func() (err error) { v, found, err = k.c.Get(ctx, key); return err })
	return v, found, err
}

func (k *retryKV) Scan(ctx context.Context, start, end []byte, limit int) (rows []kvclient.KeyValue, err error) {
	err = k.do(ctx, "scan", func() (err error) { rows, err = k.c.Scan(ctx, start, end, limit); return err })
	return rows, err
}

func (k *retryKV) Put(ctx context.Context, key, value []byte) (uint64, error) {
	var idx uint64
	err := k.do(ctx, "put", func() (err error) { idx, err = k.c.Put(ctx, key, value); return err })
	return idx, err
}

func (k *retryKV) Delete(ctx context.Context, key []byte) (uint64, error) {
	var idx uint64
	err := k.do(ctx, "delete", func() (err error) { idx, err = k.c.Delete(ctx, key); return err })
	return idx, err
}

// CompareAndSet is kvclient's; a swap that fails after an attempt with an
// unknown outcome counts as done when the key holds value.
func (k *retryKV) CompareAndSet(ctx context.Context, key, old, value []byte) (bool, error) {
	var swapped, unknown bool
	err := k.do(ctx, "compare-and-set", func() (err error) {
		swapped, err = k.c.CompareAndSet(ctx, key, old, value)
		unknown = unknown || retryable(err)
		return err
	})
	if err == nil && !swapped && unknown {
		cur, found, gerr := k.Get(ctx, key)
		if gerr != nil {
			return false, gerr
		}
		swapped = found && bytes.Equal(cur, value)
	}
	return swapped, err
}

// DeleteIf deletes key if it holds value; false when it does not. A
// delete that fails its condition after an attempt with an unknown
// outcome counts as done when the key is gone.
func (k *retryKV) DeleteIf(ctx context.Context, key, value []byte) (bool, error) {
	unknown := false
	err := k.do(ctx, "conditional delete", func() error {
		_, err := k.c.Batch(ctx, []kvclient.Op{{Delete: true, Key: key}}, []kvclient.Condition{{Key: key, Exists: true, Value: value}})
		unknown = unknown || retryable(err)
		return err
	})
	if errors.Is(err, kvapi.ErrConditionFailed) {
		if !unknown {
			return false, nil
		}
		_, found, gerr := k.Get(ctx, key)
		if gerr != nil {
			return false, gerr
		}
		return !found, nil
	}
	return err == nil, err
}
