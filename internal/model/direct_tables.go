package model

import (
	"fmt"
	"math"

	"github.com/flashmend/flashmend/internal/base"
)

// DirectTable1UBERs are the UBERs of paper 000 Table 1.
var directTable1UBERs = [...]float64{1e-10, 1e-15}

// DirectPaperParams are the parameters of paper 000 section 3.1 and Table 1:
// 128 MiB blocks, 64 KiB chunks, 3 replicas.
func DirectPaperParams() DirectParams {
	return DirectParams{UBER: 1e-10, BlockBytes: int64(128 * base.MiB), ChunkBytes: int64(64 * base.KiB), Replicas: 3}
}

var directColumns = []Column{
	{Name: "uber", Format: "%.3g"},
	{Name: "block"},
	{Name: "chunk"},
	{Name: "chunk_taylor"},
	{Name: "majority_vote"},
}

func directRowCells(r DirectRow) []Cell {
	return []Cell{Num(r.UBER), Num(r.Block), Num(r.Chunk), Num(r.ChunkTaylor), Num(r.MajorityVote)}
}

// DirectTable evaluates the model at the given UBERs (p.UBER ignored) and
// returns the printed table with its notes. With the paper's parameters and
// UBERs it is paper 000 Table 1, plus the Taylor and majority-vote columns.
func DirectTable(p DirectParams, ubers []float64) (Table, error) {
	t := Table{
		Title:   fmt.Sprintf("DIRECT section 3.1: P(application-visible error) per block read, B=%s C=%s R=%d", base.Bytes(p.BlockBytes), base.Bytes(p.ChunkBytes), p.Replicas),
		Columns: directColumns,
	}
	for _, u := range ubers {
		q := p
		q.UBER = u
		if err := q.Validate(); err != nil {
			return Table{}, err
		}
		t.Rows = append(t.Rows, directRowCells(DirectAt(q)))
	}
	t.Notes = directNotes(p, ubers)
	return t, nil
}

// DirectTable1 is paper 000 Table 1 computed from the section 3.1 formulas.
func DirectTable1() Table {
	t, err := DirectTable(DirectPaperParams(), directTable1UBERs[:])
	if err != nil {
		panic(base.AssertionFailedf("model: paper parameters do not validate: %v", err))
	}
	return t
}

// DirectSweepTable is DirectSweep as a printed table.
func DirectSweepTable(p DirectParams, fromUBER, toUBER float64, pointsPerDecade int) (Table, error) {
	if err := ValidateSweep(p, fromUBER, toUBER, pointsPerDecade); err != nil {
		return Table{}, err
	}
	t := Table{
		Title: fmt.Sprintf("DIRECT section 3.1 sweep: P(application-visible error) per block read, B=%s C=%s R=%d, UBER %g..%g",
			base.Bytes(p.BlockBytes), base.Bytes(p.ChunkBytes), p.Replicas, fromUBER, toUBER),
		Columns: directColumns,
	}
	var ubers []float64
	for _, r := range DirectSweep(p, fromUBER, toUBER, pointsPerDecade) {
		t.Rows = append(t.Rows, directRowCells(r))
		ubers = append(ubers, r.UBER)
	}
	t.Notes = directNotes(p, ubers)
	return t, nil
}

// directNotes explains the columns and, where the paper's printed numbers
// are reproduced, where they differ from its formula.
func directNotes(p DirectParams, ubers []float64) []string {
	notes := []string{
		"sizes are bytes, UBER is per bit read (B and C enter the formulas in bits); " +
			"block = (1-(1-E)^B)^R, chunk = 1-(1-(1-(1-E)^C)^R)^(B/C), chunk_taylor = (E*C)^R*B/C (DIRECT tech report section 3.1)",
		"majority_vote = chunk recovery, then a bit-by-bit vote when all R copies of a chunk are corrupt (derivation in internal/model DirectMajorityVote)",
	}
	paper := DirectPaperParams()
	if p.BlockBytes == paper.BlockBytes && p.ChunkBytes == paper.ChunkBytes && p.Replicas == paper.Replicas {
		for _, u := range ubers {
			if u != 1e-15 {
				continue
			}
			q := p
			q.UBER = u
			notes = append(notes, fmt.Sprintf(
				"DIRECT (SoCC'19 and tech report) Table 1 prints 1e-28 for chunk recovery at UBER 1e-15, but its own formula gives %.2e; "+
					"the printed value is (E*C)^R = %.2e without the factor B/C = %d; this table follows the formula",
				DirectChunkRecovery(q), math.Pow(u*float64(q.ChunkBytes*bitsPerByte), float64(q.Replicas)), q.BlockBytes/q.ChunkBytes))
		}
	}
	for _, u := range ubers {
		if u*float64(p.ChunkBytes*bitsPerByte) > 0.1 {
			notes = append(notes, fmt.Sprintf("chunk_taylor assumes E*C << 1; from UBER %.3g on E*C > 0.1 and it overestimates (it can exceed 1)", u))
			break
		}
	}
	return notes
}
