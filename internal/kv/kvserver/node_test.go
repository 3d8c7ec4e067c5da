package kvserver

import (
	"fmt"
	"testing"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

func TestSplitBatch(t *testing.T) {
	msg := func(n int) *kvpb.RaftMessage { return &kvpb.RaftMessage{Message: make([]byte, n)} }
	got := splitBatch([]*kvpb.RaftMessage{msg(3), msg(3), msg(5), msg(1), msg(1)}, 6)
	var sizes []int
	for _, b := range got {
		sizes = append(sizes, len(b))
	}
	if fmt.Sprint(sizes) != "[2 2 1]" { // 3+3 | 5+1 | 1
		t.Fatalf("batches %v", sizes)
	}
	if got := splitBatch([]*kvpb.RaftMessage{msg(10)}, 6); len(got) != 1 {
		t.Fatalf("oversized message: %d batches", len(got))
	}
}
