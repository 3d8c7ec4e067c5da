package experiments

import (
	"context"
	"fmt"
	"math"

	"github.com/flashmend/flashmend/internal/model"
	"github.com/flashmend/flashmend/internal/report"
)

// modelDirect plots the closed-form curves of DIRECT Figure 10 (paper 000,
// section 3.1): the probability that a read of one block is visible to the
// application as an error, for block recovery (HDFS), chunk recovery and
// chunk recovery with bit-by-bit majority vote. Measured points are added by
// the object-store experiment, which uses the same functions.
func modelDirect() Experiment {
	return Experiment{
		Name:        "model-direct",
		Description: "DIRECT section 3.1: closed-form read error probability against UBER (Figure 10 curves)",
		Run:         runModelDirect,
	}
}

func runModelDirect(_ context.Context, cfg Config) (*report.Report, error) {
	params := model.DirectParams{
		UBER:       1e-10,
		BlockBytes: 128 << 20,
		ChunkBytes: 64 << 10,
		Replicas:   3,
	}
	if err := params.Validate(); err != nil {
		return nil, err
	}
	perDecade := 4
	if cfg.Quick {
		perDecade = 1
	}
	rows := model.DirectSweep(params, 1e-16, 1e-3, perDecade)
	r, err := report.New("model-direct", "DIRECT closed-form read error model (Figure 10 curves)")
	if err != nil {
		return nil, err
	}
	r.Text("Probability that one read of a %d MiB block, replicated %d ways, returns an error to the "+
		"application, for UBER (errors per bit read) from 1e-16 to 1e-3. Block recovery is HDFS: a "+
		"block fails when every replica has at least one flipped bit. Chunk recovery (DIRECT) repairs "+
		"each %d KiB chunk from any replica with a clean copy; majority vote additionally recovers a "+
		"chunk when no two replicas are corrupt at the same bit. Formulas and derivations are in "+
		"`internal/model` (paper 000 section 3.1). The Taylor approximation of chunk recovery is a "+
		"first-order expansion: where it exceeds 1 it is marked invalid and left out of the plot.",
		params.BlockBytes>>20, params.Replicas, params.ChunkBytes>>10)

	var uber, block, chunk, taylor, vote []float64
	table := report.Table{
		Caption: "Closed-form probability of an application-visible read error per block read",
		Header:  []string{"UBER", "block recovery", "chunk recovery", "chunk (Taylor)", "majority vote"},
	}
	for i, row := range rows {
		uber = append(uber, row.UBER)
		block = append(block, row.Block)
		chunk = append(chunk, row.Chunk)
		// The Taylor approximation is a first-order expansion, valid only
		// while it is much smaller than 1; past 1 it is no probability.
		taylorCell := fmt.Sprintf("%.3e", row.ChunkTaylor)
		if row.ChunkTaylor <= 1 {
			taylor = append(taylor, row.ChunkTaylor)
		} else {
			taylor = append(taylor, math.NaN())
			taylorCell = "> 1 (invalid)"
		}
		vote = append(vote, row.MajorityVote)
		if i%perDecade == 0 {
			table.Rows = append(table.Rows, []string{
				fmt.Sprintf("%.0e", row.UBER), fmt.Sprintf("%.3e", row.Block), fmt.Sprintf("%.3e", row.Chunk),
				taylorCell, fmt.Sprintf("%.3e", row.MajorityVote),
			})
		}
	}
	if err := r.Table(table); err != nil {
		return nil, err
	}
	p, err := report.LinePlot{
		Title:  fmt.Sprintf("DIRECT model: B=%d MiB, C=%d KiB, R=%d", params.BlockBytes>>20, params.ChunkBytes>>10, params.Replicas),
		XLabel: "UBER (per bit)", YLabel: "P(application-visible read error)",
		LogX: true, LogY: true, YFloor: 1e-60,
		Series: []report.Series{
			{Name: "block recovery (HDFS)", X: uber, Y: block},
			{Name: "chunk recovery (DIRECT)", X: uber, Y: chunk},
			{Name: "chunk recovery, Taylor", X: uber, Y: taylor, Dashed: true},
			{Name: "chunk + majority vote", X: uber, Y: vote},
		},
	}.Build()
	if err != nil {
		return nil, err
	}
	if err := r.Plot("curves", "probability of an application-visible read error against UBER", p); err != nil {
		return nil, err
	}
	return r, nil
}
