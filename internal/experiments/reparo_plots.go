package experiments

import (
	"fmt"

	"github.com/flashmend/flashmend/internal/node"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/report"
)

// The figures of the Reparo reports, drawn from the same runs as their
// tables.

// identifierPlots draws Figure 11's two views: each method's time per
// device capacity, and the work behind it (mapping entries the scan walks,
// P2L pages CDR* reads, the spare areas page-level entrustment would read).
func identifierPlots(r *report.Report, runs []identifierRun, workers []int) error {
	var xs []float64
	for _, run := range runs {
		xs = append(xs, float64(run.capacity)/(1<<20))
	}
	var series []report.Series
	for _, w := range workers {
		name := fmt.Sprintf("CDR, %d workers", w)
		if w == 1 {
			name = "IDR (1 worker)"
		}
		s := report.Series{Name: name, X: xs, Points: true}
		for _, run := range runs {
			s.Y = append(s.Y, float64(run.scan[w].Nanoseconds())/1e3)
		}
		series = append(series, s)
	}
	star := report.Series{Name: "CDR* (block P2L, first query)", X: xs, Points: true}
	for _, run := range runs {
		star.Y = append(star.Y, float64(run.p2l.Nanoseconds())/1e3)
	}
	series = append(series, star)
	p, err := report.LinePlot{Title: "Identification time per method (Figure 11)", XLabel: "device capacity (MiB)",
		YLabel: "microseconds (wall clock)", LogX: true, LogY: true, Series: series}.Build()
	if err != nil {
		return err
	}
	if err := r.Plot("time", "time to identify a failed die's data, per method and device capacity", p); err != nil {
		return err
	}
	work := []report.Series{
		{Name: "scan: mapping entries walked", X: xs, Points: true},
		{Name: "CDR*: block-level P2L pages read", X: xs, Points: true},
		{Name: "page-level P2L: spare areas to read", X: xs, Points: true},
	}
	for _, run := range runs {
		work[0].Y = append(work[0].Y, float64(run.entries))
		work[1].Y = append(work[1].Y, float64(run.p2lPages))
		work[2].Y = append(work[2].Y, float64(run.pageLevel))
	}
	p, err = report.LinePlot{Title: "Identification work per method", XLabel: "device capacity (MiB)",
		YLabel: "entries or pages", LogX: true, LogY: true, Series: work}.Build()
	if err != nil {
		return err
	}
	return r.Plot("work", "what each identifier reads, per device capacity", p)
}

// rebuildPlots draws the cluster half of Figure 10: data moved (fetched
// plus sent) and repair time per device size, reparo against the rebuild baseline.
func rebuildPlots(r *report.Report, runs []rebuildRun) error {
	bytes := map[string]*report.Series{}
	times := map[string]*report.Series{}
	var order []string
	for _, run := range runs {
		if bytes[run.mode] == nil {
			order = append(order, run.mode)
			bytes[run.mode] = &report.Series{Name: run.mode, Points: true}
			times[run.mode] = &report.Series{Name: run.mode, Points: true}
		}
		x := float64(run.dies)
		bytes[run.mode].X = append(bytes[run.mode].X, x)
		bytes[run.mode].Y = append(bytes[run.mode].Y, float64(run.network())/(1<<20))
		times[run.mode].X = append(times[run.mode].X, x)
		times[run.mode].Y = append(times[run.mode].Y, run.repair.Seconds())
	}
	held := report.Series{Name: "what the failed die held", Dashed: true}
	for _, run := range runs {
		if run.mode == node.DieRepairReparo {
			held.X = append(held.X, float64(run.dies))
			held.Y = append(held.Y, float64(run.dieBytes)/(1<<20))
		}
	}
	var bs, ts []report.Series
	for _, m := range order {
		bs = append(bs, *bytes[m])
		ts = append(ts, *times[m])
	}
	bs = append(bs, held)
	p, err := report.LinePlot{Title: "Data moved after one die failure (Figure 10(b), cluster)", XLabel: "dies per device",
		YLabel: "MiB", LogX: true, LogY: true, Series: bs}.Build()
	if err != nil {
		return err
	}
	if err := r.Plot("cluster-bytes", "bytes moved (fetched from the nodes plus sent to them) per device size, reparo against rebuild, with the failed die's data", p); err != nil {
		return err
	}
	p, err = report.LinePlot{Title: "Repair time after one die failure (Figure 10(a), cluster)", XLabel: "dies per device",
		YLabel: "seconds (wall clock)", LogX: true, LogY: true, Series: ts}.Build()
	if err != nil {
		return err
	}
	return r.Plot("cluster-time", "wall time from the die failure to the job closed, per device size", p)
}

// afterPlots draws Figures 12-13 and 15-16 in one view each: the writes'
// throughput normalized to no failure, and the random writes' WA, against
// the number of failed dies, per handler and utilization. (The reads stay
// within a few percent of 1 for both handlers: the table gives them.)
func afterPlots(r *report.Report, points []afterPoint) error {
	type key struct {
		util   float64
		policy reparo.Policy
	}
	var order []key
	base0 := map[key]afterPoint{}
	seq, rnd, wa := map[key]*report.Series{}, map[key]*report.Series{}, map[key]*report.Series{}
	for _, p := range points {
		k := key{p.util, p.policy}
		if p.k == 0 {
			base0[k] = p
			order = append(order, k)
			// The higher utilization dashed.
			name, dashed := fmt.Sprintf("%v at %.2f", p.policy, p.util), len(order) > 2
			seq[k] = &report.Series{Name: name, Dashed: dashed}
			rnd[k] = &report.Series{Name: name, Dashed: dashed}
			wa[k] = &report.Series{Name: name, Dashed: dashed}
		}
		b, ok := base0[k]
		if !ok || p.degraded != "" {
			continue
		}
		x := float64(p.k)
		if b.seqWrite > 0 && p.seqWrite > 0 {
			seq[k].X, seq[k].Y = append(seq[k].X, x), append(seq[k].Y, p.seqWrite/b.seqWrite)
		}
		if b.randWr > 0 && p.randWr > 0 {
			rnd[k].X, rnd[k].Y = append(rnd[k].X, x), append(rnd[k].Y, p.randWr/b.randWr)
		}
		if p.waRand > 0 {
			wa[k].X, wa[k].Y = append(wa[k].X, x), append(wa[k].Y, p.waRand)
		}
	}
	for _, fig := range []struct {
		stem, title, ylabel, caption string
		s                            map[key]*report.Series
	}{
		{"seq-write", "Sequential write after k die failures", "throughput / no failure", "sequential write throughput normalized to the device before any failure (Figures 12-13)", seq},
		{"rand-write", "Random write after k die failures", "IOPS / no failure", "random write IOPS normalized to the device before any failure (Figures 15-16)", rnd},
		{"wa", "Write amplification of random writes", "flash bytes / user bytes", "WA of the random-write phase after k die failures", wa},
	} {
		var ss []report.Series
		for _, k := range order {
			ss = append(ss, *fig.s[k])
		}
		p, err := report.LinePlot{Title: fig.title, XLabel: "failed dies (one channel)", YLabel: fig.ylabel, Series: ss}.Build()
		if err != nil {
			return err
		}
		if err := r.Plot(fig.stem, fig.caption, p); err != nil {
			return err
		}
	}
	return nil
}
