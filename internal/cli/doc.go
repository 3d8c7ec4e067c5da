// Package cli builds the flashmend command tree (cobra). It owns flag parsing,
// output formatting and process wiring only: every subcommand is a thin edge
// over a package in internal/ that holds the logic, so the same code runs from
// tests, the simulator and the binary.
//
// One file per subcommand; root.go lists them.
package cli
