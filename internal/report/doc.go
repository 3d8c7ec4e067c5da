// Package report writes experiment reports: one Markdown file per experiment
// under docs/results/, with its tables, its plots (SVG, drawn with gonum plot),
// the exact command that produced it, the commit and the machine.
//
// # Invariants
//
//   - A report is rendered only from what the experiment put into it and from
//     the Env captured at the edge (git, /proc): rendering is a pure function, so
//     golden tests hold it byte for byte.
//   - Every figure in a report comes with the command that reproduces it.
//   - Plot files are named <report>-<plot>.svg next to the Markdown file, and
//     the Markdown links them by relative path.
package report
