// Package zones is the SDF layer's zone table and the policy over it
// (internal/sdf; SDF 002 sections 2.3-2.4, NVMe ZNS zones): what each zone
// is (its channel, block, dies, state, write pointer, live pages, wear,
// owners for P2L entrustment) and the decisions taken on the table alone:
//
//   - allocation (Table.Pick, AllocEmpty): the file's last zone, an idle
//     open zone of the same lifetime hint, a new zone while fewer than
//     MaxOpen are open, GC's own zones kept for GC; new zones round-robin
//     over the channels (SDF's placement by ID) or by Reparo's channel
//     weights once a die failed (Table.SetWeights), avoiding the channels a
//     rebalance drains; on a channel the least worn empty zone (dynamic
//     wear leveling);
//   - the GC victim (Table.Victim: greedy or cost-benefit) and the zones
//     reclaim may erase (Reclaimable);
//   - lending empty data zones to the journal for a checkpoint body and
//     handing them back (Table.Lend, Release), and the order in which
//     metadata zones are tried for a new epoch (MetaCandidates);
//   - the table on open (Table.Rebuild): die sets, write pointers and
//     states from the journal's zone records and the blocks' written-page
//     counts; the replayed checkpoint body's zones lent to the journal
//     (LendBody), live pages from the file table (CountLive), and the
//     zones sealed or set read-only once recovery is done (Settle).
//
// It does no I/O but reading the blocks' state once at open (LoadBlocks),
// and holds no lock: internal/sdf erases and programs the
// zones and guards the whole table with its FS.mu (a Zone's Prog mutex,
// which orders the programs of one zone, is taken by sdf's writers before
// FS.mu, never while holding it).
//
// # Invariants
//
//   - A zone's die set changes only when it is reset (Zone.Reset) or
//     rebuilt on open; pages are striped over its dies in ascending order.
//   - 0 <= Live <= WP <= Capacity.
//   - Pick and AllocEmpty never hand out a metadata zone, a zone lent to a
//     body, a zone with no die, or a zone on a channel the request
//     excludes; an empty zone is handed out only while more than
//     Request.MinEmpty are left (GC's requests excepted).
//   - A lent zone is Meta and Full until it is released; a released zone
//     is read-only with no live page (or empty, if nothing was programmed
//     in it), so only an erase makes it writable again.
//
// # Failure model
//
// The table records failures, it does not detect them: a block whose
// erase failed is marked bad (MarkBad), a failed die is in Failed (its
// zones stop taking writes), and a zone with no good die left is offline
// for good. A zone rebuilt on open whose dies are not
// programmed to one stripe prefix (a crash in the middle of a striped
// batch) is read-only: it cannot continue in stripe order.
package zones
