package kv

import (
	"fmt"
	"testing"
)

func TestSubtractAndCovers(t *testing.T) {
	r := func(a, b string) Range { return Range{Start: []byte(a), End: []byte(b)} }
	got := subtract(r("b", "k"), []Range{r("a", "c"), r("e", "f"), r("j", "")})
	if fmt.Sprint(got) != fmt.Sprint([]Range{r("c", "e"), r("f", "j")}) {
		t.Fatalf("subtract: %v", got)
	}
	if got := subtract(r("b", ""), []Range{r("c", "d")}); fmt.Sprint(got) != fmt.Sprint([]Range{r("b", "c"), r("d", "")}) {
		t.Fatalf("subtract unbounded: %v", got)
	}
	if !covers([]Range{r("c", "e"), r("a", "c"), r("d", "z")}, r("b", "y")) {
		t.Fatal("covers: overlapping pieces")
	}
	if covers([]Range{r("a", "c"), r("d", "z")}, r("b", "y")) {
		t.Fatal("covers: gap [c,d) missed")
	}
	if !covers([]Range{r("a", "")}, r("b", "")) || covers([]Range{r("a", "z")}, r("b", "")) {
		t.Fatal("covers: unbounded ends")
	}
}
