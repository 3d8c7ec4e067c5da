package sdfvfs

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf"
)

// BenchmarkPebbleWrite loads Pebble on sdfvfs (memory device) with
// 16-byte keys and 100-byte values in a seeded random order and reports:
//
//	sdf-WA     flash bytes programmed / bytes Pebble appended (padding of
//	           synced partial pages, tail rewrites, P2L pages, sdf metadata,
//	           GC copies)
//	pebble-WA  bytes Pebble appended (WAL, sstables, MANIFEST, shadows) /
//	           application key+value bytes
//	total-WA   flash bytes / application bytes
//
// Variants: one synced batch per 100 keys or an unsynced batch per 1000
// keys; a fill of 50,000 keys or three overwrite generations of them; a
// 64 MiB device or a 24 MiB one (space pressure: host GC may run).
func BenchmarkPebbleWrite(b *testing.B) {
	for _, blocks := range []int{64, 24} {
		for _, batch := range []struct {
			keys int
			sync bool
		}{{100, true}, {1000, false}} {
			for _, gens := range []int{1, 3} {
				g := testGeometry()
				g.BlocksPerDie = blocks
				name := fmt.Sprintf("device=%s/batch=%d/sync=%t/generations=%d", g.RawCapacity(), batch.keys, batch.sync, gens)
				b.Run(name, func(b *testing.B) { benchWrite(b, g, 50_000, batch.keys, batch.sync, gens) })
			}
		}
	}
}

func benchWrite(b *testing.B, g flash.Geometry, n, batch int, sync bool, gens int) {
	const seed = 1
	var last sdf.Stats
	var appBytes int64
	b.ReportAllocs()
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		rng := rand.New(rand.NewSource(seed))
		dev, err := flash.NewMemory(g, flash.Options{Seed: seed})
		if err != nil {
			b.Fatal(err)
		}
		fs := mount(b, dev, false, Options{})
		db, err := pebble.Open("db", pebbleOptions(b, fs))
		if err != nil {
			b.Fatal(err)
		}
		wo := pebble.NoSync
		if sync {
			wo = pebble.Sync
		}
		val := make([]byte, 100)
		appBytes = 0
		b.StartTimer()
		for g := 0; g < gens; g++ {
			order := rng.Perm(n)
			for lo := 0; lo < n; lo += batch {
				bt := db.NewBatch()
				for _, i := range order[lo:min(lo+batch, n)] {
					k := []byte(fmt.Sprintf("k%015d", i))
					rng.Read(val)
					if err := bt.Set(k, val, nil); err != nil {
						b.Fatal(err)
					}
					appBytes += int64(len(k) + len(val))
				}
				if err := bt.Commit(wo); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		last = fs.SDF().Stats()
		if err := fs.SDF().Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.SetBytes(appBytes)
	b.ReportMetric(last.WriteAmplification(), "sdf-WA")
	b.ReportMetric(float64(last.UserBytes)/float64(appBytes), "pebble-WA")
	b.ReportMetric(float64(last.FlashBytes)/float64(appBytes), "total-WA")
	b.ReportMetric(float64(last.GCPages), "gc-pages")
	b.Logf("sdf: %s", last)
}
