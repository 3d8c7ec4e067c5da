package nemesis

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Markdown renders the run as a report section: what was injected, the
// operations recorded, and the verdicts.
func (r *Result) Markdown() string {
	var b strings.Builder
	verdict := "passed"
	if !r.Passed() {
		verdict = "FAILED"
	}
	store := "plain files"
	if r.Store == "sdf" {
		store = "emulated flash (SDF; the KV replicas on it too)"
	}
	atOnce := "one at a time"
	if r.Concurrency > 1 {
		atOnce = fmt.Sprintf("up to %d at once, on victims no other fault held", r.Concurrency)
	}
	fmt.Fprintf(&b, "Seed %d, %d storage nodes on %s and a coordinator, each its own process; faults for %v (each held %v-%v, %s), %v in all. Verdict: **%s**.\n\n",
		r.Seed, r.Nodes, store, r.Duration, r.Hold/2, r.Hold, atOnce, r.Elapsed.Round(time.Second), verdict)
	if r.Concurrency > 1 {
		fmt.Fprintf(&b, "Faults that overlapped another: %d of %d; the most held at once: %d.\n\n", r.overlapping(), len(r.Faults), r.mostAtOnce())
	}

	count := map[string]int{}
	failed := map[string]int{}
	for _, f := range r.Faults {
		count[f.Kind]++
		if f.Err != "" {
			failed[f.Kind]++
		}
	}
	b.WriteString("| fault | how | injected | could not inject or heal |\n| --- | --- | --- | --- |\n")
	for _, k := range AllFaults {
		fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", k, faultHow[k], count[k], failed[k])
	}
	b.WriteString("\n")

	fmt.Fprintf(&b, "| KV history | count |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| operations recorded (strong get, put, compare-and-set) | %d |\n", r.KVOps)
	fmt.Fprintf(&b, "| completed | %d |\n", r.KVOK)
	fmt.Fprintf(&b, "| put or cas with unknown outcome (recorded as may-have-applied) | %d |\n", r.KVUnknown)
	fmt.Fprintf(&b, "| gets that failed (left out: no effect) | %d |\n", r.KVFailed)
	fmt.Fprintf(&b, "| porcupine (linearizability of every register) | %s |\n", r.Linearizable)
	fmt.Fprintf(&b, "| longest time in which no KV operation completed | %v |\n", r.KVLongestStall.Round(time.Millisecond))
	fmt.Fprintf(&b, "| every key answered a strong read again, after the last heal | %v |\n\n", r.KVRecovery.Round(time.Millisecond))

	fmt.Fprintf(&b, "| objects | count |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| puts acknowledged | %d |\n", r.ObjPuts)
	fmt.Fprintf(&b, "| puts failed (not acknowledged) | %d |\n", r.ObjPutFailed)
	fmt.Fprintf(&b, "| read right after its put: unavailable | %d |\n", r.ObjReadUnavailable)
	fmt.Fprintf(&b, "| read right after its put: other bytes | %d |\n", r.ObjReadWrong)
	fmt.Fprintf(&b, "| acknowledged, read back intact at the end | %d |\n", r.ObjFinalOK)
	fmt.Fprintf(&b, "| acknowledged, lost at the end | %d |\n", r.ObjFinalLost)
	fmt.Fprintf(&b, "| acknowledged, other bytes at the end | %d |\n\n", r.ObjFinalWrong)

	if r.Visualization != "" {
		fmt.Fprintf(&b, "The illegal history is drawn in `%s` (porcupine's visualization).\n\n", r.Visualization)
	}
	if len(r.Errors) > 0 {
		errs := append([]string(nil), r.Errors...)
		sort.Strings(errs)
		if len(errs) > 20 {
			errs = append(errs[:20], fmt.Sprintf("... and %d more", len(r.Errors)-20))
		}
		b.WriteString("Errors:\n\n")
		for _, e := range errs {
			fmt.Fprintf(&b, "- %s\n", e)
		}
		b.WriteString("\n")
	}
	b.WriteString("<details><summary>The faults, in order (cuts: gRPC calls and stream messages a partition failed)</summary>\n\n| at | fault | nodes | held | cuts | error |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, f := range r.Faults {
		cuts := "-"
		if f.Kind == FaultPartitionOne || f.Kind == FaultPartitionHalf || f.Kind == FaultPartitionCoord {
			cuts = fmt.Sprint(f.Cuts)
		}
		fmt.Fprintf(&b, "| %.1fs | %s | %s | %v | %s | %s |\n", f.At.Seconds(), f.Kind, f.who(), f.For.Round(time.Millisecond), cuts, f.Err)
	}
	b.WriteString("\n</details>\n")
	return b.String()
}

var faultHow = map[string]string{
	FaultKill:           "SIGKILL the node's process; restart it on its directory and address",
	FaultPause:          "SIGSTOP the node's process; SIGCONT it",
	FaultPartitionOne:   "cut one node off from every other node, both ways (netfault at the gRPC boundary)",
	FaultPartitionHalf:  "cut the nodes into two halves, both ways",
	FaultUBER:           "persistent bit errors (UBER 1e-6) on the node's chunk reads; back to 0",
	FaultFill:           "fill the node's flash device with ballast (nothing left free: object writes refused, KV replicas' raft logs fail); remove it",
	FaultKillCoord:      "SIGKILL the coordinator (and its embedded etcd); restart it on its directory",
	FaultPauseCoord:     "SIGSTOP the coordinator (and its embedded etcd); SIGCONT it",
	FaultPartitionCoord: "cut one to half of the nodes off from the coordinator and its etcd, both ways (their heartbeats stop)",
}

// overlapping counts the faults held while another was.
func (r *Result) overlapping() int {
	n := 0
	for i, f := range r.Faults {
		for j, g := range r.Faults {
			if i != j && f.At < g.At+g.For && g.At < f.At+f.For {
				n++
				break
			}
		}
	}
	return n
}

// mostAtOnce is the largest number of faults held at one moment.
func (r *Result) mostAtOnce() int {
	most := 0
	for _, f := range r.Faults {
		n := 0
		for _, g := range r.Faults {
			if g.At <= f.At && f.At < g.At+g.For {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}
