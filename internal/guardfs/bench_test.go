package guardfs_test

import (
	"context"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/guardfs/guardtest"
)

// BenchmarkPebble writes 20,000 keys of 800 B (flushes, one compaction,
// no WAL, as the KV store runs) and reads them all back, on the OS file
// system, with and without guardfs: the cost of the copies, sidecars and
// read-path checks (go test ./internal/guardfs -run - -bench Pebble
// -benchtime 3x).
func BenchmarkPebble(b *testing.B) {
	const keys = 20_000
	for _, guarded := range []bool{false, true} {
		name := "plain"
		if guarded {
			name = "guardfs"
		}
		b.Run(name, func(b *testing.B) {
			v := make([]byte, 800)
			rand.New(rand.NewSource(1)).Read(v)
			b.SetBytes(keys * 800)
			for i := 0; i < b.N; i++ {
				var fs vfs.FS = vfs.Default
				if guarded {
					fs = newGuard(b, vfs.Default, guardfs.Options{})
				}
				dir := filepath.Join(b.TempDir(), "db")
				opts := &pebble.Options{FS: fs, DisableWAL: true, FormatMajorVersion: pebble.FormatNewest,
					Logger: guardtest.PebbleOptions(b, fs).Logger}
				db, err := pebble.Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				for k := 0; k < keys; k++ {
					if err := db.Set([]byte(guardtest.KeyOf(k)), v, pebble.NoSync); err != nil {
						b.Fatal(err)
					}
				}
				if err := db.Flush(); err != nil {
					b.Fatal(err)
				}
				if err := db.Compact(context.Background(), []byte(guardtest.KeyOf(0)), []byte(guardtest.KeyOf(keys)), false); err != nil {
					b.Fatal(err)
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				if db, err = pebble.Open(dir, opts); err != nil {
					b.Fatal(err)
				}
				for k := 0; k < keys; k++ {
					_, c, err := db.Get([]byte(guardtest.KeyOf(k)))
					if err != nil {
						b.Fatal(err)
					}
					c.Close()
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
