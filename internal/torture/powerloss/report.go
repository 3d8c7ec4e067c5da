package powerloss

import (
	"fmt"
	"strings"
)

// Steps in report order: the workload step a crash interrupted ("done":
// the crash hit an operation whose failure the store ignores, after which
// the workload had nothing left to do).
var stepOrder = []string{"put chunk", "put index", "repair", "delete", "compact", "done", "reopen"}

// Markdown is the report's body: what ran, the table per mode and step,
// and the failures.
func (r *Result) Markdown() string {
	var b strings.Builder
	o := r.Options
	total := r.Total()
	verdict := "**passed**"
	if !r.Passed() {
		verdict = "**failed**"
	}
	var ops int64
	for _, n := range r.Ops {
		ops += n
	}
	crashes := fmt.Sprintf("%d drawn operations", o.CrashesPerWorkload)
	if o.CrashesPerWorkload == 0 {
		crashes = "every mutating operation"
	}
	store := "a node's plain-file object store (internal/objstore/filestore) over fsys.Mem, an in-memory file system that can lose power"
	compact := "the packs compacted"
	if o.Store == StoreSDF {
		g := SDFGeometry()
		store = fmt.Sprintf("a node's SDF object store (objstore.SDFStore: SDF extent files on a file-backed emulated flash device of %d channels x %d dies x %d blocks x %d pages of %d B, power-safe as every node's is by default; `nosync` runs it with SDFStoreOptions.PowerUnsafe; its device operations run one after another, SDFStoreOptions.Serial, so a seed repeats the same operations, trials and outcome) whose page file, device state copies and format markers are on fsys.Mem, an in-memory file system that can lose power; the crash points are the device's page programs and erases, its fsyncs and state saves, and the markers' writes",
			g.Channels, g.DiesPerChannel, g.BlocksPerDie, g.PagesPerBlock, g.PageSize)
		compact = "a compaction step (nothing to do: SDF reclaims zones itself)"
	}
	fmt.Fprintf(&b, "Seed %d. %d workloads of %d steps (a blob put: up to %d chunks of up to %d bytes, each its data and sums record, then its triplicated index entry; a chunk repaired, a blob deleted, %s), %d file-system operations in all (%v per workload), run on %s. Each workload is crashed before %s in each mode, the store restarted from the crash image and checked: every chunk and index entry acknowledged before the crash (and not deleted) must read back verified and equal, the chunk or entry in flight may be absent, corrupt (reported, then repaired) or whole, nothing may verify with other bytes; the interrupted chunk is then repaired and a second restart, from exactly what the first one synced, must find every acknowledged chunk again. %d trials in %v. Verdict: %s.\n\n",
		o.Seed, o.Workloads, o.Steps, o.MaxChunks, o.MaxChunkBytes, compact, ops, r.Ops, store, crashes, total.Trials, r.Elapsed.Round(1e6), verdict)
	b.WriteString("The power-loss model (package fsys): a file keeps what its last fsync made durable, plus each unsynced 512-byte sector and its unsynced size kept with the mode's probability; a directory keeps its synced entries plus a prefix of its changes since (each rename whole). The modes: `sync/0` exactly the synced state; `sync/50` half of the unsynced sectors and directory changes; `sync/100` and `nosync/100` a process crash (every write kept) of a store that fsyncs and of one that does not.\n\n")
	b.WriteString("| mode | step interrupted | trials | acked chunks checked | acked index entries checked | lost | wrong | in flight: absent / corrupt / whole | deleted, came back whole | torn tails cut | damaged regions | failed trials |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	row := func(mode, step string, t Tally) {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d / %d / %d | %d | %d | %d | %d |\n",
			mode, step, t.Trials, t.AckedChunks, t.AckedEntries, t.Lost, t.Wrong, t.InFlightAbsent, t.InFlightCorrupt, t.InFlightWhole, t.Resurrected, t.TornTails, t.DamagedRegions, t.Failed)
	}
	for _, m := range o.Modes {
		cells := r.Cells[m.Label()]
		for _, step := range stepOrder {
			if t := cells[step]; t != nil {
				row("`"+m.Label()+"`", step, *t)
			}
		}
	}
	row("**all**", "", total)
	b.WriteString("\n")
	if len(r.Failures) > 0 {
		b.WriteString("Failures (each line names the seed, workload, mode and operation that reproduce it):\n\n")
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "- %s\n", f)
		}
		b.WriteString("\n")
	}
	return b.String()
}
