package guardfs_test

import (
	"context"
	"math/rand"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/guardfs/guardtest"
)

// TestOverhead measures what guardfs stores besides Pebble's files for a
// store shaped like a KV replica (Pebble's default 4 KiB blocks, no
// filters, 800 B values, no WAL): sidecar bytes against sstable bytes, and
// framed-file bytes against their logical size. The doc's figures come
// from its log (go test ./internal/guardfs -run TestOverhead -v).
func TestOverhead(t *testing.T) {
	const seed, keys = 23, 10_000
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	inner := vfs.NewMem()
	g := newGuard(t, inner, guardfs.Options{})
	opts := &pebble.Options{FS: g, DisableWAL: true, FormatMajorVersion: pebble.FormatNewest,
		Logger: guardtest.PebbleOptions(t, g).Logger}
	db, err := pebble.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]byte, 800)
	for i := 0; i < keys; i++ {
		rng.Read(v)
		if err := db.Set([]byte(guardtest.KeyOf(i)), v, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact(context.Background(), []byte(guardtest.KeyOf(0)), []byte(guardtest.KeyOf(keys)), false); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := guardtest.Walk(inner, "/db")
	if err != nil {
		t.Fatal(err)
	}
	var sst, sidecar, framedStored int64
	for _, f := range files {
		fi, err := inner.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		switch b := inner.PathBase(f); {
		case strings.HasPrefix(b, "s."):
			sidecar += fi.Size()
		case strings.HasSuffix(b, ".sst"):
			sst += fi.Size()
		case strings.HasPrefix(b, "m."), guardfs.DefaultClassify(b) == guardfs.ClassFramed:
			framedStored += fi.Size()
		}
	}
	var framedLogical int64
	for _, n := range list(t, g, "/db") {
		if guardfs.DefaultClassify(n) == guardfs.ClassFramed {
			fi, err := g.Stat("/db/" + n)
			if err != nil {
				t.Fatal(err)
			}
			framedLogical += fi.Size()
		}
	}
	ratio := float64(sidecar) / float64(sst)
	t.Logf("sstables %d B, sidecars %d B (%.2f%%, %d copies); framed files %d B logical, %d B stored (x%.2f)",
		sst, sidecar, 100*ratio, g.Options().Copies-1, framedLogical, framedStored, float64(framedStored)/float64(max(1, framedLogical)))
	if ratio > 0.05 {
		t.Fatalf("sidecars take %.1f%% of sstable bytes", 100*ratio)
	}
}
