package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/experiments"
	"github.com/flashmend/flashmend/internal/report"
)

func newExperimentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "experiments",
		Short: "Run the registered experiments and write their reports under docs/results",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the registered experiments",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, e := range experiments.All() {
				fmt.Fprintf(cmd.OutOrStdout(), "%-24s %s\n", e.Name, e.Description)
			}
			return nil
		},
	})

	var (
		all   bool
		out   string
		cfg              = experiments.Config{Seed: experiments.DefaultSeed}
		clock base.Clock = base.SystemClock{}
		quiet bool
	)
	run := &cobra.Command{
		Use:   "run [NAME...]",
		Short: "Run experiments by name (or --all) and write their reports",
		RunE: func(cmd *cobra.Command, args []string) error {
			var todo []experiments.Experiment
			switch {
			case all && len(args) > 0:
				return usageError{fmt.Errorf("give experiment names or --all, not both")}
			case all:
				todo = experiments.All()
			case len(args) == 0:
				return usageError{fmt.Errorf("name an experiment (see `flashmend experiments list`) or pass --all")}
			default:
				var err error
				if todo, err = experiments.LookupAll(args); err != nil {
					return base.InvalidArgumentf("%v", err)
				}
			}
			// A line as each experiment starts, and every half minute
			// while it runs (an experiment takes minutes and says
			// nothing meanwhile).
			p := newProgress(cmd.ErrOrStderr(), quiet, clock, 30*time.Second)
			for i, e := range todo {
				start := clock.Now()
				step := fmt.Sprintf("experiment %d/%d %s", i+1, len(todo), e.Name)
				p.Linef("%s: running", step)
				stop := p.heartbeat(func() string {
					return fmt.Sprintf("%s: running for %s", step, clock.Now().Sub(start).Round(time.Second))
				})
				r, err := e.Run(cmd.Context(), cfg)
				stop()
				if err != nil {
					return fmt.Errorf("experiment %s: %w", e.Name, err)
				}
				env := report.CaptureEnv(experiments.Command(e.Name, cfg), clock.Now())
				if err := r.Write(out, env); err != nil {
					return fmt.Errorf("experiment %s: %w", e.Name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "experiment %s: wrote %s/%s.md in %s\n",
					e.Name, out, r.Name(), clock.Now().Sub(start).Round(time.Millisecond))
			}
			return nil
		},
	}
	run.Flags().BoolVar(&all, "all", false, "run every registered experiment")
	run.Flags().StringVar(&out, "out", "docs/results", "directory for the reports")
	run.Flags().Int64Var(&cfg.Seed, "seed", experiments.DefaultSeed, "seed for every random choice")
	run.Flags().BoolVar(&cfg.Quick, "quick", false, "a seconds-long version of each experiment")
	registerQuiet(run, &quiet)
	cmd.AddCommand(run)
	return cmd
}
