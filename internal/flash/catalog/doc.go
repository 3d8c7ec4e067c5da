// Package catalog names the flash devices flashmend emulates: presets that
// bundle a geometry, a timing model, a wear model and the parameters of the
// physical error model (a small test device, the Baidu SDF of SDF 002 Table
// 3, a 3D TLC and a QLC device), and SequentialThroughput, the raw
// sequential bandwidth a preset's timing gives in virtual time (SDF 002
// section 3.2 and Figure 7).
//
// # What it owns
//
//   - Preset, All, Names, Lookup: the device catalogue used by `flashmend
//     flash`, `flashmend dev`, the node's SDF store and the experiments;
//     Preset.Options and Preset.PhysicalModel turn one into flash.Options.
//   - SequentialThroughput: one synchronous worker per channel on a discard
//     device (flash.NewDiscard) in virtual time; the sdf preset gives SDF's
//     1.67 GB/s read and 1.01 GB/s write and linear channel scaling
//     (TestSDFThroughput).
//
// # Invariants
//
//   - Every preset is a valid device: its geometry validates and a memory
//     device opens with its options and physical model (TestPresetsAreValid).
//   - SequentialThroughput is deterministic: virtual time on a manual
//     clock, no sleeping, no randomness; its work is bounded
//     (maxThroughputPages).
//
// # Failure model
//
// An unknown preset name or out-of-range throughput arguments are invalid
// arguments (base.InvalidArgumentf); nothing here touches a disk.
package catalog
