package model

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
)

// Cell is one value of a printed table: a number (printed with the column's
// text format, and at full precision in CSV and JSON) or a label.
type Cell struct {
	text  string
	num   float64
	isNum bool
}

// Num is a numeric cell.
func Num(v float64) Cell { return Cell{num: v, isNum: true} }

// Label is a text cell.
func Label(s string) Cell { return Cell{text: s} }

// String prints the cell at full precision.
func (c Cell) String() string {
	if c.isNum {
		return strconv.FormatFloat(c.num, 'g', -1, 64)
	}
	return c.text
}

// Column is the header of a table column and the fmt verb used for its
// numbers in text output ("%.3e" when empty).
type Column struct {
	Name   string
	Format string
}

// Table is a printed model result: a title, columns, rows, and notes that
// say where the paper's printed numbers differ from its own formula.
type Table struct {
	Title   string
	Columns []Column
	Rows    [][]Cell
	Notes   []string
}

// Format names an output format of WriteTables.
type Format string

// The formats of `flashmend model --format`.
const (
	FormatText Format = "text"
	FormatCSV  Format = "csv"
	FormatJSON Format = "json"
)

// ParseFormat validates a --format value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatText, FormatCSV, FormatJSON:
		return f, nil
	}
	return "", base.InvalidArgumentf("unknown format %q (want text, csv or json)", s)
}

// WriteTables renders tables in the given format. Text aligns columns and
// prints each note as a "note:" line; CSV writes one header row per table
// (tables separated by an empty line, notes omitted so that the output stays
// machine-readable); JSON writes one array of objects with the rows keyed by
// column name.
func WriteTables(w io.Writer, f Format, tables []Table) error {
	switch f {
	case FormatText:
		return writeText(w, tables)
	case FormatCSV:
		return writeCSV(w, tables)
	case FormatJSON:
		return writeJSON(w, tables)
	}
	return base.InvalidArgumentf("unknown format %q", f)
}

func (c Cell) textIn(col Column) string {
	if !c.isNum {
		return c.text
	}
	f := col.Format
	if f == "" {
		f = "%.3e"
	}
	return fmt.Sprintf(f, c.num)
}

func writeText(w io.Writer, tables []Table) error {
	var b strings.Builder
	for ti, t := range tables {
		if ti > 0 {
			b.WriteString("\n")
		}
		b.WriteString(t.Title + "\n")
		widths := make([]int, len(t.Columns))
		cells := make([][]string, len(t.Rows))
		for i, c := range t.Columns {
			widths[i] = len(c.Name)
		}
		for r, row := range t.Rows {
			cells[r] = make([]string, len(row))
			for i, c := range row {
				cells[r][i] = c.textIn(t.Columns[i])
				widths[i] = max(widths[i], len(cells[r][i]))
			}
		}
		writeLine := func(fields []string) {
			for i, f := range fields {
				if i > 0 {
					b.WriteString("  ")
				}
				if i == len(fields)-1 {
					b.WriteString(f)
				} else {
					fmt.Fprintf(&b, "%-*s", widths[i], f)
				}
			}
			b.WriteString("\n")
		}
		names := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			names[i] = c.Name
		}
		writeLine(names)
		for _, row := range cells {
			writeLine(row)
		}
		for _, n := range t.Notes {
			b.WriteString("note: " + n + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCSV(w io.Writer, tables []Table) error {
	cw := csv.NewWriter(w)
	for ti, t := range tables {
		if ti > 0 {
			if err := cw.Write([]string{}); err != nil {
				return err
			}
		}
		names := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			names[i] = c.Name
		}
		if err := cw.Write(names); err != nil {
			return err
		}
		for _, row := range t.Rows {
			fields := make([]string, len(row))
			for i, c := range row {
				fields[i] = c.String()
			}
			if err := cw.Write(fields); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonTable is the JSON shape of a Table.
type jsonTable struct {
	Title   string           `json:"title"`
	Columns []string         `json:"columns"`
	Rows    []map[string]any `json:"rows"`
	Notes   []string         `json:"notes,omitempty"`
}

func writeJSON(w io.Writer, tables []Table) error {
	out := make([]jsonTable, 0, len(tables))
	for _, t := range tables {
		jt := jsonTable{Title: t.Title, Notes: t.Notes, Rows: make([]map[string]any, 0, len(t.Rows))}
		for _, c := range t.Columns {
			jt.Columns = append(jt.Columns, c.Name)
		}
		for _, row := range t.Rows {
			m := make(map[string]any, len(row))
			for i, c := range row {
				if c.isNum {
					m[t.Columns[i].Name] = c.num
				} else {
					m[t.Columns[i].Name] = c.text
				}
			}
			jt.Rows = append(jt.Rows, m)
		}
		out = append(out, jt)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
