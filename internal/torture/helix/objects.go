package helix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/client/objlayout"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/objstore"
)

// objectNodes is the object cluster's size: EC 4+2 needs six.
const objectNodes = 6

// helixObject is one object written and what its damage plan did.
type helixObject struct {
	key  string
	red  objectpb.Redundancy
	data []byte
}

func objectKey(red objectpb.Redundancy, i int) string {
	return fmt.Sprintf("helix/%s/%d", red, i)
}

// deviceGeometry sizes each node's emulated flash device for the run: a
// node holds on average 4.5/6 of an object's bytes per object (REP's three
// copies and EC's six 1/4-size shards over six nodes); every chunk is
// rewritten once by its repair (out of place, the old copy garbage until
// the host GC reclaims it), and the rest is room for the SDF layer's GC,
// journal and index. Blocks of 64 pages of 4 KiB, 8 channels x 2 dies (as
// objstore.DevGeometry), at least 16 blocks per die (64 MiB).
func deviceGeometry(objects, objectBytes int) flash.Geometry {
	g := objstore.DevGeometry()
	perNode := int64(objects) * int64(objectBytes) * 9 / 12 // (3 + 1.5) / 6
	need := 4*perNode + 32<<20
	perBlockRow := int64(g.Channels * g.DiesPerChannel * g.PagesPerBlock * g.PageSize) // one block on every die
	g.BlocksPerDie = max(16, int((need+perBlockRow-1)/perBlockRow))
	return g
}

// runObjects writes the objects, damages every copy of every chunk in a
// different place, reads everything back, restarts the cluster, reads and
// scrubs everything again.
func runObjects(ctx context.Context, opts Options, rng *rand.Rand) ([]ObjectResult, error) {
	dir, err := os.MkdirTemp(opts.Dir, "helix-objects-")
	if err != nil {
		return nil, err
	}
	dcOpts := devcluster.Options{Dir: dir, Nodes: objectNodes, UnsafeNoFsync: true, Logf: opts.Logf}
	if opts.Store == StoreSDF {
		g := deviceGeometry(opts.Objects, opts.ObjectBytes)
		dcOpts.NodeStore = func(dir string, i int) (objstore.Store, error) {
			return objstore.OpenSDFStore(filepath.Join(dir, "sdf"), objstore.SDFStoreOptions{Geometry: g, Seed: int64(i + 1)})
		}
	}
	cl, err := devcluster.Start(ctx, dcOpts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	if dead := cl.Dead(); len(dead) > 0 {
		return nil, fmt.Errorf("%d nodes did not start: %v", len(dead), dead)
	}
	cli, err := client.Dial(ctx, cl.Endpoint(), client.Options{ReadMode: client.ModeDirect, Logf: opts.Logf})
	if err != nil {
		return nil, err
	}
	defer func() { cli.Close() }()

	reds := []objectpb.Redundancy{objectpb.Redundancy_REP, objectpb.Redundancy_EC}
	results := make([]ObjectResult, len(reds))
	objects := make([][]helixObject, len(reds))
	starts := make([]time.Time, len(reds))
	for k, red := range reds {
		starts[k] = time.Now()
		results[k] = ObjectResult{Redundancy: red.String(), Objects: opts.Objects, Bytes: opts.ObjectBytes}
		for i := 0; i < opts.Objects; i++ {
			o := helixObject{key: objectKey(red, i), red: red, data: make([]byte, opts.ObjectBytes)}
			rng.Read(o.data)
			if _, err := cli.Put(ctx, o.key, o.data, red); err != nil {
				return nil, fmt.Errorf("put %s: %w", o.key, err)
			}
			objects[k] = append(objects[k], o)
		}
	}
	for k := range reds {
		t := time.Now()
		for _, o := range objects[k] {
			if err := damageObject(ctx, cli, rng, o, &results[k]); err != nil {
				return nil, fmt.Errorf("damage %s: %w", o.key, err)
			}
		}
		opts.Logf("helix: %s: %d sectors damaged over %d objects", reds[k], results[k].SectorsDamaged, len(objects[k]))
		results[k].Took += time.Since(t)
	}
	// First round: every read runs into damage on every copy it tries.
	for k := range reds {
		t := time.Now()
		for _, o := range objects[k] {
			rep, ok := readBack(ctx, cli, o, opts.ReadTimeout, &results[k])
			if ok && rep != nil {
				results[k].Repaired += rep.Repaired
				results[k].Voted += rep.Voted
				results[k].Reconstructed += rep.Reconstructed
			}
		}
		results[k].Took += time.Since(t)
	}
	// The whole cluster down and up again: what the repairs wrote must be
	// what is on the nodes' files.
	cli.Close()
	err = cl.Close()
	cl = nil
	if err != nil {
		return nil, fmt.Errorf("stop the cluster: %w", err)
	}
	if cl, err = devcluster.Start(ctx, dcOpts); err != nil {
		return nil, fmt.Errorf("restart the cluster: %w", err)
	}
	if dead := cl.Dead(); len(dead) > 0 {
		return nil, fmt.Errorf("%d nodes did not restart: %v", len(dead), dead)
	}
	if cli, err = client.Dial(ctx, cl.Endpoint(), client.Options{ReadMode: client.ModeDirect, Logf: opts.Logf}); err != nil {
		return nil, err
	}
	for k := range reds {
		t := time.Now()
		for _, o := range objects[k] {
			rep, ok := readBack(ctx, cli, o, opts.ReadTimeout, &results[k])
			if ok && rep != nil {
				results[k].LeftToRepair += rep.Repaired
			}
			left, err := scrub(ctx, cli, o.key)
			if err != nil {
				results[k].Lost++
				addError(&results[k].Errors, "scrub %s after the restart: %v", o.key, err)
				continue
			}
			results[k].LeftToRepair += left
		}
		results[k].Took += time.Since(t)
		opts.Logf("helix: %s: repaired %d chunks, %d left after the restart, %d lost, %d wrong",
			reds[k], results[k].Repaired, results[k].LeftToRepair, results[k].Lost, results[k].Wrong)
	}
	if err := cl.Close(); err != nil {
		cl = nil
		return nil, fmt.Errorf("stop the cluster: %w", err)
	}
	cl = nil
	return results, os.RemoveAll(dir)
}

// damageObject damages o so that no replica (REP) of any chunk of more
// than one sector is whole, and no sector row (EC) has more than two
// damaged shards: every byte keeps a good copy somewhere.
func damageObject(ctx context.Context, cli *client.Client, rng *rand.Rand, o helixObject, res *ObjectResult) error {
	rec, err := cli.Stat(ctx, o.key)
	if err != nil {
		return err
	}
	l, err := objlayout.New(rec)
	if err != nil {
		return err
	}
	res.Chunks += l.Chunks
	for i := 0; i < l.Chunks; i++ {
		n := l.ChunkLen(i)
		sectors := direct.SectorCount(n)
		res.Sectors += int64(sectors)
		damagedCopy := make([]bool, l.Copies)
		var prev []int
		for s := 0; s < sectors; s++ {
			victims := sectorVictims(rng, l.Copies, prev)
			prev = victims
			secLen := min(direct.SectorSize, n-s*direct.SectorSize)
			for _, r := range victims {
				// 1-8 bits from the start of one byte of the sector: the
				// damage stays inside it.
				off := int64(i)*direct.ChunkSize + int64(s*direct.SectorSize+rng.Intn(secLen))
				if _, err := cli.CorruptAt(ctx, o.key, r, off, 1+rng.Intn(8)); err != nil {
					return fmt.Errorf("copy %d chunk %d sector %d: %w", r, i, s, err)
				}
				damagedCopy[r] = true
				res.SectorsDamaged++
			}
		}
		whole := 0
		for _, d := range damagedCopy {
			if !d {
				whole++
			}
		}
		if (!l.EC && whole == 0) || (l.EC && whole < direct.DataShards) {
			res.ChunksNoCopyWhole++
		}
	}
	return nil
}

// sectorVictims picks the copies to damage at one sector: for REP (three
// copies) all but a survivor that is not the previous sector's survivor;
// for EC (six shards) two shards, neither damaged at the previous sector.
func sectorVictims(rng *rand.Rand, copies int, prev []int) []int {
	was := make([]bool, copies)
	for _, p := range prev {
		was[p] = true
	}
	if copies == direct.TotalShards {
		var fresh []int
		for s := 0; s < copies; s++ {
			if !was[s] {
				fresh = append(fresh, s)
			}
		}
		rng.Shuffle(len(fresh), func(a, b int) { fresh[a], fresh[b] = fresh[b], fresh[a] })
		return fresh[:direct.ParityShards]
	}
	// REP: the previous survivor is the one copy not in prev.
	prevSurvivor := -1
	if prev != nil {
		for r := 0; r < copies; r++ {
			if !was[r] {
				prevSurvivor = r
			}
		}
	}
	survivor := rng.Intn(copies)
	for survivor == prevSurvivor {
		survivor = rng.Intn(copies)
	}
	var out []int
	for r := 0; r < copies; r++ {
		if r != survivor {
			out = append(out, r)
		}
	}
	return out
}

// readBack reads o until it verifies or the deadline passes, and counts a
// read that failed as lost and one that returned other bytes as wrong. A
// failure that may pass (a node not yet serving after the restart) is
// tried again; data loss is final.
func readBack(ctx context.Context, cli *client.Client, o helixObject, timeout time.Duration, res *ObjectResult) (*client.ReadReport, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		got, rep, err := cli.GetWithReport(ctx, o.key, client.ModeDirect)
		switch {
		case err == nil && bytes.Equal(got, o.data):
			return rep, true
		case err == nil:
			res.Wrong++
			addError(&res.Errors, "%s: %d bytes read, not the %d written (first difference at byte %d)", o.key, len(got), len(o.data), firstDiff(got, o.data))
			return rep, false
		case base.IsDataLoss(err) || ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
			res.Lost++
			addError(&res.Errors, "%s: %v", o.key, err)
			return rep, false
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scrub verifies every replica or shard of key's version and returns the
// chunks it had to rewrite.
func scrub(ctx context.Context, cli *client.Client, key string) (int, error) {
	rec, err := cli.Stat(ctx, key)
	if err != nil {
		return 0, err
	}
	rep, err := cli.ScrubObject(ctx, rec, nil, nil)
	if err != nil {
		return 0, err
	}
	return rep.Repaired + rep.RepairFailed, nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
