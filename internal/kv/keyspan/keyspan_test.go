package keyspan

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"github.com/flashmend/flashmend/internal/testseed"
)

func r(a, b string) Range { return Range{Start: []byte(a), End: []byte(b)} }

func TestSubtractAndCovers(t *testing.T) {
	got := Subtract(r("b", "k"), []Range{r("a", "c"), r("e", "f"), r("j", "")})
	if fmt.Sprint(got) != fmt.Sprint([]Range{r("c", "e"), r("f", "j")}) {
		t.Fatalf("subtract: %v", got)
	}
	if got := Subtract(r("b", ""), []Range{r("c", "d")}); fmt.Sprint(got) != fmt.Sprint([]Range{r("b", "c"), r("d", "")}) {
		t.Fatalf("subtract unbounded: %v", got)
	}
	if !Covers([]Range{r("c", "e"), r("a", "c"), r("d", "z")}, r("b", "y")) {
		t.Fatal("covers: overlapping pieces")
	}
	if Covers([]Range{r("a", "c"), r("d", "z")}, r("b", "y")) {
		t.Fatal("covers: gap [c,d) missed")
	}
	if !Covers([]Range{r("a", "")}, r("b", "")) || Covers([]Range{r("a", "z")}, r("b", "")) {
		t.Fatal("covers: unbounded ends")
	}
	if got := Remove([]Range{r("a", "b"), r("a", "b"), r("c", "")}, []Range{r("a", "b"), r("c", "")}); fmt.Sprint(got) != fmt.Sprint([]Range{r("a", "b")}) {
		t.Fatalf("remove drops one equal entry per drop: %v", got)
	}
	if !Has([]Range{r("a", "b"), r("c", "")}, r("c", "")) || Has([]Range{r("a", "b")}, r("a", "c")) {
		t.Fatal("has: exact match only")
	}
}

// universe is every key of at most two letters over a..c, sorted: with
// range bounds taken from it, two sets of ranges are equal exactly when
// they hold the same keys of it (every gap starts at a bound, a key of the
// universe), so the brute force below is exact.
func universe() []string {
	out := []string{""}
	for _, a := range "abc" {
		out = append(out, string(a))
		for _, b := range "abc" {
			out = append(out, string(a)+string(b))
		}
	}
	sort.Strings(out)
	return out
}

// randomRange returns a well-formed range (Start < End, or End unbounded)
// with bounds in u.
func randomRange(rng *rand.Rand, u []string) Range {
	i := rng.Intn(len(u))
	if rng.Intn(4) == 0 || i == len(u)-1 {
		return r(u[i], "")
	}
	return r(u[i], u[i+1+rng.Intn(len(u)-i-1)])
}

// keysIn is the set of keys of u in the union of rgs.
func keysIn(u []string, rgs ...Range) map[string]bool {
	out := map[string]bool{}
	for _, k := range u {
		for _, rg := range rgs {
			if rg.Contains([]byte(k)) {
				out[k] = true
			}
		}
	}
	return out
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestAgainstBruteForce checks Subtract, Covers, Includes and Overlaps
// against the key sets they stand for, on random ranges.
func TestAgainstBruteForce(t *testing.T) {
	seed := testseed.Seed(t, "KEYSPAN_SEED")
	rng := rand.New(rand.NewSource(seed))
	u := universe()
	for iter := 0; iter < 5000; iter++ {
		a := randomRange(rng, u)
		var others []Range
		for n := rng.Intn(4); n > 0; n-- {
			others = append(others, randomRange(rng, u))
		}
		inA, inOthers := keysIn(u, a), keysIn(u, others...)
		want := map[string]bool{}
		for k := range inA {
			if !inOthers[k] {
				want[k] = true
			}
		}
		parts := Subtract(a, others)
		if got := keysIn(u, parts...); !sameSet(got, want) {
			t.Fatalf("seed %d iter %d: Subtract(%v, %v) = %v", seed, iter, a, others, parts)
		}
		for _, p := range parts {
			if !a.Includes(p) || (len(p.End) != 0 && string(p.Start) >= string(p.End)) {
				t.Fatalf("seed %d iter %d: Subtract(%v, %v) gave %v, not a part of it", seed, iter, a, others, p)
			}
		}
		all := append([]Range{a}, others...)
		merged := Merge(all)
		if got := keysIn(u, merged...); !sameSet(got, keysIn(u, all...)) {
			t.Fatalf("seed %d iter %d: Merge(%v) = %v, not the same keys", seed, iter, all, merged)
		}
		for i := 1; i < len(merged); i++ {
			prev := merged[i-1]
			if len(prev.End) == 0 || string(prev.End) >= string(merged[i].Start) {
				t.Fatalf("seed %d iter %d: Merge(%v) = %v: not disjoint and apart, in order", seed, iter, all, merged)
			}
		}
		if got, want := Covers(others, a), len(want) == 0; got != want {
			t.Fatalf("seed %d iter %d: Covers(%v, %v) = %v", seed, iter, others, a, got)
		}
		if len(others) > 0 {
			o := others[0]
			inO := keysIn(u, o)
			incl, over := true, false
			for k := range inO {
				if !inA[k] {
					incl = false
				} else {
					over = true
				}
			}
			if got := a.Includes(o); got != incl {
				t.Fatalf("seed %d iter %d: %v.Includes(%v) = %v", seed, iter, a, o, got)
			}
			if got := a.Overlaps(o); got != over {
				t.Fatalf("seed %d iter %d: %v.Overlaps(%v) = %v", seed, iter, a, o, got)
			}
		}
	}
}
