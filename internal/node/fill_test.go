package node

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/wire"
)

// TestFillAndUnfill: the nemesis's "device full" fault fills a node's
// emulated flash device past its repair reserve; object writes are then
// refused with no space (never half-written), the ballast survives a
// restart and Unfill gives the room back; a plain-file store and bad
// requests are refused without changing anything.
func TestFillAndUnfill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 16, PagesPerBlock: 32, PageSize: 4096, OOBSize: 128}
	dir := t.TempDir()
	start := func() *Node {
		st, err := objstore.OpenSDFStore(filepath.Join(dir, "sdf"), objstore.SDFStoreOptions{Geometry: g, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		n, err := Start(ctx, Config{Dir: dir, Store: st, NodeID: 4, RepairReserve: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := start()
	svc := &service{n: n}
	write := func(i uint32) error {
		id := direct.ChunkID{Object: 9, Version: 1, Index: i}
		data := make([]byte, direct.ChunkSize)
		data[0] = byte(i)
		return n.chunks.WriteChunk(id, data, direct.Sums(id, data), false)
	}
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Fill(ctx, &nodepb.FillRequest{LeaveBytes: 5}); !base.IsInvalidArgument(wire.FromStatus(err)) {
		t.Fatalf("unfill with leave_bytes: %v", err)
	}
	resp, err := svc.Fill(ctx, &nodepb.FillRequest{Fill: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("filled: %d ballast bytes, %d free", resp.BallastBytes, resp.FreeBytes)
	if resp.BallastBytes == 0 || resp.FreeBytes >= uint64(direct.ChunkSize) {
		t.Fatalf("fill left %d bytes free with %d of ballast", resp.FreeBytes, resp.BallastBytes)
	}
	if err := write(1); !base.IsNoSpace(err) {
		t.Fatalf("a chunk write on a full device: %v, want no space", err)
	}
	// The ballast stays across a restart; Unfill then frees it.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = start()
	defer n.Close()
	svc = &service{n: n}
	if err := write(2); !base.IsNoSpace(err) {
		t.Fatalf("a chunk write after the restart: %v, want no space", err)
	}
	un, err := svc.Fill(ctx, &nodepb.FillRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if un.FreeBytes <= resp.FreeBytes+uint64(direct.ChunkSize) {
		t.Fatalf("unfill: %d bytes free, was %d", un.FreeBytes, resp.FreeBytes)
	}
	if err := write(3); err != nil {
		t.Fatalf("a chunk write after unfill: %v", err)
	}
	if names, _ := n.inner.List(ballastPrefix); len(names) != 0 {
		t.Fatalf("ballast left: %v", names)
	}

	// Plain files: refused, nothing written.
	pn, err := Start(ctx, Config{Dir: t.TempDir(), NodeID: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer pn.Close()
	if _, _, err := pn.Fill(0); !base.IsInvalidArgument(err) {
		t.Fatalf("fill of a plain-file store: %v", err)
	}
	if _, _, err := n.Fill(-1); !base.IsInvalidArgument(err) {
		t.Fatalf("fill leaving -1 bytes: %v", err)
	}
}
