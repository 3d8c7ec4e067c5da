// Package model holds the seed papers' closed-form models as pure functions:
// no I/O, no clock, no randomness, no state. The experiments plot them next
// to measurements, the flash emulator draws its error rates from them, and
// `flashmend model direct|reparo|chameleon|ecc` prints them.
//
// # What it owns
//
//   - DIRECT (paper 000 section 3.1 and Table 1; 001 section 3.1): the
//     probability that a block read is an application-visible error under
//     block recovery (DirectBlockRecovery), chunk recovery (exact,
//     DirectChunkRecovery, and the paper's Taylor approximation,
//     DirectChunkRecoveryTaylor), and chunk recovery followed by a
//     bit-by-bit majority vote (DirectMajorityVote, derived in its doc
//     comment; DirectMajorityVoteAnyBit is the paper's informal upper
//     bound), for DirectParams; DirectSweep and DirectTable1 for plots and
//     printing.
//   - The DIRECT injection path (injection.go): what the object store's
//     persistent flip-on-read injection really does (sums records read
//     with the chunk, a re-read that adds flips, hdfs failover at an
//     offset, sector-wise merge before the vote), for the
//     direct-read-errors experiment (DirectInjectedHDFSFailure,
//     DirectInjectedChunkFailure, DirectInjectedVoteFailure), checked
//     against a bit-level simulation of the read path.
//   - ECC: the binomial tail of a t-correcting codeword
//     (CodewordFailureProbability), the UBER it implies (UBERFromRBER, one
//     uncorrectable event per failed codeword per bit read) and its inverse
//     (RBERForUBER), for the flash emulator.
//   - Reparo (paper 003): die failures among n dies (ProbAtLeastFailures),
//     P2 (eq. 1, DoubleFailureProbability and its exact exponential form),
//     P_rf (eq. 2, ReadFailureProbability), the utilization increase of
//     reparo_IDR (Table 1) and reparo_CDR (Table 2, eq. 3-4: CDRAlpha,
//     SpaceLayout.Adjust), and the selective LBA redirection of the Figure 8
//     example (RedirectUnit).
//   - Chameleon (paper 004): popularity with exponential decay (eq. 1,
//     Popularity, DecayPopularity), the erase estimate (eq. 2,
//     EraseEstimate) and write amplification 1/(1-mu).
//   - Failure at rest (every stored bit flipped with probability UBER):
//     structures kept in copies merged unit by unit, with or without a
//     bit-by-bit vote (MergedCopies: the flash device state, the SDF
//     journal, metadata files), their whole-checksum predecessors
//     (WholeCopiesLoss), and objects (ObjectAtRest: REP-3 with sector merge
//     and vote, EC 4+2 with per-sector decode), for the uber-restart-objects
//     experiment.
//   - Binomial tails in log space (BinomialTail), shared by the above.
//   - Printed tables (Table, WriteTables) in text, CSV and JSON, with
//     "note:" lines.
//
// # Conventions and invariants
//
// Sizes are bytes and error rates are per bit: a size enters a formula as
// 8 * bytes bits (paper 000: "files are measured in bytes, while UBER is in
// bits"; its Table 1 only comes out that way). Probabilities are computed
// with log1p/expm1, log-space sums of positive terms, or math/big where an
// alternating sum cancels, so that values down to 1e-300 keep their
// significant digits and a value like 1-1e-20 is not rounded before it is
// used. Every function validates its input: functions whose signatures are
// fixed by their callers (DIRECT, ECC) return NaN for invalid input and have
// a Validate method or function that says why; the others return an error
// wrapping base.ErrInvalidArgument.
//
// Where a paper's printed table disagrees with its own formula, the formula
// wins, and the difference is documented at the function and printed as a
// "note:" line. Known differences:
//
//   - Paper 000/001 Table 1 prints 1e-28 for chunk recovery at UBER 1e-15;
//     the section 3.1 formula gives 2.95e-25. The printed value is
//     (E*C)^R = 1.44e-28, the formula without its factor B/C = 2048. (The
//     other three entries, 1e-3, 1e-18 and 3e-10, match the formula.)
//   - Reparo's Tables 1 and 2, the Figure 8 example and the section 3
//     ratios (P2 x64, P_rf x52 from 512 GB to 32 TB SSDs, with binary units)
//     all match their formulas.
//
// # Failure model
//
// None at run time: the package does no I/O and keeps no state. Its risk is a
// wrong or imprecise formula, so every closed form is checked in tests
// against a second computation: the papers' printed digits, leading-order
// expansions, exact math/big sums, and seeded Monte Carlo simulations (bit
// flips on R replicas with the DIRECT read path, codewords, die failures,
// exponential lifetimes, a log-structured device with greedy GC). Golden
// files in testdata/ pin the printed tables (go test -run Golden -update).
package model
