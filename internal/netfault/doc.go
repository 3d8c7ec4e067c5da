// Package netfault is a process's partition switch at its gRPC boundary:
// the fault-injecting implementation of the network between storage nodes.
//
// The reliability harness (internal/torture/nemesis) cuts nodes off from
// each other while they run as real processes. The usual way, iptables or
// nftables rules on per-node addresses, needs root and changes the whole
// machine's network, which a shared test machine (and CI) cannot allow, so
// the cut is made where every byte between nodes passes: their gRPC
// connections. A Gate in each node process knows which peers are cut off;
// its client interceptors fail every call and every message of a stream to
// such a peer, and its server interceptors fail every call and message from
// one (each outgoing call names its sender in metadata). A partition is
// symmetric when the harness cuts both sides, one-way when it cuts one.
// The coordinator keeps no gate: it only names itself (Naming, as
// Coordinator) on its calls to nodes, and a node cut off from it blocks
// Coordinator, which fails the node's calls to the coordinator and its
// embedded etcd (its heartbeats) and the coordinator's calls to the node.
//
// What it owns: the set of cut-off peers of one process (node IDs and
// Coordinator) and the control endpoint (HTTP) the harness sets it
// through.
//
// Invariants:
//   - A nil *Gate adds no options and costs nothing: production processes
//     run without one.
//   - Once Block returns, no new call or stream message to or from a blocked
//     peer gets through; calls already past the check may finish (as
//     packets already in flight do when a real link is cut).
//   - Heal lets everything through again; nothing else is kept between
//     partitions.
//
// Failure model: a cut call fails with codes.Unavailable and a message that
// says it was the nemesis, which every client in flashmend treats as a
// transient network failure. A call that waits for ready (gRPC's
// WaitForReady, which etcd's client uses) waits over a cut link until it
// heals or the call's context ends, as it would while a real partition
// keeps the connection down; failing it at once would make its caller
// retry in a tight loop no real network produces.
package netfault
