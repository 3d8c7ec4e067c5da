// Package flash is flashmend's NAND flash device: the Device interface that
// the host layer (internal/sdf) programs against, and Emulator, a faithful
// emulated raw NAND device as a host-managed SSD (SDF 002, section 2) exposes
// it.
//
// # What it owns
//
//   - Geometry: channels x dies per channel x blocks per die x pages per
//     block, page and OOB sizes; presets for a small test device, an SDF-like
//     device (SDF 002 Table 3), TLC and QLC devices.
//   - NAND rules: a page is programmed only when erased and only as its
//     block's next page; reads return data, OOB and an ECC status; erase
//     works on whole blocks. Violations return *OpError wrapping a sentinel
//     (ErrOutOfRange, ErrBadSize, ErrNotErased, ErrProgramOrder, ErrBadBlock,
//     ErrProgramFailed, ErrEraseFailed, ErrDieFailed, ErrUncorrectable,
//     ErrClosed).
//   - Backends: memory (NewMemory) and sparse files (OpenFile) that survive
//     a restart. The device's own state (per block P/E count, write pointer,
//     bad flag, reads, program time; per die failed flag) is a CRC32C
//     checksummed record kept in two copies.
//   - Error models behind ErrorModel: UBERModel (DIRECT 000 section 5: every
//     bit read flips with probability UBER, transiently or persistently, and
//     the device reports nothing) and PhysicalModel (RBER from wear, retention
//     and read disturb; binomial raw errors per ECC codeword; at most t are
//     corrected; beyond t the page is uncorrectable and its corrupt content
//     is still returned unless Options.HideUncorrectableContent).
//   - Grown bad blocks (program/erase failures growing with wear, an erase
//     limit past rated endurance) and die failures (FailDie, or a random
//     exponential lifetime per die): every operation on a failed die fails.
//   - Timing: per-die busy timelines and per-channel bus timelines; modes
//     none, real (operations sleep for their modelled time) and virtual
//     (ReadAt/ProgramAt/EraseAt return the simulated completion time).
//   - Statistics (Stats, EraseCounts) and fault injection (Faults).
//
// # Invariants
//
//   - A block's pages [0, WrittenPage) are programmed, the rest erased;
//     WrittenPage only grows until the next erase.
//   - A bad block and a failed die stay so (they are persisted); no
//     operation on them succeeds.
//   - Erased pages read as 0xFF with a clean status, whatever the error
//     model.
//   - Randomness comes only from per-die *rand.Rand seeded from
//     Options.Seed, and is consumed under the die's lock: for a given seed
//     and per-die operation order a run is deterministic. Time comes only
//     from Options.Clock (and from the issue times given to the ...At
//     methods).
//
// # Failure model
//
// Operating errors (bad addresses, sizes, closed device, backend I/O
// errors) are returned wrapped in *OpError and change nothing. Corruption is
// reported, never returned silently as good data: an uncorrectable page or a
// failed die is an error wrapping base.ErrCorruption, and a backing file page
// whose checksum no longer verifies reads as an uncorrectable page. The one
// deliberate exception is UBERModel, which returns flipped bits with a clean
// status, because that is the device behaviour DIRECT evaluates: only
// checksums above the device can catch it. Broken internal invariants are
// assertions (internal/invariants).
//
// # Concurrency
//
// Every die has a lock: operations on different dies run in parallel,
// operations on one die are serialized (a die executes one command at a
// time). Channel bus timelines have their own small locks. Counters are
// atomics, so Stats never waits for a busy die.
package flash
