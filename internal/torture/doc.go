// Package torture is flashmend's reliability harness (issue 16): it tries
// faults systematically instead of the ones each package's tests chose,
// and reports what happened in one table per run (docs/results/torture.md,
// `flashmend torture` / `make torture`). Every run prints its seed.
//
// # What it owns
//
//   - Fuzz: the list of Go native fuzz targets (every decoder of stored or
//     received bytes; the targets live next to their decoders in
//     *_fuzz_test.go, their seed corpora in testdata/fuzz) and a runner
//     that fuzzes each for a stated time with `go test -fuzz` and records
//     its executions, new corpus entries and any failing input. Each
//     target fuzzes with a private cache of interesting inputs (a
//     temporary -test.fuzzcachedir seeded from the Go build cache's fuzz
//     directory and added back to it), so concurrent runs never remove a
//     file under it.
//   - CORDS (FAST'17): one fault at a time in one file of each kind of one
//     node. Rows are file kinds, columns are faults: a 4 KiB block zeroed,
//     junk, one bit flipped, every read of a 4 KiB block failing with EIO,
//     every write of the file's kind failing with EIO, a lost write (a 4
//     KiB block keeps its old content). Each cell's outcome is one of
//     correct / repaired / unavailable-then-recovered / lost / wrong /
//     crash (Outcome). The KV cells run one per child process (a fault
//     that crashes a node must not end the sweep): the child is this
//     binary (`flashmend torture cell`) or, under `go test`, the test
//     binary. The same table runs on emulated flash (KVOptions.Store
//     StoreSDF, `flashmend torture cords-sdf`, cords-kv-sdf.md): every
//     node's replicas on sdfvfs over SDF over its own file-backed device,
//     with the SDF layer's journal, P2L and OOB pages as rows too; the
//     faults land on the flash pages holding the bytes (at rest, silent:
//     the slot checksum recomputed; EIO read and write errors through the
//     device's fault injector, or faultfs over n1's sdfvfs). The object store's cells come from the experiments package's
//     single-fault sweep: zero, junk and flip at rest on every file kind;
//     on plain-file nodes also at run time a read error under one file
//     (each name it held fails until written anew), a write error and lost
//     writes (acknowledged, dropped, then for the scrub to repair) on
//     every write of the file's kind on one node; on emulated flash, read
//     and write errors of the page file through the device's faults.
//   - faultfs: the fault-injecting vfs.FS the KV cells run on (read and
//     write errors at run time).
//   - helix (its own package, `flashmend torture helix`): different
//     regions damaged on every copy at once (every sector of every object
//     chunk on all copies but one, a different one each sector; half of
//     every KV replica's blocks), so that one good copy of every byte
//     exists only across nodes; target 0 lost, 0 wrong, no rebuild.
//   - nemesis (its own package): processes killed, paused, cut off,
//     given bit errors and their devices filled while clients record
//     histories, with porcupine's check.
//   - Crash points (`flashmend torture crashpoints`, nemesis.RunCrashPoints
//     on the points of internal/crashpoint): a node process restarted
//     armed at one persistence step kills itself there and is restarted
//     from its disk; every acknowledged object and KV write must survive,
//     nothing half-written may be read, the node must rejoin
//     (docs/results/crashpoints-sdf.md).
//   - The whole run (`flashmend torture all`, `make torture`): fuzzing,
//     CORDS, then the nemesis on plain files and on flash and every crash
//     point; each part writes its own report and torture.md sums them up
//     (Run.Report; a part that failed or could not run counts as a miss,
//     Run.HarnessBad).
//
// # Invariants
//
//   - A cell's outcome is derived from what was measured (keys read back,
//     replica checksums, the child's exit), never assumed; a fault that
//     never fired is reported as such (not reached), and a fault that
//     cannot occur in a file kind (no byte to damage, no write the
//     harness can fail) as n/a with the reason.
//   - The same seed picks the same blocks and bits.
//
// # Failure model
//
// A cell that hangs is killed at its deadline and reported as a crash
// (hang). A fuzz target that fails leaves its input in its package's
// testdata/fuzz (Go's behaviour): it becomes a regression seed.
package torture
