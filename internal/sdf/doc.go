// Package sdf is flashmend's host-managed flash layer: the host is the flash
// translation layer, as in Baidu's Software-Defined Flash (SDF 002 sections
// 2-4), with the NVMe ZNS zone model as its interface and ZenFS-style extent
// files on top for the storage engines (internal/sdfvfs puts Pebble on them).
//
// # What it owns
//
//   - Zones. Zone z is block z/Channels on every die of channel
//     z%Channels: SDF's write unit (one erase block per chip of a channel,
//     section 2.3). A zone is appended at its write pointer, striped page by
//     page over its dies so one zone uses the channel's die parallelism, and
//     reset (erased) explicitly. States: empty, open, full, read-only,
//     offline; at most Options.MaxOpenZones are open. The zone table and
//     the choices taken on it alone (which zone a write takes, wear, the GC
//     victim, the zones lent to a checkpoint body, the table rebuilt on
//     open) are internal/sdf/zones; this package runs them under FS.mu and
//     does the erases and programs.
//   - One worker goroutine and one bounded queue per channel (section 2.4;
//     the workers are internal/sdf/channels, this package decides what they
//     run). New zones are handed out round-robin over the channels (section 2.4's
//     placement by ID) and, on a channel, least worn first (dynamic wear
//     leveling); CreateOn confines a file to one channel, SDF's per-channel
//     device. No over-provisioning and no parity: redundancy is the
//     cluster's job (section 2.3), so usable capacity is every good data page.
//   - Extent files: create, append, sync, read at offset, rename, delete,
//     list, stat. An extent maps consecutive file pages to consecutive data
//     pages of one zone; extents never cross a zone (a file's page map is
//     internal/sdf/extmap). Lifetime hints put files
//     of similar lifetime in the same zones. A zone is reset as soon as no
//     file maps a page in it; host GC (greedy or cost-benefit) relocates live
//     extents out of victim zones when empty zones run low. Write
//     amplification = flash bytes programmed (data incl. padding and GC
//     copies, P2L pages, metadata pages) / user bytes appended, in Stats.
//   - What the metadata journal records (DIRECT 000 section 4.2.2, policy
//     2: duplicate and checksum local metadata): the superblock, file
//     table and zone records, logged under FS.mu as their effects are
//     applied; the journal's writing and reading on flash is
//     internal/sdf/journal.
//   - Per-page integrity and block-level P2L entrustment (Reparo 003 section
//     6.2), the die-failure Detector (internal/sdf/detect), the lost-data
//     Identifier answering bounded windows with IDR, CDR or CDR* (Identify;
//     the P2L page reads, the scan's workers and the owners cache are
//     internal/sdf/identify) and the Handler's channel weights and fake
//     failures (handler.go); their device-independent policy is
//     internal/reparo, and what a lost die means for this layer's zones
//     and files (the zones that stop taking writes and the records that
//     say so, the file pages on the die by scan or by P2L owners, the
//     ranges to repair, channel usage, fake failures, health) is
//     internal/sdf/dieloss (pure); this package hosts the identifier and
//     journals the records.
//   - Typed corruption (*CorruptionError) and the repair hooks ReadRaw and
//     RewriteRange.
//
// # Layout on flash
//
// The encoding of every structure below (and the vote over metadata units)
// is internal/sdf/onflash; the journal's records as typed values, the merge
// of the copies of metadata and checkpoint body pages, the choice of the
// epoch to replay and the replay itself (records in, file table and zone
// records out; the unsealed zones' pages mapped) are internal/sdf/metalog
// (pure); this package writes and reads them through its channel workers
// and adopts the replayed tables.
//
// Data page (OOB): kind, valid bytes, file ID, file page, write sequence
// number, CRC32C over data and identity. The last page of every block of a
// data zone is the P2L page: the block on stripe die i stores the owners
// (file ID, file page) of every data page of the block on stripe die i+1
// (mod the stripe width), so the owners of a
// failed die's block are read from one page of a surviving die. Zones that
// are not full keep that list in memory.
//
// The metadata journal (superblock, failed dies, zone records, file table)
// is internal/sdf/journal: every page in three copies on different
// channels in the seven metadata zones, an epoch begun by a checkpoint
// (inline, or as a checkpoint body in data zones lent to the journal),
// incremental records after it, and on open the newest complete epoch
// replayed up to the first torn record or the first page no copy gives
// back (OpenInfo counts what was merged, voted and lost). A body whose
// root never became durable is found on open as a programmed zone no file
// maps and handed back to the data zones.
//
// Zone write pointers are not journaled: they are rebuilt from the device's
// per-block written-page counts as the programmed prefix of the stripe (a
// zone where some die is ahead of that prefix, after a crash in the middle
// of a striped batch, takes no more writes), and the owners of pages written
// before a reopen are read back from their OOB when the zone fills.
//
// A sync programs the partial last page padded with zeros; the next flush
// programs that page again, out of place, with the bytes appended since, so
// every extent starts at a page boundary of its file. A file sync does not
// write the journal: every zone's opening is journaled (onflash.RecZoneOpen,
// made durable by the first sync that follows) and its sealing when it fills
// (onflash.RecZoneSealed, after its extents); on open, the programmed pages
// of the zones left unsealed are read and every verified page newer than its
// file's mapping is mapped again if it replaces a page or extends the file
// without a hole (metalog.Tables.Recover). Creates, renames, removes and rewrites
// program one metadata page three times. These costs are in the write
// amplification. A channel pinned with CreateOn is not persisted: after a
// reopen the file's new zones may be on any channel.
//
// # Invariants
//
//   - Every record reaches the journal in the order its effect was applied
//     in memory (records are queued under FS.mu and flushed in order).
//   - A zone is erased only after the records that unmapped its last live
//     page are durable.
//   - The programs of a zone are issued in write-pointer order (zones.Zone.Prog),
//     so every block is programmed sequentially.
//   - A file page maps to at most one physical page; a physical page's OOB
//     names exactly the file page and sequence number the map expects.
//   - Data appended but not synced may be lost on a crash (or survive, as a
//     prefix of what was appended); synced data, creates, renames, removes
//     and rewrites are durable when the call returns. On a device whose
//     completed programs can still be lost (a file-backed emulated device
//     with flash.Options.PowerSafe: its programs are pwrites), a sync and
//     a journal flush ask it to make them durable (SyncPrograms) before
//     the journal pages are written and before the call returns, so that
//     a power loss of the host keeps the same guarantee
//     (TestPowerLossSDFOnFileDevice). Without PowerSafe such a device
//     keeps the guarantee through a process crash only: a power loss can
//     leave a volume with no complete checkpoint
//     (TestPowerLossSDFWithoutPowerSafeLosesSyncedFiles). objstore's
//     SDFStore (every node and dev cluster on --store sdf) turns PowerSafe
//     on unless told it may lose data (--unsafe-no-device-sync).
//   - Every zone that may hold pages whose extents are not journaled is
//     unsealed in the journal, so replay scans it.

// # Locks
//
// One mutex, FS.mu, guards the zone table and the file table together
// (and the journal's pending records, so that records are queued in the
// order their effects are applied): most changes touch both (an extent
// installed moves live pages between zones, a zone reset follows the
// last file page leaving it). The locks are taken in this order, and
// never the other way (Jmu is the journal's own mutex, which serializes
// its flushes and checkpoints):
//
//	File.mu -> FS.gcMu -> Jmu -> zone Prog -> identify.Identifier.mu -> FS.mu
//
// The detector's mutex is a leaf. One exception waits without a cycle: a writer
// holding a data zone's Prog whose program finds a die failed flushes the
// journal (Jmu); under Jmu only metadata zones' Prog is taken (their
// reset), never a data zone's.
//
// # Failure model
//
// Reads verify every page (device ECC status, CRC32C, identity); a page
// that fails its checksum with a clean device status is read once more by
// the channel worker right away (channels.Op.RereadOnCheck), so a
// transient flip on the way out costs one page read on its die and is
// counted (Stats.Transients). A sequential reader may ask for read-ahead
// (Options.ReadAheadBytes, File.SetReadAhead): the next range is read and
// verified in the background, queued before the caller waits for its own,
// and used only if it read whole and the file did not change meanwhile;
// otherwise the caller's own read reports. Its pages not read when the
// caller claims it go straight into the caller's buffer, and a page of it
// that failed verification is read again alone by the caller, which
// reports it if it fails again (the read-ahead is kept). A failure is never returned as data: ReadAt returns a *CorruptionError (wrapping
// base.ErrCorruption) with the physical page and the owning file range, and
// the layer above repairs that range from remote redundancy with
// RewriteRange, or votes on ReadRaw copies. A read racing with GC or a
// rewrite is retried against the new mapping before it is reported. A
// failed program marks the zone read-only and writes the pages elsewhere; a
// failed erase retires the block and the zone continues on fewer dies. A
// device-reported die failure, or more than DieBadBlocks bad blocks on a die
// (program and erase failures, and failed probes of the first pages of a
// failing block and its neighbours: the Detector), marks the die failed: its
// zones stop taking writes, Identify lists exactly the file ranges to
// rebuild, and new zones follow the Handler's weights. Metadata survives the
// loss of any two copies of a metadata page (internal/sdf/journal says
// what more it survives); a checkpoint body page no copy gives back fails
// Open with a corruption error. A die of a body or active metadata zone
// that fails makes the next flush write a new epoch elsewhere. P2L
// entrustment assumes two neighbouring dies of a
// zone do not fail together (Reparo 6.3); a zone whose P2L page is
// unreadable falls back to the scan.
package sdf
