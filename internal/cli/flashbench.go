package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/experiments"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/report"
)

type benchConfig struct {
	dir        string
	reportPath string
	channels   string
	fills      string
	timing     string
	bc         experiments.SDFBenchConfig
}

// newFlashBenchCmd is `flash bench`: the sdf experiment
// (internal/experiments, RunSDFBench) on the device in --dir.
func newFlashBenchCmd() *cobra.Command {
	c := benchConfig{fills: "0.5,0.7,0.85", timing: "real", bc: experiments.SDFBenchConfig{Runs: 3, UBER: 1e-7, RandomReads: 200}}
	cmd := &cobra.Command{
		Use:   "bench --dir DIR",
		Short: "Measure the SDF layer: throughput against channels, raw-read ratio, capacity, write amplification, UBER cost",
		Long: `bench reformats the device in DIR and runs SDF's microbenchmarks (ASPLOS'14,
section 3.2: Figure 7's sequential throughput against the number of channels
used, one writer/reader per channel, and Table 4's random reads) through the
SDF layer, each followed by a raw device read of the same pages in the same
run. It repeats everything --runs times and reports medians. It then repeats
the reads on the same device with a transient UBER (default 1e-7) to measure
the cost of the error model, and measures write amplification under random
overwrites at several fills on an in-memory device of the same block shape.
It prints a Markdown report; with --report it writes it (and an SVG plot beside
it). 'flashmend experiments run sdf' runs the same on the device of the
committed report (docs/results/sdf.md).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			return runFlashBench(cmd, c)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.dir, "dir", "", "device directory (formatted by flash format; bench erases it)")
	f.IntVar(&c.bc.Runs, "runs", c.bc.Runs, "repetitions (medians are reported)")
	f.StringVar(&c.reportPath, "report", "", "write a Markdown report to this path (e.g. docs/results/sdf.md)")
	f.Var(&c.bc.BytesPerChannel, "bytes-per-channel", "file size per channel (default: min(8MiB, a quarter of a channel))")
	f.StringVar(&c.channels, "channels", "", "channel counts to measure, e.g. 1,2,4 (default 1,2,4,...,all)")
	f.Float64Var(&c.bc.UBER, "uber", c.bc.UBER, "UBER for the error-model cost measurement (0 skips it; default: the rate set with flash inject, else 1e-7)")
	f.StringVar(&c.fills, "fills", c.fills, "fills for the write-amplification measurement")
	f.IntVar(&c.bc.RandomReads, "random-reads", c.bc.RandomReads, "random reads per channel per request size")
	f.StringVar(&c.timing, "timing", c.timing, "device timing: real (the preset's latencies on the wall clock) or none")
	return cmd
}

func runFlashBench(cmd *cobra.Command, c benchConfig) error {
	out := cmd.OutOrStdout()
	cfg, err := loadDeviceConfig(c.dir)
	if err != nil {
		return err
	}
	bc := c.bc
	bc.Dir, bc.Preset, bc.Geometry, bc.Seed, bc.Progress = c.dir, cfg.Preset, cfg.Geometry, cfg.Seed, out
	if !cmd.Flags().Changed("uber") && cfg.UBER > 0 {
		bc.UBER = cfg.UBER // the rate set with flash inject
	}
	if bc.Timing, err = flash.ParseTimingMode(c.timing); err != nil || bc.Timing == flash.TimingVirtual {
		return usageError{fmt.Errorf("--timing %q: want real or none", c.timing)}
	}
	if bc.Channels, err = parseInts(c.channels); err != nil {
		return err
	}
	if bc.Fills, err = parseFloats(c.fills); err != nil {
		return err
	}
	name := "sdf"
	if c.reportPath != "" {
		name = strings.TrimSuffix(filepath.Base(c.reportPath), ".md")
	}
	r, err := experiments.RunSDFBench(context.Background(), name, bc)
	if err != nil {
		return err
	}
	env := report.CaptureEnv(commandLine(cmd), time.Now())
	fmt.Fprintf(out, "%s", r.Markdown(env))
	if c.reportPath != "" {
		if err := r.Write(filepath.Dir(c.reportPath), env); err != nil {
			return err
		}
		fmt.Fprintf(out, "report written to %s\n", c.reportPath)
	}
	return nil
}

// commandLine reconstructs the command with the flags that were set.
func commandLine(cmd *cobra.Command) string {
	parts := []string{cmd.CommandPath()}
	cmd.Flags().Visit(func(f *pflag.Flag) { parts = append(parts, "--"+f.Name+"="+f.Value.String()) })
	return strings.Join(parts, " ")
}
