package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/flashmend/flashmend/internal/gen/coordpb"
)

// TestRestartOnOtherPorts restarts the embedded etcd when its previous
// ports are taken: the data and the cluster identity survive.
func TestRestartOnOtherPorts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, err := Start(ctx, Config{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(ctx, &coordpb.JoinRequest{Addr: "127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	id := c.ClusterID()
	c.Close()
	b, err := os.ReadFile(filepath.Join(dir, "etcd", "ports.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Client int `json:"client"`
		Peer   int `json:"peer"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{p.Client, p.Peer} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Skipf("port %d taken by someone else: %v", port, err)
		}
		defer l.Close()
	}
	c, err = Start(ctx, Config{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ClusterID() != id {
		t.Fatalf("cluster id %s then %s", id, c.ClusterID())
	}
	nodes, err := c.ListNodes(ctx, &coordpb.ListNodesRequest{})
	if err != nil || len(nodes.Nodes) != 1 {
		t.Fatalf("members after restart: %v %v", nodes, err)
	}
}
