package bench

import (
	"context"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

// SweepPoint is both designs measured at one concurrency.
type SweepPoint struct {
	Concurrency int     `json:"concurrency"`
	Engine      *Result `json:"engine"`
	Classic     *Result `json:"classic"`
	// Ratio is engine grants/s over classic grants/s.
	Ratio float64 `json:"ratio"`
}

// Ratio is a's grants/s over b's, or 0 when b has none.
func Ratio(a, b *Result) float64 {
	if b == nil || b.GrantsPerSec == 0 {
		return 0
	}
	return round(a.GrantsPerSec/b.GrantsPerSec, 2)
}

// Sweep measures both designs at each concurrency in levels, engine first,
// and calls each (if not nil) after every level.
func Sweep(ctx context.Context, o Options, levels []int, each func(SweepPoint)) ([]SweepPoint, error) {
	var out []SweepPoint
	for _, c := range levels {
		o.Concurrency = c
		e, err := Run(ctx, Engine, o)
		if err != nil {
			return out, err
		}
		cl, err := Run(ctx, Classic, o)
		if err != nil {
			return out, err
		}
		p := SweepPoint{Concurrency: c, Engine: e, Classic: cl, Ratio: Ratio(e, cl)}
		out = append(out, p)
		if each != nil {
			each(p)
		}
	}
	return out, nil
}

// The plot's geometry, in SVG user units.
const (
	plotW, plotH                         = 980, 430
	panelW                               = 490
	padLeft, padRight, padTop, padBottom = 78, 24, 78, 56
)

var seriesStyle = []struct {
	name, color string
	mode        Mode
}{
	{"engine (hongbao)", "#c62828", Engine},
	{"classic (EVAL per grab)", "#1565c0", Classic},
}

// WriteSVG draws a sweep: grants/s against concurrency on the left, p99
// latency against concurrency on the right, both with a log2 concurrency
// axis, one line per design. It is plain SVG 1.1, written by hand.
func WriteSVG(w io.Writer, title, subtitle string, points []SweepPoint) error {
	if len(points) == 0 {
		return fmt.Errorf("bench: nothing to plot")
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		plotW, plotH, plotW, plotH)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="%d" y="22" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", plotW/2, html.EscapeString(title))
	if subtitle != "" {
		p(`<text x="%d" y="40" text-anchor="middle" fill="#555555">%s</text>`+"\n", plotW/2, html.EscapeString(subtitle))
	}

	x := make([]float64, len(points))
	for i, pt := range points {
		x[i] = float64(pt.Concurrency)
	}
	pick := func(f func(*Result) float64) [2][]float64 {
		var s [2][]float64
		for _, pt := range points {
			s[0] = append(s[0], f(pt.Engine))
			s[1] = append(s[1], f(pt.Classic))
		}
		return s
	}
	thr := pick(func(r *Result) float64 { return r.GrantsPerSec })
	lat := pick(func(r *Result) float64 { return r.P99Ms })

	panel(&b, 0, "Throughput", "grants per second", x, thr, false, formatCount)
	panel(&b, panelW, "p99 latency of a grab", "p99 latency, ms (log scale)", x, lat, true, formatMs)
	p("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// frame is where a chart is drawn and how its values map to the page.
type frame struct {
	left, right, top, bottom float64
	xlo, xhi                 float64 // log2 of the concurrency axis's ends
	yticks                   []float64
	py                       func(float64) float64
}

// px places concurrency v on the log2 x axis.
func (f *frame) px(v float64) float64 {
	return f.left + (math.Log2(v)-f.xlo)/(f.xhi-f.xlo)*(f.right-f.left)
}

// panel draws one chart at horizontal offset ox.
func panel(b *strings.Builder, ox int, title, ylabel string, xs []float64, ys [2][]float64, logY bool, label func(float64) string) {
	f := &frame{
		left: float64(ox + padLeft), right: float64(ox + panelW - padRight),
		top: float64(padTop), bottom: float64(plotH - padBottom),
	}
	f.xlo, f.xhi = log2Range(xs)
	var all []float64
	for _, s := range ys {
		for _, v := range s {
			if v > 0 {
				all = append(all, v)
			}
		}
	}
	if logY {
		f.logY(all)
	} else {
		f.linearY(all)
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p(`<g>`+"\n"+`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n",
		(f.left+f.right)/2, f.top-12, html.EscapeString(title))
	f.drawAxes(p, ox, ylabel, label)
	f.drawLines(p, xs, ys, logY)
	f.drawLegend(p)
	p("</g>\n")
}

// log2Range returns the whole powers of two around xs, at least one apart.
func log2Range(xs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range xs {
		lo, hi = math.Min(lo, math.Log2(v)), math.Max(hi, math.Log2(v))
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	return lo, hi
}

// logY sets a log10 y axis over the whole decades around all.
func (f *frame) logY(all []float64) {
	lo, hi := 1e-3, 1.0
	if len(all) > 0 {
		lo, hi = all[0], all[0]
		for _, v := range all {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi == dlo {
		dhi++
	}
	for d := dlo; d <= dhi; d++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, d); math.Log10(v) <= dhi+1e-9 && (m == 1 || dhi-dlo <= 3) {
				f.yticks = append(f.yticks, v)
			}
		}
	}
	f.py = func(v float64) float64 {
		v = math.Max(v, math.Pow(10, dlo))
		return f.bottom - (math.Log10(v)-dlo)/(dhi-dlo)*(f.bottom-f.top)
	}
}

// linearY sets a linear y axis from 0 to a nice maximum above all.
func (f *frame) linearY(all []float64) {
	hi := 1.0
	for _, v := range all {
		hi = math.Max(hi, v)
	}
	hi = niceCeil(hi * 1.05)
	step := niceCeil(hi / 6)
	for v := 0.0; v <= hi+step/1e6; v += step {
		f.yticks = append(f.yticks, v)
	}
	hi = f.yticks[len(f.yticks)-1]
	f.py = func(v float64) float64 { return f.bottom - v/hi*(f.bottom-f.top) }
}

// drawAxes draws the grid, the ticks, the frame and the axis labels.
func (f *frame) drawAxes(p func(string, ...any), ox int, ylabel string, label func(float64) string) {
	for _, v := range f.yticks {
		y := f.py(v)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", f.left, y, f.right, y)
		p(`<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", f.left-6, y, label(v))
	}
	for e := f.xlo; e <= f.xhi; e++ {
		v := math.Exp2(e)
		xx := f.px(v)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eeeeee"/>`+"\n", xx, f.top, xx, f.bottom)
		p(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", xx, f.bottom+16, strconv.FormatFloat(v, 'f', -1, 64))
	}
	p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#333333"/>`+"\n", f.left, f.top, f.right-f.left, f.bottom-f.top)
	p(`<text x="%.1f" y="%.1f" text-anchor="middle">concurrency (log2 scale)</text>`+"\n", (f.left+f.right)/2, f.bottom+38)
	p(`<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", float64(ox)+16, (f.top+f.bottom)/2, html.EscapeString(ylabel))
}

// drawLines draws one line with its points per design.
func (f *frame) drawLines(p func(string, ...any), xs []float64, ys [2][]float64, logY bool) {
	for i, st := range seriesStyle {
		var pts []string
		for j, v := range ys[i] {
			if logY && v <= 0 {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", f.px(xs[j]), f.py(v)))
		}
		p(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", st.color, strings.Join(pts, " "))
		for _, pt := range pts {
			xy := strings.Split(pt, ",")
			p(`<circle cx="%s" cy="%s" r="3.5" fill="%s"/>`+"\n", xy[0], xy[1], st.color)
		}
	}
}

// drawLegend draws the legend, top left inside the frame.
func (f *frame) drawLegend(p func(string, ...any)) {
	for i, st := range seriesStyle {
		y := f.top + 16 + float64(i)*18
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", f.left+10, y, f.left+34, y, st.color)
		p(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", f.left+22, y, st.color)
		p(`<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", f.left+40, y, html.EscapeString(st.name))
	}
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= v*(1-1e-12) {
			return m * e
		}
	}
	return 10 * e
}

func formatCount(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func formatMs(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
