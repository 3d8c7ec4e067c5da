// Package devcluster runs a whole flashmend cluster in one process: a
// coordinator (with embedded etcd) and N storage nodes on 127.0.0.1 ports
// chosen at run time, each node with its own store under one directory. It
// backs `flashmend dev` and the integration tests. Starting again on the
// same directory keeps the data (node identities live in each node's
// triplicated identity file, the index in etcd).
//
// # What it owns
//
//   - The layout of a cluster directory: Dir/coordinator for the
//     coordinator's store, NodeDir(Dir, i) for node i (node ID i+1).
//   - The cluster's lifecycle: Start (coordinator, then every node, then
//     the KV layout when Options.KV asks for one, the background scrubber
//     and the wear mover when asked), StartNode and KillNode (a crash: the
//     node's lease expires later) for tests that restart nodes, Close.
//   - Wiring that belongs to no single service: the client the scrubber
//     and the mover use, and the metrics registry every node and the
//     scrubber report to (Options.Metrics).
//
// # Invariants
//
//   - Node i always runs with ID i+1 on NodeDir(Dir, i), so a restart finds
//     its data; Nodes[i] is nil exactly when node i is not running.
//   - Ports are chosen at run time on 127.0.0.1 (the coordinator remembers
//     its endpoint in its directory, see internal/coord).
//
// # Failure model
//
// A node that cannot open is one dead node, not a dead cluster: Start logs
// it, lists it in Dead (with its directory and what failed) and serves from
// the others' redundancy; Start fails only when the coordinator does not
// start, no node starts, the context ends, or the scrubber, the mover or
// the metrics cannot be set up. The cluster holds no state of
// its own: everything durable is in the coordinator's and the nodes'
// directories, so a process killed at any point starts again from them.
package devcluster
