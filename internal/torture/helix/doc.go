// Package helix is the torture harness's helix run (issue 16, `flashmend
// torture helix`): different regions are damaged on every copy at once, so
// that no copy of an object chunk, EC row or KV block is whole, yet the
// good parts of all copies together still hold every byte. The target is 0
// lost and 0 wrong, with the repair done by DIRECT at its smallest unit
// (DIRECT 000 section 4.2.2: sector-by-sector merge of REP chunks, per
// sector Reed-Solomon decode of EC rows; section 4.3: key-range patches of
// KV replicas and block merge), never by a whole-replica rebuild.
//
// # What it owns
//
//   - Objects (objects.go): a six-node dev cluster (internal/client/
//     devcluster: a coordinator with embedded etcd, six storage nodes on
//     plain files or each on its own emulated flash device (Options.Store),
//     real gRPC on 127.0.0.1) holding REP and EC objects. Every
//     512 B sector (the checksum and so the repair granularity) of every
//     REP chunk is damaged on two of its three replicas, the surviving
//     replica chosen by the seed and never the one the sector before kept;
//     every sector row of every EC row is damaged on two of its six shards,
//     a pair disjoint from the row's sector before. The damage goes through
//     the nodes' fault-injection RPC (client.CorruptAt: persistent bit
//     flips in the stored chunk). Then every object is read back (byte for
//     byte), the whole cluster restarted, every object read again and
//     scrubbed (every replica and shard, parity included): that scrub must
//     find nothing left to repair.
//   - KV (kv.go): the in-process three-replica KV cluster (internal/kv/
//     kvcluster, files in memory whatever Options.Store, no block cache so
//     damage is always seen).
//     From each replica's sstable block separators (kv.Replica.Separators)
//     blocks are chosen greedily in a seeded order, on every replica, up to
//     a fraction of each replica's blocks, skipping any block whose damage
//     would leave some key with no intact replica, and the second of the
//     two blocks (the first and the last) holding a replica's own applied
//     record: that record is local metadata no peer holds, kept in two
//     copies (internal/kv/engine/keys.go); losing both is a different
//     fault, which the replica repairs by design with a whole rebuild. The
//     damage lands at rest, all three replicas stopped
//     (engine.CorruptBlocksAtRest): a running replica's own compactions
//     would run into the damage while the rest is injected. Then all
//     replicas are restarted, every key read back and the replicas must
//     converge (same content checksum at the same applied index, no repair
//     pending) with no rebuild, and a scrub of every replica's tables must start no
//     repair (the damage it finds is the blocks patches cut out of the live
//     data, which the backing files keep until compactions drop them).
//
// # Invariants
//
//   - Every byte written has at least one good copy: the damage plan
//     checks it (per sector for objects, per key for KV) before it damages
//     anything, and reports how many sectors or keys were left with exactly
//     one good copy.
//   - The same seed damages the same sectors and bits of the same data
//     (KV block boundaries depend on Pebble's compactions, so the KV blocks
//     chosen can differ between runs of one seed; the keys and values do
//     not).
//   - Lost and wrong are measured (every byte compared with what was
//     written), never inferred from repair counters.
//
// # Failure model
//
// A read that fails although a good copy exists is *lost*; a read that
// returns other bytes (or a KV value other than the one written) is
// *wrong*; both make Result.Bad true and `flashmend torture helix` exit
// non-zero. A cluster that does not start, or damage that cannot be
// injected, is an operating error returned by Run. A read or convergence
// that does not finish within its deadline (Options.ReadTimeout) counts as
// lost, or as not converged.
package helix
