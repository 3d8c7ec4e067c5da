package experiments

import (
	"context"
	"errors"
	"fmt"
	"math/rand"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/sdf"
	"github.com/flashmend/flashmend/internal/sdfvfs"
)

// sdfvfsWriteAmplification measures Pebble on internal/sdfvfs (SDF 002
// section 3: a storage engine on host-managed flash): the write
// amplification of each layer and the cost of the metadata copies
// (DIRECT policy 2), on an in-memory emulated device.
func sdfvfsWriteAmplification() Experiment {
	return Experiment{
		Name:        "sdfvfs-write-amplification",
		Description: "Pebble on SDF extent files: write amplification of sdf and of Pebble, GC copies, cost of the metadata copies",
		Run:         runSDFVFSWriteAmplification,
	}
}

// pebbleLoad is one variant of the load.
type pebbleLoad struct {
	blocksPerDie int
	batch        int
	sync         bool
	generations  int
	metaCopies   bool // range copies of every sstable's metadata
}

// pebbleLoadResult is what one variant measured.
type pebbleLoadResult struct {
	sdfWA, pebbleWA, totalWA, copyPerApp float64
	gcPages                              int64
}

func runSDFVFSWriteAmplification(ctx context.Context, cfg Config) (*report.Report, error) {
	keys := 50_000
	g := flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 64, PagesPerBlock: 32, PageSize: 4096, OOBSize: 128}
	var loads []pebbleLoad
	// NB: the device holds every generation several times over. On a
	// device near full, Pebble's use of space depends on when its
	// compactions run, and a run can fail or keep retrying: the host GC
	// under space pressure is measured in internal/sdf's overwrite
	// benchmark (the sdf experiment) instead.
	for _, b := range []struct {
		keys int
		sync bool
	}{{100, true}, {1000, false}} {
		for _, gens := range []int{1, 3} {
			loads = append(loads, pebbleLoad{blocksPerDie: 64, batch: b.keys, sync: b.sync, generations: gens})
		}
	}
	for _, sync := range []bool{true, false} {
		loads = append(loads, pebbleLoad{blocksPerDie: 64, batch: 1000, sync: sync, generations: 3, metaCopies: true})
	}
	if cfg.Quick {
		keys = 2_000
		loads = []pebbleLoad{{blocksPerDie: 64, batch: 100, sync: true, generations: 1},
			{blocksPerDie: 64, batch: 1000, sync: false, generations: 1, metaCopies: true}}
	}
	r, err := report.New("sdfvfs-write-amplification", "Pebble on SDF extent files: write amplification and the cost of metadata copies")
	if err != nil {
		return nil, err
	}
	r.Text("**What is measured.** Pebble (`internal/sdfvfs` over `internal/sdf` on an in-memory emulated device of "+
		"%d channels x %d dies, 4 KiB pages, 32 pages per block) loads %d keys of 16 B with 100 B values in a seeded random "+
		"order (seed %d), in batches of 100 keys each synced or of 1,000 unsynced; one generation writes every key once, "+
		"three overwrite it twice more. *sdf WA* is flash "+
		"bytes programmed over the bytes Pebble appended (padding of synced partial pages, their rewrite, P2L pages, sdf "+
		"metadata, GC copies); *Pebble WA* is the bytes Pebble appended (WAL, sstables, MANIFEST, shadows) over the "+
		"application's key and value bytes; *copies* are the bytes kept in shadow and range copies per application byte "+
		"(DIRECT policy 2: the MANIFEST and OPTIONS shadows always, range copies of every sstable's metadata where marked).",
		g.Channels, g.DiesPerChannel, keys, cfg.Seed)
	t := report.Table{Caption: "Write amplification of Pebble on sdfvfs",
		Header: []string{"device", "batch", "sync", "generations", "sstable metadata copies", "sdf WA", "Pebble WA", "total WA", "GC pages copied", "copies / app byte"}}
	for _, l := range loads {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		gl := g
		gl.BlocksPerDie = l.blocksPerDie
		res, err := runPebbleLoad(gl, l, keys, cfg.Seed)
		if err != nil {
			return nil, err
		}
		t.Rows = append(t.Rows, []string{gl.RawCapacity().String(), fmt.Sprint(l.batch), fmt.Sprint(l.sync), fmt.Sprint(l.generations),
			fmt.Sprint(l.metaCopies), fmt.Sprintf("%.2f", res.sdfWA), fmt.Sprintf("%.2f", res.pebbleWA), fmt.Sprintf("%.2f", res.totalWA),
			fmt.Sprint(res.gcPages), fmt.Sprintf("%.4f", res.copyPerApp)})
	}
	if err := r.Table(t); err != nil {
		return nil, err
	}
	r.Text("Pebble deletes whole files and the lifetime classes (WAL short, flushes medium, compactions long) keep them " +
		"in zones of their own, so host GC copies few pages. Pebble's own amplification varies with the timing of its " +
		"compactions from run to run; sdf's is set by the sync pattern.")
	return r, nil
}

// runPebbleLoad runs one variant on a fresh in-memory device.
func runPebbleLoad(g flash.Geometry, l pebbleLoad, n int, seed int64) (pebbleLoadResult, error) {
	rng := rand.New(rand.NewSource(seed))
	dev, err := flash.NewMemory(g, flash.Options{Seed: seed})
	if err != nil {
		return pebbleLoadResult{}, err
	}
	sfs, err := sdf.Format(dev, sdf.Options{})
	if err != nil {
		return pebbleLoadResult{}, errors.Join(err, dev.Close())
	}
	var opts sdfvfs.Options
	if l.metaCopies {
		opts.MetadataRanges = sdfvfs.SSTMetadataRanges(sstable.ReaderOptions{})
	}
	fs, err := sdfvfs.New(sfs, opts)
	if err != nil {
		return pebbleLoadResult{}, errors.Join(err, sfs.Close(), dev.Close())
	}
	db, err := pebble.Open("db", &pebble.Options{FS: fs, MemTableSize: 1 << 20, Logger: silentPebbleLogger{}})
	if err != nil {
		return pebbleLoadResult{}, errors.Join(err, sfs.Close(), dev.Close())
	}
	wo := pebble.NoSync
	if l.sync {
		wo = pebble.Sync
	}
	val := make([]byte, 100)
	var appBytes int64
	for gen := 0; gen < l.generations; gen++ {
		order := rng.Perm(n)
		for lo := 0; lo < n; lo += l.batch {
			b := db.NewBatch()
			for _, i := range order[lo:min(lo+l.batch, n)] {
				k := []byte(fmt.Sprintf("k%015d", i))
				rng.Read(val)
				if err := b.Set(k, val, nil); err != nil {
					return pebbleLoadResult{}, errors.Join(err, db.Close(), sfs.Close(), dev.Close())
				}
				appBytes += int64(len(k) + len(val))
			}
			if err := b.Commit(wo); err != nil {
				return pebbleLoadResult{}, errors.Join(err, db.Close(), sfs.Close(), dev.Close())
			}
		}
	}
	if err := db.Close(); err != nil {
		return pebbleLoadResult{}, errors.Join(err, sfs.Close(), dev.Close())
	}
	st := sfs.Stats()
	vst := fs.Stats()
	res := pebbleLoadResult{
		sdfWA:      st.WriteAmplification(),
		pebbleWA:   float64(st.UserBytes) / float64(appBytes),
		totalWA:    float64(st.FlashBytes) / float64(appBytes),
		gcPages:    st.GCPages,
		copyPerApp: float64(vst.ShadowBytes+vst.RangeCopyBytes) / float64(appBytes),
	}
	return res, errors.Join(sfs.Close(), dev.Close())
}

// silentPebbleLogger drops Pebble's informational logging.
type silentPebbleLogger struct{}

func (silentPebbleLogger) Infof(string, ...interface{})  {}
func (silentPebbleLogger) Errorf(string, ...interface{}) {}
func (silentPebbleLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble fatal: "+format, args...))
}
