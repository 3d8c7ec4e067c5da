package sdfvfs

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
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
//	copy-bytes/app-byte  bytes kept in shadow and range copies per
//	           application byte (the cost of DIRECT policy 2)
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
				b.Run(name, func(b *testing.B) { benchWrite(b, g, Options{}, 50_000, batch.keys, batch.sync, gens) })
			}
		}
	}
	// The cost of DIRECT policy 2 for sstables: range copies of every
	// table's metadata (the MANIFEST and OPTIONS shadows are always on).
	for _, sync := range []bool{true, false} {
		opts := Options{MetadataRanges: SSTMetadataRanges(sstable.ReaderOptions{})}
		name := fmt.Sprintf("device=64MiB/batch=1000/sync=%t/generations=3/sst-metadata-copies", sync)
		b.Run(name, func(b *testing.B) { benchWrite(b, testGeometry(), opts, 50_000, 1000, sync, 3) })
	}
}

func benchWrite(b *testing.B, g flash.Geometry, opts Options, n, batch int, sync bool, gens int) {
	const seed = 1
	var last sdf.Stats
	var appBytes, copyBytes int64
	b.ReportAllocs()
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		rng := rand.New(rand.NewSource(seed))
		dev, err := flash.NewMemory(g, flash.Options{Seed: seed})
		if err != nil {
			b.Fatal(err)
		}
		fs := mount(b, dev, false, opts)
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
		st := fs.Stats()
		copyBytes = st.ShadowBytes + st.RangeCopyBytes
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
	b.ReportMetric(float64(copyBytes)/float64(appBytes), "copy-bytes/app-byte")
	b.Logf("sdf: %s", last)
}
