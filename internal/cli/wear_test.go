package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// TestDevWear runs `flashmend dev --wear-policy chameleon` on emulated
// flash and reads the balancer with `flashmend ctl wear`.
func TestDevWear(t *testing.T) {
	o := devOptions{dir: t.TempDir(), nodes: 6, store: "sdf", readMode: "direct", maxObject: base.MiB, deviceSize: 64 * base.MiB}
	o.scrub.off = true
	o.wear = wearFlags{policy: "chameleon", epoch: 200 * time.Millisecond, moves: 200 * time.Millisecond}
	ep := startDevForTest(t, o)
	ctl := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main(append([]string{"ctl", "--endpoint", ep}, args...), &out, &errOut); code != 0 {
			t.Fatalf("ctl %v: exit %d: %s %s", args, code, out.String(), errOut.String())
		}
		return out.String()
	}
	file := filepath.Join(t.TempDir(), "obj")
	if err := os.WriteFile(file, bytes.Repeat([]byte("wear "), 40000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		ctl("put", k, file)
	}
	// The policy starts objects as EC, whatever the put asked.
	if out := ctl("stat", "a"); !strings.Contains(out, " ec") {
		t.Fatalf("stat: %s", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := ctl("wear")
		if testing.Verbose() {
			t.Log(out)
		}
		if strings.Contains(out, "policy chameleon (initial ec)") && strings.Contains(out, "erase counts: mean") &&
			strings.Contains(out, "EC        3") && !strings.Contains(out, "epoch 0 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ctl wear:\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestWearThroughBinary runs the built binary as an operator would: `flashmend
// dev --wear-policy chameleon` on emulated flash, puts through `ctl put`,
// and `ctl wear` shows the policy, every node's erase counts (cumulative,
// last epoch, per die) and the state mix.
func TestWearThroughBinary(t *testing.T) {
	wd := t.TempDir()
	dev, _ := startDevBinary(t, wd, "--nodes", "6", "--wear-policy", "chameleon", "--wear-epoch", "200ms", "--wear-move-interval", "200ms")
	file := filepath.Join(wd, "obj")
	if err := os.WriteFile(file, bytes.Repeat([]byte("wear "), 40000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if out, errOut, code := runBinary(t, wd, "ctl", "put", k, file); code != 0 {
			t.Fatalf("ctl put %s: exit %d\n%s%s", k, code, out, errOut)
		}
	}
	// A node row: id, up, cumulative erases, last epoch, utilization, then
	// one count per die (a 64 MiB device has several).
	nodeRow := regexp.MustCompile(`(?m)^[1-6] +up +\d+ +\d+ +\d+\.\d% +\d+( \d+)+ *$`)
	var out string
	waitFor(t, "ctl wear to show a balanced epoch with per-die erase counts", func() bool {
		var errOut string
		var code int
		out, errOut, code = runBinary(t, wd, "ctl", "wear")
		if code != 0 {
			t.Fatalf("ctl wear: exit %d\n%s%s", code, out, errOut)
		}
		return strings.Contains(out, "policy chameleon (initial ec)") && !strings.Contains(out, "epoch 0 ") &&
			strings.Contains(out, "ERASES PER DIE") && len(nodeRow.FindAllString(out, -1)) == 6 &&
			regexp.MustCompile(`(?m)^EC +3 `).MatchString(out) && strings.Contains(out, "moves: ")
	})
	t.Logf("ctl wear:\n%s", out)
	dev.signal(t, syscall.SIGTERM)
	if code := dev.wait(t, "dev after SIGTERM"); code != 0 {
		t.Fatalf("dev after SIGTERM: exit %d\n%s", code, dev.errOut.String())
	}
}
