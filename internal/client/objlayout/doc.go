// Package objlayout is how an object version is laid out (internal/client,
// DIRECT's objects): cut into 64 KiB chunks kept in three replicas (REP), or
// into rows of four data shard chunks and two parity chunks (EC), placed on
// the nodes its index record names; the length of every chunk, the object
// bytes it carries, the chunk IDs, and the local index entry each node
// keeps for its replica or shard. It is pure: the client reads, writes and
// repairs the chunks it names.
//
// # Invariants
//
//   - Every chunk but the last of a replica or shard is full
//     (direct.ChunkSize); an EC row's shard chunks are of equal length (the
//     last row's zero-padded).
//   - A layout has exactly one placement per copy.
//
// # Failure model
//
// An index record with an unknown redundancy or a placement that does not
// match its copies is a corruption error (New); an offset outside a
// replica's bytes is an invalid argument (Locate).
package objlayout
