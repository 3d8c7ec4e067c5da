// Package node is a flashmend storage node: a gRPC server (service
// flashmend.node.Node) over an objstore.ChunkStore on one local Store, plus
// its membership in the cluster (join through the coordinator, a lease and
// heartbeats with statistics in etcd).
//
// # What it owns
//
//   - The node's identity file (cluster ID, node ID, format version), kept as
//     triplicated checksummed metadata (objstore.MetaFiles, DIRECT 000 section
//     4.2.2): a node starts with any one copy of any metadata file corrupted
//     and rewrites it.
//   - The repair history (history.go): totals per kind (transient,
//     persistent, repaired, missing-repaired, rejected-write, meta-repaired)
//     and the last 200 events with object, version, shard, chunk and time,
//     in the metadata file node/repair-history (three checksummed copies,
//     like the identity file). Events are written within a second and at a
//     clean stop; a crash loses at most the last second's. A history that
//     cannot be read begins again with a history-lost event. Heartbeats and
//     Stats report these durable totals; ChunkStore's counters are this
//     run's.
//   - The chunk service: verify every write before acknowledging (so
//     corruption does not spread by replication), verify every read and
//     re-read once on a mismatch, return corrupt content on request for
//     majority votes, out-of-place repair writes, and per-device counters
//     (transient vs persistent). ReadChunks streams many chunks of one
//     replica or shard in one call, each read exactly as ReadChunk reads
//     it (a missing or failing chunk is answered as such and the call goes
//     on), reading at most two chunks ahead of the one being sent; gRPC's
//     flow control holds the node back when the reader lags. WriteChunks
//     takes a stream of chunks (a PUT's writes to one replica or shard),
//     each verified and stored as WriteChunk stores it, one at a time, its
//     data in a pooled receive buffer handed back once stored
//     (wire.ChunkWrite), but in one store batch (objstore.Batch, group
//     commit): the stream's chunks are made durable together when it
//     ends, one fsync per file instead of two per chunk, then the blob's
//     local index entry is recorded and the call answered. Nothing is
//     acknowledged before it is durable; the first chunk that fails ends
//     the call with its error.
//   - Fault injection behind the same API: UBER flips on read, transient or
//     persistent (objstore.FaultStore); bit flips at an offset; die failures
//     when the store is on emulated flash.
//   - The KV store's replicas (Config.KV, kv.go): the KV services share the
//     node's gRPC server and port; once the coordinator has a KV layout
//     (KVLayout; the node offers the one it holds, so a coordinator that
//     lost its store takes it back), the node opens its replicas of the
//     shards placed on it in Dir/kv (internal/kv/kvserver) and keeps the
//     layout in the metadata file node/kv-layout (three checksummed
//     copies). Peers are found through their liveness records, so a node
//     that restarts on another port is reached again.
//   - The repair reserve (Config.RepairReserve, default 5% of the device):
//     a new chunk write that would leave less free is refused with an error
//     wrapping base.ErrNoSpace (the client places the write elsewhere),
//     counted as refused-full; repairs may use the reserve. A repair write
//     that fails anyway (device full, write error) is a repair-failed
//     event with its reason, logged, and answered with its error class so
//     the writer reports it and tries again.
//   - A hook, Config.RegisterServices, for more services to register on
//     the node's gRPC server.
//
// # Failure model
//
// The node may be killed at any time. A repair rewrites a chunk file out of
// place, so a restart sees either the old or the new file; a new chunk's
// file and sums record are written in place (objstore: no file held them
// before), so a restart may see them torn, which their checksums catch:
// the chunk counts as corrupt on this node and is repaired from the others. A missing lease
// (crash, partition) makes the coordinator treat the node as down; the node
// re-grants a lease when it can reach etcd again.
package node
