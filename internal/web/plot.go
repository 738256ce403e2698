package web

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// PointClass is the class of every data point's <circle> in the plots'
// SVG: the browser test counts them, and so can anyone scripting the page.
const PointClass = "lf-pt"

// series is one set of points of a plot.
type series struct {
	Name string
	X, Y []float64
	// Line joins the points in X order (time series, curves over a ramp).
	Line bool
	// Labels, when set, name each point in its tooltip (a file's path)
	// in place of the series' name.
	Labels []string
}

// plotSpec describes one plot.
type plotSpec struct {
	// ID names the plot (data-plot attribute, file name of its SVG URL).
	ID string
	// Title is the plot's heading. The page shows it as the figure's
	// caption, so the SVG does not draw it again.
	Title          string
	XLabel, YLabel string
	// XUnit and YUnit follow the values in the points' tooltips ("ms").
	XUnit, YUnit string
	Series       []series
	// Diagonal draws the y = x line (observed against expected).
	Diagonal bool
	// YMin0 starts the y axis at 0 (rates, fractions).
	YMin0 bool
	// Ago marks X as seconds before now (negative): the axis is drawn in
	// seconds or minutes ago, whichever reads better for the span, and
	// XLabel is replaced.
	Ago bool
	// LogX and LogY draw that axis on a log scale, for quantities that
	// span decades (read sizes from bytes to MiB, reads from 1 to
	// 10^5); points not above zero are left out. The ticks fall on
	// powers of ten, or of two for an axis in bytes (unit "B", labelled
	// "64 KiB"). A log Y axis clips no outlier.
	LogX, LogY bool
	// RefName, when set, draws a dashed horizontal line at y = RefY
	// across the plot, named in the legend ("whole file read once").
	RefY    float64
	RefName string
	// W and H are the size in points of the data area with its axes
	// (the legend goes below it); zero: 640 x 280. The SVG scales to its
	// container's width (viewBox), so they set the aspect ratio and the
	// type size relative to the plot.
	W, H vg.Length
}

// palette is colour-blind friendly (Okabe-Ito), in the order series get it.
var palette = []color.RGBA{
	{0, 114, 178, 255}, {213, 94, 0, 255}, {0, 158, 115, 255}, {204, 121, 167, 255},
	{230, 159, 0, 255}, {86, 180, 233, 255}, {0, 0, 0, 255}, {240, 228, 66, 255},
}

func colorOf(i int) color.RGBA { return palette[i%len(palette)] }

// pointsPlotter draws nothing itself: it records where its points fall on
// the canvas, and renderSVG writes them as classed <circle> elements after
// gonum has drawn the axes (vgsvg gives its paths no classes). Points
// above clip (an outlier) are recorded at the top edge, marked clipped.
type pointsPlotter struct {
	xys    plotter.XYs // where the points go (log10 of a value on a log axis)
	raw    plotter.XYs // the values, for the tooltips
	labels []string    // per point, or nil
	color  color.RGBA
	name   string
	clip   float64 // +Inf: none
	out    *[]placed
}

type placed struct {
	x, y    float64 // canvas points, origin bottom-left
	color   color.RGBA
	series  string
	vx, vy  float64
	label   string // the point's own name in its tooltip; "": series
	clipped bool
}

func (pp *pointsPlotter) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	for i, p := range pp.xys {
		y, clipped := p.Y, p.Y > pp.clip
		if clipped {
			y = pp.clip
		}
		var label string
		if i < len(pp.labels) {
			label = pp.labels[i]
		}
		*pp.out = append(*pp.out, placed{x: trX(p.X).Points(), y: trY(y).Points(), color: pp.color,
			series: pp.name, vx: pp.raw[i].X, vy: pp.raw[i].Y, label: label, clipped: clipped})
	}
}

func (pp *pointsPlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = plotter.XYRange(pp.xys)
	return xmin, xmax, math.Min(ymin, pp.clip), math.Min(ymax, pp.clip)
}

func (pp *pointsPlotter) Thumbnail(c *draw.Canvas) {
	pt := vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: (c.Min.Y + c.Max.Y) / 2}
	c.DrawGlyph(draw.GlyphStyle{Color: pp.color, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}, pt)
}

func sans(f *font.Font) { f.Variant = "Sans" }

// outlierClip returns the y above which points are outliers, drawn at
// the top edge with a marker so that one slow request does not squash
// every other point into the x axis: 1.5 times the largest value within
// 4 times the 90th percentile, when some value lies beyond that. +Inf
// when nothing stands out (or too few points to tell).
func outlierClip(ys []float64) float64 {
	if len(ys) < 5 {
		return math.Inf(1)
	}
	s := slices.Clone(ys)
	slices.Sort(s)
	q := s[(len(s)-1)*9/10]
	if q <= 0 || s[len(s)-1] <= 4*q {
		return math.Inf(1)
	}
	keep := q
	for _, v := range s {
		if v <= 4*q {
			keep = v
		}
	}
	return 1.5 * keep
}

// plainTicks are gonum's ticks labelled without exponent notation
// (gonum writes 1e+07): plain decimals, "M" and "G" for millions and
// billions.
var plainTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = tickLabel(ticks[i].Value)
		}
	}
	return ticks
})

func tickLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', -1, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a < 1e-9:
		return "0"
	}
	// Round away float noise (0.30000000000000004) before printing.
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 10, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// logAxis returns the range, in log10 of the values, of a log axis
// holding lo..hi (both above zero), widened to whole steps so that both
// ends carry a label, and its ticks: at powers of 10 (a step of one to
// six decades, so that at most eight are labelled, with unlabelled ticks
// at 2..9 times each power when the step is one decade), or, for bytes
// (unit "B"), at powers of 2 labelled with binary prefixes (1 KiB, 8 KiB,
// 64 KiB).
//
// The points are drawn at log10 of their values on a linear axis rather
// than through plot.LogScale: gonum places the axis label's glyph box at
// the arithmetic middle of the range, which on a log scale is near one
// end, and pads the plot for a label that is not there.
func logAxis(lo, hi float64, unit string) (axMin, axMax float64, ticks plot.Ticker) {
	base, steps, label := 10.0, []int{1, 2, 3, 4, 6}, tickLabel
	if unit == "B" {
		base, steps = 2, []int{1, 2, 3, 5, 10, 20}
		label = func(v float64) string { return fmtBytes(int64(math.Round(v))) }
	}
	logb := func(v float64) float64 { return math.Log(v) / math.Log(base) }
	var klo, khi, step int
	for _, step = range steps {
		klo = int(math.Floor(logb(lo)/float64(step) + 1e-9))
		khi = int(math.Ceil(logb(hi)/float64(step) - 1e-9))
		if khi == klo {
			khi++
		}
		if khi-klo <= 8 {
			break
		}
	}
	pow := func(k int) float64 { return math.Pow(base, float64(k*step)) }
	// A margin of 3 % beyond the end ticks keeps the points at a power
	// off the frame and the end labels inside the picture (browsers
	// often set them in a font wider than the one gonum measured).
	axMin, axMax = math.Log10(pow(klo)), math.Log10(pow(khi))
	pad := 0.03 * (axMax - axMin)
	return axMin - pad, axMax + pad, plot.TickerFunc(func(_, _ float64) []plot.Tick {
		var out []plot.Tick
		for k := klo; k <= khi; k++ {
			v := pow(k)
			out = append(out, plot.Tick{Value: math.Log10(v), Label: label(v)})
			if base == 10 && step == 1 && k < khi {
				for m := 2; m < 10; m++ {
					out = append(out, plot.Tick{Value: math.Log10(v * float64(m))})
				}
			}
		}
		return out
	})
}

// agoTicks labels an axis of seconds before now in unit seconds (1 or
// 60): "now", then how long ago.
func agoTicks(unit float64) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		ticks := plot.DefaultTicks{}.Ticks(lo/unit, hi/unit)
		for i := range ticks {
			if ticks[i].Label != "" {
				ticks[i].Label = tickLabel(-ticks[i].Value)
				if ticks[i].Label == "0" {
					ticks[i].Label = "now"
				}
			}
			ticks[i].Value *= unit
		}
		return ticks
	})
}

// renderSVG draws spec as an SVG document for inline use (no XML
// header) that fills its container's width, its points as <circle
// class="lf-pt">, the legend below the data. It returns "" when the plot
// has no finite points.
func renderSVG(spec plotSpec) (template.HTML, error) {
	p := plot.New()
	p.X.Label.Text = spec.XLabel
	p.Y.Label.Text = spec.YLabel
	for _, f := range []*font.Font{&p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font} {
		sans(f)
	}
	p.X.Label.TextStyle.Font.Size = vg.Points(10)
	p.Y.Label.TextStyle.Font.Size = vg.Points(10)
	p.X.Tick.Label.Font.Size = vg.Points(9)
	p.Y.Tick.Label.Font.Size = vg.Points(9)
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks, plainTicks
	p.Add(plotter.NewGrid())
	leg := plot.NewLegend()
	sans(&leg.TextStyle.Font)
	leg.TextStyle.Font.Size = vg.Points(9)
	leg.Top, leg.Left = true, true
	leg.Padding = vg.Points(2)

	// usable: a point the axes can show (a log axis has no place for
	// zero or below).
	usable := func(s series, k int) bool {
		return k < len(s.Y) && finite(s.X[k]) && finite(s.Y[k]) &&
			(!spec.LogX || s.X[k] > 0) && (!spec.LogY || s.Y[k] > 0)
	}
	var all []float64
	for _, s := range spec.Series {
		for k := range s.X {
			if usable(s, k) {
				all = append(all, s.Y[k])
			}
		}
	}
	if len(all) == 0 {
		return "", nil
	}
	clip := outlierClip(all)
	if spec.LogY {
		clip = math.Inf(1) // a log axis has room for the outliers
	}

	// at is where a value goes on an axis: its log10 on a log axis.
	at := func(log bool, v float64) float64 {
		if log {
			return math.Log10(v)
		}
		return v
	}
	var pts []placed
	xmin, ymin := math.Inf(1), math.Inf(1)
	xmax, ymax := math.Inf(-1), math.Inf(-1)
	for i, s := range spec.Series {
		var xys, raw plotter.XYs
		var labels []string
		for k := range s.X {
			if usable(s, k) {
				xys = append(xys, plotter.XY{X: at(spec.LogX, s.X[k]), Y: at(spec.LogY, s.Y[k])})
				raw = append(raw, plotter.XY{X: s.X[k], Y: s.Y[k]})
				if k < len(s.Labels) {
					labels = append(labels, s.Labels[k])
				} else if s.Labels != nil {
					labels = append(labels, "")
				}
				xmin, ymin = math.Min(xmin, s.X[k]), math.Min(ymin, s.Y[k])
				xmax, ymax = math.Max(xmax, s.X[k]), math.Max(ymax, math.Min(s.Y[k], clip))
			}
		}
		if len(xys) == 0 {
			continue
		}
		c := colorOf(i)
		if s.Line && len(xys) > 1 {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return "", fmt.Errorf("web: plot %s: %w", spec.ID, err)
			}
			l.Color = c
			l.Width = vg.Points(1)
			p.Add(l)
		}
		pp := &pointsPlotter{xys: xys, raw: raw, labels: labels, color: c, name: s.Name, clip: clip, out: &pts}
		p.Add(pp)
		if s.Name != "" {
			leg.Add(s.Name, pp)
		}
	}
	if spec.RefName != "" && (!spec.LogY || spec.RefY > 0) {
		ymin, ymax = math.Min(ymin, spec.RefY), math.Max(ymax, spec.RefY)
	}
	if spec.LogX {
		p.X.Min, p.X.Max, p.X.Tick.Marker = logAxis(xmin, xmax, spec.XUnit)
	}
	if spec.LogY {
		p.Y.Min, p.Y.Max, p.Y.Tick.Marker = logAxis(ymin, ymax, spec.YUnit)
	}
	if spec.RefName != "" && (!spec.LogY || spec.RefY > 0) {
		ref, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: at(spec.LogY, spec.RefY)}, {X: p.X.Max, Y: at(spec.LogY, spec.RefY)}})
		if err != nil {
			return "", fmt.Errorf("web: plot %s: %w", spec.ID, err)
		}
		ref.Color = color.Gray{Y: 120}
		ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ref)
		leg.Add(spec.RefName, ref)
	}
	if spec.Diagonal {
		top := math.Max(xmax, ymax)
		if top <= 0 {
			top = 1
		}
		d, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: top, Y: top}})
		if err != nil {
			return "", fmt.Errorf("web: plot %s: %w", spec.ID, err)
		}
		d.Color = color.Gray{Y: 120}
		d.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(d)
		leg.Add("y = x", d)
		p.X.Min, p.Y.Min = 0, 0
	}
	if spec.YMin0 && !spec.LogY {
		p.Y.Min = math.Min(p.Y.Min, 0)
		if p.Y.Max <= p.Y.Min {
			p.Y.Max = p.Y.Min + 1
		}
	}
	if !math.IsInf(clip, 1) {
		p.Y.Max = clip
		p.Y.Label.Text += " · ▲ above " + strings.TrimSpace(sig3(clip)+" "+spec.YUnit)
	}
	if spec.Ago {
		unit, label := 1.0, "seconds ago"
		if p.X.Min < -180 {
			unit, label = 60, "minutes ago"
		}
		p.X.Max = 0 // the axis ends at "now"
		p.X.Tick.Marker = agoTicks(unit)
		p.X.Label.Text = label // tipValue writes the tooltips' "40s ago"
	}
	return drawSVG(p, &leg, spec, &pts)
}

// drawSVG draws p with its legend in a strip below it; drawing fills pts.
func drawSVG(p *plot.Plot, leg *plot.Legend, spec plotSpec, pts *[]placed) (template.HTML, error) {
	w, h := spec.W, spec.H
	if w == 0 {
		w, h = 640, 280
	}
	var legH vg.Length
	probe := draw.New(vgsvg.New(w, h))
	if r := leg.Rectangle(probe); r.Max.Y > r.Min.Y {
		legH = r.Max.Y - r.Min.Y + vg.Points(8)
	}
	cv := vgsvg.New(w, h+legH)
	dc := draw.New(cv)
	top := draw.Crop(dc, 0, 0, legH, 0)
	p.Draw(top)
	if legH > 0 {
		strip := draw.Crop(dc, vg.Points(40), 0, 0, -(h + vg.Points(4)))
		leg.Draw(strip)
	}
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("web: plot %s: %w", spec.ID, err)
	}
	return template.HTML(injectPoints(buf.String(), spec, *pts)), nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

var svgSizeRE = regexp.MustCompile(`^<svg width="[^"]*" height="[^"]*"`)

// injectPoints strips the XML header, makes the <svg> fill its
// container's width (its viewBox keeps the aspect ratio), classes it and
// adds the points inside vgsvg's outer group (whose transform flips the y
// axis, so the recorded canvas coordinates apply as they are).
func injectPoints(svg string, spec plotSpec, pts []placed) string {
	if i := strings.Index(svg, "<svg"); i > 0 {
		svg = svg[i:]
	}
	svg = svgSizeRE.ReplaceAllString(svg, fmt.Sprintf(`<svg class="lf-plot" data-plot=%q data-points="%d" `+
		`width="100%%" preserveAspectRatio="xMidYMid meet"`, template.HTMLEscapeString(spec.ID), len(pts)))
	end := strings.LastIndex(svg, "</g>")
	if end < 0 {
		return svg
	}
	var b strings.Builder
	b.Grow(len(svg) + 128*len(pts))
	b.WriteString(svg[:end])
	b.WriteString(`<g class="lf-points">` + "\n")
	for _, p := range pts {
		fill := fmt.Sprintf("#%02x%02x%02x", p.color.R, p.color.G, p.color.B)
		clipped := ""
		if p.clipped {
			clipped = ` data-clipped="1"`
			// An upward triangle over the point says "off the scale".
			fmt.Fprintf(&b, `<path d="M%.2f %.2fl-4 -7h8z" fill="%s"/>`+"\n", p.x, p.y+1, fill)
		}
		fmt.Fprintf(&b, `<circle class="%s" cx="%.2f" cy="%.2f" r="2.6" fill="%s" fill-opacity="0.85"`+
			` data-series="%s"%s><title>%s: %s, %s</title></circle>`+"\n",
			PointClass, p.x, p.y, fill, template.HTMLEscapeString(p.series), clipped,
			template.HTMLEscapeString(cmp.Or(p.label, p.series)), tipValue(p.vx, spec.XUnit, spec.Ago),
			tipValue(p.vy, spec.YUnit, false))
	}
	b.WriteString("</g>\n")
	b.WriteString(svg[end:])
	return b.String()
}

// tipValue is a point's coordinate in its tooltip, with its unit. A time
// ago reads as a duration ("40s ago", "12m30s ago"); a value with more
// digits than a person reads at a glance gets about three.
func tipValue(v float64, unit string, ago bool) string {
	if ago {
		return fmtDur(time.Duration(max(-v, 0)*float64(time.Second))) + " ago"
	}
	if unit == "B" {
		return fmtBytes(int64(math.Round(v)))
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if a := math.Abs(v); a != 0 && (a < 0.01 || a >= 1e6) || len(s) > 6 {
		s = sig3(v)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}
