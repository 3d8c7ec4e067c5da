package experiments

import (
	"context"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/sim"
	"github.com/flashmend/flashmend/internal/wear"
)

// The Chameleon experiments (paper 004 section IV) run the fleet simulator
// (internal/sim) over the wear balancer (internal/wear) at the paper's
// scale: 50 servers, Table III's five workloads at their full size, one
// hour epochs. Quick runs use 16 servers and half a percent of each
// workload.

// chamPolicy is one bar of a figure.
type chamPolicy struct {
	label string
	opts  wear.Options
}

var (
	polREP     = chamPolicy{"REP", wear.Options{Mode: wear.ModeREP}}
	polEC      = chamPolicy{"EC", wear.Options{Mode: wear.ModeEC}}
	polREPEC   = chamPolicy{"REP+EC", wear.Options{Mode: wear.ModeREPEC}}
	polEDMEC   = chamPolicy{"EDM", wear.Options{Mode: wear.ModeEDM, Initial: wear.EC}}
	polChamEC  = chamPolicy{"Chameleon", wear.Options{Mode: wear.ModeChameleon, Initial: wear.EC}}
	polHCDSEC  = chamPolicy{"Chameleon without ARPT", wear.Options{Mode: wear.ModeChameleon, Initial: wear.EC, SigmaARPTRatio: 100}}
	polEDMREP  = chamPolicy{"EDM", wear.Options{Mode: wear.ModeEDM, Initial: wear.REP}}
	polChamREP = chamPolicy{"Chameleon", wear.Options{Mode: wear.ModeChameleon, Initial: wear.REP}}
)

// chamPaperServers is the paper's fleet (section IV-A).
const chamPaperServers = 50

// simMemo keeps the runs of one registry (one `experiments run`), so that
// figures drawn from the same runs (wear and endurance, latency and write
// amplification) do not repeat them. Runs are deterministic, so a memo
// changes nothing but time.
type simMemo struct {
	mu   sync.Mutex
	runs map[string]*sim.Result
}

func newSimMemo() *simMemo { return &simMemo{runs: map[string]*sim.Result{}} }

// chameleonScale is the fleet and workload size of a run.
func chameleonScale(cfg Config) (servers int, scale float64) {
	if cfg.Quick {
		return 16, 0.005
	}
	return chamPaperServers, 1
}

func (m *simMemo) run(ctx context.Context, cfg Config, workload string, pol chamPolicy) (*sim.Result, error) {
	servers, scale := chameleonScale(cfg)
	key := fmt.Sprintf("%s/%d/%g/%d/%+v", workload, servers, scale, cfg.Seed, pol.opts)
	m.mu.Lock()
	r, ok := m.runs[key]
	m.mu.Unlock()
	if ok {
		return r, nil
	}
	p, err := sim.LookupProfile(workload)
	if err != nil {
		return nil, err
	}
	w, err := p.Scaled(scale).Workload()
	if err != nil {
		return nil, err
	}
	r, err = sim.Run(ctx, sim.Config{Servers: servers, Workload: w, Policy: pol.opts, Seed: cfg.Seed})
	if err != nil {
		return nil, fmt.Errorf("%s under %s: %w", workload, pol.label, err)
	}
	m.mu.Lock()
	m.runs[key] = r
	m.mu.Unlock()
	return r, nil
}

// grid runs every policy on every Table III workload.
func (m *simMemo) grid(ctx context.Context, cfg Config, pols []chamPolicy) (map[string]map[string]*sim.Result, []string, error) {
	out := map[string]map[string]*sim.Result{}
	var names []string
	for _, p := range sim.Profiles() {
		names = append(names, p.Name)
		out[p.Name] = map[string]*sim.Result{}
		for _, pol := range pols {
			r, err := m.run(ctx, cfg, p.Name, pol)
			if err != nil {
				return nil, nil, err
			}
			out[p.Name][pol.label] = r
		}
	}
	return out, names, nil
}

// chamSetupText describes the runs of a Chameleon figure.
func chamSetupText(cfg Config) string {
	servers, scale := chameleonScale(cfg)
	size := "Table III's full request counts and data sets"
	if scale != 1 {
		size = fmt.Sprintf("%.1f%% of Table III's request counts and data sets (quick run)", 100*scale)
	}
	return fmt.Sprintf("Fleet simulator (`internal/sim`) running the wear balancer (`internal/wear`): %d servers, "+
		"%s, one-hour epochs, seed %d. Each server has a page-mapped FTL with greedy GC and 15%% "+
		"over-provisioning (Table II: 4 KB pages, 256 KB blocks, 25/200/1500 us read/program/erase), sized so that "+
		"the REP footprint of the most loaded server (under the default placement) fills 70%% of its logical capacity, and "+
		"preconditioned after the data set is loaded, as a device in service is (its free space is invalid pages, so every "+
		"page programmed during the trace costs an erase: eq. 2 after GC starts). Objects are placed by consistent "+
		"hashing (FNV-1a). The YCSB trace is a Zipf (0.99) generator; the four MSR-Cambridge traces are synthetic "+
		"profiles with Table III's request count, data set, bytes requested and write ratio (their Zipf skew, 0.9 to "+
		"1.1, is our assumption: the traces are not shipped). EC is RS(4+2) in 4 KiB stripe units, REP three copies; "+
		"an EC update of part of a stripe row reads the old data and parity (or the rest of the row) before it "+
		"programs. Counters cover the "+
		"trace, not the initial load of the data set.", servers, size, cfg.Seed)
}

// pct is the change from base to v in percent.
func chamChange(v, base float64) float64 {
	if base == 0 {
		return math.NaN()
	}
	return 100 * (v - base) / base
}

// chamAvgBest returns the mean and the most negative of xs (reductions are
// negative changes).
func chamAvgBest(xs []float64) (mean, best float64) {
	best = math.Inf(1)
	for _, x := range xs {
		mean += x
		best = math.Min(best, x)
	}
	return mean / float64(len(xs)), best
}

// chamBars is one policy's bars across the workloads.
type chamBars struct {
	name   string
	values []float64
}

// chamGroupedBars draws one group of bars per workload, one bar per series.
func chamGroupedBars(title, ylabel string, groups []string, series []chamBars) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	w := vg.Points(50 / float64(len(series)+1))
	colors := []color.Color{
		color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
		color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	}
	for i, s := range series {
		bars, err := plotter.NewBarChart(plotter.Values(s.values), w)
		if err != nil {
			return nil, err
		}
		bars.Color = colors[i%len(colors)]
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	p.NominalX(groups...)
	p.Add(plotter.NewGrid())
	return p, nil
}

// SimReport is the report `flashmend sim --report DIR` writes for one run:
// the figures of the run (erase counts per server, sorted, as in Figure 1;
// the wear variance and state mix per epoch) and its numbers.
func SimReport(r *sim.Result, wall time.Duration) (*report.Report, error) {
	name := strings.NewReplacer("+", "-", ":", "-", "/", "-", ".", "-", "_", "-").Replace(
		strings.ToLower(fmt.Sprintf("sim-%s-%s-%s-%d", r.Workload, r.Policy, r.Initial, r.Servers)))
	rep, err := report.New(name, fmt.Sprintf("Fleet simulation: %s under %s (%d servers)", r.Workload, r.Policy, r.Servers))
	if err != nil {
		return nil, err
	}
	rep.Text("Workload %s, policy %s with initial redundancy %s, %d servers, seed %d, %d requests (%d writes) over "+
		"%.0f virtual hours in %d epochs; %s of wall time (machine below).", r.Workload, r.Policy, r.Initial,
		r.Servers, r.Seed, r.Requests, r.Writes, r.VirtualHour, r.Epochs, wall.Round(time.Millisecond))
	if err := rep.Table(report.Table{
		Header: []string{"erase sigma", "erase mean", "min", "max", "erases total", "write amplification", "write latency (us, SSD / client)", "moved"},
		Rows: [][]string{{
			fmt.Sprintf("%.1f", r.EraseSigma), fmt.Sprintf("%.1f", r.EraseMean), fmt.Sprintf("%.0f", r.EraseMin),
			fmt.Sprintf("%.0f", r.EraseMax), fmt.Sprintf("%.0f", r.ErasesTotal), fmt.Sprintf("%.3f", r.WriteAmp),
			fmt.Sprintf("%.0f / %.0f", r.LatencyUs, r.ClientLatUs), fmt.Sprintf("%d B", r.MovedBytes),
		}},
	}); err != nil {
		return nil, err
	}
	sorted := append([]float64(nil), r.ServerErases...)
	sort.Float64s(sorted)
	var xs []float64
	for i := range sorted {
		xs = append(xs, float64(i+1))
	}
	p, err := report.LinePlot{
		Title: "Erase count per server, sorted (Figure 1)", XLabel: "server (sorted by erases)", YLabel: "block erases",
		Series: []report.Series{{Name: r.Policy, X: xs, Y: sorted, Points: true}},
	}.Build()
	if err != nil {
		return nil, err
	}
	if err := rep.Plot("erases", "erase count per server, sorted", p); err != nil {
		return nil, err
	}
	if err := chamStatesPlot(rep, r, "states", "state of the data per epoch"); err != nil {
		return nil, err
	}
	return rep, nil
}

// chamStatesPlot draws the share of bytes in each state per epoch (Figure 8).
func chamStatesPlot(rep *report.Report, r *sim.Result, stem, caption string) error {
	var series []report.Series
	groups := []struct {
		name   string
		states []string
	}{
		{"REP", []string{"REP"}}, {"EC", []string{"EC"}}, {"late-REP", []string{"late-REP"}},
		{"late-EC", []string{"late-EC"}}, {"EWO (REP-EWO + EC-EWO)", []string{"REP-EWO", "EC-EWO"}},
	}
	for _, g := range groups {
		s := report.Series{Name: g.name}
		for _, e := range r.EpochLog {
			var total, in int64
			for st, b := range e.StateBytes {
				total += b
				for _, want := range g.states {
					if st == want {
						in += b
					}
				}
			}
			if total == 0 {
				continue
			}
			s.X = append(s.X, e.Hours)
			s.Y = append(s.Y, 100*float64(in)/float64(total))
		}
		series = append(series, s)
	}
	p, err := report.LinePlot{Title: "Data per state (Figure 8)", XLabel: "hour", YLabel: "% of the data", Series: series}.Build()
	if err != nil {
		return err
	}
	return rep.Plot(stem, caption, p)
}
