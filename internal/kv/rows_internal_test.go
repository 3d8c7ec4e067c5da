package kv

import (
	"fmt"
	"testing"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// TestUniqueRowsPrefersPeers: a key both sent by the peers and read from
// the replica's own rows (two covered ranges whose wide spans overlap)
// goes into the patch table once, with the peers' value.
func TestUniqueRowsPrefersPeers(t *testing.T) {
	row := func(k, v string) *kvpb.KeyValue { return &kvpb.KeyValue{Key: []byte(k), Value: []byte(v)} }
	peers := []*kvpb.KeyValue{row("b", "peer"), row("c", "peer"), row("b", "peer-again")}
	own := []*kvpb.KeyValue{row("a", "own"), row("b", "own"), row("d", "own")}
	got := fmt.Sprint(uniqueRows(peers, own))
	want := fmt.Sprint([]*kvpb.KeyValue{row("b", "peer"), row("c", "peer"), row("a", "own"), row("d", "own")})
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
