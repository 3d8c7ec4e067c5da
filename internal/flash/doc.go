// Package flash is flashmend's NAND flash device: the Device interface that
// the host layer (internal/sdf) programs against, and Emulator, a faithful
// emulated raw NAND device as a host-managed SSD (SDF 002, section 2) exposes
// it.
//
// # What it owns
//
//   - Geometry: channels x dies per channel x blocks per die x pages per
//     block, page and OOB sizes (SmallGeometry, SDFGeometry); the named
//     device presets built on it are internal/flash/catalog.
//   - NAND rules: a page is programmed only when erased and only as its
//     block's next page; reads return data, OOB and an ECC status; erase
//     works on whole blocks. Violations return *OpError wrapping a sentinel
//     (ErrOutOfRange, ErrBadSize, ErrNotErased, ErrProgramOrder, ErrBadBlock,
//     ErrProgramFailed, ErrEraseFailed, ErrDieFailed, ErrUncorrectable,
//     ErrClosed).
//   - Backends: memory (NewMemory), sparse files (OpenFile) that survive a
//     restart, and discard (NewDiscard: rules, state and timing without page
//     content, for simulations). The device's own state (per block P/E
//     count, write pointer, bad flag, reads, program time; per die failed
//     flag) is a CRC32C-checksummed record kept in three copies (state.0,
//     state.1, state.2), each cut into 512-byte units with their own CRC32C
//     and written one copy after the other; on open the record is
//     assembled unit by unit from whichever copy verifies, a unit bad in
//     every copy is voted bit by bit, and a torn save falls back to the
//     previous record (OpenInfo reports what was merged). A directory whose
//     state files are all gone but whose page file holds pages is not a
//     new device: its write pointers are rebuilt from the pages
//     (OpenInfo.StateRebuilt); nor is one with fewer state copies than
//     three, none verifying: its first save was torn by a power loss, and
//     it opens as new (or rebuilt). The state is saved on Sync and
//     Close, at once when a block is retired or a die fails, and every
//     Options.SaveStateEveryErases erases. Every page slot of the file
//     carries a CRC32C over its flat index and content; after a crash the
//     write pointers are rebuilt from the slots, and a slot that no longer
//     verifies reads as an uncorrectable page. The directory's layout
//     (page slots, state copies, lock) is internal/flash/pagefile, on the
//     file system Options.FS (the os's; internal/fsys.Mem cuts the power
//     in TestPowerLossFileDevice: every page programmed before a Sync that
//     returned reads back, a program or erase in flight is torn or lost,
//     never read as other bytes).
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
//     none, real (operations sleep for their modelled time; Timing.RealSlack
//     absorbs OS sleep overshoot so sustained throughput follows the model)
//     and virtual (ReadAt/ProgramAt/EraseAt take an issue time and return
//     the simulated completion time; no sleeping, deterministic). A
//     host link (Timing.HostBytesPerSecond) shared by every channel
//     bounds the device as its SAS or PCIe interface does. On a device
//     without content (NewDiscard), ReadRunAt and ProgramRunAt move runs
//     of pages of one block without content, each page scheduled as one
//     operation, for simulations of whole large devices.
//     catalog.SequentialThroughput replays SDF 002 Figure 7 in virtual
//     time on it.
//   - Statistics (Stats: per die, per channel and total operations, bytes,
//     raw / corrected / uncorrectable errors, flipped bits, observed UBER
//     and RBER, busy time; Blocks and EraseCounts per block) and fault
//     injection (Faults: a failing program or erase, a flipped bit at a
//     chosen position, transient or persistent, an uncorrectable read).
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
//     Options.Seed, consumed under the die's lock, and from PhysicalModel's
//     per-page factors, a hash of its own Seed: for a given seed and
//     per-die operation order a run is deterministic. Time comes only
//     from Options.Clock (and from the issue times given to the ...At
//     methods). The random die-failure process draws each die's lifetime
//     at open; it is memoryless, so a reopened device draws afresh.
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
