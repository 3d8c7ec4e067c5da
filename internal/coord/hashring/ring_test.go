package hashring

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

func TestKeyHashIsFNV1a(t *testing.T) {
	// Reference values of FNV-1a 64 (isthe.com/chongo/tech/comp/fnv).
	for in, want := range map[string]uint64{"": 0xcbf29ce484222325, "a": 0xaf63dc4c8601ec8c, "foobar": 0x85944171f73967e8} {
		if got := KeyHash(in); got != want {
			t.Fatalf("KeyHash(%q) = %x want %x", in, got, want)
		}
	}
}

func TestRingPlacement(t *testing.T) {
	members := []base.NodeID{1, 2, 3, 4, 5, 6}
	r := NewRing(members)
	all := func(base.NodeID) bool { return true }
	counts := map[base.NodeID]int{}
	const keys = 30000
	for i := 0; i < keys; i++ {
		key := fmt.Sprintf("key-%d", i)
		p, err := r.Place(key, 3, all)
		if err != nil || p.Differs() {
			t.Fatal(p, err)
		}
		if len(p.Actual) != 3 || p.Actual[0] == p.Actual[1] || p.Actual[1] == p.Actual[2] || p.Actual[0] == p.Actual[2] {
			t.Fatalf("not distinct: %v", p.Actual)
		}
		counts[p.Actual[0]]++
		// Deterministic.
		q, _ := r.Place(key, 3, all)
		if !slices.Equal(p.Actual, q.Actual) {
			t.Fatal("placement not deterministic")
		}
	}
	for _, m := range members {
		share := float64(counts[m]) / keys
		if math.Abs(share-1.0/6) > 0.05 {
			t.Fatalf("node %s holds %.3f of primaries: %v", m, share, counts)
		}
	}
	// A down node is substituted in place; the other positions stay.
	moved := 0
	for i := 0; i < 2000; i++ {
		key := fmt.Sprintf("key-%d", i)
		p, _ := r.Place(key, 3, func(n base.NodeID) bool { return n != 4 })
		for j := range p.Default {
			if p.Default[j] == 4 {
				moved++
				if p.Actual[j] == 4 || slices.Contains(p.Default, p.Actual[j]) {
					t.Fatalf("bad substitute: %s", p)
				}
			} else if p.Actual[j] != p.Default[j] {
				t.Fatalf("healthy position moved: %s", p)
			}
		}
	}
	if moved == 0 {
		t.Fatal("node 4 never placed")
	}
	// Adding a node moves only about 1/7 of primaries (consistent hashing).
	r7 := NewRing(append(members, 7))
	changed := 0
	for i := 0; i < keys; i++ {
		key := fmt.Sprintf("key-%d", i)
		if r.Walk(key)[0] != r7.Walk(key)[0] {
			changed++
		}
	}
	if f := float64(changed) / keys; f < 0.09 || f > 0.2 {
		t.Fatalf("adding a node moved %.3f of keys", f)
	}
	if _, err := r.Place("k", 7, all); err == nil {
		t.Fatal("7 copies on 6 nodes")
	}
	if _, err := r.Place("k", 6, func(n base.NodeID) bool { return n != 1 }); err == nil {
		t.Fatal("6 copies on 5 live nodes")
	}
	if _, err := NewRing(nil).Place("k", 1, all); err == nil {
		t.Fatal("empty ring")
	}
}
