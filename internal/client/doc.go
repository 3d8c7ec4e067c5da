// Package client is flashmend's Go client and the I/O edge of the DIRECT
// read path. It talks to the coordinator (index, placement, membership) and
// to the nodes (chunks).
//
// # What it owns
//
//   - Writes: checksums are computed once here, per 512 B sector with the
//     chunk's identity, and travel with the data; a version is written to all
//     its replicas (REP) or shards (EC 4+2) and only then committed in the
//     index, so a writer that disconnects leaves no visible partial object.
//     A node that fails mid-write is excluded and the write is placed again
//     (the substitutes land in the coordinator's mapping table).
//   - Reads: the loops around direct.DecideREP / DecideEC (DIRECT) and
//     direct.DecideHDFS (the hdfs baseline); repairs rewrite the bad chunks
//     out of place on the nodes that had them wrong. A node that answers
//     "not found" for a chunk the index places on it has lost it: that is
//     damage, re-created like a corrupt chunk (with the blob's local index
//     entry when chunk 0 is re-created) and counted (RepairedMissing). The hdfs mode applies
//     to REP objects (HDFS blocks); EC objects are always read with DIRECT
//     row reconstruction. REP chunk i is read from replica i mod 3 first, to
//     spread reads over the replicas.
//   - Streaming: PutReader and GetTo / Open move an object of any size
//     through a bounded window (Options.WindowBytes, default 8 MiB): a
//     write reads, checksums and encodes units (64 KiB chunks for REP,
//     256 KiB rows for EC) while earlier ones are on the wire, one
//     WriteChunks stream per replica or shard (a slow node holds back only
//     its own stream until the window is full), and reuses each unit's
//     buffer once every stream has sent its chunk; the write commits once
//     every stream's node has answered that all its chunks are stored. A
//     read
//     fetches units in parallel (up to ChunksInFlight at once) at most a
//     window ahead of the bytes it has delivered, each verified, and
//     repaired, by the DIRECT cores before it is written out, in order.
//     A DIRECT read takes each unit's first chunks (the replica it starts
//     at, or an EC row's data shards) from batched ReadChunks calls, one
//     node call per replica or shard and half-window batch instead of one
//     call per chunk (batchReader); the decision, further fetches and
//     repairs stay per chunk. Put, Get and ReadVersion are the same paths with the bytes in memory.
//   - Scrubbing: ScrubObject reads every replica and shard (parity included)
//     and repairs through the same path; Scrubber runs it over the whole
//     index under a byte budget, with repairs queued behind their own budget.
//   - Wear moves: RunWearMoves carries out the coordinator's wear balancer
//     moves, each a replacement of one part re-created through the scrub
//     path and committed by CommitReplace; Put writes the redundancy the
//     coordinator's plan names.
//   - Re-protection: ReprotectObject re-creates the replicas and shards of
//     a dead node on nodes the coordinator picks (through the scrub path:
//     the new node's missing chunks are damage) and moves the placement;
//     the Scrubber runs it for nodes down longer than ReprotectAfter.
//     RebuildIndex asks the coordinator to merge the nodes' local indexes
//     into its index.
//   - Fault injection and statistics commands for flashmend ctl.
//
// # Memory per request
//
// With W = Options.WindowBytes and F = Options.ChunksInFlight: a streamed
// PUT holds W of object bytes in unit buffers (1.5 W for EC: the parity
// is encoded in place) plus, per replica or shard, the chunk gRPC is
// encoding and what its stream's flow control lets it queue; a
// streamed GET holds at most W of units fetched or waiting for their turn,
// plus at most W/2 that its batched reads delivered ahead of the units the
// window has reached (the rest of the last batch started),
// and each unit being verified holds what its replicas or shards returned:
// one chunk for a clean REP read, four shard chunks and the assembled row
// for EC (2 W in all), up to four times a unit when every replica of a
// chunk is corrupt or a row is reconstructed. gRPC's transport buffers
// come on top. Chunks received by a streamed GET come in buffers of the
// data path's pool (wire.ChunkBufferPool), handed back once the chunk is
// delivered when no repair refers to it. A node handles one chunk at a
// time per WriteChunk request or WriteChunks stream and holds
// at most four chunks per ReadChunks call (two read ahead, one being read,
// one being sent; gRPC's flow control holds it back), never an object. TestStreamLargerThanMemory checks a 256 MiB object against a
// 48 MiB bound on the client process's peak resident set growth.
//
// # Failure model
//
// Nodes may be down or return corrupt bytes; the coordinator may be briefly
// unreachable (operations fail and can be retried). A read returns verified
// bytes or an error; a corruption no copy can repair is a base.ErrDataLoss
// error. Repairs never fail silently: a repair write that fails is counted
// and listed with its reason in the ReadReport (RepairFailures; ctl get and
// ctl scrub print them), the node keeps it in its history, and the
// Scrubber logs it, keeps the job and writes it again at its next pass
// while the version is current (ScrubStats.RepairsPending, RepairRetried).
// A node whose device is near full answers new writes with a no-space
// error: the write is placed on other nodes, and when none is left the
// error says which nodes were full. A streamed PUT that must be placed again
// reads its source again from the start (it must be an io.Seeker, or the
// write fails with the nodes' error); a streamed GET that fails after
// bytes went out returns its error (ctl get writes a file under a
// temporary name and renames it only when the whole object verified).
package client
