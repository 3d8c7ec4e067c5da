package cli

import (
	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/model"
)

// newModelCmd is `flashmend model`: the papers' closed-form models
// (internal/model), printed as tables.
func newModelCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Print the papers' closed-form models (DIRECT, Reparo, Chameleon, ECC)",
		Long: `model evaluates the closed-form models of the seed papers and prints them as
tables (--format text, csv or json). Where a paper's printed table disagrees
with its own formula, the formula is printed and a "note:" line says so.`,
	}
	cmd.PersistentFlags().StringVar(&format, "format", string(model.FormatText), "output format: text, csv or json")
	print := func(cmd *cobra.Command, tables ...model.Table) error {
		f, err := model.ParseFormat(format)
		if err != nil {
			return usageError{err}
		}
		return model.WriteTables(cmd.OutOrStdout(), f, tables)
	}
	cmd.AddCommand(newModelDirectCmd(print), newModelECCCmd(print))
	return cmd
}

// printTables renders tables in the format chosen by --format.
type printTables func(cmd *cobra.Command, tables ...model.Table) error

func newModelDirectCmd(print printTables) *cobra.Command {
	paper := model.DirectPaperParams()
	var (
		uber            float64
		block           = base.Bytes(paper.BlockBytes)
		chunk           = base.Bytes(paper.ChunkBytes)
		replicas        = paper.Replicas
		sweep           bool
		sweepFrom       float64
		sweepTo         float64
		pointsPerDecade int
	)
	cmd := &cobra.Command{
		Use:   "direct",
		Short: "DIRECT section 3.1: read error probability for block, chunk and majority-vote recovery",
		Long: `direct prints the probability that a block read is an application-visible
error (paper 000 section 3.1) for block recovery (HDFS), chunk recovery (exact
and the paper's Taylor approximation) and chunk recovery with bit-by-bit
majority vote. By default it prints Table 1 (UBER 1e-10 and 1e-15); --uber
picks one UBER; --sweep prints a UBER sweep (default 1e-16 to 1e-3). Sizes are
bytes (units such as 64KiB accepted); UBER is per bit read.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := model.DirectParams{UBER: uber, BlockBytes: int64(block), ChunkBytes: int64(chunk), Replicas: replicas}
			if sweep {
				if cmd.Flags().Changed("uber") {
					return usageError{base.InvalidArgumentf("--uber and --sweep exclude each other (use --from and --to)")}
				}
				t, err := model.DirectSweepTable(p, sweepFrom, sweepTo, pointsPerDecade)
				if err != nil {
					return err
				}
				return print(cmd, t)
			}
			ubers := []float64{1e-10, 1e-15}
			if cmd.Flags().Changed("uber") {
				ubers = []float64{uber}
			}
			t, err := model.DirectTable(p, ubers)
			if err != nil {
				return err
			}
			return print(cmd, t)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&uber, "uber", 1e-10, "uncorrectable bit error rate, per bit read (default: Table 1's 1e-10 and 1e-15)")
	f.Var(&block, "block", "block size B, the unit of HDFS recovery (bytes, units accepted)")
	f.Var(&chunk, "chunk", "chunk size C, the unit of DIRECT recovery (bytes, units accepted)")
	f.IntVar(&replicas, "replicas", replicas, "replication factor R")
	f.BoolVar(&sweep, "sweep", false, "print a UBER sweep instead of Table 1")
	f.Float64Var(&sweepFrom, "from", 1e-16, "first UBER of --sweep")
	f.Float64Var(&sweepTo, "to", 1e-3, "last UBER of --sweep")
	f.IntVar(&pointsPerDecade, "points-per-decade", 1, "UBER points per factor of ten in --sweep")
	return cmd
}

// Default ECC codeword: 1 KiB of data protected by a BCH code over GF(2^14)
// correcting 40 bits (40*14 = 560 parity bits), a common NAND configuration.
const (
	defaultCodewordBits    = 1024*8 + 560
	defaultCorrectableBits = 40
)

func newModelECCCmd(print printTables) *cobra.Command {
	var (
		nBits, tBits    int
		rber            float64
		from, to        float64
		pointsPerDecade int
		targets         []float64
	)
	cmd := &cobra.Command{
		Use:   "ecc",
		Short: "UBER from raw bit error rate for a t-correcting ECC codeword, and its inverse",
		Long: `ecc prints the probability that a codeword of n bits has more than t bits in
error (binomial tail, computed in log space), the resulting UBER (one
uncorrectable event per failed codeword, per bit read), over a sweep of raw
bit error rates (or one --rber), and the largest RBER that meets each
--target UBER.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("rber") {
				from, to = rber, rber
			}
			tables, err := model.ECCTables(nBits, tBits, from, to, pointsPerDecade, targets)
			if err != nil {
				return err
			}
			return print(cmd, tables...)
		},
	}
	f := cmd.Flags()
	f.IntVar(&nBits, "codeword-bits", defaultCodewordBits, "codeword length n in bits (data plus parity)")
	f.IntVar(&tBits, "correctable-bits", defaultCorrectableBits, "bit errors t the ECC corrects per codeword")
	f.Float64Var(&rber, "rber", 1e-3, "one raw bit error rate to evaluate (instead of the sweep)")
	f.Float64Var(&from, "from", 1e-5, "first RBER of the sweep")
	f.Float64Var(&to, "to", 1e-2, "last RBER of the sweep")
	f.IntVar(&pointsPerDecade, "points-per-decade", 2, "RBER points per factor of ten")
	f.Float64SliceVar(&targets, "target", []float64{1e-15, 1e-16}, "target UBERs for the inverse table (repeat or comma-separate)")
	return cmd
}
