package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/kv"
)

func TestOperation(t *testing.T) {
	for in, want := range map[string]string{
		"/flashmend.node.Node/ReadChunk": "Node/ReadChunk",
		"/flashmend.kv.KV/Get":           "KV/Get",
		"/Plain/Method":                  "Plain/Method",
		"odd":                            "odd",
	} {
		if got := operation(in); got != want {
			t.Errorf("operation(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRepairEvents checks what the repair hooks record: a failed repair
// counts as failed and moves no bytes; latencies land in the histograms.
func TestRepairEvents(t *testing.T) {
	r := New()
	copts := r.ClientOptions(client.Options{})
	copts.OnRepair(client.RepairEvent{Kind: client.RepairVote, Node: 2, Bytes: 65536, Latency: 3 * time.Millisecond})
	copts.OnRepair(client.RepairEvent{Kind: client.RepairVote, Node: 3, Bytes: 65536, Err: errors.New("device full")})
	copts.OnRepair(client.RepairEvent{Kind: client.RepairECRow, Node: 4, Bytes: 100, Latency: time.Second})
	var seen []kv.RepairEvent
	kopts := r.KVOptions(kv.Options{OnRepair: func(ev kv.RepairEvent) { seen = append(seen, ev) }})
	now := time.Unix(1000, 0)
	kopts.OnRepair(kv.RepairEvent{Node: 5, Detected: now, Applied: now.Add(40 * time.Millisecond)})
	kopts.OnRepair(kv.RepairEvent{Node: 5, Rebuild: true, Detected: now, Applied: now.Add(2 * time.Second)})
	if len(seen) != 2 {
		t.Fatalf("the previous kv OnRepair saw %d events, want 2", len(seen))
	}
	want := `
# HELP flashmend_client_repair_bytes_total Bytes this process's clients wrote to repair chunks, by kind.
# TYPE flashmend_client_repair_bytes_total counter
flashmend_client_repair_bytes_total{kind="ec_row"} 100
flashmend_client_repair_bytes_total{kind="vote"} 65536
# HELP flashmend_client_repairs_total Repair writes this process's clients attempted, by how the good data was found (chunk, vote, ec_row) and result (ok, failed).
# TYPE flashmend_client_repairs_total counter
flashmend_client_repairs_total{kind="ec_row",result="ok"} 1
flashmend_client_repairs_total{kind="vote",result="failed"} 1
flashmend_client_repairs_total{kind="vote",result="ok"} 1
`
	if err := testutil.GatherAndCompare(r.Gatherer(), strings.NewReader(want), "flashmend_client_repairs_total", "flashmend_client_repair_bytes_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(r.clientRepairSeconds); n != 2 {
		t.Errorf("client repair latency series: %d, want 2 (vote, ec_row)", n)
	}
	if n := testutil.CollectAndCount(r.repairSeconds); n != 2 {
		t.Errorf("kv repair latency series: %d, want 2 (kv_patch, kv_rebuild)", n)
	}
	problems, err := testutil.GatherAndLint(r.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "flashmend_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}
