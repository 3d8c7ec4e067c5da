package patch

import (
	"math/rand"
	"sort"
	"testing"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv/keyspan"
	"github.com/flashmend/flashmend/internal/testseed"
)

// keys is every key of one or two letters over a..d, sorted: ranges with
// bounds among them hold the same keys exactly when they hold the same keys
// of this set, so coverage is checked by brute force over it.
func keys() []string {
	var out []string
	for _, a := range "abcd" {
		out = append(out, string(a))
		for _, b := range "abcd" {
			out = append(out, string(a)+string(b))
		}
	}
	sort.Strings(out)
	return out
}

func randomRange(rng *rand.Rand, ks []string) keyspan.Range {
	i := rng.Intn(len(ks) - 1)
	return keyspan.Range{Start: []byte(ks[i]), End: []byte(ks[i+1+rng.Intn(len(ks)-i-1)])}
}

// TestDeliverAgainstBruteForce delivers random pieces from random peers, in
// random order and with repeats, for random requested ranges; every peer
// sends, with a piece, every row the shard holds in it. What Received and
// Assemble give must match a brute force over the keys: a range is covered
// exactly when the pieces it includes cover each of its keys, and its rows
// are the shard's rows in those pieces, each once.
func TestDeliverAgainstBruteForce(t *testing.T) {
	seed := testseed.Seed(t, "PATCH_SEED")
	rng := rand.New(rand.NewSource(seed))
	ks := keys()
	for iter := 0; iter < 2000; iter++ {
		shard := map[string]string{} // the rows every peer holds
		for _, k := range ks {
			if rng.Intn(3) > 0 {
				shard[k] = k + "!"
			}
		}
		rowsIn := func(rg keyspan.Range) []*kvpb.KeyValue {
			var out []*kvpb.KeyValue
			for _, k := range ks {
				if v, ok := shard[k]; ok && rg.Contains([]byte(k)) {
					out = append(out, &kvpb.KeyValue{Key: []byte(k), Value: []byte(v)})
				}
			}
			return out
		}
		var tr Tracker
		q := &Request{Path: "t.sst"}
		for n := 1 + rng.Intn(3); n > 0; n-- {
			q.Ranges = append(q.Ranges, randomRange(rng, ks))
		}
		tr.Add(1, q)
		var sent []keyspan.Range
		peers := map[uint64]bool{}
		for n := rng.Intn(8); n > 0; n-- {
			var pieces []keyspan.Range
			var rows []*kvpb.KeyValue
			for m := rng.Intn(3); m > 0; m-- {
				p := randomRange(rng, ks)
				if rng.Intn(4) == 0 && len(sent) > 0 {
					p = sent[rng.Intn(len(sent))] // a repeat
				}
				pieces = append(pieces, p)
				rows = append(rows, rowsIn(p)...)
			}
			from := uint64(2 + rng.Intn(3))
			tr.Deliver(1, from, pieces, rows, 1)
			sent = append(sent, pieces...)
			peers[from] = true
		}
		got, answered := tr.Received(1)
		if answered != len(peers) {
			t.Fatalf("seed %d iter %d: %d peers answered, Received says %d", seed, iter, len(peers), answered)
		}
		covered, missing := Assemble(q, q.Ranges, got)
		if len(covered)+len(missing) != len(q.Ranges) {
			t.Fatalf("seed %d iter %d: %d covered + %d missing of %d ranges", seed, iter, len(covered), len(missing), len(q.Ranges))
		}
		for _, rg := range q.Ranges {
			// Brute force: the keys of rg the pieces it includes hold.
			held := map[string]bool{}
			for _, p := range sent {
				if rg.Includes(p) {
					for _, k := range ks {
						if p.Contains([]byte(k)) {
							held[k] = true
						}
					}
				}
			}
			want := true
			for _, k := range ks {
				if rg.Contains([]byte(k)) && !held[k] {
					want = false
				}
			}
			if got.Covers(rg) != want {
				t.Fatalf("seed %d iter %d: %v covered=%v, brute force %v (pieces %v)", seed, iter, rg, got.Covers(rg), want, sent)
			}
			seen := map[string]bool{}
			for _, kv := range got.Rows[rg.String()] {
				k := string(kv.Key)
				if seen[k] || !held[k] || shard[k] != string(kv.Value) {
					t.Fatalf("seed %d iter %d: %v: row %q repeated, outside its pieces or wrong", seed, iter, rg, k)
				}
				seen[k] = true
			}
			for k := range held {
				if _, ok := shard[k]; ok && !seen[k] {
					t.Fatalf("seed %d iter %d: %v: row %q of a received piece missing", seed, iter, rg, k)
				}
			}
		}
		for _, p := range covered {
			if want := rowsIn(p.Range); len(p.Rows) != len(want) {
				t.Fatalf("seed %d iter %d: covered %v has %d rows, the shard %d", seed, iter, p.Range, len(p.Rows), len(want))
			}
		}
		// A settled request takes nothing more.
		tr.Settle(1, q.Path, q.Ranges, nil, nil)
		if tr.Deliver(1, 2, q.Ranges, nil, 1) {
			t.Fatalf("seed %d iter %d: a settled request took a patch", seed, iter)
		}
	}
}
