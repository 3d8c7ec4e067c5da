package client_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashmend/flashmend/client"
	"github.com/flashmend/flashmend/client/clustertest"
	iclient "github.com/flashmend/flashmend/internal/client"
)

func startForTest(t *testing.T) (context.Context, *client.Client, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cl, err := clustertest.Start(ctx, t.TempDir(), clustertest.Options{MaxObjectBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Error(err)
		}
	})
	c, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c, cl.Endpoint()
}

// TestRepairAndErrors: a read of a damaged replica returns the right bytes
// and reports the repair; bad input and missing keys give the documented
// sentinels and change nothing.
func TestRepairAndErrors(t *testing.T) {
	ctx, c, endpoint := startForTest(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320000 bytes
	for _, red := range []client.Redundancy{client.Replicated, client.ErasureCoded} {
		key := "obj-" + red.String()
		info, err := c.Put(ctx, key, data, &client.PutOptions{Redundancy: red})
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != key || info.Version != 1 || info.Size != int64(len(data)) || info.Redundancy != red {
			t.Fatalf("put %s: %v", key, info)
		}
		// Damage the copy (or shard) a read starts at, through the
		// internal client as 'ctl corrupt' does.
		ic, err := iclient.Dial(ctx, endpoint, iclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := ic.Corrupt(ctx, key, 0, 100, 3); err != nil {
			t.Fatal(err)
		}
		ic.Close()
		got, rep, err := c.GetWithReport(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get %s after corruption: %d bytes, %v", key, len(got), err)
		}
		if rep.Repaired != 1 || rep.RepairFailed != 0 {
			t.Fatalf("get %s: report %+v, want one repair", key, rep)
		}
		if red == client.ErasureCoded && rep.Reconstructed != 1 {
			t.Fatalf("get %s: report %+v, want one EC row reconstructed", key, rep)
		}
		if _, rep, err = c.GetWithReport(ctx, key); err != nil || rep.Repaired != 0 {
			t.Fatalf("second get %s: %+v %v (the first repaired it)", key, rep, err)
		}
	}

	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"get missing", second(c.Get(ctx, "nope")), client.ErrNotFound},
		{"stat missing", second(c.Stat(ctx, "nope")), client.ErrNotFound},
		{"delete missing", c.Delete(ctx, "nope"), client.ErrNotFound},
		{"key not UTF-8", second(c.Put(ctx, "bad\xff", data, nil)), client.ErrInvalidArgument},
		{"unknown redundancy", second(c.Put(ctx, "k", data, &client.PutOptions{Redundancy: 7})), client.ErrInvalidArgument},
		{"too large", second(c.Put(ctx, "big", make([]byte, c.MaxObjectBytes()+1), nil)), client.ErrInvalidArgument},
		{"negative scan limit", func() error {
			kv, err := c.KV(ctx)
			if err != nil {
				return err
			}
			defer kv.Close()
			_, err = kv.Scan(ctx, nil, nil, -1)
			return err
		}(), client.ErrInvalidArgument},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want an error wrapping %v", tc.name, tc.err, tc.want)
		}
	}
	objs, err := c.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("after bad input the cluster lists %v, want the two objects only", objs)
	}
}

func second[T any](_ T, err error) error { return err }

// TestStreams: PutReader of unknown size and GetTo agree with Put and Get,
// and a streamed read of a damaged object returns the right bytes and
// reports the repair.
func TestStreams(t *testing.T) {
	ctx, c, endpoint := startForTest(t)
	data := bytes.Repeat([]byte("stream!"), 100000) // 700000 bytes
	info, err := c.PutReader(ctx, "s", bytes.NewReader(data), -1, &client.PutOptions{Redundancy: client.ErasureCoded})
	if err != nil || info.Size != int64(len(data)) || info.Redundancy != client.ErasureCoded {
		t.Fatalf("PutReader: %v %v", info, err)
	}
	ic, err := iclient.Dial(ctx, endpoint, iclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	if err := ic.Corrupt(ctx, "s", 0, 10, 2); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	info, rep, err := c.GetTo(ctx, "s", &got)
	if err != nil || !bytes.Equal(got.Bytes(), data) || info.Version != 1 {
		t.Fatalf("GetTo: %d bytes, %v, %v", got.Len(), info, err)
	}
	if rep.Repaired != 1 || rep.Reconstructed != 1 {
		t.Fatalf("GetTo of a damaged shard: %+v, want one row reconstructed and repaired", rep)
	}
	if _, _, err := c.GetTo(ctx, "missing", &got); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetTo of a missing key: %v", err)
	}
	if _, err := c.PutReader(ctx, "short", bytes.NewReader(data[:10]), 20, nil); err == nil {
		t.Fatal("PutReader of a source shorter than its size succeeded")
	}
	if _, err := c.Stat(ctx, "short"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a failed PutReader left %v", err)
	}
}
