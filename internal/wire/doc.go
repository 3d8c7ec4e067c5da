// Package wire is what flashmend's processes agree on across a connection:
// how the error classes of internal/base travel as gRPC status codes, and the
// etcd keys that more than one package reads or writes.
//
// # What it owns
//
//   - ToStatus and FromStatus: invalid argument, not found, corruption and
//     data loss survive a gRPC call (server side ToStatus, client side
//     FromStatus), so a caller tests a remote error with base.IsCorruption,
//     base.IsDataLoss, base.IsInvalidArgument or errors.Is(err,
//     fs.ErrNotExist) exactly as it would a local one.
//   - ChunkBufferPool: the gRPC buffer pool of the chunk data path (size
//     classes that fit a chunk message, buffers not zeroed: gRPC fills them).
//   - The etcd key prefix shared by the coordinator's keys (KeyPrefix) and the
//     nodes' leased liveness keys (LivePrefix, LiveKey).
//
// # Invariants
//
// The package holds no state and imports nothing from flashmend but base: the
// node, the coordinator and the client all depend on it, never the other way.
//
// # Failure model
//
// A status whose code carries no flashmend class (Internal, Unavailable, ...)
// comes back from FromStatus unchanged; a caller treats it as an operating
// error.
package wire
