package bench

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// memKV is an in-memory KV; flip, when set, damages the values it returns.
type memKV struct {
	mu   sync.Mutex
	m    map[string][]byte
	flip bool
	// failPuts fails the first put of one key in failPuts (0: none), chosen
	// by the key alone: which put fails must not depend on how concurrent
	// loaders interleave (a shared counter could fail every try of a key).
	failPuts int
	tries    map[string]int
}

func (k *memKV) Put(_ context.Context, key, value []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tries == nil {
		k.tries = map[string]int{}
	}
	k.tries[string(key)]++
	if k.failPuts > 0 && k.tries[string(key)] == 1 && crc32.ChecksumIEEE(key)%uint32(k.failPuts) == 0 {
		return errors.New("proposal not applied in time")
	}
	k.m[string(key)] = append([]byte(nil), value...)
	return nil
}

func (k *memKV) out(v []byte) []byte {
	v = append([]byte(nil), v...)
	if k.flip {
		v[len(v)-1] ^= 1
	}
	return v
}

func (k *memKV) Get(_ context.Context, key []byte) ([]byte, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[string(key)]
	if !ok {
		return nil, false, nil
	}
	return k.out(v), true, nil
}

func (k *memKV) Scan(_ context.Context, start, end []byte, limit int) ([][]byte, [][]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var names []string
	for n := range k.m {
		if n >= string(start) && n < string(end) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) > limit {
		names = names[:limit]
	}
	var keys, values [][]byte
	for _, n := range names {
		keys, values = append(keys, []byte(n)), append(values, k.out(k.m[n]))
	}
	return keys, values, nil
}

// Every KV operation runs, checks what it reads, and counts what it moved;
// a store that returns other values fails the run.
func TestRunKV(t *testing.T) {
	ctx := context.Background()
	for _, op := range []string{KVOpPut, KVOpGet, KVOpRange} {
		// The first put of one key in five fails: the loading tries
		// again, the runs count the failures.
		kv := &memKV{m: map[string][]byte{}, failPuts: 5}
		r, err := RunKV(ctx, kv, KVOptions{Op: op, Keys: 300, ValueSize: 100, RangeKeys: 7, Concurrency: 3, Duration: 50 * time.Millisecond, Seed: 5})
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if op == KVOpPut && r.Errors == 0 {
			t.Fatalf("no failed put counted: %+v", r)
		}
		if r.Store != "kv" || r.Op != op || r.Ops == 0 || (op != KVOpPut && r.Errors != 0) || r.Bytes < int64(r.Ops)*100 || r.OpsPerS <= 0 || r.LatencyMsMax < r.LatencyMsP50 {
			t.Fatalf("%s: %+v", op, r)
		}
		if op == KVOpRange && r.Bytes <= int64(r.Ops)*100 {
			t.Fatalf("range moved only one value per op: %+v", r)
		}
		if !strings.Contains(r.String(), "kv "+op) {
			t.Fatalf("%s: %s", op, r)
		}
		if op != KVOpPut && len(kv.m) != 300 {
			t.Fatalf("%s: %d keys loaded", op, len(kv.m))
		}
		kv.flip = true
		if op != KVOpPut {
			if _, err := RunKV(ctx, kv, KVOptions{Op: op, Keys: 300, ValueSize: 100, Concurrency: 2, Duration: 20 * time.Millisecond, Seed: 5}); err == nil {
				t.Fatalf("%s: damaged values went unnoticed", op)
			}
		}
	}
	d := kvData{prefix: "p/", block: bytes.Repeat([]byte{9}, 1124), size: 100, keys: 52}
	if v := d.value(3); len(v) != 100 || v[0] != 3 {
		t.Fatalf("value %v", v)
	}
	for i := 1; i < 52; i++ {
		if string(d.key(i-1)) >= string(d.key(i)) {
			t.Fatalf("keys %s, %s out of order", d.key(i-1), d.key(i))
		}
	}
	if string(d.key(0)) != "a/p/key-00000000" || string(d.key(51)) != "z/p/key-00000051" {
		t.Fatalf("keys %s .. %s", d.key(0), d.key(51))
	}
	if end, want := d.rangeFrom(2, 10); want != 2 || string(end) != "b/p/key-\xff" || string(d.key(3)) >= string(end) {
		t.Fatalf("range from 2: %q %d", end, want)
	}
	for _, o := range []KVOptions{{Op: "scan"}, {Op: KVOpGet, ValueSize: 4}, {Op: KVOpGet, Keys: -1}, {Op: KVOpGet, Concurrency: 5000}} {
		if _, err := RunKV(ctx, &memKV{m: map[string][]byte{}}, o); err == nil {
			t.Fatalf("options %+v accepted", o)
		}
	}
}
