package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/experiments"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/torture"
	"github.com/flashmend/flashmend/internal/torture/helix"
	"github.com/flashmend/flashmend/internal/torture/nemesis"
	"github.com/flashmend/flashmend/internal/torture/powerloss"
)

// newTortureCmd is `flashmend torture`: the reliability harness
// (internal/torture). `torture all` fuzzes every decoder and runs the
// CORDS sweeps; `torture fuzz` and `torture cords` run one part. Each run
// prints its seed and writes <out>/torture.md.
func newTortureCmd() *cobra.Command {
	var (
		seed        int64
		out         string
		fuzzTime    time.Duration
		parallel    int
		keys        int
		cellTimeout time.Duration
		objects     bool
		kvSDF       bool
		only        string
		harness     bool
		nemDuration time.Duration
	)
	cmd := &cobra.Command{
		Use:   "torture",
		Short: "Reliability harness: fuzz every decoder, one fault at a time in every file kind (CORDS); writes torture.md",
		Long: `torture runs flashmend's reliability harness (internal/torture) and writes
<out>/torture.md. "torture all" runs everything; "torture fuzz" fuzzes every
decoder of stored or received bytes for --fuzztime each (run from the
repository root: it uses "go test -fuzz"); "torture cords" runs the CORDS
single-fault tables of the KV store (each cell in a child process; on files
and on emulated flash) and of the object store; "torture cords-sdf" runs
only the KV table on emulated flash and writes <out>/cords-kv-sdf.md
instead. Every run prints its seed; --seed repeats a run.`,
	}
	run := func(parts string) func(cmd *cobra.Command, _ []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			if fuzzTime <= 0 || parallel < 1 || keys < 20 || cellTimeout <= 0 {
				return base.InvalidArgumentf("torture: --fuzztime and --cell-timeout must be positive, --parallel at least 1, --keys at least 20")
			}
			if parts == "all" && harness && nemDuration <= 0 {
				return base.InvalidArgumentf("torture all: --nemesis-duration must be positive (or --harness=false)")
			}
			if seed == 0 {
				seed = time.Now().UnixNano()
			}
			fmt.Fprintf(cmd.OutOrStdout(), "torture %s: seed %d (repeat with --seed %d)\n", parts, seed, seed)
			logf := func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			start := time.Now()
			r := torture.Run{Seed: seed, Keys: keys, FuzzTime: fuzzTime}
			ctx := cmd.Context()
			if parts == "all" || parts == "fuzz" {
				targets := torture.FuzzTargets
				if only != "" {
					targets = nil
					for _, t := range torture.FuzzTargets {
						if strings.Contains(t.Pkg+"/"+t.Name, only) {
							targets = append(targets, t)
						}
					}
				}
				r.Fuzz = torture.Fuzz(ctx, ".", targets, fuzzTime, parallel, logf)
			}
			cellFilter := func(kind, fault string) bool { return only == "" || strings.Contains(kind+"/"+fault, only) }
			if (parts == "all" || parts == "cords") && kvSDF || parts == "cords-sdf" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				kv, err := torture.RunKV(ctx, torture.KVOptions{Keys: keys, Seed: seed, Store: torture.StoreSDF,
					Argv: []string{exe, "torture", "cell"}, CellTimeout: cellTimeout, Logf: logf, Cell: cellFilter})
				if err != nil {
					r.Errors = append(r.Errors, "KV sweep on flash: "+err.Error())
					logf("cords kv on flash: %v", err)
				}
				r.KVFlash = kv
			}
			if parts == "all" || parts == "cords" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				kv, err := torture.RunKV(ctx, torture.KVOptions{Keys: keys, Seed: seed, Argv: []string{exe, "torture", "cell"},
					CellTimeout: cellTimeout, Logf: logf, Cell: cellFilter})
				if err != nil {
					r.Errors = append(r.Errors, "KV sweep: "+err.Error())
					logf("cords kv: %v", err)
				}
				r.KV = kv
				if objects {
					tmp, err := os.MkdirTemp("", "torture-objects-")
					if err != nil {
						return err
					}
					defer os.RemoveAll(tmp)
					r.ObjectFaults = experiments.ObjectCordsFaults
					r.Objects, err = experiments.ObjectCordsCells(ctx, tmp, seed, nil, cellFilter)
					if err != nil {
						// The cells that ran are reported; the sweep's
						// error is the report's too.
						r.Errors = append(r.Errors, "object sweep: "+err.Error())
						logf("cords objects: %v", err)
					}
					for _, c := range r.Objects {
						logf("cords objects %-20s %-6s %s %s", c.Type, c.Fault, c.Outcome, c.Detail)
					}
				}
			}
			if parts == "all" && harness && only == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				// Helix: every copy damaged in a different place at once.
				hdir, err := os.MkdirTemp("", "flashmend-helix-")
				if err != nil {
					return err
				}
				hres, herr := helix.Run(ctx, helix.Options{Seed: seed, Dir: hdir, Store: helix.StoreFile, Logf: logf})
				_ = os.RemoveAll(hdir)
				if herr != nil {
					r.HelixErr = herr.Error()
					logf("helix: %v", herr)
				} else {
					r.Helix = &hres
					if hrep, err := hres.Report(); err == nil {
						hcmd := fmt.Sprintf("flashmend torture helix --seed %d --store file --objects %d --object-size %d --keys %d --fraction %g",
							seed, helix.DefaultObjects, helix.DefaultObjectBytes, helix.DefaultKeys, helix.DefaultFraction)
						if err := hrep.Write(out, report.CaptureEnv(hcmd, time.Now())); err != nil {
							return err
						}
					}
				}
				// The nemesis on plain files, then on emulated flash with
				// two faults at once; each writes its own report.
				for _, n := range []nemesis.Options{
					{Store: "file", Nodes: 6, Concurrency: 1},
					{Store: "sdf", DeviceSize: "512MiB", Nodes: 6, Concurrency: 2},
				} {
					n.Seed, n.Argv, n.Logf = seed, []string{exe}, logf
					n.Duration, n.Hold = nemDuration, 8*time.Second
					n.KVClients, n.Keys, n.ObjClients = 4, 6, 2
					res, err := runNemesis(ctx, n, out, cmd.OutOrStdout())
					if res != nil {
						r.Nemesis = append(r.Nemesis, res)
					}
					if err != nil && res == nil {
						r.NemesisErr = append(r.NemesisErr, n.Store+": "+err.Error())
					}
					if err != nil {
						logf("%v", err)
					}
				}
				// Every crash point, on emulated flash.
				cr, err := runCrashPoints(ctx, nemesis.CrashOptions{Seed: seed, Argv: []string{exe}, Logf: logf}, out, cmd.OutOrStdout())
				r.Crash = cr
				if err != nil && cr == nil {
					r.CrashErr = err.Error()
				}
				if err != nil {
					logf("%v", err)
				}
			}
			if parts == "all" && only == "" {
				// Power losses of a node's store: plain files, then SDF on
				// emulated flash; each writes its own report.
				for _, o := range tortureAllPowerLoss {
					o.Seed, o.Logf = seed, logf
					res, err := runPowerLoss(o, out, cmd.OutOrStdout())
					if err != nil {
						r.PowerLossErr = append(r.PowerLossErr, o.Store+": "+err.Error())
						logf("powerloss %s: %v", o.Store, err)
						continue
					}
					r.PowerLoss = append(r.PowerLoss, res)
				}
			}
			r.Wall = time.Since(start)
			if len(r.KVFlash) > 0 || parts == "cords-sdf" {
				command := fmt.Sprintf("flashmend torture cords-sdf --seed %d --keys %d", seed, keys)
				if only != "" {
					command += " --only " + only
				}
				frep, err := r.KVFlashReport()
				if err != nil {
					return err
				}
				if err := frep.Write(out, report.CaptureEnv(command, time.Now())); err != nil {
					return err
				}
			}
			rep, err := r.Report()
			if err != nil {
				return err
			}
			command := fmt.Sprintf("flashmend torture %s --seed %d --fuzztime %v --keys %d", parts, seed, fuzzTime, keys)
			if only != "" {
				command += " --only " + only
			}
			if !objects {
				command += " --objects=false"
			}
			if parts == "all" {
				if harness && only == "" {
					command += fmt.Sprintf(" --nemesis-duration %v", nemDuration)
				} else {
					command += " --harness=false"
				}
			}
			if !kvSDF {
				command += " --kv-sdf=false"
			}
			written := filepath.Join(out, "cords-kv-sdf.md")
			if parts != "cords-sdf" {
				if err := rep.Write(out, report.CaptureEnv(command, time.Now())); err != nil {
					return err
				}
				written = filepath.Join(out, "torture.md")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "torture %s: wrote %s in %v (seed %d)\n", parts, written, r.Wall.Round(time.Second), seed)
			bad := 0
			for _, c := range append(append([]torture.KVCell(nil), r.KV...), r.KVFlash...) {
				if c.Outcome.Bad() {
					bad++
				}
			}
			for _, c := range r.Objects {
				if torture.ClassifyObject(c).Bad() {
					bad++
				}
			}
			for _, f := range r.Fuzz {
				if f.Failed {
					bad++
				}
			}
			bad += len(r.Errors) + r.HarnessBad()
			if bad > 0 {
				return fmt.Errorf("torture: %d cells or targets missed the target (see %s)", bad, written)
			}
			return nil
		}
	}
	for _, sub := range []struct{ name, short string }{
		{"all", "The whole harness: fuzz every decoder, the CORDS sweeps, the helix, the nemesis (plain files and flash), every crash point and the power-loss runs (plain files and flash); torture.md sums them up"},
		{"fuzz", "Fuzz every decoder of stored or received bytes for --fuzztime each (from the repository root)"},
		{"cords", "One fault at a time in one file of every kind: KV store (a child process per cell; on files and on emulated flash) and object store"},
		{"cords-sdf", "One fault at a time in every file kind of a KV replica on emulated flash and in the SDF layer's own pages; writes cords-kv-sdf.md"},
	} {
		c := &cobra.Command{Use: sub.name, Short: sub.short, Args: exactArgs(0), RunE: run(sub.name)}
		c.Flags().Int64Var(&seed, "seed", 0, "seed for every random choice (0: from the clock, printed)")
		c.Flags().StringVar(&out, "out", "docs/results", "directory for torture.md")
		c.Flags().DurationVar(&fuzzTime, "fuzztime", 45*time.Second, "fuzzing time per target")
		c.Flags().IntVar(&parallel, "parallel", 1, "fuzzing workers per target")
		c.Flags().IntVar(&keys, "keys", 600, "keys in the KV sweep's store")
		c.Flags().DurationVar(&cellTimeout, "cell-timeout", 3*time.Minute, "deadline of one KV cell (a hang past it is a crash)")
		if sub.name == "all" || sub.name == "cords" {
			c.Flags().BoolVar(&objects, "objects", true, "also run the object store's sweep")
			c.Flags().BoolVar(&kvSDF, "kv-sdf", true, "also run the KV sweep on emulated flash (cords-kv-sdf.md too)")
		}
		c.Flags().StringVar(&only, "only", "", "run only fuzz targets (package/name), KV cells (kind/fault) or object cells (file type/fault) containing this")
		if sub.name == "all" {
			c.Flags().BoolVar(&harness, "harness", true, "after the sweeps, run the helix, the nemesis (plain files, then flash) and every crash point on flash (not with --only)")
			c.Flags().DurationVar(&nemDuration, "nemesis-duration", 2*time.Minute, "how long each nemesis injects faults")
		}
		cmd.AddCommand(c)
	}
	cmd.AddCommand(newNemesisCmd())
	cmd.AddCommand(newCrashPointsCmd())
	cmd.AddCommand(newHelixCmd())
	cmd.AddCommand(newPowerLossCmd())
	cmd.AddCommand(&cobra.Command{
		Use:    "cell",
		Short:  "Run one KV cell named by " + torture.CellEnv + " (the harness's child process)",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ok, err := torture.RunCellFromEnv(cmd.Context(), cmd.OutOrStdout())
			if !ok && err == nil {
				return base.InvalidArgumentf("torture cell: %s is not set (this command is the harness's child)", torture.CellEnv)
			}
			return err
		},
	})
	return cmd
}

// tortureAllPowerLoss are the power-loss runs of `torture all` (its seed
// filled in): the plain-file store cut before every operation, the SDF
// store (thousands of device operations per workload) before 100 drawn
// ones per workload and mode.
var tortureAllPowerLoss = []powerloss.Options{
	{Store: powerloss.StoreFile, Workloads: 8, Steps: 16, CrashesPerWorkload: 0},
	{Store: powerloss.StoreSDF, Workloads: 8, Steps: 16, CrashesPerWorkload: 100},
}

// newNemesisCmd is `flashmend torture nemesis`: real processes, a seeded
// nemesis, porcupine on the KV history (internal/torture/nemesis).
func newNemesisCmd() *cobra.Command {
	var (
		opts   nemesis.Options
		out    string
		faults string
	)
	cmd := &cobra.Command{
		Use:   "nemesis",
		Short: "Kill, pause and partition node processes and inject bit errors while clients record histories; check them (writes nemesis.md)",
		Long: `nemesis starts a coordinator and --nodes storage nodes, each its own
process of this binary, runs KV clients (strong gets, puts and
compare-and-sets on a few registers) and object clients (put, then read
back) while a seeded nemesis injects faults (one at a time, or up to
--concurrency at once): SIGKILL and restart, SIGSTOP and SIGCONT of a
node or of the coordinator, a partition of one node, of two halves, or of
some nodes from the coordinator (cut at every node's gRPC boundary),
persistent bit errors on a node's reads, a node's flash device filled with
ballast (--store sdf only). At the end it heals everything, checks the KV history for
linearizability with porcupine, reads every acknowledged object back, and
writes <out>/nemesis.md (nemesis-sdf.md with --store sdf). It exits
non-zero when a check failed.`,
		Example: `  flashmend torture nemesis --duration 2m --seed 7 --out /tmp/nemesis
  flashmend torture nemesis --faults kill,partition-one --nodes 5
  flashmend torture nemesis --concurrency 2 --seed 9`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if faults != "" {
				opts.Faults = strings.Split(faults, ",")
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			opts.Argv = []string{exe}
			opts.Logf = announceSeed(cmd, "nemesis", &opts.Seed)
			_, err = runNemesis(cmd.Context(), opts, out, cmd.OutOrStdout())
			return err
		},
	}
	f := cmd.Flags()
	f.Int64Var(&opts.Seed, "seed", 0, "seed of the fault schedule and the workloads (0: from the clock, printed)")
	f.StringVar(&out, "out", "docs/results", "directory for nemesis.md")
	f.StringVar(&opts.Store, "store", "file", "nodes' store: file (plain files) or sdf (emulated flash, KV replicas on it too)")
	f.StringVar(&opts.DeviceSize, "device-size", "512MiB", "each node's emulated flash device (--store sdf)")
	f.IntVar(&opts.Nodes, "nodes", 6, "storage nodes (at least 4; 6 or more also stores EC objects)")
	f.DurationVar(&opts.Duration, "duration", 3*time.Minute, "how long faults are injected")
	f.DurationVar(&opts.Hold, "hold", 8*time.Second, "the longest a fault lasts (each lasts half to all of it; the gap between faults too)")
	f.IntVar(&opts.Concurrency, "concurrency", 1, "faults held at once at most, each on victims no other fault holds")
	f.StringVar(&faults, "faults", "", "fault kinds, comma separated (default all: "+strings.Join(nemesis.AllFaults, ",")+"; fill only with --store sdf)")
	f.IntVar(&opts.KVClients, "kv-clients", 4, "concurrent KV clients")
	f.IntVar(&opts.Keys, "keys", 6, "KV registers the clients share")
	f.IntVar(&opts.ObjClients, "obj-clients", 2, "concurrent object clients")
	f.IntVar(&opts.ObjSize, "obj-size", 256<<10, "largest object in bytes")
	f.DurationVar(&opts.CheckTimeout, "check-timeout", 2*time.Minute, "bound of the linearizability check")
	return cmd
}

// newCrashPointsCmd is `flashmend torture crashpoints`: a node process
// crashed at each named persistence step and restarted from its disk
// (internal/crashpoint, internal/torture/nemesis.RunCrashPoints).
func newCrashPointsCmd() *cobra.Command {
	var (
		opts   nemesis.CrashOptions
		out    string
		points string
	)
	cmd := &cobra.Command{
		Use:   "crashpoints",
		Short: "Crash a node process at each persistence step, restart it from its disk, check nothing acknowledged is lost (writes crashpoints-<store>.md)",
		Long: `crashpoints starts a coordinator and --nodes storage nodes, each its own
process of this binary, and KV and object clients. For each crash point
(internal/crashpoint: raft log append and copies, chunk data and sums,
object index entry and its metadata copies, KV apply and patch ingest, SDF
journal page and checkpoint, GC move, zone erase) in turn it restarts one
node armed with FLASHMEND_CRASHPOINT=<point>@<n>, waits until the node
kills itself there (or --bound passes: not reached), restarts it unarmed
from what was on its disk, and checks that it rejoins, that every object
reads back as its last acknowledged put or a put in flight (never absent
or other bytes), that a scrub finds what the crashed node lost, and that
the KV history is linearizable (porcupine). It writes
<out>/crashpoints-<store>.md and exits non-zero when a check failed.`,
		Example: `  flashmend torture crashpoints --seed 7
  flashmend torture crashpoints --store file --points raftlog-copy,chunk-sums --out /tmp/cp`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if points != "" {
				opts.Points = strings.Split(points, ",")
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			opts.Argv = []string{exe}
			opts.Logf = announceSeed(cmd, "crashpoints", &opts.Seed)
			_, err = runCrashPoints(cmd.Context(), opts, out, cmd.OutOrStdout())
			return err
		},
	}
	f := cmd.Flags()
	f.Int64Var(&opts.Seed, "seed", 0, "seed of the victims, hit counts and workloads (0: from the clock, printed)")
	f.StringVar(&out, "out", "docs/results", "directory for crashpoints-<store>.md")
	f.StringVar(&opts.Store, "store", "sdf", "nodes' store: sdf (emulated flash, KV replicas on it too) or file (plain files)")
	f.StringVar(&opts.DeviceSize, "device-size", "256MiB", "each node's emulated flash device (--store sdf)")
	f.IntVar(&opts.Nodes, "nodes", 6, "storage nodes (at least 4; 6 or more also stores EC objects)")
	f.StringVar(&points, "points", "", "crash points, comma separated, in order (default all but, with --store file, the sdf-* ones: "+strings.Join(crashpoint.Names(), ",")+")")
	f.DurationVar(&opts.Warmup, "warmup", 4*time.Second, "workload before each arming")
	f.DurationVar(&opts.Bound, "bound", time.Minute, "how long an armed node may run without reaching its point (then: not reached)")
	f.IntVar(&opts.MaxAt, "max-at", 3, "the hit to crash at is drawn from 1..max-at")
	f.IntVar(&opts.KVClients, "kv-clients", 3, "concurrent KV clients")
	f.IntVar(&opts.Keys, "keys", 4, "KV registers the clients share")
	f.IntVar(&opts.ObjClients, "obj-clients", 2, "concurrent object clients (each overwrites --obj-keys objects of its own)")
	f.IntVar(&opts.ObjKeys, "obj-keys", 6, "objects each object client overwrites in turn")
	f.IntVar(&opts.ObjSize, "obj-size", 256<<10, "largest object in bytes")
	return cmd
}

// runNemesis runs one nemesis (opts.Argv and Logf set, Dir made here),
// writes <out>/nemesis.md (nemesis-sdf.md on emulated flash) and returns
// the result; an error when it could not run or a check failed (the
// processes' logs are then kept).
func runNemesis(ctx context.Context, opts nemesis.Options, out string, stdout io.Writer) (*nemesis.Result, error) {
	dir, err := os.MkdirTemp("", "flashmend-nemesis-")
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	res, err := nemesis.Run(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("torture nemesis: %w (processes' logs in %s)", err, dir)
	}
	name := "nemesis" // plain files; emulated flash gets a report of its own
	if opts.Store == "sdf" {
		name = "nemesis-sdf"
	}
	rep, err := report.New(name, "Nemesis: processes killed, paused and cut off, with a linearizability check")
	if err != nil {
		return res, err
	}
	rep.Text("%s", res.Markdown())
	command := fmt.Sprintf("flashmend torture nemesis --store %s --seed %d --nodes %d --duration %v --hold %v --concurrency %d --kv-clients %d --keys %d --obj-clients %d",
		opts.Store, opts.Seed, opts.Nodes, opts.Duration, opts.Hold, opts.Concurrency, opts.KVClients, opts.Keys, opts.ObjClients)
	if opts.Store == "sdf" {
		command += " --device-size " + opts.DeviceSize
	}
	if len(opts.Faults) > 0 {
		command += " --faults " + strings.Join(opts.Faults, ",")
	}
	if err := rep.Write(out, report.CaptureEnv(command, time.Now())); err != nil {
		return res, err
	}
	fmt.Fprintf(stdout, "torture nemesis: wrote %s in %v\n", filepath.Join(out, name+".md"), res.Elapsed.Round(time.Second))
	if !res.Passed() {
		return res, fmt.Errorf("torture nemesis: a check failed (see %s; processes' logs in %s)", filepath.Join(out, name+".md"), dir)
	}
	return res, os.RemoveAll(dir)
}

// runCrashPoints runs the crash points (opts.Argv and Logf set, Dir made
// here), writes <out>/crashpoints-<store>.md and returns the result; an
// error when it could not run or a check failed (the logs are then kept).
func runCrashPoints(ctx context.Context, opts nemesis.CrashOptions, out string, stdout io.Writer) (*nemesis.CrashResult, error) {
	dir, err := os.MkdirTemp("", "flashmend-crashpoints-")
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	named := len(opts.Points) > 0
	// The defaults filled in, so that the report's name and command say
	// what ran (torture all passes only the seed).
	if err := opts.Validate(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	res, err := nemesis.RunCrashPoints(ctx, opts)
	if base.IsInvalidArgument(err) {
		_ = os.RemoveAll(dir) // nothing ran
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("torture crashpoints: %w (processes' logs in %s)", err, dir)
	}
	name := "crashpoints-" + opts.Store
	rep, err := report.New(name, "Crash points: a node killed at each persistence step and restarted from its disk")
	if err != nil {
		return res, err
	}
	rep.Text("%s", res.Markdown())
	command := fmt.Sprintf("flashmend torture crashpoints --store %s --seed %d --nodes %d --device-size %s --warmup %v --bound %v --max-at %d",
		opts.Store, opts.Seed, opts.Nodes, opts.DeviceSize, opts.Warmup, opts.Bound, opts.MaxAt)
	if named {
		command += " --points " + strings.Join(opts.Points, ",")
	}
	if err := rep.Write(out, report.CaptureEnv(command, time.Now())); err != nil {
		return res, err
	}
	fmt.Fprintf(stdout, "torture crashpoints: wrote %s in %v (seed %d)\n", filepath.Join(out, name+".md"), res.Elapsed.Round(time.Second), opts.Seed)
	if !res.Passed() {
		return res, fmt.Errorf("torture crashpoints: a check failed (see %s; processes' logs in %s)", filepath.Join(out, name+".md"), dir)
	}
	return res, os.RemoveAll(dir)
}

// newHelixCmd is `flashmend torture helix`: every copy damaged in a
// different place at once (internal/torture/helix); writes helix.md.
func newHelixCmd() *cobra.Command {
	var (
		opts       helix.Options
		objectSize = base.Bytes(helix.DefaultObjectBytes)
		out        string
	)
	cmd := &cobra.Command{
		Use:   "helix",
		Short: "Damage every copy of every object chunk and KV block in a different place at once; 0 lost (writes helix.md)",
		Long: `helix damages different regions on every copy at once, so that no copy is
whole and one good copy of every byte exists only across nodes
(internal/torture/helix). Objects: a 6-node cluster on plain files (or
emulated flash with --store sdf); every
512 B sector of every REP chunk damaged on two of its three replicas (a
different survivor each sector), every sector row of every EC row on two of
its six shards; every object read back, the cluster restarted, read and
scrubbed again. KV: a 3-replica shard; on every replica up to --fraction of
its data blocks damaged, every key kept intact on at least one replica;
all replicas restarted, every key read back, the replicas must converge
by key-range patches (no rebuild). Writes <out>/helix.md; exits non-zero
when anything was lost, wrong, left to repair or rebuilt.`,
		Example: `  flashmend torture helix --seed 7 --out /tmp/helix
  flashmend torture helix --objects 8 --object-size 1MiB --keys 20000`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// 0 means "the default" in helix.Options; on the command line
			// it is a mistake.
			if opts.Objects < 1 || opts.Keys < 1 || objectSize < 1 || !(opts.Fraction > 0) {
				return base.InvalidArgumentf("torture helix: --objects, --object-size, --keys and --fraction must be positive")
			}
			if objectSize > helix.MaxObjectBytes {
				return base.InvalidArgumentf("torture helix: --object-size %s above %s", objectSize, base.Bytes(helix.MaxObjectBytes))
			}
			opts.ObjectBytes = int(objectSize)
			dir, err := os.MkdirTemp("", "flashmend-helix-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			opts.Dir = dir
			if err := opts.Validate(); err != nil {
				return err
			}
			opts.Logf = announceSeed(cmd, "helix", &opts.Seed)
			res, err := helix.Run(cmd.Context(), opts)
			if err != nil {
				return fmt.Errorf("torture helix (seed %d): %w", opts.Seed, err)
			}
			rep, err := res.Report()
			if err != nil {
				return err
			}
			command := fmt.Sprintf("flashmend torture helix --seed %d --store %s --objects %d --object-size %d --keys %d --fraction %g",
				opts.Seed, opts.Store, opts.Objects, opts.ObjectBytes, opts.Keys, opts.Fraction)
			if err := rep.Write(out, report.CaptureEnv(command, time.Now())); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "torture helix: wrote %s in %v (seed %d)\n", filepath.Join(out, "helix.md"), res.Wall.Round(time.Second), opts.Seed)
			if p := res.Problems(); len(p) > 0 {
				return fmt.Errorf("torture helix (seed %d): target missed: %s", opts.Seed, strings.Join(p, "; "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&opts.Seed, "seed", 0, "seed of the data and of every damage choice (0: from the clock, printed)")
	f.IntVar(&opts.Objects, "objects", helix.DefaultObjects, fmt.Sprintf("objects per redundancy (REP and EC), 1 to %d", helix.MaxObjects))
	f.Var(&objectSize, "object-size", fmt.Sprintf("size of each object (%s to %s)", base.Bytes(helix.MinObjectBytes), base.Bytes(helix.MaxObjectBytes)))
	f.IntVar(&opts.Keys, "keys", helix.DefaultKeys, fmt.Sprintf("KV keys, %d to %d", helix.MinKeys, helix.MaxKeys))
	f.Float64Var(&opts.Fraction, "fraction", helix.DefaultFraction, "share of each KV replica's data blocks damaged at most, in (0, 1]")
	f.StringVar(&opts.Store, "store", helix.StoreFile, "object nodes' store: file (plain files) or sdf (emulated flash; the KV half stays on files in memory)")
	f.StringVar(&out, "out", "docs/results", "directory for helix.md")
	return cmd
}

// announceSeed draws the seed from the clock when the user gave none,
// prints it with how to repeat the run, and returns the progress logger
// (stderr) of a torture subcommand.
func announceSeed(cmd *cobra.Command, what string, seed *int64) func(format string, args ...any) {
	if *seed == 0 {
		*seed = time.Now().UnixNano()
	}
	fmt.Fprintf(cmd.OutOrStdout(), "torture %s: seed %d (repeat with --seed %d)\n", what, *seed, *seed)
	return func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
}
