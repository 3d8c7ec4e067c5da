package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/experiments"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/sim"
	"github.com/flashmend/flashmend/internal/wear"
)

// newSimCmd is `flashmend sim`: the fleet simulator (internal/sim) running
// a wear policy (internal/wear) in virtual time.
func newSimCmd() *cobra.Command {
	var (
		workload    = "ycsb-zipf"
		servers     = 50
		policy      = "chameleon"
		redundancy  string
		scale       = 1.0
		epoch       = time.Hour
		fill        = 0.7
		hostManaged bool
		freshDevs   bool
		zoneBlocks  int
		channels    int
		seed        int64 = 1
		format            = "text"
		objectBytes       = base.Bytes(128 * base.KiB)
		reportDir   string
		quiet       bool
		opts        wear.Options
		moveBytes   base.Bytes
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate a flash fleet under a wear policy (Chameleon and its baselines) in virtual time",
		Long: `sim runs the fleet simulator: N servers, each with a page-mapped FTL
(greedy GC, 15% over-provisioning, paper 004 Table II timing) or the SDF
host-managed model (--sdf), replaying a workload under a wear policy. The
policy is the same wear balancer the coordinator runs (internal/wear).

Workloads: ycsb-zipf, mds-0, web-1, usr-0, hm-0 (synthetic profiles of the
paper's Table III, --scale multiplies their requests and data set), or
msr:FILE.csv, an MSR-Cambridge block trace. Policies: rep, ec, rep+ec, edm,
chameleon; --redundancy picks the initial redundancy of edm and chameleon
(ec by default, as the paper's wear figures; rep for its latency figures).

It prints the standard deviation of the servers' erase counts (erase_sigma),
total erases, write amplification and mean write latency; --format json
prints one JSON object; --report DIR also writes a Markdown report with
plots. A run is deterministic for its flags (--seed drives the workload).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usageError{fmt.Errorf("--format %q (want text or json)", format)}
			}
			mode, err := wear.ParseMode(policy)
			if err != nil {
				return err
			}
			opts.Mode = mode
			if redundancy != "" {
				if opts.Initial, err = wear.ParseRedundancy(redundancy); err != nil {
					return err
				}
			}
			opts.MaxMoveBytesPerEpoch = int64(moveBytes)
			w, err := simWorkload(workload, scale, int64(objectBytes))
			if err != nil {
				return err
			}
			cfg := sim.Config{
				Servers: servers, Workload: w, Policy: opts, Fill: fill, Epoch: epoch, Seed: seed, FreshDevices: freshDevs,
				Device: sim.DeviceConfig{HostManaged: hostManaged, ZoneBlocks: zoneBlocks, Channels: channels},
			}
			clock := base.Clock(base.SystemClock{})
			start := clock.Now()
			if !quiet {
				cfg.Progress = simProgress(cmd.ErrOrStderr(), clock, start)
			}
			res, err := sim.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			wall := clock.Now().Sub(start)
			if reportDir != "" {
				r, err := experiments.SimReport(res, wall)
				if err != nil {
					return err
				}
				env := report.CaptureEnv("flashmend "+strings.Join(simArgs(cmd), " "), clock.Now())
				if err := r.Write(reportDir, env); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "sim: wrote %s/%s.md\n", reportDir, r.Name())
			}
			if format == "json" {
				out := struct {
					*sim.Result
					WallSeconds float64 `json:"wall_seconds"`
				}{res, wall.Seconds()}
				enc := json.NewEncoder(cmd.OutOrStdout())
				return enc.Encode(out)
			}
			printSimText(cmd.OutOrStdout(), res, wall)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&workload, "workload", workload, "ycsb-zipf, mds-0, web-1, usr-0, hm-0, or msr:FILE.csv")
	f.IntVar(&servers, "servers", servers, "servers in the fleet (up to 100000)")
	f.StringVar(&policy, "policy", policy, "rep, ec, rep+ec, edm or chameleon")
	f.StringVar(&redundancy, "redundancy", "", "initial redundancy of edm and chameleon: ec (default) or rep")
	f.Float64Var(&scale, "scale", scale, "multiply a profile's requests and data set")
	f.DurationVar(&epoch, "epoch", epoch, "balancer epoch in virtual time")
	f.Float64Var(&fill, "fill", fill, "REP footprint of the data set as a fraction of each server's logical capacity (sizes the devices)")
	f.BoolVar(&freshDevs, "fresh-devices", false, "start the trace on devices erased but for the data set (default: preconditioned, as devices in service: every page programmed costs an erase)")
	f.BoolVar(&hostManaged, "sdf", false, "SDF host-managed devices (zones, no over-provisioning) instead of an FTL")
	f.IntVar(&zoneBlocks, "zone-blocks", 0, "blocks per zone with --sdf (default 16)")
	f.IntVar(&channels, "channels", 0, "channels per device: a request's page operations are dealt over them (timing only; default 1)")
	f.Int64Var(&seed, "seed", seed, "seed of the workload generator")
	f.StringVar(&format, "format", format, "output: text or json")
	f.Var(&objectBytes, "object-bytes", "object size for msr: traces (the address space is cut into objects)")
	f.StringVar(&reportDir, "report", "", "also write a Markdown report with plots into this directory")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	f.Float64Var(&opts.SigmaARPT, "sigma-arpt", 0, "ARPT trigger sigma_ARPT (paper 004 Table I): standard deviation of the servers' erase counts, in erases (default: --sigma-arpt-ratio)")
	f.Float64Var(&opts.SigmaHCDS, "sigma-hcds", 0, "HCDS and EDM trigger sigma_HCDS: standard deviation of the erase counts, in erases (default: --sigma-hcds-ratio)")
	f.Float64Var(&opts.SigmaARPTRatio, "sigma-arpt-ratio", 0, "ARPT trigger as erase-count sigma over mean, when --sigma-arpt is not given (default 0.03: Figure 8 starts ARPT before HCDS)")
	f.Float64Var(&opts.SigmaHCDSRatio, "sigma-hcds-ratio", 0, "HCDS and EDM trigger as erase-count sigma over mean, when --sigma-hcds is not given (default 0.05)")
	f.Float64Var(&opts.HotFraction, "hot-fraction", 0, "l_hot at this fraction of objects from the hottest (default 0.05)")
	f.IntVar(&opts.MaxRemapsPerEpoch, "remaps", 0, "objects remapped per epoch at most (default 256)")
	f.Float64Var(&opts.HorizonEpochs, "horizon", 0, "epochs of each object's write rate the balancer's eq. 2 estimate charges to the server that will hold it (default 8; paper 004 eq. 2 counts one epoch)")
	f.IntVar(&opts.MinResidenceEpochs, "residence", 0, "epochs a converted object stays before the opposite conversion (default 8)")
	f.Var(&moveBytes, "move-bytes", "bytes copied per epoch at most (default 256MiB)")
	return cmd
}

// simWorkload resolves --workload.
func simWorkload(name string, scale float64, objectBytes int64) (sim.Workload, error) {
	if path, ok := strings.CutPrefix(name, "msr:"); ok {
		return sim.MSRWorkload(path, objectBytes)
	}
	p, err := sim.LookupProfile(name)
	if err != nil {
		return sim.Workload{}, err
	}
	if !(scale > 0 && scale <= 1000) {
		return sim.Workload{}, base.InvalidArgumentf("--scale %g outside (0, 1000]", scale)
	}
	return p.Scaled(scale).Workload()
}

// simProgress prints a line at every tenth of the requests.
func simProgress(w io.Writer, clock base.Clock, start time.Time) func(sim.Progress) {
	next := int64(0)
	return func(p sim.Progress) {
		if p.Total <= 0 || p.Done*10 < next*p.Total {
			return
		}
		next = p.Done*10/p.Total + 1
		fmt.Fprintf(w, "sim: %3d%% of %d requests, virtual %.0fh, epoch %d, erase cv %.3f, %s\n",
			p.Done*100/p.Total, p.Total, p.Virtual.Hours(), p.Epoch, p.CV, clock.Now().Sub(start).Round(time.Second))
	}
}

func simArgs(cmd *cobra.Command) []string {
	args := []string{"sim"}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name == "report" {
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return args
}

func printSimText(w io.Writer, r *sim.Result, wall time.Duration) {
	fmt.Fprintf(w, "workload %s, policy %s (initial %s), %d servers, seed %d%s\n", r.Workload, r.Policy, r.Initial,
		r.Servers, r.Seed, map[bool]string{true: ", SDF host-managed", false: ""}[r.HostManaged])
	fmt.Fprintf(w, "requests %d (%d writes) over %.0f virtual hours, %d epochs, %d objects\n", r.Requests, r.Writes, r.VirtualHour, r.Epochs, r.Objects)
	fmt.Fprintf(w, "erase_sigma %.1f (mean %.1f, min %.0f, max %.0f, cv %.3f)\n", r.EraseSigma, r.EraseMean, r.EraseMin, r.EraseMax, r.EraseCV)
	fmt.Fprintf(w, "erases_total %.0f\n", r.ErasesTotal)
	fmt.Fprintf(w, "write_amplification %.3f (host pages %d, GC copies %d)\n", r.WriteAmp, r.HostPages, r.GCPages)
	fmt.Fprintf(w, "write_latency_us_mean %.0f per SSD write, %.0f per client write\n", r.LatencyUs, r.ClientLatUs)
	fmt.Fprintf(w, "pages read by EC read-modify-writes %d; pages written to new layouts %d (conversions %d), reading %d\n",
		r.RMWReadPages, r.RelayoutPages, r.ConversionPages, r.RelayoutReadPages)
	fmt.Fprintf(w, "balancer: %d remapped, %d swaps, %d late-REP, %d late-EC, %d moves (%s, %d failed), %d mapping rows (%d B)\n",
		r.Remapped, r.Swapped, r.LateREP, r.LateEC, r.Moves, base.Bytes(r.MovedBytes), r.MovesFailed, r.MappingRows, r.EntryBytes)
	fmt.Fprintf(w, "wall time %s\n", wall.Round(time.Millisecond))
}
