// Package experiments is the registry of flashmend's experiments: each one runs
// a measurement (or evaluates a model), and returns a report.Report that the
// command line writes under docs/results/. `make experiments` runs them all;
// `flashmend experiments run NAME` runs one.
//
// # Invariants
//
//   - An experiment is deterministic for a given Config.Seed wherever its
//     subject allows (models and simulations are; wall-clock measurements are
//     not, and say so in their report).
//   - Every report names the exact command that reproduces it (Command).
//   - Config.Quick shrinks an experiment to seconds so tests can run it.
package experiments
