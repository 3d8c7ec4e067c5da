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
//     classes that fit a chunk message, buffers not zeroed: gRPC fills them),
//     ChunkCodec and the data path's transport options (DataPathServerOptions,
//     DataPathDialOptions: transport buffers of DataPathBufferBytes).
//   - ChunkFrame and the hand coding of the streamed chunk read
//     (ReadChunksResponse, chunkframe.go): a chunk is sent from the node's
//     pooled read buffer without a copy, and its data received alone into
//     a pooled buffer the reader hands back (RecycleChunkData) once the
//     chunk is delivered; checked field by field against protobuf's own
//     coding (TestChunkFrameMatchesProto, FuzzUnmarshalChunks).
//   - ChunkWrite (chunkwrite.go): a streamed chunk write (WriteChunkRequest)
//     received by the node into one pooled buffer its data aliases, handed
//     back once the chunk is stored (TestChunkWriteMatchesProto,
//     FuzzUnmarshalChunkWrite).
//   - ChunkSend (chunksend.go): the client's side of the streamed chunk
//     write, encoded without copying the chunk's data: gRPC refers to the
//     sender's bytes until its transport wrote them and then calls the
//     sender's release function, once (TestChunkSendMatchesProto,
//     TestChunkSendRelease).
//   - The etcd key prefix shared by the coordinator's keys (KeyPrefix) and the
//     nodes' leased liveness keys (LivePrefix, LiveKey).
//
// # Invariants
//
// The package holds no state and imports nothing from flashmend but base and
// the generated node messages (gen/nodepb): the node, the coordinator and the
// client all depend on it, never the other way.
//
// # Failure model
//
// A status whose code carries no flashmend class (Internal, Unavailable, ...)
// comes back from FromStatus unchanged; a caller treats it as an operating
// error.
package wire
