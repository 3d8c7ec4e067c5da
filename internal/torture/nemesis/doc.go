// Package nemesis is the Jepsen-style part of the reliability harness
// (`flashmend torture nemesis`): a coordinator and storage nodes run as
// separate processes, KV and object clients record what they did, and a
// seeded nemesis kills nodes (SIGKILL, then a restart from what was on
// disk), pauses them (SIGSTOP/SIGCONT), cuts them off from each other
// (internal/netfault at every node's gRPC boundary: one node, or two
// halves, both ways), turns on persistent bit errors on a node's reads, and
// kills the coordinator (with its embedded etcd) and restarts it.
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
// Invariants: one fault at a time, each held for Hold/2 to Hold, and the
// same seed gives the same schedule of faults and operations (not the same
// timing: processes run on real clocks). Every process dies with the
// harness (Pdeathsig), and Run stops them all before it returns.
//
// Failure model: Run returns an error only when the harness could not run
// (the cluster did not start); a fault that could not be injected or
// healed, and every check that failed, are in the Result.
//
// Not yet: filling a device, pausing or partitioning the coordinator,
// partitions between clients and nodes, several faults at once, nodes on
// emulated flash.
package nemesis
