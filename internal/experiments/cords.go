package experiments

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/bitrot"
)

// The torture harness's CORDS table (internal/torture) is built from the
// two single-fault sweeps of this package: the KV store's (kv_fault_sweep.go,
// one cell per process, since a fault can crash one) and the object
// store's (objstore_fault_sweep.go). This file is their exported face.

// KVSweepCell is one (file, fault) of the KV sweep.
type KVSweepCell = kvSweepCell

// KVCordsBase builds the KV sweep's stored cluster (3 replicas, keys
// written in two loads with a restart between them, stopped) and writes it
// under dir/base on disk, with its state between the two loads under
// dir/old. It returns the files of replica n1 to damage: the newest of
// each kind.
func KVCordsBase(ctx context.Context, dir string, keys int, seed int64) ([]string, error) {
	p := kvSweepParams{Keys: keys, Seed: seed, OnePerKind: true}
	baseFS, oldFS, cfg, err := kvSweepBase(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("kv cords base: %w", err)
	}
	if err := bitrot.Copy(baseFS, cfg.Dir, vfs.Default, filepath.Join(dir, "base")); err != nil {
		return nil, err
	}
	if err := bitrot.Copy(oldFS, cfg.Dir, vfs.Default, filepath.Join(dir, "old")); err != nil {
		return nil, err
	}
	return kvSweepFiles(baseFS, oldFS, cfg, p)
}

// KVCordsCell runs one cell of the KV sweep on an in-memory copy of the
// store KVCordsBase wrote under dir: fault (one of KVCordsFaults) in file,
// the cluster restarted, the workload continued, every key read back,
// replicas compared.
func KVCordsCell(ctx context.Context, dir, file, fault string, keys int, seed int64) (KVSweepCell, error) {
	known := false
	for _, f := range append(append([]string(nil), KVCordsFaults...), kvSweepFaults...) {
		known = known || f == fault
	}
	if !known {
		return KVSweepCell{}, fmt.Errorf("kv cords: unknown fault %q (want one of %s)", fault, strings.Join(KVCordsFaults, ", "))
	}
	baseFS, oldFS := vfs.NewMem(), vfs.NewMem()
	cfg := kvSweepConfig(baseFS)
	if err := bitrot.Copy(vfs.Default, filepath.Join(dir, "base"), baseFS, cfg.Dir); err != nil {
		return KVSweepCell{}, err
	}
	if err := bitrot.Copy(vfs.Default, filepath.Join(dir, "old"), oldFS, cfg.Dir); err != nil {
		return KVSweepCell{}, err
	}
	p := kvSweepParams{Keys: keys, Seed: seed}
	return runKVSweepCell(ctx, baseFS, oldFS, cfg, file, fault, p, rand.New(rand.NewSource(seed)))
}

// ObjectCordsCell is one (file type, fault) of the object store's sweep.
type ObjectCordsCell struct {
	Type, Fault, File, Outcome, Detail string
	Took                               time.Duration
	Failed                             bool
}

// ObjectCordsFaults are the object sweep's faults that are CORDS columns:
// damage at rest, and at run time a read error on the file, write errors
// and lost writes on its type (plain-file nodes; on emulated flash, read
// and write errors of the page file through the device).
var ObjectCordsFaults = []string{string(faultZero), string(faultJunk), string(faultFlip), string(faultEIORead), string(faultWriteError), string(faultLostWrite)}

// ObjectCords runs the object store's single-fault sweep (7 storage
// nodes and a coordinator; REP and EC objects; nodes on plain files and
// on emulated flash) for the given faults (nil: ObjectCordsFaults) under
// tmp, and returns its cells.
func ObjectCords(ctx context.Context, tmp string, seed int64, faults []string) ([]ObjectCordsCell, error) {
	return ObjectCordsCells(ctx, tmp, seed, faults, nil)
}

// ObjectCordsCells is ObjectCords with the cells picked by cell (file
// type, fault); nil runs every one.
func ObjectCordsCells(ctx context.Context, tmp string, seed int64, faults []string, cell func(fileType, fault string) bool) ([]ObjectCordsCell, error) {
	if faults == nil {
		faults = ObjectCordsFaults
	}
	var cols []sweepFault
	for _, f := range faults {
		cols = append(cols, sweepFault(f))
	}
	o := sweepOptions{Nodes: 7, Seed: seed, Objects: 1, CellTimeout: 2 * time.Minute, Faults: cols}
	if cell != nil {
		o.Cells = func(t sweepFileType, f sweepFault) bool { return cell(t.Name, string(f)) }
	}
	cells, err := runFaultSweep(ctx, tmp, o)
	var out []ObjectCordsCell
	for _, c := range cells {
		out = append(out, ObjectCordsCell{Type: c.Type, Fault: string(c.Fault), File: c.File, Outcome: c.Outcome,
			Detail: c.Detail, Took: c.Took, Failed: c.failed()})
	}
	return out, err
}

// ObjectFileTypes names the object sweep's file types (the rows of its
// table), in order, with the store each lives on ("file", "sdf", or
// "coordinator").
func ObjectFileTypes() [][2]string {
	var out [][2]string
	for _, ft := range sweepFileTypes {
		st := ft.Store
		if st == "" {
			st = "coordinator"
		}
		out = append(out, [2]string{ft.Name, st})
	}
	return out
}
