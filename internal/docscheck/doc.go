// Package docscheck holds the tests that hold docs/architecture.md to the
// tree: every package path it names exists and holds Go code, and every
// function, type or method its "Where to find each idea" paragraph points a
// newcomer to (the DIRECT vote, the KV patch through raft, the die
// identifier, the wear balancer, the simulator) is declared where it says.
// It owns no code of its own: a doc that names something the tree does
// not have fails `make test`.
//
// # Invariants
//
//   - Paths are taken from the doc's code spans (`internal/...`,
//     `cmd/...`, `client/...`, and the short `pkg/sub` forms under
//     internal/); identifiers from the code spans of the one paragraph.
//
// # Failure model
//
// The tests read files under the repository root (two directories up) and
// fail, naming the span, for each one that does not resolve.
package docscheck
