// Package frames is guardfs's unit of storage as pure encoding, decoding
// and merging (internal/guardfs; DIRECT 000 section 4.2.2, policy 2:
// duplicate and checksum local metadata): a framed file is a sequence of
// frames, each at most MaxBytes of the file's logical bytes with a header
// naming the file's identity and the bytes' offset and a CRC32C over both
// (Append, AppendSeal); the copies of a framed file are parsed frame by
// frame, resynchronizing past damage (Parse), and merged into the file's
// content, each byte from any copy holding a verified frame of it (Merge),
// under the identity the copies' names vote for (ResolveID); Encode writes
// a whole copy back from the merge. guardfs owns the files, the copies and
// when they are read, merged and restored; this package does no I/O.
//
// # Invariants
//
//   - A frame verifies only against its own header, identity and offset:
//     a frame of another file, of another incarnation of the same name, or
//     a stale or misplaced block never verifies as this file's data.
//   - Merged.Data holds only verified bytes; every byte below Merged.Size
//     that no copy holds intact, and every byte two verified frames give
//     differently, is in Merged.Lost (and zero in Data), never guessed.
//   - A copy is Perfect only if it alone holds the whole content and
//     nothing else (no damaged, foreign or torn bytes, the seal if sealed).
//
// # Failure model
//
// Damage costs the frames it touches and no others (Parse resynchronizes
// on the next header that verifies). A torn tail is a shorter file unless
// some copy kept the seal, in which case the missing bytes are lost, not
// torn. The decoders never trust a length they read and never panic on
// damaged input (FuzzMergeFrames in internal/guardfs).
package frames
