// Package metalog is the pure core of the SDF layer's metadata journal
// (internal/sdf; DIRECT 000 section 4.2.2, policy 2: duplicate and checksum
// local metadata): the journal's records as typed values, encoded and
// decoded (Create, Extents, ZoneReset, ..., Decode), the unit-by-unit merge
// and bit-by-bit vote of the copies of every metadata page read on open
// (Merge), the choice of the newest epoch whose checkpoint is complete
// (Latest), the merge of a checkpoint body page from its copies
// (ParseBodyPage, MergeBodyPage), and the replay of an epoch's records to
// the file table and the journaled zone records (Replay: records in,
// Tables out, the checkpoint body read through the caller's function), and
// of the synced pages found in zones left unsealed (Tables.Recover). It
// does no I/O: internal/sdf reads the pages through its channel workers,
// hands them here, and adopts the Tables (the zone table proper is rebuilt
// by internal/sdf/zones); the page, unit and record framing is
// internal/sdf/onflash.
//
// # Invariants
//
//   - A unit is used only if it verifies as that very unit (epoch, page,
//     index, unit count), taken from a copy or voted over three copies;
//     a page is given back only if every one of its units is.
//   - Latest returns the stream of one epoch up to its first page that no
//     copy gives back, and only if that prefix holds a complete checkpoint
//     (onflash.RecCheckpointDone); pages after the gap are counted lost.
//   - Record and Decode are inverses for every record this build writes.
//   - Replay applies records in stream order, a checkpoint body's records
//     in the place of the record naming it, and stops at the first record
//     that does not verify; its Tables are what the same operations applied
//     in memory left (a second, page-by-page model checks it in the tests).
//   - Recover never maps a page that would leave a hole below a file's
//     size, nor one older than the page's mapping.
//
// # Failure model
//
// Damaged copies are merged or voted past; what cannot be rebuilt is
// reported, never guessed: a page with a unit no copy gives back ends the
// epoch's stream (Epoch.Lost), no complete checkpoint is a corruption
// error, a record that does not decode is skipped (replay treats the
// journal as ended by a torn record elsewhere, in onflash.NextRecord), and
// a verified record that is impossible for the device (a die it does not
// have, an extent outside the data zones, a superblock of another geometry
// or format) is an error, never applied.
package metalog
