package report

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one named line (and/or set of points) of a line plot.
type Series struct {
	Name   string
	X, Y   []float64
	Points bool // draw markers (measurements) instead of a line (models)
	Dashed bool
}

// LinePlot describes a simple x/y plot, the shape of almost every figure in
// the papers.
type LinePlot struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	// YFloor replaces y values <= 0 (or below the floor) on a log axis, where
	// they cannot be drawn; points below it are dropped. Zero means 1e-300.
	YFloor float64
	Series []Series
}

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// Build draws the plot.
func (lp LinePlot) Build() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = lp.Title
	p.X.Label.Text = lp.XLabel
	p.Y.Label.Text = lp.YLabel
	if lp.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = decadeTicks{}
	}
	if lp.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = decadeTicks{}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = -vg.Points(8)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())
	floor := lp.YFloor
	if floor == 0 {
		floor = 1e-300
	}
	for i, s := range lp.Series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("report: series %q has %d x and %d y values", s.Name, len(s.X), len(s.Y))
		}
		xys := make(plotter.XYs, 0, len(s.X))
		for j := range s.X {
			x, y := s.X[j], s.Y[j]
			if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(y, 0) {
				continue
			}
			if lp.LogX && x <= 0 {
				continue
			}
			if lp.LogY && y < floor {
				continue
			}
			xys = append(xys, plotter.XY{X: x, Y: y})
		}
		if len(xys) == 0 {
			continue
		}
		c := palette[i%len(palette)]
		if s.Points {
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle.Color = c
			sc.GlyphStyle.Radius = vg.Points(3)
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(sc)
			p.Legend.Add(s.Name, sc)
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = c
		l.Width = vg.Points(1.5)
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	if lp.LogX {
		p.X.Min, p.X.Max = logRange(p.X.Min, p.X.Max)
	}
	if lp.LogY {
		p.Y.Min, p.Y.Max = logRange(p.Y.Min, p.Y.Max)
	}
	return p, nil
}

// logRange returns a range a log axis can draw. NB: gonum leaves an axis
// without data at [+Inf, -Inf] and widens an empty range [x, x] to
// [x-1, x+1] when drawing; either panics on a log scale ("Values must be
// greater than 0") when no series had a point (an experiment that measured
// nothing) or every point sat at one x below 1 (a single repair). The first
// gets one decade, the second a decade on each side.
func logRange(lo, hi float64) (float64, float64) {
	switch {
	case !(lo > 0) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || hi < lo:
		return 1, 10
	case lo == hi:
		return lo / 10, hi * 10
	}
	return lo, hi
}

// decadeTicks marks every power of ten of a log axis and labels at most about
// eight of them ("1e-9"), so that axes spanning 30 decades stay readable.
type decadeTicks struct{}

func (decadeTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 || max <= min {
		return nil
	}
	lo, hi := int(math.Floor(math.Log10(min))), int(math.Ceil(math.Log10(max)))
	step := (hi - lo + 7) / 8
	if step < 1 {
		step = 1
	}
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		v := math.Pow(10, float64(e))
		if v < min || v > max {
			continue
		}
		label := ""
		if e%step == 0 {
			label = fmt.Sprintf("1e%d", e)
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}
