package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/torture/powerloss"
)

// newPowerLossCmd is `flashmend torture powerloss`: a node's plain-file
// object store cut from power at its file-system operations
// (internal/torture/powerloss); writes powerloss-file.md.
func newPowerLossCmd() *cobra.Command {
	var (
		opts  powerloss.Options
		modes string
		out   string
	)
	cmd := &cobra.Command{
		Use:   "powerloss",
		Short: "Cut a node's plain-file object store from power at every file-system operation, restart it from what was synced, check nothing acknowledged is lost (writes powerloss-file.md)",
		Long: `powerloss draws --workloads workloads (blob puts: chunk data, sums records
and the triplicated index entry; chunk repairs; blob deletes; pack
compactions) and runs each on a node's plain-file object store over an
in-memory file system that can lose power (internal/fsys).
Each workload is crashed before each of its mutating file-system operations
(--crashes 0) or before --crashes drawn ones, in each mode: sync/0 (a power
loss keeping exactly what was fsynced), sync/50 (half of the unsynced
sectors and directory changes kept), sync/100 and nosync/100 (a process
crash of a store that fsyncs or does not). The store is restarted from the
crash image: every acknowledged chunk and index entry must read back
verified, the write in flight absent, corrupt or whole, nothing other bytes;
a second restart from what the first synced must agree. It writes
<out>/powerloss-file.md and exits non-zero when a check failed.`,
		Example: `  flashmend torture powerloss --seed 7
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
			logf := announceSeed(cmd, "powerloss", &opts.Seed)
			opts.Logf = logf
			if err := opts.Validate(); err != nil {
				return err
			}
			res, err := powerloss.Run(opts)
			if err != nil {
				return err
			}
			rep, err := report.New("powerloss-file", "Power loss: a node's plain-file object store cut off at every file-system operation")
			if err != nil {
				return err
			}
			rep.Text("%s", res.Markdown())
			labels := make([]string, len(opts.Modes))
			for i, m := range opts.Modes {
				labels[i] = m.Label()
			}
			command := fmt.Sprintf("flashmend torture powerloss --seed %d --workloads %d --crashes %d --steps %d --max-chunks %d --max-chunk-bytes %d --modes %s",
				opts.Seed, opts.Workloads, opts.CrashesPerWorkload, opts.Steps, opts.MaxChunks, opts.MaxChunkBytes, strings.Join(labels, ","))
			if err := rep.Write(out, report.CaptureEnv(command, time.Now())); err != nil {
				return err
			}
			t := res.Total()
			fmt.Fprintf(cmd.OutOrStdout(), "torture powerloss: %d trials, %d acknowledged chunks and %d index entries checked, %d lost, %d wrong, %d failed trials; wrote %s in %v\n",
				t.Trials, t.AckedChunks, t.AckedEntries, t.Lost, t.Wrong, t.Failed, filepath.Join(out, "powerloss-file.md"), res.Elapsed.Round(time.Millisecond))
			if !res.Passed() {
				return fmt.Errorf("torture powerloss: a check failed (see %s)", filepath.Join(out, "powerloss-file.md"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&opts.Seed, "seed", 0, "seed of the workloads, crash points and images (0: from the clock, printed)")
	f.StringVar(&out, "out", "docs/results", "directory for powerloss-file.md")
	f.IntVar(&opts.Workloads, "workloads", powerloss.DefaultWorkloads, "workloads drawn")
	f.IntVar(&opts.CrashesPerWorkload, "crashes", 0, "crashes per workload and mode, at drawn operations (0: before every mutating operation)")
	f.IntVar(&opts.Steps, "steps", powerloss.DefaultSteps, "steps per workload (puts, repairs, deletes, compactions)")
	f.IntVar(&opts.MaxChunks, "max-chunks", powerloss.DefaultMaxChunks, "most chunks per blob")
	f.IntVar(&opts.MaxChunkBytes, "max-chunk-bytes", powerloss.DefaultMaxChunkBytes, "largest chunk in bytes (at most 65536)")
	f.StringVar(&modes, "modes", "sync/0,sync/50,sync/100,nosync/100", "crash modes, comma separated: sync/<percent of unsynced state kept>, nosync/100")
	return cmd
}
