package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
)

func runKVCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return out.String() + errOut.String(), code
}

func TestKVCommandsAgainstLocalCluster(t *testing.T) {
	// No block cache: a clean cached copy of the block damaged below
	// would hide the damage from reads (see Replica.CorruptBlock).
	c, err := kvcluster.Start(kvcluster.Config{Splits: []string{"m"}, Options: kv.Options{CacheBytes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var parts []string
	for _, id := range c.NodeIDs() {
		parts = append(parts, id.String()[1:]+"="+c.Addrs[id])
	}
	flags := []string{"--addrs", strings.Join(parts, ","), "--splits", "m"}
	kvRun := func(args ...string) (string, int) {
		return runKVCLI(t, append(append([]string{"kv"}, args...), flags...)...)
	}
	for _, kvs := range [][2]string{{"apple", "red"}, {"banana", "yellow"}, {"zucchini", "green"}} {
		if out, code := kvRun("put", kvs[0], kvs[1]); code != 0 || !strings.HasPrefix(out, "ok index=") {
			t.Fatalf("put: %d %s", code, out)
		}
	}
	if out, code := kvRun("get", "zucchini"); code != 0 || out != "green\n" {
		t.Fatalf("get: %d %q", code, out)
	}
	if out, code := runKVCLI(t, append([]string{"ctl", "kv", "get", "zucchini"}, flags...)...); code != 0 || out != "green\n" {
		t.Fatalf("ctl kv get: %d %q", code, out)
	}
	// An eventual read may be served by a replica that has not applied the
	// put yet: it sees the value within a bounded time.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, code := kvRun("get", "banana", "--consistency", "eventual")
		if code == 0 && out == "yellow\n" {
			break
		}
		if time.Now().After(deadline) || (code != 0 && !strings.Contains(out, "not found")) {
			t.Fatalf("eventual get: %d %q", code, out)
		}
	}
	if out, code := kvRun("del", "apple"); code != 0 {
		t.Fatalf("del: %d %s", code, out)
	}
	if out, code := kvRun("scan", "a", ""); code != 0 || out != "banana\tyellow\nzucchini\tgreen\n" {
		t.Fatalf("scan: %d %q", code, out)
	}
	if out, code := kvRun("get", "apple"); code != 1 || !strings.Contains(out, "not found") {
		t.Fatalf("get deleted: %d %q", code, out)
	}
	if out, code := kvRun("put", "", "x"); code != 2 {
		t.Fatalf("empty key: exit %d, want 2: %s", code, out)
	}
	if out, code := kvRun("get", "x", "--consistency", "bogus"); code != 2 {
		t.Fatalf("bad consistency: exit %d, want 2: %s", code, out)
	}
	corruptOut, code := kvRun("corrupt", "banana", "--node", "2")
	if code != 0 || !strings.Contains(corruptOut, "damaged the data block") {
		t.Fatalf("corrupt: %d %s", code, corruptOut)
	}
	// The damage is found by the replica's own scrub or a read, whenever
	// that happens: wait for status to report it.
	var out string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, code = kvRun("status")
		replicaLines := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "s1 ") || strings.HasPrefix(line, "s2 ") {
				replicaLines++
			}
		}
		if code != 0 || replicaLines != 6 {
			t.Fatalf("status: %d %s", code, out)
		}
		if strings.Contains(out, "last detection: ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never reported the detection of %s: %s", corruptOut, out)
		}
		// An eventual read of the damaged key from any replica helps the
		// victim find it sooner.
		kvRun("get", "banana", "--consistency", "eventual")
	}
	if out, code := runKVCLI(t, "kv", "get", "x", "--addrs", "nonsense"); code != 2 {
		t.Fatalf("bad addrs: exit %d: %s", code, out)
	}
}

func TestKVDemo(t *testing.T) {
	out, code := runKVCLI(t, "kv", "demo", "--keys", "2000")
	if code != 0 || !strings.Contains(out, "patches 1, rebuilds 0") || !strings.Contains(out, "replicas identical   true") ||
		!strings.Contains(out, "errors seen by the application 0, wrong data 0") {
		t.Fatalf("demo: %d\n%s", code, out)
	}
}

// TestKVAgainstDevCluster: the dev cluster's storage nodes host the KV
// store with the coordinator's placement; kv and ctl kv reach it through
// the cluster endpoint alone.
func TestKVAgainstDevCluster(t *testing.T) {
	o := devOptions{dir: t.TempDir(), nodes: 4, store: "file", readMode: "direct", maxObject: base.MiB, kv: true, kvSplits: "m"}
	o.scrub.off = true
	endpoint := []string{"--endpoint", startDevForTest(t, o)}
	// The nodes open their replicas once they see the layout: the first
	// write waits for them (the client retries an unavailable replica).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, code := runKVCLI(t, append([]string{"ctl", "kv", "put", "apple", "red"}, endpoint...)...)
		if code == 0 && strings.HasPrefix(out, "ok index=") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ctl kv put: %d %s", code, out)
		}
	}
	if out, code := runKVCLI(t, append([]string{"kv", "put", "zebra", "stripes"}, endpoint...)...); code != 0 {
		t.Fatalf("kv put: %d %s", code, out)
	}
	if out, code := runKVCLI(t, append([]string{"ctl", "kv", "get", "zebra"}, endpoint...)...); code != 0 || out != "stripes\n" {
		t.Fatalf("ctl kv get: %d %q", code, out)
	}
	if out, code := runKVCLI(t, append([]string{"kv", "scan"}, endpoint...)...); code != 0 || out != "apple\tred\nzebra\tstripes\n" {
		t.Fatalf("kv scan: %d %q", code, out)
	}
	out, code := runKVCLI(t, append([]string{"ctl", "kv", "init", "--splits", "a,b,c"}, endpoint...)...)
	if code != 0 || !strings.Contains(out, "already has a KV layout") || strings.Count(out, "replicas=") != 2 {
		t.Fatalf("ctl kv init on a placed cluster: %d %s", code, out)
	}
	// Every replica (2 shards x 3) reports healthy once it has opened and
	// checked its engine.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, code = runKVCLI(t, append([]string{"ctl", "kv", "status"}, endpoint...)...)
		if code == 0 && strings.Count(out, "healthy") == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ctl kv status: %d %s", code, out)
		}
	}
	// bench --kv loads the same store: range reads of keys it wrote
	// first, every row checked, one JSON object with the figures.
	out, code = runKVCLI(t, append([]string{"bench", "--kv", "--op", "range", "--keys", "60", "--range-keys", "4", "--value-size", "100",
		"--concurrency", "2", "--duration", "300ms", "--format", "json"}, endpoint...)...)
	var r map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("bench --kv: %d %s", code, out)
	}
	if r["store"] != "kv" || r["op"] != "range" || r["errors"].(float64) != 0 || r["ops"].(float64) <= 0 || r["latency_ms_p99"].(float64) <= 0 {
		t.Fatalf("bench --kv: %s", out)
	}
	if _, code := runKVCLI(t, append([]string{"bench", "--kv", "--op", "mixed", "--duration", "10ms"}, endpoint...)...); code != 2 {
		t.Fatalf("bench --kv --op mixed: exit %d, want 2", code)
	}
}
