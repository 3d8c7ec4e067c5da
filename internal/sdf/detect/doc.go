// Package detect is Reparo's die-failure Detector on the host-managed layer
// (internal/sdf; Reparo 003 section 4.2.1). Every failing device operation
// of the layer reaches it (Detector.Observe): a die the device reports
// failed is declared at once; a program or erase failure is a grown bad
// block; an uncorrectable read makes its block a suspect, which is probed.
// A probe reads the first page of a block and walks to the neighbouring
// blocks while they fail; the die is declared failed past a number of bad
// blocks. The decisions (thresholds, which block to probe next) are the
// pure reparo.Detector; this package runs the probes through the reads its
// host gives it (Prober), stamps the events with the injected clock and
// keeps the list of events. internal/sdf declares what it returns: it
// journals the failure, stops writes to the die and tells the layer above.
//
// # Invariants
//
//   - A die is declared failed at most once per open: Observe and Reported
//     return a Failure only the first time.
//   - Probes run on the caller's goroutine after its own operation
//     completed, with no lock of this package held, so they may take the
//     host's locks and queue on its channels.
//
// # Failure model
//
// A probe's device error is an observation, not an error of the Detector:
// a bad block or an uncorrectable page counts against the die, a failed
// die reported by the device declares it. Nothing here is persisted: the
// host journals the declared failures, and a failure lost with a crash is
// found again by the next failing operations after the restart.
package detect
