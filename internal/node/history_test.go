package node

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/filestore"
	"github.com/flashmend/flashmend/internal/wire"
)

func historyOf(t *testing.T, c nodepb.NodeClient) *nodepb.RepairHistory {
	t.Helper()
	st, err := c.Stats(context.Background(), &nodepb.StatsRequest{WithHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	return st.History
}

// eventsString renders recent events without their times (golden-style).
func eventsString(h *nodepb.RepairHistory) string {
	var b strings.Builder
	for _, e := range h.Recent {
		fmt.Fprintf(&b, "%s key=%q o=%d v=%d s=%d c=%d %s\n", e.Kind, e.Key, e.Object, e.Version, e.Shard, e.Index, e.Detail)
	}
	return b.String()
}

// TestRepairHistorySurvivesRestart checks issue 17 item 7: a node's repair
// counts and recent repairs (object, chunk, kind, time) are durable across
// clean restarts, kept in three checksummed copies like other node
// metadata, and a history that cannot be read at all is reported, not
// silently reset.
func TestRepairHistorySurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	start := func() (*Node, nodepb.NodeClient) {
		n, err := Start(ctx, Config{Dir: dir, NodeID: 3})
		if err != nil {
			t.Fatal(err)
		}
		return n, dial(t, n.Addr())
	}
	n, c := start()
	if n.Dir() != dir {
		t.Fatalf("Dir %q, want %q", n.Dir(), dir)
	}
	id := direct.ChunkID{Object: 11, Version: 22, Index: 1}
	ref := &nodepb.ChunkRef{Object: 11, Version: 22, Index: 1}
	data := bytes.Repeat([]byte("history "), 1000)
	sums := direct.Sums(id, data)
	info := &nodepb.BlobInfo{Key: "k", Object: 11, Version: 22, Redundancy: "rep", Chunks: 2}
	steps := []func() error{
		func() error {
			_, err := c.WriteChunk(ctx, &nodepb.WriteChunkRequest{Chunk: ref, Data: data, Sums: sums, Info: info})
			return err
		},
		func() error {
			_, err := c.CorruptChunk(ctx, &nodepb.CorruptChunkRequest{Chunk: ref, OffsetBytes: 5, Bits: 2})
			return err
		},
		func() error { _, err := c.ReadChunk(ctx, &nodepb.ReadChunkRequest{Chunk: ref}); return err },
		func() error {
			_, err := c.WriteChunk(ctx, &nodepb.WriteChunkRequest{Chunk: ref, Data: data, Sums: sums, Repair: true})
			return err
		},
		func() error { _, err := c.ReadChunk(ctx, &nodepb.ReadChunkRequest{Chunk: ref}); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	bad := append([]byte(nil), data...)
	bad[0] ^= 1
	if _, err := c.WriteChunk(ctx, &nodepb.WriteChunkRequest{Chunk: ref, Data: bad, Sums: sums, Repair: true}); !base.IsCorruption(wire.FromStatus(err)) {
		t.Fatalf("corrupt repair write: %v", err)
	}
	const want = "persistent key=\"k\" o=11 v=22 s=0 c=1 \n" +
		"repaired key=\"k\" o=11 v=22 s=0 c=1 \n" +
		"rejected-write key=\"k\" o=11 v=22 s=0 c=1 \n"
	h := historyOf(t, c)
	if got := eventsString(h); got != want {
		t.Fatalf("events:\n%s\nwant:\n%s", got, want)
	}
	for _, e := range h.Recent {
		if age := time.Since(time.UnixMilli(e.UnixMs)); age < 0 || age > time.Hour {
			t.Fatalf("event time %v", time.UnixMilli(e.UnixMs))
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// A clean restart keeps counts and events, with one copy of the
	// history file damaged and another missing: it is voted, rewritten,
	// and the rewrite is itself recorded.
	fs, err := filestore.Open(dir+"/store", false)
	if err != nil {
		t.Fatal(err)
	}
	copies := objstore.CopyNames(historyFile)
	if err := fs.FlipBits(copies[0], 100, 3); err != nil {
		t.Fatal(err)
	}
	if err := fs.Delete(copies[2]); err != nil {
		t.Fatal(err)
	}
	fs.Close()
	n, c = start()
	h = historyOf(t, c)
	if got := eventsString(h); !strings.HasPrefix(got, want) || !strings.Contains(got[len(want):], "meta-repaired") {
		t.Fatalf("events after restart:\n%s", got)
	}
	wantCounts := map[string]int64{KindPersistent: 1, KindRepaired: 1, KindRejectedWrite: 1, CountChunksRead: 2}
	for k, v := range wantCounts {
		if h.Counts[k] != v {
			t.Fatalf("counts after restart %v, want %v", h.Counts, wantCounts)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// Every copy damaged: the node still starts, and says the history was
	// lost instead of silently showing zeros.
	fs, _ = filestore.Open(dir+"/store", false)
	for _, name := range copies {
		if err := fs.FlipBits(name, 30, 1); err != nil {
			t.Fatal(err)
		}
	}
	fs.Close()
	n, c = start()
	defer n.Close()
	h = historyOf(t, c)
	if len(h.Recent) != 1 || h.Recent[0].Kind != KindHistoryLost || h.Counts[KindHistoryLost] != 1 || h.Counts[KindPersistent] != 0 {
		t.Fatalf("after losing every copy: %v", h)
	}
}

// TestHistoryIsBounded keeps the newest historyEvents events and every
// count.
func TestHistoryIsBounded(t *testing.T) {
	store, err := filestore.Open(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clock := base.NewManualClock(time.Unix(1e9, 0))
	h := loadHistory(objstore.NewMetaFiles(store), clock.Now, t.Logf)
	for i := 0; i < 3*historyEvents+7; i++ {
		clock.Advance(time.Second)
		h.record(KindTransient, &direct.ChunkID{Object: 1, Version: 2, Index: uint32(i)}, "")
		if i%50 == 0 {
			if err := h.flush(false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := h.flush(false); err != nil {
		t.Fatal(err)
	}
	again := loadHistory(objstore.NewMetaFiles(store), clock.Now, t.Logf)
	snap := again.snapshot(func(uint64, uint64, uint32) string { return "" })
	if len(snap.Recent) != historyEvents || snap.Counts[KindTransient] != 3*historyEvents+7 {
		t.Fatalf("%d events, counts %v", len(snap.Recent), snap.Counts)
	}
	if first, last := snap.Recent[0].Index, snap.Recent[historyEvents-1].Index; first != 2*historyEvents+7 || last != 3*historyEvents+6 {
		t.Fatalf("kept events %d..%d", first, last)
	}
}
