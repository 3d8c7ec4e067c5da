package model

import (
	"fmt"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
)

// ReparoDiesPerCore are the columns of paper 003 Tables 1 and 2.
var reparoDiesPerCore = [...]int{4, 8, 16, 32, 64, 128}

// reparoTableCores is the number of flash cores of Tables 1-2 (PM1643).
const reparoTableCores = 4

// RAIDParams describe the UL-RAID(n) comparison of paper 003 section 3: a
// RAID-5 group of SSDs whose rebuild reads the n-1 surviving SSDs in full.
type RAIDParams struct {
	SSDs                  int
	CapacitiesBytes       []int64 // compared SSD capacities, smallest first
	UBER                  float64 // per bit read
	MTTFHours             float64
	RebuildBytesPerSecond int64 // MTTR = capacity / rebuild rate
}

// PaperRAIDParams is UL-RAID(16) of 32 TiB SSDs against sixteen 512 GiB
// SSDs, UBER 1e-16 (section 3). MTTF (2 million hours, the PM1643 data
// sheet) and the rebuild rate (12 Gbit/s SAS-2 with 8b/10b coding,
// 1.2e9 bytes/s) are our assumptions; the ratios the paper quotes do not
// depend on them.
func PaperRAIDParams() RAIDParams {
	return RAIDParams{
		SSDs:                  16,
		CapacitiesBytes:       []int64{int64(512 * base.GiB), int64(32 * base.TiB)},
		UBER:                  1e-16,
		MTTFHours:             2e6,
		RebuildBytesPerSecond: 1_200_000_000,
	}
}

// RAIDRow is the eq. 1-2 risk of one capacity.
type RAIDRow struct {
	CapacityBytes     int64
	MTTRHours         float64
	P2, P2Exponential float64
	ReadBits          float64
	PReadFailure      float64
}

// RAIDRisks evaluates eq. 1 and eq. 2 for each capacity.
func RAIDRisks(p RAIDParams) ([]RAIDRow, error) {
	if p.RebuildBytesPerSecond <= 0 || len(p.CapacitiesBytes) == 0 {
		return nil, base.InvalidArgumentf("model: RAID comparison needs capacities and a positive rebuild rate")
	}
	var rows []RAIDRow
	for _, c := range p.CapacitiesBytes {
		if c <= 0 {
			return nil, base.InvalidArgumentf("model: SSD capacity %d bytes is not positive", c)
		}
		r := RAIDRow{CapacityBytes: c, MTTRHours: float64(c) / float64(p.RebuildBytesPerSecond) / 3600}
		var err error
		if r.P2, err = DoubleFailureProbability(r.MTTRHours, p.MTTFHours, p.SSDs); err != nil {
			return nil, err
		}
		if r.P2Exponential, err = DoubleFailureProbabilityExponential(r.MTTRHours, p.MTTFHours, p.SSDs); err != nil {
			return nil, err
		}
		r.ReadBits = float64(p.SSDs-1) * float64(c) * bitsPerByte
		if r.PReadFailure, err = ReadFailureProbability(p.UBER, r.ReadBits); err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// ReparoParams are the inputs of `flashmend model reparo`.
type ReparoParams struct {
	Cores          int     // flash cores per SSD for the die-failure table
	DieFailureProb float64 // probability that one die fails over the period considered
	RAID           RAIDParams
	Layout         SpaceLayout // worked example (Figure 8)
}

// PaperReparoParams are the paper's examples plus a per-die failure
// probability of 1e-3 (our assumption, only for the binomial table).
func PaperReparoParams() ReparoParams {
	return ReparoParams{Cores: reparoTableCores, DieFailureProb: 1e-3, RAID: PaperRAIDParams(), Layout: Figure8Layout()}
}

// ReparoTables prints the Reparo models: die failures among the dies of an
// SSD, eq. 1-2 for UL-RAID(n), Tables 1 and 2, and the Figure 8 example.
func ReparoTables(p ReparoParams) ([]Table, error) {
	dies := Table{
		Title: fmt.Sprintf("Reparo section 3: P(die failures) in an SSD of %d cores, each die failing with p=%g (binomial, footnote 4)", p.Cores, p.DieFailureProb),
		Columns: []Column{
			{Name: "dies_per_core", Format: "%.0f"}, {Name: "dies", Format: "%.0f"},
			{Name: "p_at_least_1"}, {Name: "p_at_least_2"},
		},
	}
	for _, x := range reparoDiesPerCore {
		n := p.Cores * x
		p1, err := ProbAtLeastFailures(n, 1, p.DieFailureProb)
		if err != nil {
			return nil, err
		}
		p2, err := ProbAtLeastFailures(n, 2, p.DieFailureProb)
		if err != nil {
			return nil, err
		}
		dies.Rows = append(dies.Rows, []Cell{Num(float64(x)), Num(float64(n)), Num(p1), Num(p2)})
	}

	raidRows, err := RAIDRisks(p.RAID)
	if err != nil {
		return nil, err
	}
	raid := Table{
		Title: fmt.Sprintf("Reparo eq. 1-2: RAID-5 group of n=%d SSDs, UBER %g, MTTF %g h, rebuild %d bytes/s", p.RAID.SSDs, p.RAID.UBER, p.RAID.MTTFHours, p.RAID.RebuildBytesPerSecond),
		Columns: []Column{
			{Name: "capacity"}, {Name: "mttr_hours", Format: "%.2f"},
			{Name: "p2_eq1"}, {Name: "p2_exponential"},
			{Name: "read_bits"}, {Name: "p_read_failure_eq2"},
		},
		Notes: []string{
			"eq. 1: P2 = MTTR*(n-1)/MTTF (first order; p2_exponential = 1-exp(-(n-1)*MTTR/MTTF)); eq. 2: P_rf = 1-(1-UBER)^S_read, S_read = (n-1) * capacity in bits",
		},
	}
	for _, r := range raidRows {
		raid.Rows = append(raid.Rows, []Cell{Label(base.Bytes(r.CapacityBytes).String()), Num(r.MTTRHours), Num(r.P2), Num(r.P2Exponential), Num(r.ReadBits), Num(r.PReadFailure)})
	}
	if len(raidRows) >= 2 {
		first, last := raidRows[0], raidRows[len(raidRows)-1]
		raid.Notes = append(raid.Notes, fmt.Sprintf(
			"from %s to %s SSDs P2 grows %.1fx (paper, 512 GB to 32 TB: 64 times) and P_rf grows %.1fx (paper: 52 times)",
			base.Bytes(first.CapacityBytes), base.Bytes(last.CapacityBytes), last.P2/first.P2, last.PReadFailure/first.PReadFailure))
	}

	table1 := Table{
		Title:   "Reparo Table 1: space utilization increase after a die failure, reparo_IDR (percent)",
		Columns: []Column{{Name: "core"}},
	}
	table2 := Table{
		Title:   fmt.Sprintf("Reparo Table 2: space utilization increase after logical space adjustment, reparo_CDR, %d cores (percent)", p.Cores),
		Columns: []Column{{Name: "core"}},
		Notes:   []string{"alpha = |LS_h|/(D_ssd-1) (eq. 4) makes every core's utilization grow by 1/(D_ssd-1); Table 1 (IDR) is 1/(x-1) for x dies per core"},
	}
	idr := []Cell{Label("victim (w/ die failure)")}
	idrHelper := []Cell{Label("helper")}
	cdr := []Cell{Label("victim (w/ die failure)")}
	cdrHelper := []Cell{Label("helper")}
	for _, x := range reparoDiesPerCore {
		col := Column{Name: fmt.Sprintf("%d_dies", x), Format: "%.2f"}
		table1.Columns = append(table1.Columns, col)
		table2.Columns = append(table2.Columns, col)
		v, err := IDRUtilizationIncrease(x)
		if err != nil {
			return nil, err
		}
		idr = append(idr, Num(100*v))
		idrHelper = append(idrHelper, Num(0))
		layout := SpaceLayout{Cores: p.Cores, DiesPerCore: x, LogicalSpace: float64(p.Cores * x), DieCapacity: 2}
		adj, err := layout.Adjust()
		if err != nil {
			return nil, err
		}
		cdr = append(cdr, Num(100*(adj.VictimUtilization/adj.UtilizationBefore-1)))
		cdrHelper = append(cdrHelper, Num(100*(adj.HelperUtilization/adj.UtilizationBefore-1)))
	}
	table1.Rows = [][]Cell{idr, idrHelper}
	table2.Rows = [][]Cell{cdr, cdrHelper}

	fig8, err := Figure8Table(p.Layout)
	if err != nil {
		return nil, err
	}
	return []Table{dies, raid, table1, table2, fig8}, nil
}

// Figure8Table is the worked example of section 5.2 (Figure 8) for a layout:
// alpha, utilizations, and the first redirection unit of victim core N-1.
func Figure8Table(l SpaceLayout) (Table, error) {
	adj, err := l.Adjust()
	if err != nil {
		return Table{}, err
	}
	victim := l.Cores - 1
	redirects, err := RedirectUnit(l, victim, 0, int64(l.LogicalSpace))
	if err != nil {
		return Table{}, err
	}
	var rs []string
	for _, r := range redirects {
		rs = append(rs, r.String())
	}
	num := func(name string, v float64) []Cell { return []Cell{Label(name), Num(v)} }
	t := Table{
		Title:   fmt.Sprintf("Reparo Figure 8: a die of core %d fails; %s", victim, l),
		Columns: []Column{{Name: "quantity"}, {Name: "value", Format: "%.4g"}},
		Rows: [][]Cell{
			num("alpha = |LS_h|/(D_ssd-1) (eq. 4)", adj.Alpha),
			num("utilization before", adj.UtilizationBefore),
			num("helper logical space after", adj.HelperLogicalAfter),
			num("victim logical space after", adj.VictimLogicalAfter),
			num("utilization after, helper", adj.HelperUtilization),
			num("utilization after, victim", adj.VictimUtilization),
			num("increase with adjustment (%)", 100*(adj.VictimUtilization/adj.UtilizationBefore-1)),
			num("victim utilization without adjustment", adj.VictimUtilizationIDR),
			num("increase without adjustment (%)", 100*(adj.VictimUtilizationIDR/adj.UtilizationBefore-1)),
			num("LBAs per redirection unit (D_ssd-1)", float64(adj.RedirectionUnitBlocks)),
			num("fake failures per unit (N-1)", float64(adj.RedirectedPerUnit)),
			{Label("redirected in unit 0"), Label(strings.Join(rs, ", "))},
		},
	}
	return t, nil
}
