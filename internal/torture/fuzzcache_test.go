package torture

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFuzzMetaPageCacheFileVanished is named after the miss of `torture
// all` (seed 20261125): FuzzMetaPage failed, with no failing input,
// because a file of the Go build cache's shared fuzz directory vanished
// between the fuzzer listing the directory and reading the file (another
// process fuzzing the same target). The fault is reproduced here in a
// cache directory of the test's own, with a listed file that is not there
// (a dangling link): the fuzz run fails exactly as it did, which also
// shows that the command's cache directory is the one the test binary
// reads. The harness's runs each get a private cache directory that
// nothing else knows and that is removed when the target is done, seeded
// from the shared one (a listed file that is gone is skipped) and adding
// what it found to it.
func TestFuzzMetaPageCacheFileVanished(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	target := FuzzTarget{Pkg: "./internal/objstore/sumsrec", Name: "FuzzDecodeSums"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The fault: a file listed in the cache directory is gone when read.
	cache := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cache, target.Name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(cache, "vanished"), filepath.Join(cache, target.Name, "799008b8b472f869")); err != nil {
		t.Fatal(err)
	}
	cmd := fuzzCommand(ctx, root, target, time.Second, 1, cache)
	if n := len(cmd.Args); n < 2 || cmd.Args[n-2] != "-args" || cmd.Args[n-1] != "-test.fuzzcachedir="+cache {
		t.Fatalf("the fuzz command does not give the test binary its own cache directory: %q", cmd.Args)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil || !strings.Contains(out.String(), "no such file or directory") {
		t.Fatalf("a cache file that vanished under the fuzzer: err %v, output:\n%s", err, out.String())
	}

	// The harness's cache is seeded from the shared one, where a listed
	// file that is gone is skipped, and what the run found is added to it.
	shared := t.TempDir()
	seed, err := os.ReadFile(filepath.Join(root, "internal/objstore/sumsrec/testdata/fuzz", target.Name, "197480bfef9b463b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "cached"), seed, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(shared, "vanished"), filepath.Join(shared, "799008b8b472f869")); err != nil {
		t.Fatal(err)
	}
	r := fuzzOne(ctx, root, target, time.Second, 1, shared)
	if r.Failed || r.Execs == 0 {
		t.Fatalf("fuzzing %s seeded from a cache with a vanished file: %+v", target.Name, r)
	}
	after, err := os.ReadDir(shared)
	if err != nil {
		t.Fatal(err)
	}
	if r.New > 0 && len(after) <= 2 {
		t.Fatalf("the run found %d new inputs; the shared cache holds %d files, none of them", r.New, len(after))
	}
	if got, err := sharedFuzzCache(ctx, root, target); err != nil || !strings.HasSuffix(got, filepath.Join("fuzz", "github.com/flashmend/flashmend/internal/objstore/sumsrec", target.Name)) {
		t.Fatalf("shared fuzz cache of %s: %q, %v", target.Name, got, err)
	}

	// The harness: its own cache directory, removed afterwards.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	rs := Fuzz(ctx, root, []FuzzTarget{target}, time.Second, 1, t.Logf)
	if len(rs) != 1 || rs[0].Failed || rs[0].Execs == 0 {
		t.Fatalf("fuzzing %s: %+v", target.Name, rs)
	}
	left, err := filepath.Glob(filepath.Join(tmp, "flashmend-fuzzcache-*"))
	if err != nil || len(left) != 0 {
		t.Fatalf("fuzz cache directories left behind: %v %v", left, err)
	}
}
