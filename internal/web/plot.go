package web

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"strings"

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
}

// plotSpec describes one plot.
type plotSpec struct {
	// ID names the plot (data-plot attribute, file name of its SVG URL).
	ID                    string
	Title, XLabel, YLabel string
	Series                []series
	// Diagonal draws the y = x line (observed against expected).
	Diagonal bool
	// YMin0 starts the y axis at 0 (rates, fractions).
	YMin0 bool
	// W and H are the size in points; zero: 420 x 260.
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
// gonum has drawn the axes (vgsvg gives its paths no classes).
type pointsPlotter struct {
	xys   plotter.XYs
	color color.RGBA
	name  string
	out   *[]placed
}

type placed struct {
	x, y   float64 // canvas points, origin bottom-left
	color  color.RGBA
	series string
	vx, vy float64
}

func (pp *pointsPlotter) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	for _, p := range pp.xys {
		*pp.out = append(*pp.out, placed{x: trX(p.X).Points(), y: trY(p.Y).Points(), color: pp.color,
			series: pp.name, vx: p.X, vy: p.Y})
	}
}

func (pp *pointsPlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	return plotter.XYRange(pp.xys)
}

func (pp *pointsPlotter) Thumbnail(c *draw.Canvas) {
	pt := vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: (c.Min.Y + c.Max.Y) / 2}
	c.DrawGlyph(draw.GlyphStyle{Color: pp.color, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}, pt)
}

func sans(f *font.Font) { f.Variant = "Sans" }

// renderSVG draws spec as an SVG document for inline use (no XML
// header), its points as <circle class="lf-pt">. It returns "" when the
// plot has no finite points.
func renderSVG(spec plotSpec) (template.HTML, error) {
	p := plot.New()
	p.Title.Text = spec.Title
	p.X.Label.Text = spec.XLabel
	p.Y.Label.Text = spec.YLabel
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		sans(f)
	}
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.TextStyle.Font.Size = vg.Points(9)
	p.Y.Label.TextStyle.Font.Size = vg.Points(9)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	p.Y.Tick.Label.Font.Size = vg.Points(8)
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(6), vg.Points(-4)
	p.Add(plotter.NewGrid())

	var pts []placed
	n, legend := 0, 0
	xmax, ymax := math.Inf(-1), math.Inf(-1)
	for i, s := range spec.Series {
		var xys plotter.XYs
		for k := range s.X {
			if k < len(s.Y) && finite(s.X[k]) && finite(s.Y[k]) {
				xys = append(xys, plotter.XY{X: s.X[k], Y: s.Y[k]})
				xmax, ymax = math.Max(xmax, s.X[k]), math.Max(ymax, s.Y[k])
			}
		}
		if len(xys) == 0 {
			continue
		}
		n += len(xys)
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
		pp := &pointsPlotter{xys: xys, color: c, name: s.Name, out: &pts}
		p.Add(pp)
		if s.Name != "" {
			p.Legend.Add(s.Name, pp)
			legend++
		}
	}
	if n == 0 {
		return "", nil
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
		p.Legend.Add("y = x", d)
		legend++
		p.X.Min, p.Y.Min = 0, 0
	}
	if spec.YMin0 {
		p.Y.Min = math.Min(p.Y.Min, 0)
		if p.Y.Max <= p.Y.Min {
			p.Y.Max = p.Y.Min + 1
		}
	}
	if legend > 0 {
		// Head-room so the legend (top left) does not hide points.
		p.Y.Max += 0.1 * float64(min(legend, 6)) * (p.Y.Max - p.Y.Min)
	}
	w, h := spec.W, spec.H
	if w == 0 {
		w, h = 420, 260
	}
	cv := vgsvg.New(w, h)
	p.Draw(draw.New(cv))
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("web: plot %s: %w", spec.ID, err)
	}
	return template.HTML(injectPoints(buf.String(), spec.ID, pts)), nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// injectPoints strips the XML header, classes the <svg> element and adds
// the points inside vgsvg's outer group (whose transform flips the y axis,
// so the recorded canvas coordinates apply as they are).
func injectPoints(svg, id string, pts []placed) string {
	if i := strings.Index(svg, "<svg"); i > 0 {
		svg = svg[i:]
	}
	svg = strings.Replace(svg, "<svg ", fmt.Sprintf(`<svg class="lf-plot" data-plot=%q data-points="%d" `,
		template.HTMLEscapeString(id), len(pts)), 1)
	end := strings.LastIndex(svg, "</g>")
	if end < 0 {
		return svg
	}
	var b strings.Builder
	b.Grow(len(svg) + 96*len(pts))
	b.WriteString(svg[:end])
	b.WriteString(`<g class="lf-points">` + "\n")
	for _, p := range pts {
		fmt.Fprintf(&b, `<circle class="%s" cx="%.2f" cy="%.2f" r="2.6" fill="#%02x%02x%02x" fill-opacity="0.85"`+
			` data-series="%s"><title>%s: %.4g, %.4g</title></circle>`+"\n",
			PointClass, p.x, p.y, p.color.R, p.color.G, p.color.B, template.HTMLEscapeString(p.series),
			template.HTMLEscapeString(p.series), p.vx, p.vy)
	}
	b.WriteString("</g>\n")
	b.WriteString(svg[end:])
	return b.String()
}
