// Package model holds the seed papers' closed-form models as pure functions:
// no I/O, no clock, no randomness. The experiments plot them next to
// measurements, the flash emulator draws its error rates from them, and
// `flashmend model` prints them.
//
// # What it owns
//
//   - DIRECT (paper 000 section 3.1, Table 1; 001 section 3.1): the
//     probability that a block read is an application-visible error under
//     block recovery (DirectBlockRecovery), chunk recovery (exact,
//     DirectChunkRecovery, and the paper's Taylor approximation,
//     DirectChunkRecoveryTaylor) and chunk recovery followed by a bit-by-bit
//     majority vote (DirectMajorityVote, derived in its doc comment), plus
//     DirectSweep for plots.
//   - Binomial tails in log space (BinomialTail), shared by the models below.
//   - Printed tables (Table, WriteTables) in text, CSV and JSON.
//
// # Conventions and invariants
//
// Sizes are bytes and error rates are per bit: a size enters a formula as
// 8 * bytes bits (paper 000: "files are measured in bytes, while UBER is in
// bits"). Probabilities are computed with log1p/expm1, log-space sums or
// math/big so that values down to 1e-300 keep their significant digits and
// values near 1 are not rounded from 1-1e-20 to 1 prematurely. Every function
// validates its input: functions whose signature is fixed by their callers
// return NaN for invalid input and have a Validate method or function that
// says why; the others return an error wrapping base.ErrInvalidArgument.
//
// Where a paper's printed table disagrees with its own formula, the formula
// wins; the difference is documented at the function and printed as a
// "note:" line by the tables.
//
// # Failure model
//
// None: the package does no I/O and keeps no state. Its results are checked
// in tests against the papers' printed digits, leading-order expansions,
// exact math/big sums and seeded Monte Carlo simulations.
package model
