// Package compactgate is the compaction scheduler of each KV replica's
// Pebble (pebble.CompactionScheduler): Pebble's own concurrency limit
// (GetAllowedWithoutPermission), no compaction while pebble.Open runs, and
// a backoff after a compaction fails on damaged data.
//
// # Why
//
// Pebble v2 retries a failed compaction at once and without end
// (compaction.go: "TODO: count consecutive compaction errors and backoff";
// the problem spans that hold a failed compaction's inputs back are not
// kept for L0), and every retry that reads the damaged block again runs its
// bit-flip search: each byte of the block flipped bit by bit and the whole
// block's checksum recomputed (sstable/block.ValidateChecksum), 8n^2 bytes
// hashed for a block of n bytes. Until a DIRECT patch cuts the damage out
// (the same corruption report starts it), a replica whose L0 holds a
// damaged table spent most of its CPU on that search
// (docs/results/kv-ycsb-corruption.md: YCSB under persistent flips, before
// and after). And an Open that fails closes its file cache under any
// compaction it started (see internal/kv/engine's fenceFS).
//
// # What it owns
//
//   - Gate: Register, Unregister, TrySchedule, UpdateGetAllowedWithoutPermission
//     (Pebble's side), Opened and Failed (the engine's: set Failed as the
//     EventListener's BackgroundError), Paused.
//   - One granting goroutine per gate, the only caller into the DB.
//
// # Invariants
//
//   - No compaction is granted before Opened, after Unregister, while more
//     are running than the DB allows, or before a pause ends.
//   - A corruption error pauses for pauseMin, doubling with each further one
//     up to pauseMax; none for quietAfter resets it. Other errors change
//     nothing.
//   - Lock order is Pebble's: the gate's mutex after the DB's; the gate
//     never calls into the DB while holding it. Unregister returns once the
//     granting goroutine has stopped.
//   - Time is the injected base.Clock.
//
// # Failure model
//
// A pause only delays compactions: flushes do not go through a scheduler,
// and writes are never stopped for a deep L0 (engine.PebbleOptions). A
// damaged table stays in L0 until a patch excises it; the gate only keeps
// Pebble from hashing it again and again meanwhile.
package compactgate
