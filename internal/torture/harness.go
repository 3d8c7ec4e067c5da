package torture

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/report"
)

// helixSection is the helix run's findings (helix.md has the same).
func (r Run) helixSection(rep *report.Report) error {
	if r.HelixErr != "" {
		rep.Text("## Helix\n\n**Helix could not finish:** %s", escape(r.HelixErr))
		return nil
	}
	if r.Helix == nil {
		rep.Text("## Helix\n\nNot run in this report (`flashmend torture helix`).")
		return nil
	}
	return r.Helix.Section(rep, 2)
}

// nemesisSection summarizes the nemesis runs (each has its own report,
// nemesis.md and nemesis-sdf.md, with every fault's timeline).
func (r Run) nemesisSection(rep *report.Report) error {
	if len(r.Nemesis) == 0 && len(r.NemesisErr) == 0 {
		rep.Text("## Nemesis\n\nNot run in this report (`flashmend torture nemesis`).")
		return nil
	}
	rep.Text("## Nemesis (processes killed, paused, cut off, given bit errors, devices filled; porcupine)\n\n" +
		"Coordinator and storage nodes as separate processes, KV and object clients recording histories while a seeded " +
		"nemesis injects faults; at the end everything is healed, the KV history is checked for linearizability with " +
		"porcupine and every acknowledged object is read back. Each run's own report lists every fault with its victims " +
		"and duration.")
	t := report.Table{Caption: "Nemesis runs", Header: []string{"store", "nodes", "faults injected", "by kind", "KV operations (completed)",
		"porcupine", "object puts acknowledged", "acknowledged objects intact at the end", "lost / wrong", "verdict", "report", "wall"}}
	for _, n := range r.Nemesis {
		kinds := map[string]int{}
		for _, f := range n.Faults {
			kinds[f.Kind]++
		}
		var by []string
		for k, c := range kinds {
			by = append(by, fmt.Sprintf("%s %d", k, c))
		}
		sort.Strings(by)
		verdict, name := "pass", "nemesis.md"
		if !n.Passed() {
			verdict = "FAILED"
		}
		if n.Store == "sdf" {
			name = "nemesis-sdf.md"
		}
		t.Rows = append(t.Rows, []string{n.Store, fmt.Sprint(n.Nodes), fmt.Sprint(len(n.Faults)), strings.Join(by, ", "),
			fmt.Sprintf("%d (%d)", n.KVOps, n.KVOK), n.Linearizable, fmt.Sprint(n.ObjPuts), fmt.Sprint(n.ObjFinalOK),
			fmt.Sprintf("%d / %d", n.ObjFinalLost, n.ObjFinalWrong+n.ObjReadWrong), verdict, "[" + name + "](" + name + ")",
			n.Elapsed.Round(time.Second).String()})
	}
	for _, e := range r.NemesisErr {
		t.Rows = append(t.Rows, []string{"", "", "", "", "", "", "", "", "", "ERROR: " + escape(e), "", ""})
	}
	return rep.Table(t)
}

// crashSection lists the crash points covered (crashpoints-<store>.md has
// the detail).
func (r Run) crashSection(rep *report.Report) error {
	if r.Crash == nil && r.CrashErr == "" {
		rep.Text("## Crash points\n\nNot run in this report (`flashmend torture crashpoints`).")
		return nil
	}
	rep.Text("## Crash points (a node killed at each persistence step, restarted from its disk)\n\n" +
		"One node process, armed with `FLASHMEND_CRASHPOINT=<point>@<n>`, SIGKILLs itself at the n-th hit of a persistence " +
		"step while KV and object clients work; it is restarted unarmed from what its device holds, and every acknowledged " +
		"object and KV write must read back, nothing half-written may be read, and the KV history must stay linearizable.")
	if r.CrashErr != "" {
		rep.Text("**Crash-point run stopped:** %s", escape(r.CrashErr))
	}
	if r.Crash == nil {
		return nil
	}
	c := r.Crash
	counts := map[string]int{}
	t := report.Table{Header: []string{"point", "layer", "node", "hit", "outcome", "detail"}}
	for _, p := range c.Points {
		counts[p.Outcome]++
		t.Rows = append(t.Rows, []string{"`" + p.Point + "`", p.Layer, p.Node.String(), fmt.Sprint(p.At), p.Outcome, escape(p.Detail)})
	}
	var parts []string
	for o, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, o))
	}
	sort.Strings(parts)
	verdict := "pass"
	if !c.Passed() {
		verdict = "FAILED"
	}
	name := "crashpoints-" + c.Store + ".md"
	t.Caption = fmt.Sprintf("%d points on %d nodes (%s, %s devices): %s; KV history %d operations, porcupine %s; %d object puts "+
		"acknowledged, %d objects checked. Verdict: %s. Detail: [%s](%s).", len(c.Points), c.Nodes, c.Store, c.DeviceSize,
		strings.Join(parts, ", "), c.KVOps, c.Linearizable, c.ObjPuts, c.ObjChecked, verdict, name, name)
	return rep.Table(t)
}

// HarnessBad counts the harness parts (helix, nemesis runs, the
// crash-point run, the power-loss runs) that failed their checks or could
// not run.
func (r Run) HarnessBad() int {
	bad := len(r.NemesisErr)
	if r.HelixErr != "" || (r.Helix != nil && r.Helix.Bad()) {
		bad++
	}
	for _, n := range r.Nemesis {
		if !n.Passed() {
			bad++
		}
	}
	if r.CrashErr != "" || (r.Crash != nil && !r.Crash.Passed()) {
		bad++
	}
	bad += len(r.PowerLossErr)
	for _, p := range r.PowerLoss {
		if !p.Passed() {
			bad++
		}
	}
	return bad
}

// powerLossSection sums up the power-loss runs (each has its own report,
// powerloss-file.md and powerloss-sdf.md, with every mode and step).
func (r Run) powerLossSection(rep *report.Report) error {
	if len(r.PowerLoss) == 0 && len(r.PowerLossErr) == 0 {
		rep.Text("## Power loss\n\nNot run in this report (`flashmend torture powerloss [--store sdf]`).")
		return nil
	}
	rep.Text("## Power loss (a node's store cut from power at its file-system operations, restarted from what was synced)\n\n" +
		"Where the crash points kill a process and keep everything it wrote, these cut the power: a node's object store " +
		"runs seeded put/sums/index/repair/delete/compact workloads on fsys.Mem, an in-memory file system that keeps only " +
		"what was fsynced (plus, in the torn modes, some unsynced 512 B sectors and directory changes), is cut before a " +
		"mutating file-system operation, restarted from the image and checked: every acknowledged chunk and index entry " +
		"reads back verified, the write in flight is absent, corrupt or whole, nothing verifies with other bytes, and a " +
		"second restart agrees. The plain-file store is cut before each of its operations; the SDF store on emulated " +
		"flash (power-safe, as every node's is by default) before drawn ones: page programs and erases, device fsyncs " +
		"and state saves, format markers.")
	t := report.Table{Caption: "Power-loss runs (modes: sync/0, sync/50, sync/100 power losses and process crashes of a syncing store; nosync/100 a process crash of one that does not sync)",
		Header: []string{"store", "workloads x steps", "crash points", "trials", "acknowledged chunks / index entries checked", "lost", "wrong",
			"in flight: absent / corrupt / whole", "failed trials", "verdict", "report", "wall"}}
	for _, p := range r.PowerLoss {
		o, tot := p.Options, p.Total()
		crashes := "every operation"
		if o.CrashesPerWorkload > 0 {
			crashes = fmt.Sprintf("%d drawn per workload and mode", o.CrashesPerWorkload)
		}
		verdict := "pass"
		if !p.Passed() {
			verdict = "FAILED"
		}
		name := "powerloss-" + o.Store + ".md"
		t.Rows = append(t.Rows, []string{o.Store, fmt.Sprintf("%d x %d", o.Workloads, o.Steps), crashes, fmt.Sprint(tot.Trials),
			fmt.Sprintf("%d / %d", tot.AckedChunks, tot.AckedEntries), fmt.Sprint(tot.Lost), fmt.Sprint(tot.Wrong),
			fmt.Sprintf("%d / %d / %d", tot.InFlightAbsent, tot.InFlightCorrupt, tot.InFlightWhole), fmt.Sprint(tot.Failed), verdict,
			"[" + name + "](" + name + ")", p.Elapsed.Round(time.Second).String()})
	}
	for _, e := range r.PowerLossErr {
		t.Rows = append(t.Rows, []string{"", "", "", "", "", "", "", "", "", "ERROR: " + escape(e), "", ""})
	}
	return rep.Table(t)
}
