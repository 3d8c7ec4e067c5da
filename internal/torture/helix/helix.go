package helix

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/report"
)

// Options configures Run. Zero values take the defaults noted.
type Options struct {
	// Seed picks the data, the surviving copy of every sector and the KV
	// blocks damaged. Any value is a seed (the CLI draws one for 0).
	Seed int64
	// Dir holds the object cluster's files (required; Run leaves its own
	// subdirectory behind only on an error).
	Dir string
	// Objects is the number of objects per redundancy, REP and EC
	// (default 2, at most 1000).
	Objects int
	// Store is the object nodes' store: "file" (plain files, the default)
	// or "sdf" (each node on its own emulated flash device, sized for the
	// objects: at least 64 MiB of data pages).
	Store string
	// ObjectBytes is each object's size (default 256 KiB; at least 1 KiB,
	// at most 64 MiB).
	ObjectBytes int
	// Keys is the number of KV keys (default 2000; at least 100, at most
	// 1,000,000).
	Keys int
	// Fraction bounds the blocks damaged on each KV replica, as a share of
	// its data blocks (default 0.5; in (0, 1]).
	Fraction float64
	// ReadTimeout bounds one object or key read, and the KV replicas'
	// convergence (default 2 minutes): a deadline only, it times nothing.
	ReadTimeout time.Duration
	// SkipObjects and SkipKV leave out one half (tests of the other).
	SkipObjects, SkipKV bool
	Logf                func(format string, args ...any)
}

// Object stores (Options.Store).
const (
	StoreFile = "file"
	StoreSDF  = "sdf"
)

// Limits of Options.
const (
	DefaultObjects     = 2
	DefaultObjectBytes = 256 << 10
	DefaultKeys        = 2000
	DefaultFraction    = 0.5
	MinObjectBytes     = 1 << 10
	MaxObjectBytes     = 64 << 20
	MaxObjects         = 1000
	MinKeys            = 100
	MaxKeys            = 1_000_000
)

// Validate reports an invalid-argument error for an option out of range
// (what Run would refuse), nil otherwise.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" && !o.SkipObjects {
		return o, base.InvalidArgumentf("helix: a directory for the object cluster is required")
	}
	if o.Objects == 0 {
		o.Objects = DefaultObjects
	}
	if o.ObjectBytes == 0 {
		o.ObjectBytes = DefaultObjectBytes
	}
	if o.Keys == 0 {
		o.Keys = DefaultKeys
	}
	if o.Fraction == 0 {
		o.Fraction = DefaultFraction
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 2 * time.Minute
	}
	if o.Store == "" {
		o.Store = StoreFile
	}
	switch {
	case o.Objects < 1 || o.Objects > MaxObjects:
		return o, base.InvalidArgumentf("helix: %d objects per redundancy outside [1, %d]", o.Objects, MaxObjects)
	case o.ObjectBytes < MinObjectBytes || o.ObjectBytes > MaxObjectBytes:
		return o, base.InvalidArgumentf("helix: object size %d B outside [%d, %d]", o.ObjectBytes, MinObjectBytes, MaxObjectBytes)
	case o.Keys < MinKeys || o.Keys > MaxKeys:
		return o, base.InvalidArgumentf("helix: %d keys outside [%d, %d]", o.Keys, MinKeys, MaxKeys)
	case !(o.Fraction > 0 && o.Fraction <= 1): // NB: also rejects NaN
		return o, base.InvalidArgumentf("helix: fraction %v of each replica's blocks outside (0, 1]", o.Fraction)
	case o.ReadTimeout < 0:
		return o, base.InvalidArgumentf("helix: read timeout %v is negative", o.ReadTimeout)
	case o.Store != StoreFile && o.Store != StoreSDF:
		return o, base.InvalidArgumentf("helix: store %q, want %s or %s", o.Store, StoreFile, StoreSDF)
	case o.SkipObjects && o.SkipKV:
		return o, base.InvalidArgumentf("helix: nothing to run (both halves skipped)")
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o, nil
}

// Result is what one helix run measured.
type Result struct {
	Seed int64
	// Store is the object nodes' store (Options.Store).
	Store string
	// Objects has one row per redundancy (REP, EC); nil when skipped.
	Objects []ObjectResult
	// KV is nil when skipped.
	KV   *KVResult
	Wall time.Duration
}

// ObjectResult is the helix run of one redundancy's objects.
type ObjectResult struct {
	Redundancy string // "REP" or "EC"
	Objects    int
	Bytes      int   // per object
	Chunks     int   // REP chunks or EC rows, over all objects
	Sectors    int64 // sectors per copy (REP) or sector rows (EC), over all objects
	// SectorsDamaged counts damaged sectors over all copies (two per REP
	// sector, two per EC sector row).
	SectorsDamaged int64
	// ChunksNoCopyWhole counts REP chunks none of whose replicas verified
	// whole, and EC rows with fewer than four whole shards: the chunks a
	// chunk-granularity repair could not have served.
	ChunksNoCopyWhole int
	// Repaired counts chunks rewritten by the first read after the damage;
	// Voted the REP chunks where some sector had to be voted (none should:
	// every sector had a good copy); Reconstructed the EC rows decoded.
	Repaired, Voted, Reconstructed int
	// LeftToRepair counts chunk rewrites the read and the scrub after the
	// restart still had to do: 0 when the first read repaired everything.
	LeftToRepair int
	// Lost counts reads that failed, Wrong reads that returned other bytes
	// (over both rounds of reads).
	Lost, Wrong int
	// Errors are the first few failures, for the report.
	Errors []string
	Took   time.Duration
}

// KVResult is the helix run of the KV store.
type KVResult struct {
	Keys int
	// Blocks and BlocksDamaged are per replica (by node ID order).
	Blocks, BlocksDamaged []int
	// KeysOnOneReplica counts keys intact on exactly one replica after the
	// damage.
	KeysOnOneReplica int
	// Patches, BlocksMerged and Rebuilds sum the replicas' counters after
	// convergence (kv.ReplicaStats); Rebuilds must be 0.
	Patches, BlocksMerged, Rebuilds uint64
	// RebuildReasons counts the rebuilds by why they happened.
	RebuildReasons map[string]uint64
	// Converged: every replica had no repair pending and the same content
	// checksum at the same applied index; Checksums are what they reported.
	Converged bool
	Checksums []string
	// ScrubDamaged counts damaged tables a scrub of every replica found
	// after convergence: the backing files of patched tables keep the
	// blocks the patches cut out of the live data, and the replicas know
	// them as already repaired. LeftToRepair counts the repairs (patches,
	// block merges, rebuilds) that scrub still started: must be 0.
	ScrubDamaged int
	LeftToRepair int
	Lost, Wrong  int
	Errors       []string
	Took         time.Duration
}

// maxErrors bounds the failures a result keeps (all are counted).
const maxErrors = 8

func addError(errs *[]string, format string, args ...any) {
	if len(*errs) < maxErrors {
		*errs = append(*errs, fmt.Sprintf(format, args...))
	}
}

// Problems lists why the run missed its target; empty when it met it.
func (r Result) Problems() []string {
	var out []string
	for _, o := range r.Objects {
		if o.Lost+o.Wrong > 0 {
			out = append(out, fmt.Sprintf("%s objects: %d reads lost, %d wrong (first: %s)", o.Redundancy, o.Lost, o.Wrong, strings.Join(o.Errors, "; ")))
		}
		if o.LeftToRepair > 0 {
			out = append(out, fmt.Sprintf("%s objects: %d chunks still needed repair after the restart", o.Redundancy, o.LeftToRepair))
		}
		if o.SectorsDamaged == 0 {
			out = append(out, fmt.Sprintf("%s objects: nothing was damaged", o.Redundancy))
		}
	}
	if k := r.KV; k != nil {
		if k.Lost+k.Wrong > 0 {
			out = append(out, fmt.Sprintf("KV: %d keys lost, %d wrong (first: %s)", k.Lost, k.Wrong, strings.Join(k.Errors, "; ")))
		}
		if k.Rebuilds > 0 {
			out = append(out, fmt.Sprintf("KV: %d replica rebuilds (the repair must be key-range patches): %v", k.Rebuilds, k.RebuildReasons))
		}
		if !k.Converged {
			out = append(out, fmt.Sprintf("KV: the replicas did not converge: %v", k.Checksums))
		}
		if k.LeftToRepair > 0 {
			out = append(out, fmt.Sprintf("KV: a scrub after convergence started %d repairs", k.LeftToRepair))
		}
		damaged := 0
		for _, d := range k.BlocksDamaged {
			damaged += d
		}
		if damaged == 0 {
			out = append(out, "KV: nothing was damaged")
		}
	}
	return out
}

// Bad reports whether anything was lost or wrong, left unrepaired, rebuilt
// whole, or whether the damage never landed.
func (r Result) Bad() bool { return len(r.Problems()) > 0 }

// Run runs the helix: objects, then KV. It returns an error for operating
// failures (a cluster that does not start, damage that cannot be
// injected); what was lost or wrong is in the result (Result.Bad).
func Run(ctx context.Context, opts Options) (Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	res := Result{Seed: opts.Seed, Store: opts.Store}
	start := time.Now()
	// One stream per half, so that skipping one does not change the other.
	rng := rand.New(rand.NewSource(opts.Seed))
	objSeed, kvSeed := rng.Int63(), rng.Int63()
	if !opts.SkipObjects {
		if res.Objects, err = runObjects(ctx, opts, rand.New(rand.NewSource(objSeed))); err != nil {
			res.Wall = time.Since(start)
			return res, fmt.Errorf("helix objects: %w", err)
		}
	}
	if !opts.SkipKV {
		k, err := runKV(ctx, opts, rand.New(rand.NewSource(kvSeed)))
		if err != nil {
			res.Wall = time.Since(start)
			return res, fmt.Errorf("helix kv: %w", err)
		}
		res.KV = &k
	}
	res.Wall = time.Since(start)
	return res, nil
}

// Report renders the run as its own report (docs/results/helix.md).
func (r Result) Report() (*report.Report, error) {
	rep, err := report.New("helix", "Helix: every copy damaged somewhere, the good parts together whole")
	if err != nil {
		return nil, err
	}
	if err := r.Section(rep, 2); err != nil {
		return nil, err
	}
	return rep, nil
}

// Section appends the run's findings to rep under headings of the given
// level (2: "##"), for a report of its own or for torture.md.
func (r Result) Section(rep *report.Report, level int) error {
	if level < 1 || level > 5 {
		return base.InvalidArgumentf("helix: heading level %d outside [1, 5]", level)
	}
	h := strings.Repeat("#", level)
	verdict := "**0 lost, 0 wrong, nothing left to repair, no rebuild: target met.**"
	if p := r.Problems(); len(p) > 0 {
		verdict = "**Target missed:** " + escape(strings.Join(p, "; "))
	}
	rep.Text("%s Helix\n\nSeed %d; wall time %v. Different regions of every copy are damaged at once, so that "+
		"no copy is whole and one good copy of every byte exists only across nodes (issue 16). Target: 0 lost, 0 wrong, "+
		"repaired by DIRECT at its smallest unit (sectors, key ranges, blocks), no whole-replica rebuild. %s",
		h, r.Seed, r.Wall.Round(time.Second), verdict)
	if len(r.Objects) > 0 {
		store := "plain files"
		if r.Store == StoreSDF {
			store = "emulated flash (SDF layer, a device each)"
		}
		rep.Text("%s# Objects (6 storage nodes on %s, REP 3 replicas and EC 4+2)\n\n"+
			"Every 512 B sector of every REP chunk damaged (1-8 bits flipped in the stored chunk, persistent) on two of its "+
			"three replicas, the survivor chosen by the seed and never the previous sector's; every sector row of every EC "+
			"row damaged on two of its six shards, a pair disjoint from the previous sector row's. Every object read back "+
			"and compared, the whole cluster (coordinator and nodes) restarted, every object read again and scrubbed "+
			"(every replica and shard, parity included): *left to repair* is what that second round still rewrote.", h, store)
		t := report.Table{Header: []string{"redundancy", "objects", "size", "chunks or rows", "sectors damaged",
			"chunks with no whole copy", "repaired by the first read", "voted", "rows decoded", "left to repair", "lost", "wrong", "took"}}
		for _, o := range r.Objects {
			t.Rows = append(t.Rows, []string{o.Redundancy, fmt.Sprint(o.Objects), base.Bytes(o.Bytes).String(), fmt.Sprint(o.Chunks),
				fmt.Sprintf("%d of %d", o.SectorsDamaged, o.Sectors*copiesOf(o.Redundancy)), fmt.Sprint(o.ChunksNoCopyWhole),
				fmt.Sprint(o.Repaired), fmt.Sprint(o.Voted), fmt.Sprint(o.Reconstructed), fmt.Sprint(o.LeftToRepair),
				fmt.Sprint(o.Lost), fmt.Sprint(o.Wrong), o.Took.Round(100 * time.Millisecond).String()})
		}
		if err := rep.Table(t); err != nil {
			return err
		}
	}
	if k := r.KV; k != nil {
		rep.Text("%s# KV (one shard, 3 replicas, files in memory, no block cache)\n\n"+
			"%d keys written and compacted; all three replicas stopped and, on each, data blocks damaged at rest (one byte "+
			"flipped per block) in a seeded order up to the fraction of its blocks, skipping any block whose damage would "+
			"leave a key with no intact replica, or would take the second of the two blocks (first and last) that hold the "+
			"replica's own applied record (local metadata no peer holds: damaging both copies is a different fault, repaired "+
			"by design with a rebuild). All three replicas restarted, every key read back (eventual reads, the client trying "+
			"the replicas), "+
			"then the replicas must converge (same content checksum at the same applied index, no repair pending) with no "+
			"rebuild. Then every replica's tables are scrubbed: *left to repair* counts the repairs that scrub still started "+
			"(the tables it finds damaged are the backing files of patched tables, which keep the blocks the patches cut "+
			"out of the live data until a compaction drops them; the replicas know them as already repaired).", h, k.Keys)
		t := report.Table{Header: []string{"replica", "data blocks", "damaged"}}
		for i := range k.Blocks {
			t.Rows = append(t.Rows, []string{fmt.Sprintf("n%d", i+1), fmt.Sprint(k.Blocks[i]), fmt.Sprint(k.BlocksDamaged[i])})
		}
		if err := rep.Table(t); err != nil {
			return err
		}
		t = report.Table{Header: []string{"keys", "keys intact on one replica only", "patches applied", "blocks merged",
			"rebuilds", "converged", "tables the scrub found damaged", "left to repair", "lost", "wrong", "took"}}
		t.Rows = append(t.Rows, []string{fmt.Sprint(k.Keys), fmt.Sprint(k.KeysOnOneReplica), fmt.Sprint(k.Patches),
			fmt.Sprint(k.BlocksMerged), fmt.Sprint(k.Rebuilds), fmt.Sprint(k.Converged), fmt.Sprint(k.ScrubDamaged), fmt.Sprint(k.LeftToRepair),
			fmt.Sprint(k.Lost), fmt.Sprint(k.Wrong), k.Took.Round(100 * time.Millisecond).String()})
		if err := rep.Table(t); err != nil {
			return err
		}
	}
	return nil
}

func copiesOf(redundancy string) int64 {
	if redundancy == "EC" {
		return 6
	}
	return 3
}

// escape keeps a reason on one table row.
func escape(s string) string { return report.Cell(s, 600) }
