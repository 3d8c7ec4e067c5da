package cli

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// writeTable prints rows as left-aligned columns two spaces apart, the
// first row being the header. Column widths count terminal cells, not
// bytes: a key in a wide script (CJK, two cells per character) does not
// push the columns after it out of line, as text/tabwriter's rune count
// does.
func writeTable(w io.Writer, rows [][]string) error {
	var widths []int
	for _, r := range rows {
		for i, cell := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], cellWidth(cell))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, cell := range r {
			b.WriteString(cell)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-cellWidth(cell)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cellWidth is the number of terminal cells s takes: two for East Asian
// wide and full-width characters, none for combining marks, one otherwise.
func cellWidth(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == '\u200b':
		case isWide(r):
			n += 2
		default:
			n++
		}
	}
	return n
}

// isWide reports the East Asian Wide and Fullwidth ranges (Unicode UAX 11)
// that matter for keys: Hangul, CJK, kana, full-width forms and emoji.
func isWide(r rune) bool {
	return (r >= 0x1100 && r <= 0x115f) || (r >= 0x2e80 && r <= 0x303e) || (r >= 0x3041 && r <= 0x33ff) ||
		(r >= 0x3400 && r <= 0x4dbf) || (r >= 0x4e00 && r <= 0x9fff) || (r >= 0xa000 && r <= 0xa4cf) ||
		(r >= 0xac00 && r <= 0xd7a3) || (r >= 0xf900 && r <= 0xfaff) || (r >= 0xfe30 && r <= 0xfe4f) ||
		(r >= 0xff00 && r <= 0xff60) || (r >= 0xffe0 && r <= 0xffe6) || (r >= 0x1f300 && r <= 0x1f64f) ||
		(r >= 0x1f900 && r <= 0x1f9ff) || (r >= 0x20000 && r <= 0x3fffd)
}

// displayKey prints a key as it is when it is printable text without
// spaces, and Go-quoted otherwise, so that a key with a tab, a newline or a
// trailing space cannot break a table or hide.
func displayKey(k string) string {
	if k == "" || !utf8.ValidString(k) {
		return strconv.Quote(k)
	}
	for _, r := range k {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' {
			return strconv.Quote(k)
		}
	}
	return k
}

// markRequired marks flags a command cannot run without; cobra then
// refuses to run it without them (a usage error, exit 2).
func markRequired(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		if err := cmd.MarkFlagRequired(n); err != nil {
			panic(err) // a flag name typo: a bug
		}
	}
}
