// Package nemesis is the Jepsen-style part of the reliability harness
// (`flashmend torture nemesis`): a coordinator and storage nodes run as
// separate processes, KV and object clients record what they did, and a
// seeded nemesis kills nodes (SIGKILL, then a restart from what was on
// disk), pauses them (SIGSTOP/SIGCONT), cuts them off from each other
// (internal/netfault at every node's gRPC boundary: one node, or two
// halves, both ways) or from the coordinator and its etcd, turns on
// persistent bit errors on a node's reads, fills a node's emulated flash
// device with ballast (node.Node.Fill; sdf store only: object writes are
// refused there, its KV replicas whose raft logs cannot persist fail-stop
// and are replaced once the ballast goes), and kills or pauses the
// coordinator (with its embedded etcd). Faults are held one at a time or,
// with Options.Concurrency, several at once: a node is the victim of one
// node fault at a time, partitions overlap as the union of their cuts, and
// a node restarted or resumed while partitions hold gets their cuts again.
//
// What it owns: the processes of one run, the workloads, the fault
// schedule, and the checks:
//   - the KV history (strong gets, puts, compare-and-sets on a few
//     registers) is checked for linearizability with porcupine; an
//     operation whose outcome is unknown is recorded as may-have-applied,
//     with its return at the end of the history;
//   - every acknowledged object put is read back right away (read your
//     writes: the bytes must be the ones put) and again after the last
//     heal (no acknowledged put lost);
//   - after the last heal every key must answer a strong read within three
//     minutes (availability comes back).
//
// Invariants: at most Concurrency faults at once, each held for Hold/2 to
// Hold, and the same seed gives the same schedule of faults and operations (not the same
// timing: processes run on real clocks). Every process dies with the
// harness (Pdeathsig), and Run stops them all before it returns.
//
// Failure model: Run returns an error only when the harness could not run
// (the cluster did not start); a fault that could not be injected or
// healed, and every check that failed, are in the Result.
//
// Crash points (RunCrashPoints, `flashmend torture crashpoints`) reuse the
// same processes, clients and checker: for each point of
// internal/crashpoint in turn, one node (drawn from the seed) is stopped
// cleanly and restarted with FLASHMEND_CRASHPOINT=<point>@<n>, kills
// itself at the point's n-th hit (or runs CrashOptions.Bound without
// reaching it: not reached), and is restarted unarmed from its disk.
// Then it must rejoin, every register must answer a strong read, every
// object must read back as its last acknowledged put or a put not
// acknowledged since (the object clients overwrite a few keys each, so
// old versions become garbage for the SDF layer's GC; never absent after
// an acknowledgement, never other bytes), a scrub of every object counts
// the chunks the crashed node had lost or torn (outcome "repaired"), the
// replicas of every KV shard, once at the same applied index, must hold
// the same contents (their checksums; a crashed replica that lost or
// doubled part of what it applied differs), and the KV history so far
// must be linearizable. One cluster serves every
// point: the checks after a point cover everything acknowledged since the
// run began. Two points need a workload of their own to be reached: while
// sdf-gc-move is armed, clients churn 4 MiB objects over a small live set
// until the devices run short of empty zones (host GC then moves pages);
// while patch-ingest or patch-applied is armed, the victim's replicas get
// sstable blocks damaged (KVAdmin CorruptBlock) and read (eventual reads),
// so that they detect the damage and have it patched through raft. A
// point armed at a later hit and not reached is armed once more at its
// first (a log's rewrite is hit once per replica, at open).
//
// Not yet: filling a device, partitions between clients and nodes.
package nemesis
