// Package base is flashmend's shared vocabulary: identifiers, sizes with
// units, the injected clock (Clock; its timers and tickers, After and
// NewTicker, fire on a ManualClock when it is moved), the three error
// classes every package uses, the one CRC32C table (CRC32C, CRC32CUpdate),
// InFlight (one repair per damaged range at a time), SetDefault (the
// defaulting step of Options), and LogLines (a Logf whose lines a test or
// an experiment reads back).
//
// # Error classes
//
// Following Pebble and TigerBeetle, flashmend distinguishes three kinds of
// failure, and every package must keep them apart:
//
//   - Operating errors (a node is down, a file is missing, bad input): ordinary
//     Go errors, wrapped with context and returned. Input validation failures
//     wrap ErrInvalidArgument so callers and RPC layers can map them.
//   - Corruption (a checksum mismatch, an uncorrectable page, a failed die):
//     errors that wrap ErrCorruption, created with CorruptionErrorf. A
//     corruption is repaired or reported by the layer above; it is never
//     returned as data. When every redundant copy is gone the error wraps
//     ErrDataLoss, which is itself a corruption.
//   - Bugs (a broken invariant): AssertionFailedf. In builds with the
//     "invariants" tag internal/invariants turns them into panics.
//
// # Invariants
//
// The package has no mutable globals and imports nothing from flashmend.
package base
