package kvapi

import (
	"bytes"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// Limits on client input. They bound raft entries and patch sizes.
const (
	// MaxKeyBytes bounds a key.
	MaxKeyBytes = 4 << 10
	// MaxValueBytes bounds a value.
	MaxValueBytes = 1 << 20
	// MaxBatchOps bounds the operations (and conditions) of one write.
	MaxBatchOps = 1000
	// MaxScanRows bounds the rows of one scan page (one Scan RPC); a larger
	// limit is an error. Client.Scan pages through any number of rows.
	MaxScanRows = 10000
	// DefaultScanPageBytes and MaxScanPageBytes bound the keys and values
	// of one scan page (ScanRequest.max_bytes 0 takes the default): well
	// under gRPC's default 4 MiB message.
	DefaultScanPageBytes = 1 << 20
	MaxScanPageBytes     = 2 << 20
)

func ValidateKey(k []byte) error {
	if len(k) == 0 {
		return base.InvalidArgumentf("kv: empty key")
	}
	if len(k) > MaxKeyBytes {
		return base.InvalidArgumentf("kv: key of %d bytes exceeds %d", len(k), MaxKeyBytes)
	}
	return nil
}

func ValidateValue(v []byte) error {
	if len(v) > MaxValueBytes {
		return base.InvalidArgumentf("kv: value of %d bytes exceeds %d", len(v), MaxValueBytes)
	}
	return nil
}

func ValidateBatch(b *kvpb.WriteBatch) error {
	if b == nil || len(b.Ops) == 0 {
		return base.InvalidArgumentf("kv: empty write batch")
	}
	if len(b.Ops)+len(b.Conditions)+len(b.Scans) > MaxBatchOps {
		return base.InvalidArgumentf("kv: batch of %d operations exceeds %d", len(b.Ops)+len(b.Conditions), MaxBatchOps)
	}
	for _, op := range b.Ops {
		if err := ValidateKey(op.Key); err != nil {
			return err
		}
		switch op.Kind {
		case kvpb.Op_PUT:
			if err := ValidateValue(op.Value); err != nil {
				return err
			}
		case kvpb.Op_DELETE:
		default:
			return base.InvalidArgumentf("kv: unknown op kind %d", op.Kind)
		}
	}
	for _, c := range b.Conditions {
		if err := ValidateKey(c.Key); err != nil {
			return err
		}
	}
	for _, s := range b.Scans {
		if err := ValidateRange(s.Start, s.End); err != nil {
			return err
		}
	}
	return nil
}

func ValidateRange(start, end []byte) error {
	if len(start) > MaxKeyBytes || len(end) > MaxKeyBytes {
		return base.InvalidArgumentf("kv: range bound exceeds %d bytes", MaxKeyBytes)
	}
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return base.InvalidArgumentf("kv: empty range [%q, %q)", start, end)
	}
	return nil
}

// ValidatePageBytes maps a request's byte bound to a page's.
func ValidatePageBytes(n uint64) (int, error) {
	if n == 0 {
		return DefaultScanPageBytes, nil
	}
	if n > MaxScanPageBytes {
		return 0, base.InvalidArgumentf("kv: scan page of %d bytes exceeds %d", n, MaxScanPageBytes)
	}
	return int(n), nil
}

func ValidateLimit(limit uint32) (int, error) {
	if limit == 0 {
		return MaxScanRows, nil
	}
	if limit > MaxScanRows {
		return 0, base.InvalidArgumentf("kv: scan limit %d exceeds %d", limit, MaxScanRows)
	}
	return int(limit), nil
}
