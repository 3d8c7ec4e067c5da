package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/testseed"
)

// smallDamagedTable is a state machine holding n keys in a large flushed
// table (too many keys to list) and, flushed after them, a small table of
// a few new values (and the applied record's two copies at the ends of the
// key space, as every flush): the small table's bounds are the whole key
// space. One data block of the small table is damaged. It returns the
// model (every key's value now), the damaged run IsolateBlocks found and
// the keys the damaged run lost.
func smallDamagedTable(t *testing.T, rng *rand.Rand, n int) (*StateMachine, map[string]string, DamagedSpan) {
	t.Helper()
	fs := vfs.NewMem()
	sm, err := Open(fs, "sm", 0, 4<<20, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	// No compaction runs while the test looks for, damages and reads the
	// small table: one could delete it between the listing and the open.
	release, quiet := sm.gate.Hold(time.Minute)
	t.Cleanup(release)
	if !quiet {
		t.Fatal("compactions of an empty engine did not finish")
	}
	model := map[string]string{}
	fillSM(t, sm, n)
	for j := 0; j < n; j++ {
		model[fmt.Sprintf("key-%05d", j)] = fmt.Sprintf("value-%05d-%0100d", j, j)
	}
	if err := sm.Flush(); err != nil {
		t.Fatal(err)
	}
	b := &kvpb.WriteBatch{}
	small := 1 + rng.Intn(40)
	for _, j := range rng.Perm(n)[:small] {
		k, v := fmt.Sprintf("key-%05d", j), fmt.Sprintf("new-%05d-%0200d", j, rng.Int())
		b.Ops = append(b.Ops, put(k, v))
		model[k] = v
	}
	if err := sm.ApplyWrite(uint64(n+10), 1, b); err != nil {
		t.Fatal(err)
	}
	if err := sm.Flush(); err != nil {
		t.Fatal(err)
	}
	// The small table is the one that lists small keys (no compaction
	// runs: it is there).
	levels, err := sm.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	path := ""
	for _, l := range levels {
		for _, tbl := range l {
			p := fs.PathJoin("sm", fmt.Sprintf("%06d.sst", uint64(tbl.BackingSSTNum)))
			if keys, ok := tableKeysIn(t, fs, p, sm); ok && len(keys) == small {
				path = p
			}
		}
	}
	if path == "" {
		t.Fatal("no small table")
	}
	layout := sstLayout(t, fs, path, sm.opts.MakeReaderOptions())
	h := layout.Data[rng.Intn(len(layout.Data))]
	if err := FlipByteAt(fs, path, int64(h.Offset)+rng.Int63n(int64(h.Length))); err != nil {
		t.Fatal(err)
	}
	spans, _, err := IsolateBlocks(fs, path, sm.opts.MakeReaderOptions(), wholeStart, wholeEnd)
	if err != nil || len(spans) != 1 {
		t.Fatalf("IsolateBlocks: %v, %v", spans, err)
	}
	return sm, model, spans[0]
}

// tableKeysIn reads the key list of the table at path.
func tableKeysIn(t *testing.T, fs vfs.FS, path string, sm *StateMachine) ([][]byte, bool) {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := objstorageprovider.NewFileReadable(f, fs, objstorageprovider.NewReadaheadConfig(), path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sstable.NewReader(context.Background(), rd, sm.opts.MakeReaderOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return tableKeysOf(r)
}

// plainScanFails reports whether a scan of key k alone, not told of the
// damage, fails. (A point read mostly does not fail: the table's bloom
// filter says it does not hold k, and the read skips it. A scan has no
// filter to skip a table by.)
func plainScanFails(db pebble.Reader, k []byte) bool {
	_, _, err := ScanBounded(db, k, append(bytes.Clone(k), 0), 1, 0)
	return err != nil
}

// TestSmallTableIsolatesToItsKeys: a damaged block of a table that lists its
// keys costs exactly its keys. Every other key reads back exactly (from the
// older table underneath) when the damaged table is left out of the read,
// point reads and bounded scans alike, against a model; a plain scan of the
// same keys fails on the damaged block whenever the table's bounds hold
// them (they are the whole key space).
func TestSmallTableIsolatesToItsKeys(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	plainFailed := 0 // reads of keys not lost that fail without Around
	for round := 0; round < 6; round++ {
		n := 300 + rng.Intn(300)
		sm, model, sp := smallDamagedTable(t, rng, n)
		if !sp.KeysKnown || sp.Table == 0 {
			t.Fatalf("seed %d: small table's run %+v does not list its keys", seed, sp)
		}
		var all, lost [][]byte
		for _, pk := range sp.AllKeys {
			k, _ := FromUserKey(pk)
			all = append(all, k)
		}
		for _, pk := range sp.Keys {
			k, _ := FromUserKey(pk)
			lost = append(lost, k)
		}
		a := Around{Tables: []TableKeys{{Table: sp.Table, Keys: all}}}
		isLost := func(k []byte) bool {
			_, found := slices.BinarySearchFunc(lost, k, bytes.Compare)
			return found
		}
		// The run's keys are the table's keys in it, and every key the
		// damage made unreadable is among them.
		for j := 0; j < n; j++ {
			k := []byte(fmt.Sprintf("key-%05d", j))
			if plainScanFails(sm.db, k) && !isLost(k) {
				plainFailed++
			}
			v, found, err := GetWith(sm.db, k, a)
			switch {
			case err != nil && !isLost(k):
				t.Fatalf("seed %d: key %s not in the damaged run fails: %v", seed, k, err)
			case err != nil:
				if !base.IsCorruption(err) {
					t.Fatalf("seed %d: lost key %s: %v", seed, k, err)
				}
			case !found || string(v) != model[string(k)]:
				t.Fatalf("seed %d: key %s reads %q (found %t), want %q", seed, k, v, found, model[string(k)])
			}
		}
		// Scans of random ranges that hold no lost key, with random bounds,
		// read exactly the model's rows.
		for q := 0; q < 40; q++ {
			lo, hi := rng.Intn(n), rng.Intn(n+1)
			if lo > hi {
				lo, hi = hi, lo
			}
			start, end := []byte(fmt.Sprintf("key-%05d", lo)), []byte(fmt.Sprintf("key-%05d", hi))
			if hi == n {
				end = nil
			}
			rg := Range{Start: start, End: end}
			clean := true
			for _, k := range lost {
				if rg.Contains(k) {
					clean = false
				}
			}
			if !clean {
				continue
			}
			var want []string
			for j := lo; j < hi || (end == nil && j < n); j++ {
				want = append(want, fmt.Sprintf("key-%05d", j))
			}
			limit, maxBytes := 0, 0
			if rng.Intn(2) == 0 {
				limit = 1 + rng.Intn(20)
			}
			if rng.Intn(3) == 0 {
				maxBytes = 1 + rng.Intn(3000)
			}
			rows, more, err := ScanBoundedWith(sm.db, start, end, limit, maxBytes, a)
			if err != nil {
				t.Fatalf("seed %d: scan %v: %v", seed, rg, err)
			}
			// What a plain scan of the model returns under the same bounds.
			got := 0
			used := 0
			for _, k := range want {
				if (limit > 0 && got == limit) || (maxBytes > 0 && used >= maxBytes && got > 0) {
					break
				}
				used += len(k) + len(model[k])
				got++
			}
			if len(rows) != got || more != (got < len(want)) {
				t.Fatalf("seed %d: scan %v limit %d bytes %d: %d rows more=%t, want %d more=%t", seed, rg, limit, maxBytes, len(rows), more, got, got < len(want))
			}
			for i, kv := range rows {
				if string(kv.Key) != want[i] || string(kv.Value) != model[want[i]] {
					t.Fatalf("seed %d: scan %v row %d = %s, want %s", seed, rg, i, kv.Key, want[i])
				}
			}
		}
		// A write next to the damage, conditioned on a key the damaged
		// table does not hold, evaluates its condition and keeps the
		// Digest (its reads go around the table), where a plain read
		// of the condition failed and the replica rebuilt.
		for j := 0; j < n; j++ {
			k := []byte(fmt.Sprintf("key-%05d", j))
			if isLost(k) {
				continue
			}
			if !plainScanFails(sm.db, k) {
				continue // only a key whose plain read fails shows anything
			}
			sm.SetAround(&a)
			b := &kvpb.WriteBatch{
				Conditions: []*kvpb.Condition{{Key: k, Exists: true, Value: []byte(model[string(k)])}},
				Ops:        []*kvpb.Op{put(string(k), "conditioned")},
			}
			if err := sm.ApplyWrite(sm.Applied().Index+1, 1, b); err != nil || sm.Applied().Digest.Dirty {
				t.Fatalf("seed %d: conditioned write of %s next to damage: %v, digest dirty %t", seed, k, err, sm.Applied().Digest.Dirty)
			}
			model[string(k)] = "conditioned"
			sm.SetAround(nil)
			break
		}
		// A peer's patch read of the range between two lost keys is whole.
		if len(lost) >= 2 {
			rg := Range{Start: append(bytes.Clone(lost[0]), 0), End: lost[1]}
			pieces, rows := ScanPieces(sm.db, rg, a)
			if len(pieces) != 1 || !bytes.Equal(pieces[0].Start, rg.Start) || !bytes.Equal(pieces[0].End, rg.End) {
				t.Fatalf("seed %d: pieces of %v = %v", seed, rg, pieces)
			}
			for _, kv := range rows {
				if string(kv.Value) != model[string(kv.Key)] {
					t.Fatalf("seed %d: piece row %s = %q", seed, kv.Key, kv.Value)
				}
			}
		}
	}
	if plainFailed == 0 {
		t.Fatalf("seed %d: no plain read of a key outside the damaged run failed: the test shows nothing", seed)
	}
}

// TestTableKeysProperty: the list decodes back, a table over the bounds
// lists nothing, and malformed lists do not decode.
func TestTableKeysProperty(t *testing.T) {
	c := newTableKeysCollector().(*tableKeysCollector)
	for _, k := range []string{"\x00applied", "ua", "ua", "ub", "uc", "~applied"} {
		_ = c.AddPointKey(pebble.InternalKey{UserKey: []byte(k)}, nil)
	}
	buf, _ := c.FinishTable(nil)
	keys, ok := decodeTableKeys(buf)
	if !ok || len(keys) != 3 || string(keys[0]) != "ua" || string(keys[2]) != "uc" {
		t.Fatalf("decoded %q, %t", keys, ok)
	}
	for _, bad := range [][]byte{nil, {2}, buf[:len(buf)-1], append(bytes.Clone(buf), 0)} {
		if _, ok := decodeTableKeys(bad); ok {
			t.Fatalf("%x decodes", bad)
		}
	}
	big := newTableKeysCollector().(*tableKeysCollector)
	for i := 0; i <= maxTableKeys; i++ {
		_ = big.AddPointKey(pebble.InternalKey{UserKey: []byte(fmt.Sprintf("u%05d", i))}, nil)
	}
	if buf, _ := big.FinishTable(nil); len(buf) != 0 {
		t.Fatalf("a table of %d keys lists them", maxTableKeys+1)
	}
}
