package kv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/kv"
)

// TestLaggingFollowerCatchesUpFromSnapshot compacts the raft log while a
// follower is down; on restart the leader no longer has the entries it
// needs and sends a snapshot point, and the follower fetches the state.
func TestLaggingFollowerCatchesUpFromSnapshot(t *testing.T) {
	c, cl := startCluster(t, kv.Options{LogCompactEntries: 50, LogKeepEntries: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	follower := leader%3 + 1
	if err := c.StopNode(follower); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if _, err := cl.Put(ctx, []byte(fmt.Sprintf("k%04d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	lr := c.Node(leader).Replica(1)
	if first, _ := lr.RaftLog().FirstIndex(); first < 100 {
		t.Fatalf("leader log not compacted: first index %d", first)
	}
	if err := c.RestartNode(follower); err != nil {
		t.Fatal(err)
	}
	fr := c.Node(follower).Replica(1)
	waitFor(t, "snapshot install", func() bool { return fr.Stats().Rebuilds > 0 })
	if _, err := cl.Put(ctx, []byte("after"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	assertSame(t, checksums(t, c, 1))
	// The follower keeps working from the snapshot on: restart it again.
	if err := c.StopNode(follower); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartNode(follower); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(ctx, []byte("after2"), []byte("y")); err != nil {
		t.Fatal(err)
	}
	assertSame(t, checksums(t, c, 1))
	t.Logf("leader log %v; follower %v", lr.RaftLog().Stats(), c.Node(follower).Replica(1).Stats())
}
