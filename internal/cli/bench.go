package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bench"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

// newBenchCmd is `flashmend bench`: the load generator (internal/bench).
func newBenchCmd() *cobra.Command {
	var (
		endpoint, red, format string
		size                  = 8 * base.MiB
		o                     = bench.Options{Op: bench.OpGet, Concurrency: 1, Duration: 10 * time.Second, GetFraction: 0.5}
		kvMode                bool
		kvAddrs, kvSplits     string
		ko                    = bench.KVOptions{ValueSize: 800, Keys: 5000, RangeKeys: 10}
		tlsF                  clientTLSFlags
		quiet                 bool
	)
	cmd := &cobra.Command{
		Use:   "bench [--kv] --op get|put|mixed|range [--size S] [--concurrency N] [--duration D]",
		Short: "Load a running cluster's objects (GET, PUT, mixed) or KV store (put, get, range) and report throughput and latency",
		Long: `bench runs N concurrent workers against a running cluster for a duration:
GETs of objects it puts first (every GET's bytes are compared with what was
put), PUTs (each worker overwrites its own few keys), or a mix. It reports
throughput (bytes of verified data per second), operations per second and
latency percentiles (nearest rank: p50, p90, p99, max) of the operations that
succeeded, the errors, and the client machine's CPU count (a local cluster
shares those CPUs). The objects it writes are deleted at its end (--keep
leaves them).

With --kv it loads the cluster's KV store instead (the one its storage nodes
host, or with --kv-addrs a 'kv serve' cluster): --op put writes random keys out
of --keys, get reads them back (strongly consistent; each value is compared
with what was written), range scans --range-keys consecutive keys from a
random one (every row compared); get and range runs write every key once
before the clock starts. Values are --value-size bytes; the throughput is
value bytes moved per second. The keys are left in the store.

With --format json it prints one JSON object whose field names carry their
units (throughput_bytes_per_s, ops_per_s, latency_ms_p99, ...); "store" says
object or kv.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usageError{fmt.Errorf("--format %q (want text or json)", format)}
			}
			// JSON is for scripts, which often read both streams.
			quiet = quiet || format == "json"
			if kvMode {
				return runKVBench(cmd, format, kvAddrs, kvSplits, endpoint, &tlsF, quiet, o, ko)
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
			c, err := dialEndpoint(ctx, endpoint, &tlsF)
			if err != nil {
				return err
			}
			defer c.Close()
			stopBeat := benchHeartbeat(cmd, quiet, o.Duration)
			res, err := bench.Run(ctx, c, o)
			stopBeat()
			if err != nil && ctx.Err() == nil {
				return err
			}
			return printBenchResult(cmd, format, res, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&endpoint, "endpoint", "", "cluster endpoint (default $"+EndpointEnv+")")
	f.StringVar(&o.Op, "op", o.Op, "operation: get, put or mixed (objects); put, get or range (--kv)")
	f.Var(&size, "size", "object size")
	f.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "concurrent workers")
	f.DurationVar(&o.Duration, "duration", o.Duration, "how long the workers run (objects for GETs are put before)")
	f.IntVar(&o.Objects, "objects", 0, "objects GETs read, put before the clock starts (default max(concurrency, 4))")
	f.StringVar(&red, "redundancy", "rep", "redundancy of the objects written: rep or ec")
	f.Float64Var(&o.GetFraction, "get-fraction", o.GetFraction, "share of GETs in a mixed run")
	f.StringVar(&format, "format", "text", "output: text or json")
	f.BoolVar(&o.Keep, "keep", false, "leave the objects the run wrote in the cluster")
	f.Int64Var(&o.Seed, "seed", 0, "seed of the object contents or values and the workers' choices (0: from the clock)")
	f.BoolVar(&kvMode, "kv", false, "load the KV store instead of objects")
	f.StringVar(&kvAddrs, "kv-addrs", "", "with --kv: a 'kv serve' cluster's node addresses, ID=host:port comma separated (default: the KV store of the cluster at --endpoint)")
	f.StringVar(&kvSplits, "kv-splits", "", "with --kv-addrs: the shard split keys the 'kv serve' cluster was started with")
	f.IntVar(&ko.ValueSize, "value-size", ko.ValueSize, "with --kv: bytes per value")
	f.IntVar(&ko.Keys, "keys", ko.Keys, "with --kv: distinct keys")
	f.IntVar(&ko.RangeKeys, "range-keys", ko.RangeKeys, "with --kv --op range: keys per scan")
	tlsF.register(cmd)
	cmd.Flags().BoolVar(&quiet, "quiet", false, "no progress lines on stderr (implied by --format json)")
	return cmd
}

// runKVBench is bench --kv.
func runKVBench(cmd *cobra.Command, format, addrs, splits, endpoint string, tlsF *clientTLSFlags, quiet bool, o bench.Options, ko bench.KVOptions) error {
	ko.Op, ko.Concurrency, ko.Duration, ko.Seed = o.Op, o.Concurrency, o.Duration, o.Seed
	if ko.Op == bench.OpMixed {
		return usageError{fmt.Errorf("--kv --op %q: want put, get or range", ko.Op)}
	}
	if ko.Concurrency < 1 || ko.Duration <= 0 {
		return usageError{fmt.Errorf("--concurrency %d, --duration %s: want at least one worker and a positive duration", ko.Concurrency, ko.Duration)}
	}
	if ko.Seed == 0 {
		ko.Seed = time.Now().UnixNano()
	}
	ctx, stop := signalContext()
	defer stop()
	var kc *kvclient.Client
	var err error
	if addrs != "" {
		kc, err = staticKVClient(addrs, splits, tlsF)
	} else {
		kc, err = clusterKVClient(ctx, endpoint, tlsF)
	}
	if err != nil {
		return err
	}
	defer kc.Close()
	stopBeat := benchHeartbeat(cmd, quiet, ko.Duration)
	res, err := bench.RunKV(ctx, bench.KVClient(kc), ko)
	stopBeat()
	if err != nil && ctx.Err() == nil {
		if base.IsInvalidArgument(err) {
			return usageError{err}
		}
		return err
	}
	return printBenchResult(cmd, format, res, err)
}

// benchHeartbeat prints a line every few seconds while a run fills the
// cluster with what it reads and then loads it for d.
func benchHeartbeat(cmd *cobra.Command, quiet bool, d time.Duration) (stop func()) {
	p := cmdProgress(cmd, quiet)
	p.Linef("bench: writing the data it reads, then %s of load", d)
	return p.heartbeat(func() string { return "bench: running" })
}

// printBenchResult prints a run's result (JSON with --format json) and
// returns err, the run's own error, or else an error if an operation failed.
func printBenchResult(cmd *cobra.Command, format string, res bench.Result, err error) error {
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
}
