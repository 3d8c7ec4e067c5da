// Package patch is the DIRECT repair state of one KV replica as a pure
// state machine (DIRECT 001 section 4.1.4 and Figure 5; helix recovery):
// which key ranges the replica refuses to read, which patch requests it has
// and when to propose them, how the pieces its peers send come together
// into covered ranges, and what becomes of a patch entry's ranges when it
// applies. internal/kv's Replica does the I/O around it: it isolates the
// damage (internal/kv/engine), proposes through raft, scans and sends
// pieces, waits, ingests, merges blocks; it calls the Tracker under its
// mutex and passes the time in.
//
// # What it owns
//
//   - Span (a damaged range as isolated: what was lost, what the patch
//     excises, the damaged blocks) and Request (a patch request: its
//     ranges, detection time, proposal state).
//   - Tracker, a request's life: Admit (spans to a request, minus what a
//     patch already repaired; its ranges refused from then on), Add (under
//     a patch id), Due and Dropped (propose, and again when raft dropped
//     the proposal or its entry did not apply in time), Deliver and
//     Received (peers' pieces and rows per requested range), Hold and
//     Release (spans refused while an excise is checked), Settle (the
//     entry applied: what was patched or merged is readable again and
//     remembered as repaired), Reset (the replica's state was replaced).
//   - Assemble (a patch entry's ranges: covered, with their rows, or
//     missing), Retry (ask again for the missing ones, backing off) and
//     Remainders (what an excise cut off, patched in turn).
//
// # Invariants
//
//   - A range the replica lost is refused (Refused) from Admit until a
//     Settle patches or merges a range that includes it, or Reset; the
//     replica's read path checks every read against it.
//   - A piece counts only for a requested range that includes it; a
//     range's rows hold each key once and only keys of pieces received for
//     it, so a covered range's rows are exactly what its peers read there
//     at the patch entry (TestDeliverAgainstBruteForce).
//   - Due proposes each request at most once per resend interval (doubled
//     with each resend, up to a cap), in patch id order, and never again
//     once one of its entries committed (Committed); a request keeps its
//     patch id across proposals, so a second entry of it finds nothing
//     waiting.
//   - No I/O, no clock (times are arguments), no goroutines; a Tracker is
//     not safe for concurrent use.
//
// # Failure model
//
// None of its own: a patch for an unknown or settled id changes nothing; a
// range no peer covered stays refused, goes to block merge (the replica)
// and then to Retry, never to a guess; a patch entry replayed after a
// restart finds nothing Waiting and the replica skips it (damage still
// there is found again).
package patch
