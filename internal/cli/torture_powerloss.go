package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/torture/powerloss"
)

// newPowerLossCmd is `flashmend torture powerloss`: a node's object store
// (plain files, or SDF on emulated flash) cut from power at its
// file-system operations (internal/torture/powerloss); writes
// powerloss-<store>.md.
func newPowerLossCmd() *cobra.Command {
	var (
		opts  powerloss.Options
		modes string
		out   string
	)
	cmd := &cobra.Command{
		Use:   "powerloss",
		Short: "Cut a node's object store (plain files, or SDF on emulated flash) from power at every file-system operation, restart it from what was synced, check nothing acknowledged is lost (writes powerloss-<store>.md)",
		Long: `powerloss draws --workloads workloads (blob puts: chunk data, sums records
and the triplicated index entry; chunk repairs; blob deletes; pack
compactions) and runs each on a node's object store over an in-memory file
system that can lose power (internal/fsys): --store file, the plain-file
store; --store sdf, the SDF store on a file-backed emulated flash device
whose page file, state copies and format markers are on that file system
(power-safe, as every node's is by default).
Each workload is crashed before each of its mutating file-system operations
(--crashes 0) or before --crashes drawn ones, in each mode: sync/0 (a power
loss keeping exactly what was fsynced), sync/50 (half of the unsynced
sectors and directory changes kept), sync/100 and nosync/100 (a process
crash of a store that fsyncs or does not; for sdf, nosync is the device
without its power-safe fsyncs). The store is restarted from the crash
image: every acknowledged chunk and index entry must read back verified,
the write in flight absent, corrupt or whole, nothing other bytes; a second
restart from what the first synced must agree. It writes
<out>/powerloss-<store>.md and exits non-zero when a check failed.`,
		Example: `  flashmend torture powerloss --seed 7
  flashmend torture powerloss --store sdf --crashes 100
  flashmend torture powerloss --workloads 2 --crashes 50 --modes sync/0,sync/50 --out /tmp/pl`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Modes = nil
			for _, s := range strings.Split(modes, ",") {
				m, err := powerloss.ParseMode(strings.TrimSpace(s))
				if err != nil {
					return err
				}
				opts.Modes = append(opts.Modes, m)
			}
			if opts.Workloads < 1 || opts.Steps < 1 || opts.MaxChunks < 1 || opts.MaxChunkBytes < 1 {
				return base.InvalidArgumentf("torture powerloss: --workloads, --steps, --max-chunks and --max-chunk-bytes must be at least 1")
			}
			if opts.Store != powerloss.StoreFile && opts.Store != powerloss.StoreSDF {
				return base.InvalidArgumentf("torture powerloss: --store %q (want file or sdf)", opts.Store)
			}
			opts.Logf = announceSeed(cmd, "powerloss", &opts.Seed)
			res, err := runPowerLoss(opts, out, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if !res.Passed() {
				return fmt.Errorf("torture powerloss: a check failed (see %s)", filepath.Join(out, powerLossReportName(opts.Store)+".md"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&opts.Seed, "seed", 0, "seed of the workloads, crash points and images (0: from the clock, printed)")
	f.StringVar(&out, "out", "docs/results", "directory for powerloss-<store>.md")
	f.StringVar(&opts.Store, "store", powerloss.StoreFile, "the node store cut from power: file (plain files) or sdf (SDF on a file-backed emulated flash device)")
	f.IntVar(&opts.Workloads, "workloads", powerloss.DefaultWorkloads, "workloads drawn")
	f.IntVar(&opts.CrashesPerWorkload, "crashes", 0, "crashes per workload and mode, at drawn operations (0: before every mutating operation)")
	f.IntVar(&opts.Steps, "steps", powerloss.DefaultSteps, "steps per workload (puts, repairs, deletes, compactions)")
	f.IntVar(&opts.MaxChunks, "max-chunks", powerloss.DefaultMaxChunks, "most chunks per blob")
	f.IntVar(&opts.MaxChunkBytes, "max-chunk-bytes", powerloss.DefaultMaxChunkBytes, "largest chunk in bytes (at most 65536)")
	f.StringVar(&modes, "modes", "sync/0,sync/50,sync/100,nosync/100", "crash modes, comma separated: sync/<percent of unsynced state kept>, nosync/100")
	return cmd
}

// powerLossReportName is the report a power-loss run of store writes.
func powerLossReportName(store string) string { return "powerloss-" + store }

// runPowerLoss runs the power-loss trials of opts (Seed set), writes
// <out>/powerloss-<store>.md and prints a summary line; a failed check is
// in the result (Passed), not the error.
func runPowerLoss(opts powerloss.Options, out string, stdout io.Writer) (*powerloss.Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	res, err := powerloss.Run(opts)
	if err != nil {
		return nil, err
	}
	title := "Power loss: a node's plain-file object store cut off at every file-system operation"
	if opts.Store == powerloss.StoreSDF {
		title = "Power loss: a node's SDF object store on emulated flash cut off at its file-system operations"
	}
	name := powerLossReportName(opts.Store)
	rep, err := report.New(name, title)
	if err != nil {
		return nil, err
	}
	rep.Text("%s", res.Markdown())
	if err := rep.Write(out, report.CaptureEnv(powerLossCommand(opts), time.Now())); err != nil {
		return nil, err
	}
	t := res.Total()
	fmt.Fprintf(stdout, "torture powerloss --store %s: %d trials, %d acknowledged chunks and %d index entries checked, %d lost, %d wrong, %d failed trials; wrote %s in %v\n",
		opts.Store, t.Trials, t.AckedChunks, t.AckedEntries, t.Lost, t.Wrong, t.Failed, filepath.Join(out, name+".md"), res.Elapsed.Round(time.Millisecond))
	return res, nil
}

// powerLossCommand is the command line that repeats a run of opts.
func powerLossCommand(opts powerloss.Options) string {
	labels := make([]string, len(opts.Modes))
	for i, m := range opts.Modes {
		labels[i] = m.Label()
	}
	return fmt.Sprintf("flashmend torture powerloss --store %s --seed %d --workloads %d --crashes %d --steps %d --max-chunks %d --max-chunk-bytes %d --modes %s",
		opts.Store, opts.Seed, opts.Workloads, opts.CrashesPerWorkload, opts.Steps, opts.MaxChunks, opts.MaxChunkBytes, strings.Join(labels, ","))
}
