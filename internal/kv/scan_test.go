package kv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

// TestScanPagesByBytes: 2,300 values of 4 KB (9 MB, more than a gRPC
// message) come back whole from one Client.Scan over two shards, page by
// page; one page is bounded by bytes; a limit above MaxScanRows works; an
// oversized page request is refused.
func TestScanPagesByBytes(t *testing.T) {
	c, cl := startCluster(t, kv.Options{}, "key-01000")
	// The deadline bounds a hang; it times nothing (9 MB written and
	// scanned under the race detector took more than 60 s at a load
	// average of 15).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	value := func(i int) []byte { return []byte(fmt.Sprintf("%04d-%04000d", i, i)) }
	const n = 2300
	for i := 0; i < n; i += 25 {
		var ops []kvclient.Op
		for j := i; j < i+25 && j < n; j++ {
			ops = append(ops, kvclient.Op{Key: testKey(j), Value: value(j)})
		}
		// The puts are idempotent: a batch whose outcome is unknown (a
		// leader change under the race detector's slowdown) is sent again.
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if _, err = cl.Batch(ctx, ops, nil); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rows, err := cl.Scan(ctx, nil, nil, 0, kvclient.Strong())
	if err != nil || len(rows) != n {
		t.Fatalf("whole scan: %d rows, %v", len(rows), err)
	}
	for i, r := range rows {
		if string(r.Key) != string(testKey(i)) || string(r.Value) != string(value(i)) {
			t.Fatalf("row %d: %q", i, r.Key)
		}
	}
	// Eventual reads: every replica first holds every row (a write needs
	// only a quorum, a replica still behind would return fewer).
	waitAllCaughtUp(t, c, 1)
	waitAllCaughtUp(t, c, 2)
	if rows, err := cl.Scan(ctx, nil, nil, kvapi.MaxScanRows+5, kvclient.Eventual()); err != nil || len(rows) != n {
		t.Fatalf("limit above MaxScanRows: %d rows, %v", len(rows), err)
	}
	if rows, err := cl.Scan(ctx, testKey(10), nil, 1500); err != nil || len(rows) != 1500 || string(rows[0].Key) != string(testKey(10)) {
		t.Fatalf("limit across shards: %d rows, %v", len(rows), err)
	}
	leader, err := c.WaitLeader(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	page, more, _, err := c.Node(leader).Replica(2).Scan(ctx, nil, nil, 0, kvapi.DefaultScanPageBytes, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
	bytes := 0
	for _, r := range page {
		bytes += engine.RowBytes(r)
	}
	if err != nil || !more || bytes < kvapi.DefaultScanPageBytes || bytes > kvapi.DefaultScanPageBytes+5000 {
		t.Fatalf("one page: %d rows, %d bytes, more=%v, %v", len(page), bytes, more, err)
	}
	kc, err := cl.KVClient(leader)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kc.Scan(ctx, &kvpb.ScanRequest{Shard: 2, MaxBytes: kvapi.MaxScanPageBytes + 1})
	if !base.IsInvalidArgument(kvapi.FromStatus(err)) {
		t.Fatalf("oversized page: %v", err)
	}
}
