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
	render := func(cmd *cobra.Command, tables ...model.Table) error {
		f, err := model.ParseFormat(format)
		if err != nil {
			return usageError{err}
		}
		return model.WriteTables(cmd.OutOrStdout(), f, tables)
	}
	cmd.AddCommand(newModelDirectCmd(render), newModelReparoCmd(render), newModelChameleonCmd(render), newModelECCCmd(render))
	return cmd
}

// printTables renders tables in the format chosen by --format.
type printTables func(cmd *cobra.Command, tables ...model.Table) error

func newModelDirectCmd(render printTables) *cobra.Command {
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
error (DIRECT, Tai et al., SoCC'19 and its tech report, section 3.1) for block
recovery (HDFS), chunk recovery (exact and the paper's Taylor approximation)
and chunk recovery with bit-by-bit majority vote. By default it prints Table 1 (UBER 1e-10 and 1e-15); --uber
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
				return render(cmd, t)
			}
			ubers := []float64{1e-10, 1e-15}
			if cmd.Flags().Changed("uber") {
				ubers = []float64{uber}
			}
			t, err := model.DirectTable(p, ubers)
			if err != nil {
				return err
			}
			return render(cmd, t)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&uber, "uber", 0, "uncorrectable bit error rate, per bit read (default: Table 1's 1e-10 and 1e-15)")
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

func newModelECCCmd(render printTables) *cobra.Command {
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
			return render(cmd, tables...)
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

func newModelReparoCmd(render printTables) *cobra.Command {
	p := model.PaperReparoParams()
	var (
		small   = base.Bytes(p.RAID.CapacitiesBytes[0])
		large   = base.Bytes(p.RAID.CapacitiesBytes[1])
		rebuild = base.Bytes(p.RAID.RebuildBytesPerSecond)
	)
	cmd := &cobra.Command{
		Use:   "reparo",
		Short: "Reparo: die-failure binomials, eq. 1-2, Tables 1-2 and the Figure 8 example",
		Long: `reparo prints the models of Reparo (Hong et al., ACM TOS 2021): the probability of die failures among the
dies of an SSD (binomial), the double-failure probability P2 (eq. 1) and the
rebuild read-failure probability P_rf (eq. 2) for a RAID-5 group of small and
ultra-large SSDs, the space utilization increase of reparo_IDR (Table 1) and of
reparo_CDR after logical space adjustment (Table 2, eq. 3-4), and the Figure 8
worked example.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.RAID.CapacitiesBytes = []int64{int64(small), int64(large)}
			p.RAID.RebuildBytesPerSecond = int64(rebuild)
			tables, err := model.ReparoTables(p)
			if err != nil {
				return err
			}
			return render(cmd, tables...)
		},
	}
	f := cmd.Flags()
	f.IntVar(&p.Cores, "cores", p.Cores, "flash cores per SSD (Tables 1-2 and the die-failure table)")
	f.Float64Var(&p.DieFailureProb, "die-failure-prob", p.DieFailureProb, "probability that one die fails over the period considered")
	f.IntVar(&p.RAID.SSDs, "ssds", p.RAID.SSDs, "SSDs n in the RAID-5 group (eq. 1-2)")
	f.Var(&small, "small-capacity", "capacity of the conventional SSD compared in eq. 1-2")
	f.Var(&large, "large-capacity", "capacity of the ultra-large SSD compared in eq. 1-2")
	f.Float64Var(&p.RAID.UBER, "uber", p.RAID.UBER, "UBER of the SSDs, per bit read (eq. 2)")
	f.Float64Var(&p.RAID.MTTFHours, "mttf-hours", p.RAID.MTTFHours, "SSD mean time to failure in hours (eq. 1)")
	f.Var(&rebuild, "rebuild-rate", "rebuild bandwidth in bytes per second; MTTR = capacity / rate (eq. 1)")
	f.IntVar(&p.Layout.Cores, "example-cores", p.Layout.Cores, "flash cores N of the worked example (Figure 8)")
	f.IntVar(&p.Layout.DiesPerCore, "example-dies-per-core", p.Layout.DiesPerCore, "dies per core of the worked example")
	f.Float64Var(&p.Layout.LogicalSpace, "example-logical", p.Layout.LogicalSpace, "logical space |LS| of the worked example, in LBAs")
	f.Float64Var(&p.Layout.DieCapacity, "example-die-capacity", p.Layout.DieCapacity, "physical capacity of one die in the worked example, in LBAs")
	return cmd
}

func newModelChameleonCmd(render printTables) *cobra.Command {
	p := model.PaperChameleonParams()
	cmd := &cobra.Command{
		Use:   "chameleon",
		Short: "Chameleon: popularity with exponential decay (eq. 1), erase estimate (eq. 2), write amplification",
		Long: `chameleon prints the models of Chameleon (Zhao et al., IPDPS'18): an object's popularity after each epoch of
the --writes history (eq. 1, halving per epoch), and for each victim block
utilization mu the write amplification 1/(1-mu) and the erases
E_t = W_t / (B_p (1 - mu)) caused by --page-writes page writes (eq. 2).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			tables, err := model.ChameleonTables(p)
			if err != nil {
				return err
			}
			return render(cmd, tables...)
		},
	}
	f := cmd.Flags()
	f.Float64SliceVar(&p.WritesPerEpoch, "writes", p.WritesPerEpoch, "one object's writes per epoch, oldest first (eq. 1)")
	f.Float64Var(&p.PageWrites, "page-writes", p.PageWrites, "page writes W_t in the epoch (eq. 2)")
	f.IntVar(&p.PagesPerBlock, "pages-per-block", p.PagesPerBlock, "pages per erase block B_p (eq. 2)")
	f.Float64SliceVar(&p.Utilizations, "utilization", p.Utilizations, "victim block utilizations mu in [0, 1) to tabulate")
	return cmd
}
