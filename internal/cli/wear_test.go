package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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
