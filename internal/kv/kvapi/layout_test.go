package kvapi

import (
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

func TestLayoutProtoRoundTrip(t *testing.T) {
	l := UniformLayout([]base.NodeID{1, 2, 3}, "g", "n")
	back, err := LayoutFromProto(l.Proto())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := back.Proto().String(), l.Proto().String(); got != want {
		t.Fatalf("round trip:\n got %s\nwant %s", got, want)
	}
	if s := back.ShardFor([]byte("k")); s.ID != 2 {
		t.Fatalf("key k in %s, want s2", s.ID)
	}
	// A map with a gap between shards is refused.
	bad := l.Proto()
	bad.Shards[1].Start = []byte("h")
	if _, err := LayoutFromProto(bad); !base.IsInvalidArgument(err) {
		t.Fatalf("layout with a gap: %v", err)
	}
	if _, err := LayoutFromProto(&kvpb.ShardMap{}); !base.IsInvalidArgument(err) {
		t.Fatalf("empty layout: %v", err)
	}
}
