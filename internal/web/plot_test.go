package web

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	svgTagRE  = regexp.MustCompile(`^<svg [^>]*>`)
	textRE    = regexp.MustCompile(`<text x="[^"]*" y="([^"]*)"[^>]*>([^<]*)</text>`)
	circleRE  = regexp.MustCompile(`<circle class="lf-pt" cx="[^"]*" cy="([^"]*)"[^>]*?( data-clipped="1")?>`)
	viewBoxRE = regexp.MustCompile(`viewBox="0 0 ([0-9.]+) ([0-9.]+)"`)
)

// svgTexts maps each <text> of an SVG to its height on the canvas
// (vgsvg flips y: the attribute is minus the canvas y).
func svgTexts(svg string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range textRE.FindAllStringSubmatch(svg, -1) {
		y, _ := strconv.ParseFloat(m[1], 64)
		out[m[2]] = -y
	}
	return out
}

// TestPlotLayout: plots read at a glance.
func TestPlotLayout(t *testing.T) {
	ramp := series{Name: "legend-probe", Line: true}
	for i := range 20 {
		ramp.X = append(ramp.X, float64(i))
		ramp.Y = append(ramp.Y, float64(i))
	}
	outlier := series{Name: "slow", X: ramp.X, Y: append([]float64{}, ramp.Y...)}
	outlier.Y[10] = 1000

	t.Run("full width", func(t *testing.T) {
		svg := mustRender(t, plotSpec{ID: "w", XLabel: "x (s)", YLabel: "y (ms)", Series: []series{ramp}})
		tag := svgTagRE.FindString(svg)
		if !strings.Contains(tag, `width="100%"`) || !viewBoxRE.MatchString(tag) || strings.Contains(tag, `pt"`) {
			t.Errorf("<svg> = %s, want width 100%% and a viewBox, no fixed size", tag)
		}
	})
	t.Run("legend below the data", func(t *testing.T) {
		svg := mustRender(t, plotSpec{ID: "l", XLabel: "xlabel", YLabel: "y (ms)", Diagonal: true, Series: []series{ramp}})
		tx := svgTexts(svg)
		for _, name := range []string{"legend-probe", "y = x"} {
			y, ok := tx[name]
			if !ok {
				t.Fatalf("no legend entry %q", name)
			}
			if y >= tx["xlabel"] {
				t.Errorf("legend entry %q at y %.1f, not below the x axis label (y %.1f)", name, y, tx["xlabel"])
			}
		}
	})
	t.Run("outlier clipped", func(t *testing.T) {
		svg := mustRender(t, plotSpec{ID: "o", XLabel: "x", YLabel: "y (ms)", YUnit: "ms", Series: []series{outlier}})
		vb := viewBoxRE.FindStringSubmatch(svg)
		h, _ := strconv.ParseFloat(vb[2], 64)
		lo, hi, clipped := math.Inf(1), math.Inf(-1), 0
		for _, m := range circleRE.FindAllStringSubmatch(svg, -1) {
			if m[2] != "" {
				clipped++
				continue
			}
			cy, _ := strconv.ParseFloat(m[1], 64)
			lo, hi = math.Min(lo, cy), math.Max(hi, cy)
		}
		if clipped != 1 {
			t.Errorf("clipped points = %d, want 1 (the outlier)", clipped)
		}
		if spread := (hi - lo) / h; spread < 0.4 {
			t.Errorf("the other points span %.0f%% of the height, want at least 40%%", 100*spread)
		}
		if !strings.Contains(svg, "▲ above") {
			t.Errorf("the y axis does not say where it clips")
		}
	})
	for _, c := range []struct {
		name, label string
		span        float64
	}{{"seconds ago", "seconds ago", 50}, {"minutes ago", "minutes ago", 1200}} {
		t.Run(c.name, func(t *testing.T) {
			s := series{Name: "ep", Line: true}
			for i := range 10 {
				s.X = append(s.X, -c.span*float64(9-i)/9)
				s.Y = append(s.Y, 3)
			}
			svg := mustRender(t, plotSpec{ID: "a", YLabel: "latency (ms)", Ago: true, Series: []series{s}})
			tx := svgTexts(svg)
			if _, ok := tx[c.label]; !ok {
				t.Errorf("no x label %q in %v", c.label, tx)
			}
			if _, ok := tx["now"]; !ok {
				t.Errorf("no tick \"now\" in %v", tx)
			}
			for txt := range tx {
				if strings.HasPrefix(txt, "-") || strings.Contains(txt, ".") && strings.Count(txt, "") > 6 {
					t.Errorf("tick label %q: want whole seconds or minutes ago", txt)
				}
			}
		})
	}
}

// TestNoCaptionRepeatsTitle: the SVG does not draw the title the
// figure's caption already shows.
func TestNoCaptionRepeatsTitle(t *testing.T) {
	srv, openID, _ := newServer(t)
	_, body := get(t, fmt.Sprintf("%s/ui/run/%d", srv.URL, openID))
	capRE := regexp.MustCompile(`<figure id="plot-([^"]+)"><figcaption><a [^>]*>([^<]+)</a></figcaption>(?s:(.*?))</figure>`)
	ms := capRE.FindAllStringSubmatch(body, -1)
	if len(ms) == 0 {
		t.Fatal("no captioned figures in the run page")
	}
	for _, m := range ms {
		if _, ok := svgTexts(m[3])[m[2]]; ok {
			t.Errorf("plot %s draws its caption %q again", m[1], m[2])
		}
	}
}

func mustRender(t *testing.T, spec plotSpec) string {
	t.Helper()
	svg, err := renderSVG(spec)
	if err != nil || svg == "" {
		t.Fatalf("renderSVG(%s) = %q, %v", spec.ID, svg, err)
	}
	return string(svg)
}
