package torture

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/experiments"
	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/torture/helix"
	"github.com/flashmend/flashmend/internal/torture/nemesis"
	"github.com/flashmend/flashmend/internal/torture/powerloss"
)

// Run is everything one torture run measured.
type Run struct {
	Seed     int64
	Keys     int
	FuzzTime time.Duration
	Fuzz     []FuzzResult
	KV       []KVCell
	// KVFlash is the KV sweep on emulated flash (KVOptions.Store
	// StoreSDF).
	KVFlash []KVCell
	Objects []experiments.ObjectCordsCell
	// ObjectFaults are the object sweep's columns that ran.
	ObjectFaults []string
	Wall         time.Duration
	// Errors are sweeps that stopped early (their cells so far are
	// reported).
	Errors []string
	// Nemesis are the nemesis runs (plain files, emulated flash) and
	// NemesisErr the runs that could not finish.
	Nemesis    []*nemesis.Result
	NemesisErr []string
	// Crash is the crash-point run (CrashErr: it could not finish).
	Crash    *nemesis.CrashResult
	CrashErr string
	// Helix is the helix run (HelixErr: it could not finish).
	Helix    *helix.Result
	HelixErr string
	// PowerLoss are the power-loss runs (plain-file store, SDF store) and
	// PowerLossErr the runs that could not finish.
	PowerLoss    []*powerloss.Result
	PowerLossErr []string
}

// faultTitle names a fault column.
var faultTitle = map[string]string{
	"zero-4k": "zeros", "junk-4k": "junk", "flip-bit": "bit flip", "eio-read-4k": "EIO read",
	"write-error": "write error", "lost-write-4k": "lost write",
	"zero": "zeros", "junk": "junk", "flip": "bit flip", "eio-read": "EIO read", "lost-write": "lost write", "truncate": "truncate", "delete": "delete",
}

func title(f string) string {
	if t, ok := faultTitle[f]; ok {
		return t
	}
	return f
}

// Report renders the run as docs/results/torture.md.
func (r Run) Report() (*report.Report, error) {
	rep, err := report.New("torture", "Torture: fuzzed decoders, one fault at a time in every file kind (CORDS), nemesis, crash points, power loss")
	if err != nil {
		return nil, err
	}
	rep.Text("Seed %d; total wall time %v on the machine below (shared, 2 cores). Targets: 0 lost, 0 wrong, 0 crash, "+
		"availability back after at most one restart of the faulty replica. Outcomes: *correct* (nothing needed repair), "+
		"*repaired* (detected and repaired from a local copy or a peer), *unavailable-then-recovered* (operations failed "+
		"while the fault was in place and succeeded once it was cleared and the replica restarted), *lost* (a key or "+
		"object not readable at the end), *wrong* (bytes other than those written), *crash* (the process died or hung), "+
		"*unavailable* (the cluster did not start, or the faulty replica never came back in step), *not reached* (the "+
		"fault did not land: nothing to damage, or the file was never read or written), *n/a* (the fault cannot occur in that "+
		"file kind; the cell says why).",
		r.Seed, r.Wall.Round(time.Second))
	for _, e := range r.Errors {
		rep.Text("**Stopped early:** %s", escape(e))
	}
	if err := r.fuzzSection(rep); err != nil {
		return nil, err
	}
	if err := r.kvSection(rep); err != nil {
		return nil, err
	}
	if err := r.kvFlashSection(rep, 2); err != nil {
		return nil, err
	}
	if err := r.objectSection(rep); err != nil {
		return nil, err
	}
	if err := r.helixSection(rep); err != nil {
		return nil, err
	}
	if err := r.nemesisSection(rep); err != nil {
		return nil, err
	}
	if err := r.crashSection(rep); err != nil {
		return nil, err
	}
	if err := r.powerLossSection(rep); err != nil {
		return nil, err
	}
	return rep, nil
}

func (r Run) fuzzSection(rep *report.Report) error {
	if len(r.Fuzz) == 0 {
		rep.Text("## Fuzzing\n\nNot run in this report (`flashmend torture fuzz`).")
		return nil
	}
	rep.Text("## Fuzzing\n\nEach target fuzzed with `go test -fuzz` for %v (one after the other; the wall time includes "+
		"building the instrumented test binary). A target asserts more than the absence of a panic: decode(encode(x)) == x, "+
		"and damaged input is an error, never other content. The seed corpora (testdata/fuzz next to each target) run in "+
		"every `go test`.", r.FuzzTime)
	t := report.Table{Header: []string{"package", "target", "decoder", "execs", "new corpus entries", "result", "wall"}}
	failed := 0
	for _, f := range r.Fuzz {
		res := "pass"
		if f.Failed {
			res = "FAIL: " + f.Failure
			failed++
		}
		t.Rows = append(t.Rows, []string{f.Target.Pkg, f.Target.Name, f.Target.What, fmt.Sprint(f.Execs), fmt.Sprint(f.New), res,
			f.Wall.Round(time.Second).String()})
	}
	t.Caption = fmt.Sprintf("%d targets, %d failed.", len(r.Fuzz), failed)
	return rep.Table(t)
}

// cordsTable lays out cells as rows (kinds, in first-seen order) by
// columns (faults).
func cordsTable(caption string, faults []string, cells map[[2]string]string, kinds []string) report.Table {
	t := report.Table{Caption: caption, Header: []string{"file kind"}}
	for _, f := range faults {
		t.Header = append(t.Header, title(f))
	}
	for _, k := range kinds {
		row := []string{k}
		for _, f := range faults {
			v, ok := cells[[2]string{k, f}]
			if !ok {
				v = "not run"
			}
			row = append(row, v)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func (r Run) kvSection(rep *report.Report) error {
	if len(r.KV) == 0 {
		rep.Text("## KV store\n\nNot run in this report (`flashmend torture cords`).")
		return nil
	}
	rep.Text("## KV store (3 replicas of one shard, files in memory)\n\n%d keys of 800 B written in two loads with a restart "+
		"between them, then the cluster stopped. Each cell runs in its own process on a fresh copy of that store: one fault "+
		"in the newest file of one kind of replica n1 (at rest for zeros, junk, bit flip and lost write; at run time through "+
		"internal/torture/faultfs for EIO read and write error), the cluster restarted, and for the run-time faults the "+
		"workload continued under the fault (%d new keys written, every key read) before the fault was cleared and n1 "+
		"restarted. Then every key is read back (eventual reads, the client retrying replicas, 20 s) and the replicas' "+
		"contents compared (20 s).", r.Keys, max(20, r.Keys/20))
	return kvTables(rep, "KV", r.KV)
}

// kvTables renders KV cells as the CORDS table and the cells in detail.
func kvTables(rep *report.Report, name string, kv []KVCell) error {
	var kinds []string
	seen := map[string]bool{}
	table := map[[2]string]string{}
	faults := []string{}
	seenF := map[string]bool{}
	counts := map[Outcome]int{}
	for _, c := range kv {
		if !seen[c.Kind] {
			seen[c.Kind] = true
			kinds = append(kinds, c.Kind)
		}
		if !seenF[c.Params.Fault] {
			seenF[c.Params.Fault] = true
			faults = append(faults, c.Params.Fault)
		}
		table[[2]string{c.Kind, c.Params.Fault}] = string(c.Outcome)
		counts[c.Outcome]++
	}
	if err := rep.Table(cordsTable(name+": outcome per (file kind of replica n1, fault). "+countLine(counts), faults, table, kinds)); err != nil {
		return err
	}
	t := report.Table{Caption: name + " cells in detail", Header: []string{"file", "fault", "outcome", "what happened", "failed ops under the fault", "faults injected", "wall"}}
	for _, c := range kv {
		t.Rows = append(t.Rows, []string{"`" + strings.TrimPrefix(c.Params.File, "kv/") + "`", title(c.Params.Fault), string(c.Outcome), escape(c.Reason),
			fmt.Sprint(c.Cell.DuringErrors), fmt.Sprint(c.Cell.Injected), c.Wall.Round(100 * time.Millisecond).String()})
	}
	return rep.Table(t)
}

// KVFlashIntro describes the KV sweep on emulated flash.
func (r Run) kvFlashIntro() string {
	return fmt.Sprintf("The same cluster, workload and cells as the KV table of torture.md (%d keys of 800 B in two loads, a child process per cell), "+
		"with every node's replicas on internal/sdfvfs over internal/sdf over its own file-backed emulated device "+
		"(internal/flash: 4 channels x 2 dies x 64 blocks x 32 pages of 4 KiB, a page file of checksummed slots). Rows: the "+
		"newest file of each kind replica n1 keeps on its device (sdfvfs's duplicate copies, .sdfvfs, and the protection "+
		"layer's, .guardfs, included; of a kind, the last file the second load wrote, if it wrote one), then the SDF layer's own pages: journal pages (records and checkpoints; the zone "+
		"table is in them), P2L pages, the OOB bytes of the newest sstable's pages, and the device's own state copies "+
		"(state.0-2 beside its page file: damaged at rest, a lost write keeps a copy as it was between the loads, EIO read "+
		"and write error through flash.Options.StateIO, n1's device saving its state after every erase in the write-error "+
		"cell). A fault lands on the flash page "+
		"holding the bytes: zeros, junk and bit flip change the stored page (data, or OOB) with the slot checksum "+
		"recomputed, so the device returns the damage with a clean status (silent corruption the layers above must catch); "+
		"lost write makes a page programmed by the second load read back erased; EIO read makes every read of the page "+
		"under one 4 KiB block of the file uncorrectable (the device's fault injector) while the workload continues (a P2L "+
		"page, which only the identification of a die's data reads, is read by identifying the dies of its channel under "+
		"the fault: the result must equal the file-table scan's); write error fails every write, sync and create of the "+
		"file's kind on n1 (faultfs over its sdfvfs) or, for the SDF layer's journal pages, the next program of such a page "+
		"in one block of a zone the device was writing, for its P2L pages the first P2L program in any data zone not full "+
		"(the block is retired); sdfvfs's copies and the OOB bytes have no write of their own a fault could fail (n/a). *n1's flash stack* lists what the device, the SDF layer and sdfvfs detected and repaired "+
		"in the cell (the KV layers' counters do not see it). The base store is not bit-identical "+
		"between runs (raft timing decides placement), so a seed repeats the choices, not always the same page.", r.Keys)
}

// kvFlashSection is the KV sweep on emulated flash (level 2 in
// torture.md, 1 in its own report).
func (r Run) kvFlashSection(rep *report.Report, level int) error {
	h := strings.Repeat("#", level)
	if len(r.KVFlash) == 0 {
		rep.Text("%s KV store on emulated flash\n\nNot run in this report (`flashmend torture cords-sdf`, which writes "+
			"[cords-kv-sdf.md](cords-kv-sdf.md)).", h)
		return nil
	}
	rep.Text("%s KV store on emulated flash (3 replicas of one shard, each node's on SDF over its own emulated device)\n\n%s", h, r.kvFlashIntro())
	return kvTables(rep, "KV on flash", r.KVFlash)
}

// KVFlashReport renders the KV sweep on emulated flash alone
// (docs/results/cords-kv-sdf.md).
func (r Run) KVFlashReport() (*report.Report, error) {
	rep, err := report.New("cords-kv-sdf", "CORDS on emulated flash: one fault at a time in every file kind of a KV replica and in the SDF layer's own pages")
	if err != nil {
		return nil, err
	}
	rep.Text("Seed %d; wall time %v. Targets as in [torture.md](torture.md): 0 lost, 0 wrong, 0 crash, availability back "+
		"after at most one restart of the faulty replica.", r.Seed, r.Wall.Round(time.Second))
	for _, e := range r.Errors {
		rep.Text("**Stopped early:** %s", escape(e))
	}
	if len(r.KVFlash) == 0 {
		rep.Text("No cell ran.")
		return rep, nil
	}
	rep.Text("%s", r.kvFlashIntro())
	return rep, kvTables(rep, "KV on flash", r.KVFlash)
}

func (r Run) objectSection(rep *report.Report) error {
	if len(r.Objects) == 0 {
		rep.Text("## Object store\n\nNot run in this report.")
		return nil
	}
	rep.Text("## Object store (7 storage nodes and a coordinator; REP and EC objects; nodes on plain files and on emulated flash)\n\n" +
		"The experiments package's single-fault sweep: one object of each redundancy written, the cluster stopped; per cell one " +
		"file of the type on one node (or the coordinator) is damaged at rest (a 4 KiB block of its used part zeroed or junk, " +
		"one bit flipped), the cluster restarted with its scrubber, every object read back and compared, a node reported dead " +
		"must have its data re-created on the others, and every object scrubbed clean. EIO read (every read of the file fails until it is written anew, off the bad sector), " +
		"write error (every write of a file of its type on that node fails, while new objects are written and read " +
		"back) and lost write (every such write is acknowledged and dropped while new objects are written and read back; then " +
		"the fault clears and the scrub must repair every lost copy) run at run time on plain-file nodes. On emulated flash " +
		"the page file takes them through the device's own faults, armed before SDF mounts it: EIO read, the page under a " +
		"random used offset reads uncorrectable 64 times (the first read also returns 16 bits flipped); write error, the die " +
		"holding it fails every program of a page not yet written and every erase; lost write, that die acknowledges every " +
		"program and leaves the cells erased; for both, new objects are written and read back under the fault, which then " +
		"clears before the scrub. Every run-time cell ends with a restart of the whole cluster once the fault is over, and " +
		"every object is read back again from what the nodes' files hold. The device's state copies take I/O faults through " +
		"flash.Options.StateIO (a read error on the victim copy until it is written anew; every write of the node's state " +
		"copies failing, or acknowledged and dropped, until the fault clears before the scrub); the device lock file and the " +
		"SDF format marker hold no bytes that are read at run time (an flock; a stat), so their I/O faults cannot land. Not run " +
		"yet: I/O faults on the coordinator's etcd files (embedded etcd opens them itself: no file-system seam).")
	var kinds []string
	seen := map[string]bool{}
	cells := map[[2]string]string{}
	counts := map[Outcome]int{}
	for _, ft := range experiments.ObjectFileTypes() {
		k := ft[0] + " (" + ft[1] + ")"
		kinds = append(kinds, k)
		seen[ft[0]] = true
	}
	typeStore := map[string]string{}
	for _, ft := range experiments.ObjectFileTypes() {
		typeStore[ft[0]] = ft[0] + " (" + ft[1] + ")"
	}
	for _, c := range r.Objects {
		o := ClassifyObject(c)
		cells[[2]string{typeStore[c.Type], c.Fault}] = string(o)
		counts[o]++
	}
	faults := r.ObjectFaults
	if err := rep.Table(cordsTable("Objects: outcome per (file type, fault). "+countLine(counts), faults, cells, kinds)); err != nil {
		return err
	}
	t := report.Table{Caption: "Object cells in detail", Header: []string{"file type", "fault", "file", "outcome", "what happened", "took"}}
	for _, c := range r.Objects {
		t.Rows = append(t.Rows, []string{c.Type, title(c.Fault), "`" + c.File + "`", c.Outcome, escape(c.Detail), c.Took.Round(100 * time.Millisecond).String()})
	}
	return rep.Table(t)
}

func countLine(counts map[Outcome]int) string {
	var parts []string
	for o, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, o))
	}
	sort.Strings(parts)
	bad := 0
	for o, n := range counts {
		if o.Bad() {
			bad += n
		}
	}
	return fmt.Sprintf("Cells: %s; %d miss the target.", strings.Join(parts, ", "), bad)
}

// escape keeps a reason on one table row.
func escape(s string) string { return report.Cell(s, 300) }
