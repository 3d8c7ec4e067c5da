// Package keyspan is the KV store's user key ranges and the set operations
// on them that the replica, its engine and its repair share: a Range is
// [Start, End) over user keys with an empty End meaning unbounded.
//
// # What it owns
//
//   - Range, its order-based predicates (Contains, Overlaps, Includes,
//     Equal) and its text form (golden files and errors print it).
//   - The few operations on sets of ranges the repair needs: Subtract (the
//     parts of a range outside some holes), Covers (whether pieces cover a
//     range), Remove and Has (exact matches in a list), and the wire form
//     (ToProto, FromProto).
//
// # Invariants
//
//   - Ranges compare keys bytewise, as Pebble orders user keys; an empty
//     End is above every key, an empty Start below every key.
//   - Functions never modify their arguments; results share key bytes with
//     the arguments (callers clone what they keep past a buffer's reuse).
//
// # Failure model
//
// Pure functions of their arguments: no I/O, no errors. A range with End
// at or below Start is empty: it contains no key and overlaps nothing.
package keyspan
