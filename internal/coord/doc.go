// Package coord is flashmend's coordinator: membership and liveness,
// placement, the object index and the mapping table, all kept in etcd
// (embedded single-member by default, `go.etcd.io/etcd/server/v3/embed`, or an
// external cluster).
//
// # What it owns
//
//   - Membership: nodes join through the coordinator (Join allocates or
//     confirms a node ID and records the node as a permanent member); each
//     node then keeps a lease in etcd and heartbeats its statistics under
//     wire.LiveKey. A member without a lease is down.
//   - Placement: a consistent-hashing ring over the members, FNV-1a keyed
//     (Chameleon 004 section IV-A, internal/coord/hashring); n copies or
//     shards go to n distinct nodes, and a down node is replaced in place by
//     the next usable member on the ring. The ring is pure and tested on its
//     own.
//   - The object index: key -> ObjectRecord (version, size, redundancy,
//     placement), each etcd value a protobuf followed by its CRC32C. A write
//     is BeginPut (allocate a version = the etcd revision, place it, record
//     a pending write), then chunks to the nodes (internal/client), then
//     CommitPut, one etcd transaction that publishes the record, retires the
//     previous version to the garbage list and updates the mapping table. A
//     writer that never commits leaves only a pending record, which expires.
//   - The KV store's shard placement (KVLayout, kvlayout.go): placed once,
//     over the live members, on the same ring as objects (key
//     "kv/shard/ID", replica raft ID = node ID), stored as one checksummed
//     etcd value; the first stored wins. A coordinator without one adopts
//     the layout a node offers. Replicas do not move yet.
//   - The mapping table (MappingTable, etcd-backed): objects whose placement
//     or redundancy differs from the default; see its doc for the scale limit.
//   - The cluster endpoint's port: with a directory and no explicit listen
//     address, the port chosen the first time is remembered in
//     Dir/listen.json (with a CRC32C) and used again by later starts, so that
//     clients keep their endpoint across restarts.
//   - The sweeper: expired pending writes become garbage; garbage versions
//     are deleted from their live nodes and forgotten once every node of the
//     placement has deleted its part.
//   - The wear balancer (wear.go, Config.Wear): Chameleon's internal/wear
//     run on the nodes' heartbeats every epoch; it places every put
//     (redundancy and nodes), hands its moves to a mover as replacements
//     of one part (BeginReplace with a destination), and keeps its mapping
//     rows in etcd, reconciled with the records at start.
//   - Re-protection (replace.go): a replica or shard on a dead node is
//     re-created elsewhere. BeginReplace picks the target (the first live
//     member on the key's ring walk holding no part and no garbage of the
//     version) and records it as a pending write of that one blob;
//     CommitReplace swaps the slot in the record, updates the mapping table
//     and lists the blob left on the dead node as garbage, in one
//     transaction guarded by the record's revision. The copying is the
//     client's scrub path (internal/client ReprotectObject), driven by the
//     scrubber once a node has been down for ScrubberOptions.ReprotectAfter.
//     A wear move is the same replacement with the balancer's destination
//     and a live source (internal/client MovePart).
//
// # Invariants
//
//   - A key's visible version was durable on every node of its placement
//     before CommitPut.
//   - Versions are unique and increasing cluster-wide (etcd revisions); they
//     name chunks. Users see KeyVersion: 1 for a key's first version (since
//     it was created or re-created after a delete), +1 per overwrite,
//     assigned in the commit transaction.
//   - Every value this package writes to etcd carries a CRC32C; a value that
//     fails it is a corruption error, never data.
//   - A part is never re-created (re-protection, wear move) on a node that
//     holds a part, garbage, or another slot's pending part of the same
//     version: the sweeper deletes a version's blob on a node whole. So a
//     replacement cut short anywhere leaves the record's layout whole (the
//     old one until CommitReplace, the new one after), and what it left
//     behind is collected: the pending part at its deadline, the source's
//     part as garbage (client TestWearMoveCrashAtEachStep).
//
// # Failure model
//
// etcd is the source of truth for what is committed; the coordinator holds
// only caches (the membership view for placement, refreshed within 250 ms or
// on a liveness change) and can restart at any time. Nodes may die at any
// time: their leases expire after Config.LeaseTTLSeconds and placement
// avoids them.
//
// The coordinator's store is not a single point of loss: every node keeps a
// local index entry per replica or shard with the version's key, size and
// placement, so the index can be rebuilt from the nodes (the plan in
// internal/coord/indexrebuild, the I/O in rebuild.go). An embedded store is
// checked before etcd starts on it (internal/coord/etcdstore: etcd panics
// on a damaged bbolt page and waits forever on a WAL that lost applied
// entries); a damaged one is set
// aside (renamed, never deleted) and a new one started, unless
// Config.KeepDamagedStore makes it a start error. A new or set-aside store
// that holds no objects adopts the cluster identity of the first node that
// joins with one, and merges every joining node's local index into the
// index for Config.RecoveryWindow; RebuildIndex runs the merge on demand.
// Versions stay unique across a rebuild: a version is the etcd revision plus
// a base that a rebuild moves above every version the nodes hold. What a
// rebuild cannot restore: deletions whose blobs were not yet collected come
// back, writes whose chunks were all written but not committed become
// visible, and per-key version numbers start again at 1.
//
// With Config.EtcdMembers = 3 (or 5) the embedded store is a replicated
// etcd cluster whose members live in separate directories of the
// coordinator's process (internal/coord/etcdstore): a member whose store is damaged or
// lost is set aside and replaced from the others (removed, added again and
// started empty), without a rebuild from the nodes; only when no quorum of
// members keeps a store is the whole store started afresh and rebuilt.
//
// Every start-up step is bounded (a context and timeouts), and closing an
// embedded etcd that never became ready is abandoned after 10 s instead of
// waiting forever (etcdstore.etcdCloseTimeout).
package coord
