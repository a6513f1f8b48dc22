package bench

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
)

// series is one curve: an implementation, and the values of the plot's
// Series fields.
type series struct {
	impl, name string // name: "weft" or "weft path=tcp"
	points     map[float64][]float64
}

// plot geometry, in SVG user units
const (
	svgW, svgH       = 760, 460
	padL, padR       = 70, 190
	padT, padB       = 40, 50
	plotW, plotH     = svgW - padL - padR, svgH - padT - padB
	legendX, legendY = svgW - padR + 15, padT + 5
)

var implColors = map[string]string{Weft: "#1f77b4", "mpich": "#d62728", "openmpi": "#2ca02c"}
var otherColors = []string{"#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
var dashes = []string{"", "6,3", "2,3", "8,3,2,3", "12,4"}

// PlotSVG draws p from lines: the median of each X value, a polyline per
// implementation and per distinct value of the Series fields, log scales as
// asked, axes with ticks, and a legend. ok is false when no line has data for
// it.
func PlotSVG(p Plot, lines []Line) (svg []byte, ok bool) {
	var curves []*series
	byName := map[string]*series{}
	for _, l := range lines {
		if l.Metric != p.Metric || !l.matches(p.Where) {
			continue
		}
		xs, ok := l.Field(p.X)
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(xs, 64)
		if err != nil || (p.LogX && x <= 0) || (p.LogY && l.Value <= 0) {
			continue
		}
		name := l.Impl
		for _, f := range p.Series {
			if v, ok := l.Field(f); ok {
				if isBytes(f) {
					v = HumanSize(v)
				}
				name += " " + f + "=" + v
			}
		}
		s := byName[name]
		if s == nil {
			s = &series{impl: l.Impl, name: name, points: map[float64][]float64{}}
			byName[name] = s
			curves = append(curves, s)
		}
		s.points[x] = append(s.points[x], l.Value)
	}
	if len(curves) == 0 {
		return nil, false
	}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range curves {
		for x, vs := range s.points {
			y, _ := Median(vs)
			xmin, xmax = min(xmin, x), max(xmax, x)
			ymin, ymax = min(ymin, y), max(ymax, y)
		}
	}
	unit := ""
	for _, l := range lines {
		if l.Metric == p.Metric && l.matches(p.Where) {
			unit = l.Unit
			break
		}
	}
	xa := newAxis(xmin, xmax, p.LogX, isBytes(p.X))
	ya := newAxis(ymin, ymax, p.LogY, false)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, esc(p.Title))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>`+"\n", padL, padT, plotW, plotH)
	for _, t := range xa.ticks {
		x := padL + xa.pos(t.v)*plotW
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`, x, padT, x, padT+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, padT+plotH+16, esc(t.label))
	}
	for _, t := range ya.ticks {
		y := padT + (1-ya.pos(t.v))*plotH
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, padL, y, padL+plotW, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y+4, esc(t.label))
	}
	xLabel := p.X
	if p.LogX {
		xLabel += " (log scale)"
	}
	yLabel := p.Metric + " (" + unit + ")"
	if p.LogY {
		yLabel += ", log scale"
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, svgH-12, esc(xLabel))
	fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n", padT+plotH/2, padT+plotH/2, esc(yLabel))
	colors := map[string]string{}
	dashOf := map[string]string{}
	for i, s := range curves {
		c, ok := implColors[s.impl]
		if !ok {
			if c, ok = colors[s.impl]; !ok {
				c = otherColors[len(colors)%len(otherColors)]
			}
		}
		colors[s.impl] = c
		rest := strings.TrimPrefix(s.name, s.impl)
		if _, ok := dashOf[rest]; !ok {
			dashOf[rest] = dashes[len(dashOf)%len(dashes)]
		}
		xs := make([]float64, 0, len(s.points))
		for x := range s.points {
			xs = append(xs, x)
		}
		sort.Float64s(xs)
		var pts []string
		for _, x := range xs {
			y, _ := Median(s.points[x])
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", padL+xa.pos(x)*plotW, padT+(1-ya.pos(y))*plotH))
		}
		dash := ""
		if d := dashOf[rest]; d != "" {
			dash = ` stroke-dasharray="` + d + `"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"><title>%s</title></polyline>`+"\n", c, dash, strings.Join(pts, " "), esc(s.name))
		for _, pt := range pts {
			x, y, _ := strings.Cut(pt, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`, x, y, c)
		}
		ly := legendY + i*18
		fmt.Fprintf(&b, "\n"+`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`, legendX, ly, legendX+24, ly, c, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", legendX+30, ly+4, esc(s.name))
	}
	b.WriteString("</svg>\n")
	return []byte(b.String()), true
}

func esc(s string) string { return html.EscapeString(s) }

type tick struct {
	v     float64
	label string
}

// axis maps values to [0, 1], linearly or by their logarithm.
type axis struct {
	lo, hi float64 // in the scale's own terms (log10 of the values for log)
	log    bool
	ticks  []tick
}

func newAxis(lo, hi float64, log, bytes bool) axis {
	a := axis{log: log}
	if log {
		base := 10.0
		if bytes {
			base = 2
		}
		lo, hi = math.Floor(math.Log(lo)/math.Log(base)), math.Ceil(math.Log(hi)/math.Log(base))
		if hi == lo {
			hi++
		}
		step := math.Max(1, math.Ceil((hi-lo)/10))
		// from the top down, so that the largest value has its label
		for e := hi; e >= lo; e -= step {
			v := math.Pow(base, e)
			label := FormatValue(v)
			if bytes {
				label = HumanSize(strconv.FormatFloat(v, 'f', 0, 64))
			}
			a.ticks = append([]tick{{v, label}}, a.ticks...)
		}
		a.lo, a.hi = lo*math.Log10(base), hi*math.Log10(base)
		return a
	}
	lo = math.Min(lo, 0)
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 5)
	hi = math.Ceil(hi/step) * step
	for v := lo; v <= hi+step/2; v += step {
		a.ticks = append(a.ticks, tick{v, FormatValue(v)})
	}
	a.lo, a.hi = lo, hi
	return a
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func (a axis) pos(v float64) float64 {
	if a.log {
		v = math.Log10(v)
	}
	return (v - a.lo) / (a.hi - a.lo)
}
