package cli

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/flash/catalog"
	"github.com/flashmend/flashmend/internal/model"
)

// newFlashCmd is `flashmend flash`: the emulated NAND device
// (internal/flash): its presets, its modelled throughput, and a check of its
// error models against their closed forms.
func newFlashCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "flash",
		Short: "Inspect and exercise the emulated NAND flash device",
		Long: `flash shows the emulated NAND device's presets (geometry, timing, wear, ECC),
replays SDF's channel-scaling microbenchmark in virtual time, and measures the
error models against their closed forms.`,
	}
	cmd.PersistentFlags().StringVar(&format, "format", string(model.FormatText), "output format: text, csv or json")
	print := func(cmd *cobra.Command, tables ...model.Table) error {
		f, err := model.ParseFormat(format)
		if err != nil {
			return usageError{err}
		}
		return model.WriteTables(cmd.OutOrStdout(), f, tables)
	}
	cmd.AddCommand(newFlashPresetsCmd(print), newFlashThroughputCmd(print), newFlashErrorsCmd(print))
	return cmd
}

func newFlashPresetsCmd(print printTables) *cobra.Command {
	return &cobra.Command{
		Use:   "presets",
		Short: "List the device presets",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t := model.Table{
				Title: "flash device presets (internal/flash Presets)",
				Columns: []model.Column{{Name: "name"}, {Name: "geometry"}, {Name: "raw_capacity"},
					{Name: "tR_us", Format: "%.0f"}, {Name: "tPROG_us", Format: "%.0f"}, {Name: "tBERS_us", Format: "%.0f"},
					{Name: "channel_MBps", Format: "%.0f"}, {Name: "rated_pe", Format: "%.0f"}, {Name: "ecc"}, {Name: "rber_fresh_to_rated"}},
			}
			for _, name := range catalog.Names() {
				p, _ := catalog.Lookup(name)
				us := func(d time.Duration) model.Cell { return model.Num(float64(d) / float64(time.Microsecond)) }
				t.Rows = append(t.Rows, []model.Cell{
					model.Label(p.Name), model.Label(p.Geometry.String()), model.Label(p.Geometry.RawCapacity().String()),
					us(p.Timing.ReadLatency), us(p.Timing.ProgramLatency), us(p.Timing.EraseLatency),
					model.Num(float64(p.Timing.ChannelBytesPerSecond) / 1e6), model.Num(float64(p.Wear.RatedEndurance)),
					model.Label(fmt.Sprintf("t=%d/%dB", p.CorrectableBits, p.CodewordBytes)),
					model.Label(fmt.Sprintf("%.0e..%.0e", p.Fit.Fresh, p.Fit.AtRated)),
				})
			}
			return print(cmd, t)
		},
	}
}

func newFlashThroughputCmd(print printTables) *cobra.Command {
	var (
		preset   string
		request  = base.Bytes(8 * base.MiB)
		requests int
	)
	cmd := &cobra.Command{
		Use:   "throughput",
		Short: "SDF Figure 7 in virtual time: sequential read/write throughput against channels used",
		Long: `throughput replays SDF's (Ouyang et al., ASPLOS'14, section 3.2) microbenchmark on a preset's
timing model in virtual time: one worker per channel issues synchronous
requests (default 8MiB, as SDF), each served by one channel and striped over
its dies. It prints the data throughput for 1, 2, 4, ... channels and all of
them. The sdf preset reproduces the paper's raw flash bandwidths (1.67 GB/s
read, 1.01 GB/s write over 44 channels).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := catalog.Lookup(preset)
			if err != nil {
				return err
			}
			t := model.Table{
				Title: fmt.Sprintf("sequential throughput, preset %s (%s), %d x %s requests per channel, virtual time", p.Name, p.Timing, requests, request),
				Columns: []model.Column{{Name: "channels", Format: "%.0f"}, {Name: "read_GBps", Format: "%.3f"},
					{Name: "write_GBps", Format: "%.3f"}, {Name: "read_per_channel_MBps", Format: "%.1f"}},
			}
			var counts []int
			for c := 1; c < p.Geometry.Channels; c *= 2 {
				counts = append(counts, c)
			}
			counts = append(counts, p.Geometry.Channels)
			for _, c := range counts {
				r, err := catalog.SequentialThroughput(p.Geometry, p.Timing, c, requests, request)
				if err != nil {
					return err
				}
				t.Rows = append(t.Rows, []model.Cell{model.Num(float64(c)), model.Num(r.ReadBytesPerSecond / 1e9),
					model.Num(r.WriteBytesPerSecond / 1e9), model.Num(r.ReadBytesPerSecond / 1e6 / float64(c))})
			}
			return print(cmd, t)
		},
	}
	cmd.Flags().StringVar(&preset, "preset", "sdf", "device preset (see flash presets)")
	cmd.Flags().Var(&request, "request", "request size (a multiple of the page size)")
	cmd.Flags().IntVar(&requests, "requests", 2, "requests per channel")
	return cmd
}

// errorsMaxReads bounds `flash errors` so it stays a quick check.
const errorsMaxReads = 10_000_000

func newFlashErrorsCmd(print printTables) *cobra.Command {
	var (
		kind        string
		uber, rber  float64
		persistent  bool
		codeword    = base.Bytes(132)
		correctable int
		reads       int
		seed        int64
	)
	cmd := &cobra.Command{
		Use:   "errors",
		Short: "Measure an error model on an emulated device against its closed form",
		Long: `errors programs every page of a small emulated device (2 channels x 2 dies x
4 blocks x 8 pages of 512+16 bytes), reads pages round-robin --reads times
with the chosen error model, and prints each measured count next to its
closed-form mean and 99.9% interval (normal approximation):

  --model uber       DIRECT's injection: flipped bits ~ Binomial(bits read, UBER)
  --model physical   constant --rber, ECC correcting --correctable bits per
                     --codeword: uncorrectable page reads ~ Binomial(reads,
                     1 - prod(1 - P[Binomial(codeword bits, RBER) > t])).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if reads < 1 || reads > errorsMaxReads {
				return usageError{base.InvalidArgumentf("--reads %d outside [1, %d]", reads, errorsMaxReads)}
			}
			g := flash.Geometry{Channels: 2, DiesPerChannel: 2, BlocksPerDie: 4, PagesPerBlock: 8, PageSize: 512, OOBSize: 16}
			var m flash.ErrorModel
			phys := flash.PhysicalModel{Fit: flash.ConstantRBER(rber), CodewordBytes: int(codeword), CorrectableBits: correctable}
			switch kind {
			case "uber":
				m = flash.UBERModel{UBER: uber, Persistent: persistent}
			case "physical":
				m = phys
			default:
				return usageError{base.InvalidArgumentf("--model %q (want uber or physical)", kind)}
			}
			e, err := flash.NewMemory(g, flash.Options{Seed: seed, ErrorModel: m})
			if err != nil {
				return err
			}
			defer e.Close()
			if err := exerciseDevice(e, reads); err != nil {
				return err
			}
			s := e.Stats().Total
			t := model.Table{
				Title: fmt.Sprintf("%s on %s, %d page reads, seed %d", m, g, reads, seed),
				Columns: []model.Column{{Name: "quantity"}, {Name: "observed", Format: "%.0f"}, {Name: "model_mean", Format: "%.1f"},
					{Name: "ci999_low", Format: "%.1f"}, {Name: "ci999_high", Format: "%.1f"}, {Name: "inside"}},
			}
			row := func(name string, observed, n, p float64) {
				mean, sd := n*p, math.Sqrt(n*p*(1-p))
				inside := "yes"
				if math.Abs(observed-mean) > 3.29*sd {
					inside = "NO"
				}
				t.Rows = append(t.Rows, []model.Cell{model.Label(name), model.Num(observed), model.Num(mean),
					model.Num(mean - 3.29*sd), model.Num(mean + 3.29*sd), model.Label(inside)})
			}
			if kind == "uber" {
				row("flipped bits", float64(s.FlippedBits), float64(s.BitsRead), uber)
				t.Notes = append(t.Notes, fmt.Sprintf("observed UBER %.4g (configured %g)", s.ObservedUBER(), uber))
			} else {
				row("uncorrectable page reads", float64(s.UncorrectableReads), float64(s.Reads),
					phys.UncorrectablePageProbability(g.PageSize+g.OOBSize, rber))
				row("raw bit errors", float64(s.RawBitErrors), float64(s.BitsSensed), rber)
				t.Notes = append(t.Notes, fmt.Sprintf("corrected bits %d, observed RBER %.4g", s.CorrectedBits, s.ObservedRBER()))
			}
			return print(cmd, t)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kind, "model", "uber", "error model: uber or physical")
	f.Float64Var(&uber, "uber", 1e-4, "UBER: probability that a bit read flips (uber model)")
	f.BoolVar(&persistent, "persistent", false, "write UBER flips into the stored pages (uber model)")
	f.Float64Var(&rber, "rber", 1e-3, "raw bit error rate (physical model)")
	f.Var(&codeword, "codeword", "ECC codeword payload bytes (physical model)")
	f.IntVar(&correctable, "correctable", 3, "bits the ECC corrects per codeword (physical model)")
	f.IntVar(&reads, "reads", 100_000, "page reads")
	f.Int64Var(&seed, "seed", 1, "random seed")
	return cmd
}

// exerciseDevice programs every page of e and reads pages round-robin reads
// times. Uncorrectable reads are expected (they are what is measured); any
// other error is returned.
func exerciseDevice(e *flash.Emulator, reads int) error {
	g := e.Geometry()
	data, oob := make([]byte, g.PageSize), make([]byte, g.OOBSize)
	var pages []flash.PageAddr
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			for b := 0; b < g.BlocksPerDie; b++ {
				for p := 0; p < g.PagesPerBlock; p++ {
					a := flash.PageAddr{Channel: c, Die: d, Block: b, Page: p}
					for i := range data {
						data[i] = byte(i*7 + p)
					}
					if err := e.Program(a, data, oob[:0]); err != nil {
						return err
					}
					pages = append(pages, a)
				}
			}
		}
	}
	for i := 0; i < reads; i++ {
		if _, err := e.Read(pages[i%len(pages)], data, oob); err != nil && !errors.Is(err, flash.ErrUncorrectable) {
			return err
		}
	}
	return nil
}
