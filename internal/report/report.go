package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// Report accumulates the sections of one experiment report.
type Report struct {
	name   string
	title  string
	blocks []block
}

type block struct {
	markdown string     // text, or a rendered table
	plot     *namedPlot // or a plot
}

type namedPlot struct {
	stem    string
	caption string
	p       *plot.Plot
	width   vg.Length
	height  vg.Length
}

var stemPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// New starts a report that will be written as <name>.md. The name must be
// lower-case letters, digits and dashes.
func New(name, title string) (*Report, error) {
	if !stemPattern.MatchString(name) {
		return nil, fmt.Errorf("report: bad name %q (want [a-z0-9-]+)", name)
	}
	return &Report{name: name, title: title}, nil
}

// Name is the report's file stem.
func (r *Report) Name() string { return r.name }

// Text appends a Markdown paragraph.
func (r *Report) Text(format string, args ...any) {
	r.blocks = append(r.blocks, block{markdown: fmt.Sprintf(format, args...)})
}

// Table is a Markdown table with an optional caption.
type Table struct {
	Caption string
	Header  []string
	Rows    [][]string
}

// Table appends a table. Every row must have as many cells as the header.
func (r *Report) Table(t Table) error {
	var b strings.Builder
	if t.Caption != "" {
		fmt.Fprintf(&b, "%s\n\n", t.Caption)
	}
	writeRow := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	writeRow(t.Header)
	sep := make([]string, len(t.Header))
	for i := range sep {
		sep[i] = "---"
	}
	writeRow(sep)
	for i, row := range t.Rows {
		if len(row) != len(t.Header) {
			return fmt.Errorf("report: table %q row %d has %d cells, header has %d",
				t.Caption, i, len(row), len(t.Header))
		}
		writeRow(row)
	}
	r.blocks = append(r.blocks, block{markdown: strings.TrimRight(b.String(), "\n")})
	return nil
}

// Plot appends a figure, saved as <report>-<stem>.svg.
func (r *Report) Plot(stem, caption string, p *plot.Plot) error {
	if !stemPattern.MatchString(stem) {
		return fmt.Errorf("report: bad plot name %q", stem)
	}
	for _, b := range r.blocks {
		if b.plot != nil && b.plot.stem == stem {
			return fmt.Errorf("report: duplicate plot %q", stem)
		}
	}
	r.blocks = append(r.blocks, block{plot: &namedPlot{
		stem: stem, caption: caption, p: p, width: 16 * vg.Centimeter, height: 10 * vg.Centimeter,
	}})
	return nil
}

func (r *Report) plotFile(stem string) string { return r.name + "-" + stem + ".svg" }

// Markdown renders the report. It is a pure function of the report and env.
func (r *Report) Markdown(env Env) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", r.title)
	fmt.Fprintf(&b, "Produced by:\n\n```sh\n%s\n```\n\n", env.Command)
	fmt.Fprintf(&b, "- commit: `%s`\n- machine: %s\n- date: %s\n", env.Commit, env.Machine, env.Date)
	for _, bl := range r.blocks {
		b.WriteString("\n")
		if bl.plot != nil {
			fmt.Fprintf(&b, "![%s](%s)\n\n*Figure: %s*\n", bl.plot.caption, r.plotFile(bl.plot.stem), bl.plot.caption)
			continue
		}
		b.WriteString(bl.markdown)
		b.WriteString("\n")
	}
	return b.Bytes()
}

// Write writes <dir>/<name>.md and every plot's SVG next to it.
func (r *Report) Write(dir string, env Env) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	for _, bl := range r.blocks {
		if bl.plot == nil {
			continue
		}
		path := filepath.Join(dir, r.plotFile(bl.plot.stem))
		if err := bl.plot.p.Save(bl.plot.width, bl.plot.height, path); err != nil {
			return fmt.Errorf("report: plot %s: %w", path, err)
		}
	}
	path := filepath.Join(dir, r.name+".md")
	if err := os.WriteFile(path, r.Markdown(env), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// Cell makes s fit one cell of a Markdown table: newlines become spaces,
// '|' is escaped, and text past max bytes (max > 0) is cut with "...".
func Cell(s string, max int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if max > 0 && len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
