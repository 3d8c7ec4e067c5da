package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bench"
	"github.com/flashmend/flashmend/internal/client"
)

// newBenchCmd is `flashmend bench`: the load generator (internal/bench).
func newBenchCmd() *cobra.Command {
	var (
		endpoint, red, format string
		size                  = 8 * base.MiB
		o                     = bench.Options{Op: bench.OpGet, Concurrency: 1, Duration: 10 * time.Second, GetFraction: 0.5}
	)
	cmd := &cobra.Command{
		Use:   "bench --op get|put|mixed [--size S] [--concurrency N] [--duration D]",
		Short: "Load a running cluster with GETs, PUTs or both and report throughput and latency",
		Long: `bench runs N concurrent workers against a running cluster for a duration:
GETs of objects it puts first (every GET's bytes are compared with what was
put), PUTs (each worker overwrites its own few keys), or a mix. It reports
throughput (bytes of verified data per second), operations per second and
latency percentiles (nearest rank: p50, p90, p99, max) of the operations that
succeeded, the errors, and the client machine's CPU count (a local cluster
shares those CPUs). The objects it writes are deleted at its end (--keep
leaves them).

With --format json it prints one JSON object whose field names carry their
units (throughput_bytes_per_s, ops_per_s, latency_ms_p99, ...).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usageError{fmt.Errorf("--format %q (want text or json)", format)}
			}
			if o.Concurrency < 1 || o.Duration <= 0 || o.Objects < 0 {
				return usageError{fmt.Errorf("--concurrency %d, --duration %s, --objects %d: want at least one worker, a positive duration and no negative count", o.Concurrency, o.Duration, o.Objects)}
			}
			r, err := client.ParseRedundancy(red)
			if err != nil {
				return usageError{err}
			}
			o.Redundancy, o.SizeBytes = r, int(size)
			if o.SizeBytes == 0 {
				return usageError{fmt.Errorf("--size must be positive")}
			}
			if o.Seed == 0 {
				o.Seed = time.Now().UnixNano()
			}
			ctx, stop := signalContext()
			defer stop()
			c, err := dialEndpoint(ctx, endpoint)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := bench.Run(ctx, c, o)
			if err != nil && ctx.Err() == nil {
				return err
			}
			if format == "json" {
				b, jerr := json.Marshal(res)
				if jerr != nil {
					return jerr
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), res)
			}
			if res.Errors > 0 {
				return fmt.Errorf("%d of %d operations failed (first: %s)", res.Errors, res.Errors+res.Ops, res.FirstError)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&endpoint, "endpoint", "", "cluster endpoint (default $"+EndpointEnv+")")
	f.StringVar(&o.Op, "op", o.Op, "operation: get, put or mixed")
	f.Var(&size, "size", "object size")
	f.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "concurrent workers")
	f.DurationVar(&o.Duration, "duration", o.Duration, "how long the workers run (objects for GETs are put before)")
	f.IntVar(&o.Objects, "objects", 0, "objects GETs read, put before the clock starts (default max(concurrency, 4))")
	f.StringVar(&red, "redundancy", "rep", "redundancy of the objects written: rep or ec")
	f.Float64Var(&o.GetFraction, "get-fraction", o.GetFraction, "share of GETs in a mixed run")
	f.StringVar(&format, "format", "text", "output: text or json")
	f.BoolVar(&o.Keep, "keep", false, "leave the objects the run wrote in the cluster")
	f.Int64Var(&o.Seed, "seed", 0, "seed of the object contents and the workers' choices (0: from the clock)")
	return cmd
}
