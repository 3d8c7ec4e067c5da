package invariants

import (
	"errors"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

func TestCheck(t *testing.T) {
	if err := Check(true, "never"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		r := recover()
		if Enabled {
			if r == nil {
				t.Fatal("invariants build did not panic")
			}
		} else if r != nil {
			t.Fatalf("panic without invariants tag: %v", r)
		}
	}()
	err := Check(false, "x=%d", 1)
	if !errors.Is(err, base.ErrAssertionFailed) {
		t.Fatalf("err %v", err)
	}
}
