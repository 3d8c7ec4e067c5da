// Package nemesis is the Jepsen-style part of the reliability harness
// (`flashmend torture nemesis`): a coordinator and storage nodes run as
// separate processes, KV and object clients record what they did, and a
// seeded nemesis kills nodes (SIGKILL, then a restart from what was on
// disk), pauses them (SIGSTOP/SIGCONT), cuts them off from each other
// (internal/netfault at every node's gRPC boundary: one node, or two
// halves, both ways) or from the coordinator and its etcd, turns on
// persistent bit errors on a node's reads, and kills or pauses the
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
// Not yet: filling a device, partitions between clients and nodes.
package nemesis
