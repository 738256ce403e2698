package web

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/results"
)

type runPage struct {
	Run     results.Run
	Summary []kv
	Params  []kv
	Steps   []results.Step
	Plots   []namedPlot
	Label   string
}

// runWithSteps loads run id and its ramp stages for a request.
func (d *Dashboard) runWithSteps(r *http.Request, id int64) (results.Run, []results.Step, error) {
	run, err := d.o.Store.Get(r.Context(), id)
	if err != nil {
		return results.Run{}, nil, err
	}
	steps, err := d.o.Store.Steps(r.Context(), id)
	return run, steps, err
}

func (d *Dashboard) serveRun(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	run, steps, err := d.runWithSteps(r, id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	plots, err := d.runPlots(r.Context(), []results.Run{run}, [][]results.Step{steps})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, "run.html", runPage{Run: run, Summary: flatten(run.Kind, decodeJSON(run.Summary)),
		Params: flatten(run.Kind, decodeJSON(run.Params)),
		Steps:  steps, Plots: plots, Label: protoLabel(run)})
}

// stepSeries makes one series per run of f(step) against x(step).
func stepSeries(runs []results.Run, steps [][]results.Step, name func(results.Run) string,
	x, y func(results.Step) float64, kind string) []series {
	var out []series
	for i, run := range runs {
		if run.Kind != kind {
			continue
		}
		s := series{Name: name(run), Line: true}
		for _, st := range steps[i] {
			s.X = append(s.X, x(st))
			s.Y = append(s.Y, y(st))
		}
		out = append(out, s)
	}
	return out
}

// runPlots draws the plots of one run, or the overlaid plots of several
// (compare). Each run is a series named after it.
func (d *Dashboard) runPlots(ctx context.Context, runs []results.Run, steps [][]results.Step) ([]namedPlot, error) {
	name := func(r results.Run) string {
		if len(runs) == 1 {
			return ""
		}
		return fmt.Sprintf("#%d %s", r.ID, r.Site)
	}
	expected := func(s results.Step) float64 { return s.Expected }
	jobs := func(s results.Step) float64 { return float64(s.Jobs) }
	specs := []plotSpec{
		{ID: "open-rate", Title: "Observed against expected open rate", XLabel: "expected rate (Hz)",
			YLabel: "observed rate (Hz)", XUnit: "Hz", YUnit: "Hz", Diagonal: true,
			Series: stepSeries(runs, steps, name, expected, func(s results.Step) float64 { return s.Observed }, "open")},
		{ID: "open-failures", Title: "Failure fraction against expected rate", XLabel: "expected rate (Hz)",
			YLabel: "failed opens (%)", XUnit: "Hz", YUnit: "%", YMin0: true,
			Series: stepSeries(runs, steps, name, expected, func(s results.Step) float64 { return 100 * s.FailFrac }, "open")},
		{ID: "open-time", Title: "Open time (median) against expected rate", XLabel: "expected rate (Hz)",
			YLabel: "open time p50 (ms)", XUnit: "Hz", YUnit: "ms", YMin0: true,
			Series: stepSeries(runs, steps, name, expected, func(s results.Step) float64 { return s.P50 * 1000 }, "open")},
		{ID: "read-blocktime", Title: "Average block read time against jobs", XLabel: "jobs",
			YLabel: "mean block read time (ms)", XUnit: "jobs", YUnit: "ms", YMin0: true,
			Series: stepSeries(runs, steps, name, jobs, func(s results.Step) float64 { return 1000 * s.Mean }, "read")},
		{ID: "read-rate", Title: "Total read rate against jobs", XLabel: "jobs", YLabel: "read rate (MB/s)",
			XUnit: "jobs", YUnit: "MB/s", YMin0: true,
			Series: readRate(runs, steps, name)},
		{ID: "read-iowait", Title: "Time waiting for I/O against jobs", XLabel: "jobs",
			YLabel: "I/O wait (% of job time)", XUnit: "jobs", YUnit: "%", YMin0: true,
			Series: stepSeries(runs, steps, name, jobs, func(s results.Step) float64 { return 100 * s.IOWait }, "read")},
	}
	var out []namedPlot
	for _, sp := range specs {
		svg, err := renderSVG(sp)
		if err != nil {
			return nil, err
		}
		if svg != "" {
			out = append(out, namedPlot{ID: sp.ID, Title: sp.Title, SVG: svg})
		}
	}
	// Time series of every sample kind of the runs.
	ts, err := d.sampleSeries(ctx, runs, name)
	if err != nil {
		return nil, err
	}
	return append(out, ts...), nil
}

func readRate(runs []results.Run, steps [][]results.Step, name func(results.Run) string) []series {
	var out []series
	for i, run := range runs {
		if run.Kind != "read" {
			continue
		}
		obs := series{Name: strings.TrimSpace(name(run) + " observed"), Line: true}
		exp := series{Name: strings.TrimSpace(name(run) + " expected"), Line: true}
		for _, st := range steps[i] {
			obs.X, obs.Y = append(obs.X, float64(st.Jobs)), append(obs.Y, st.Observed/1e6)
			exp.X, exp.Y = append(exp.X, float64(st.Jobs)), append(exp.Y, st.Expected/1e6)
		}
		out = append(out, obs, exp)
	}
	return out
}

// sampleSeries draws, per sample kind, the operation times against time in
// the run.
func (d *Dashboard) sampleSeries(ctx context.Context, runs []results.Run, name func(results.Run) string) ([]namedPlot, error) {
	byKind := map[string][]series{}
	var kinds []string
	for _, run := range runs {
		ks := []string{run.Kind}
		if run.Kind != "open" && run.Kind != "read" {
			var err error
			if ks, err = d.sampleKinds(ctx, run.ID); err != nil {
				return nil, err
			}
		}
		// A run from several nodes (bench agents) has a series per node.
		nodes, err := d.o.Store.Nodes(ctx, run.ID)
		if err != nil {
			return nil, err
		}
		if len(nodes) == 0 {
			nodes = []string{""}
		}
		for _, k := range ks {
			for _, node := range nodes {
				t, v, err := d.o.Store.SampleSeries(ctx, run.ID, k, node, 500)
				if err != nil {
					return nil, err
				}
				if len(t) == 0 {
					continue
				}
				s := series{Name: name(run), X: t}
				if node != "" {
					s.Name += " · node " + node
				}
				for _, x := range v {
					s.Y = append(s.Y, x*1000)
				}
				if _, ok := byKind[k]; !ok {
					kinds = append(kinds, k)
				}
				byKind[k] = append(byKind[k], s)
			}
		}
	}
	var out []namedPlot
	for _, k := range kinds {
		id := "series-" + k
		title := fmt.Sprintf("%s time during the run", k)
		svg, err := renderSVG(plotSpec{ID: id, Title: title, XLabel: "time in run (s)", YLabel: k + " time (ms)",
			XUnit: "s", YUnit: "ms", Series: byKind[k], YMin0: true})
		if err != nil {
			return nil, err
		}
		if svg != "" {
			out = append(out, namedPlot{ID: id, Title: title, SVG: svg})
		}
	}
	return out, nil
}

// sampleKinds lists the sample kinds of a run (io, root and functional
// runs have several), from a bounded look at its samples.
func (d *Dashboard) sampleKinds(ctx context.Context, id int64) ([]string, error) {
	ss, err := d.o.Store.Samples(ctx, id, results.SampleFilter{Limit: 2000})
	if err != nil {
		return nil, err
	}
	var ks []string
	for _, s := range ss {
		if !slices.Contains(ks, s.Kind) {
			ks = append(ks, s.Kind)
		}
	}
	return ks, nil
}

// servePlot serves one plot of a run as an SVG file:
// /ui/plot/run/{id}/{name}.svg, name as the run page's plot IDs.
func (d *Dashboard) servePlot(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	name, ok := strings.CutSuffix(r.PathValue("name"), ".svg")
	if !ok {
		d.fail(w, r, badRequest("plot names end in .svg"))
		return
	}
	run, steps, err := d.runWithSteps(r, id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	plots, err := d.runPlots(r.Context(), []results.Run{run}, [][]results.Step{steps})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	for _, p := range plots {
		if p.ID == name {
			writeSVGFile(w, p)
			return
		}
	}
	httpx.WriteError(w, http.StatusNotFound, fmt.Sprintf("web: run %d has no plot %q", id, name))
}

// writeSVGFile answers with p as an SVG file of its own.
func writeSVGFile(w http.ResponseWriter, p namedPlot) {
	w.Header().Set("Content-Type", "image/svg+xml")
	// The page captions the plot; the file names it in <title>.
	svg := strings.Replace(string(p.SVG), ">", ">\n<title>"+template.HTMLEscapeString(p.Title)+"</title>", 1)
	_, _ = w.Write([]byte(`<?xml version="1.0"?>` + "\n" + svg))
}
