package cli

import (
	"context"
	"io"
	"regexp"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// TestDemo runs `flashmend demo --keep=false` on a small data set: it
// prints the endpoints, and each step of its story happens (every read
// checked against the bytes written, the die failure detected and
// repaired).
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out lockedBuffer
	o := demoOptions{dir: t.TempDir(), objects: 12, objectBytes: 256 * base.KiB, seed: 3}
	if err := runDemo(ctx, o, &out, io.Discard); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`(?m)^S3: http://127\.0\.0\.1:\d+ access key: \S+ secret key: \S+$`,
		`(?m)^dashboard: http://127\.0\.0\.1:\d+/$`,
		`(?m)^metrics: http://127\.0\.0\.1:\d+/metrics$`,
		`\[2\] bit rot.*\n.*rewrote the bad one: [1-9]`,
		`UBER 1e-05: read all 12 objects, every byte right`,
		`the node detected it: die \S+ failed`,
		`Reparo rebuilt only what the die held`,
		`read all 12 objects again, every byte right`,
		`die-failed 1, die-repaired [1-9]`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no %q in the demo's output:\n%s", want, out.String())
		}
	}
}
