// Package objstore owns flashmend's object format and the DIRECT repair
// decisions for objects (DIRECT 000 sections 4.2.2 and 5; 001 section 4.2).
//
// # What it owns
//
//   - The chunk format: an object version is cut into 64 KiB chunks; every
//     512 B sector of a chunk has a CRC32C (Castagnoli) that also covers the
//     chunk's identity (object, version, shard, chunk index), so a misdirected
//     or misplaced write fails verification. Checksums are computed once, at the
//     writing client, and travel with the data: every node verifies what it
//     receives before acknowledging, so corruption cannot spread by replication.
//     Checksums are stored apart from the data they cover (a separate sums
//     record with its own CRC32C).
//   - The redundancy layouts: REP (3 identical copies on 3 nodes) and EC
//     (Reed-Solomon 4+2 over 6 nodes, one 64 KiB chunk per shard per row).
//   - The pure DIRECT read decision cores: DecideREP (verify, fall back to the
//     next replica; when every copy is corrupt, take each 512 B sector from a
//     copy where it verifies and vote bit by bit only on sectors corrupt in
//     all three, verify the result, else an explicit data-loss error) and
//     DecideEC (reconstruct only the corrupted 64 KiB row from the other
//     shards' same rows, and when fewer than four shards verify whole, decode
//     sector by sector from the shards that verify at each sector). They take
//     what the replicas returned and give back the data or the error plus the
//     repairs to make; the loops that do the I/O live in internal/client. A
//     read that finds no good copy while some copies could not be read
//     returns ErrUnavailable (an operating error), not data loss.
//     NB: the sector-wise step goes one step below the paper's 64 KiB chunk
//     (its repair unit) down to the checksum unit; it repairs strictly more
//     than the chunk-then-vote order of Figure 6 and never returns bytes
//     that fail their checksums.
//   - DecideHDFS, the baseline of the paper's evaluation: fail over from the
//     first failing offset, never return to a failed replica, re-replicate the
//     whole block, fail if every replica fails somewhere.
//   - The node-local store (Store: put/get/delete of named files plus bit
//     flips for fault injection), its plain-file implementation (FileStore), a
//     fault-injecting wrapper (FaultStore: UBER flips on read, transient or
//     persistent), the chunk store a node serves (ChunkStore: verify on write,
//     verify and re-read once on read, out-of-place repair, counters), and
//     triplicated checksummed metadata files (MetaFiles, DIRECT 000 4.2.2).
//   - The scrubber's rate policy (Scrubber): verification at a configured
//     bytes/s, repairs throttled by the same budget.
//
// # Invariants
//
//   - Data whose checksums do not verify is never returned as data: a read
//     returns verified bytes or an error wrapping base.ErrCorruption /
//     base.ErrDataLoss.
//   - A repair rewrites a chunk out of place (new file, atomic rename); the
//     old bytes are never modified in place.
//   - Every on-disk structure carries a CRC32C.
//
// # Failure model
//
// Bits may flip in stored data (persistent) or on the way out of the device
// (transient); whole files may vanish; nodes may be down. The checksums
// themselves may be corrupt: a sums record that fails its own CRC makes its
// chunk count as corrupt, and it is rewritten with the repair. Metadata files
// survive the corruption of any two of their three copies.
package objstore
