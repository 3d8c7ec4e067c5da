package coord

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
)

// TestThreeMemberStore: a coordinator with a three-member store keeps its
// data when one member's store is damaged (its WAL truncated) or deleted:
// the member is replaced from the other two, no rebuild from the nodes;
// with two members damaged there is no quorum and the store starts afresh
// (the nodes then rebuild it, TestCoordinatorStoreLost).
func TestThreeMemberStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	start := func() (*Coordinator, *base.LogLines) {
		t.Helper()
		var logs base.LogLines
		c, err := Start(ctx, Config{Dir: dir, EtcdMembers: 3, UnsafeNoFsync: true, Logf: logs.Logf})
		if err != nil {
			t.Fatalf("start: %v\n%s", err, logs.String())
		}
		if len(c.EtcdEndpoints()) != 3 {
			t.Fatalf("endpoints %v", c.EtcdEndpoints())
		}
		return c, &logs
	}
	members := func(c *Coordinator) int {
		t.Helper()
		resp, err := c.ListNodes(ctx, &coordpb.ListNodesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Nodes)
	}
	c, _ := start()
	id := c.ClusterID()
	for i := 0; i < 30; i++ {
		if _, err := c.Join(ctx, &coordpb.JoinRequest{Addr: fmt.Sprintf("127.0.0.1:%d", 2000+i)}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()

	// Member 2's WAL truncated: replaced from members 1 and 3.
	names, _ := filepath.Glob(filepath.Join(dir, "etcd-2", "data", "member", "wal", "*.wal"))
	if len(names) == 0 {
		t.Fatal("member 2 has no WAL")
	}
	b, err := os.ReadFile(names[len(names)-1])
	if err != nil {
		t.Fatal(err)
	}
	used := len(b)
	for used > 0 && b[used-1] == 0 {
		used--
	}
	if err := os.WriteFile(names[len(names)-1], b[:used/2], 0o600); err != nil {
		t.Fatal(err)
	}
	c, logs := start()
	if n := members(c); n != 30 || c.ClusterID() != id {
		t.Fatalf("after replacing member 2: %d members, cluster %s (was %s)\n%s", n, c.ClusterID(), id, logs)
	}
	if !strings.Contains(logs.String(), "m2") || !strings.Contains(logs.String(), "replaced") {
		t.Fatalf("no replacement in the logs:\n%s", logs)
	}
	c.Close()

	// Member 3's directory deleted: replaced.
	if err := os.RemoveAll(filepath.Join(dir, "etcd-3")); err != nil {
		t.Fatal(err)
	}
	c, logs = start()
	if n := members(c); n != 30 || c.ClusterID() != id {
		t.Fatalf("after replacing member 3: %d members\n%s", n, logs)
	}
	c.Close()

	// Members 1 and 2 damaged: no quorum, a new store.
	for _, m := range []string{"etcd", "etcd-2"} {
		if err := os.RemoveAll(filepath.Join(dir, m, "data", "member", "wal")); err != nil {
			t.Fatal(err)
		}
	}
	c, logs = start()
	defer c.Close()
	if n := members(c); n != 0 || c.ClusterID() == id {
		t.Fatalf("after losing two members: %d members, cluster %s\n%s", n, c.ClusterID(), logs)
	}
	if !strings.Contains(logs.String(), "quorum") {
		t.Fatalf("no quorum message:\n%s", logs)
	}
}
