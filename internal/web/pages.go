package web

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/sitetest"
)

// benchKinds are the run kinds the runs table lists (functional runs of
// the scheduled tests have their own section).
var benchKinds = []string{"open", "read", "io", "root"}

// namedPlot is one rendered plot of a page.
type namedPlot struct {
	ID    string
	Title string
	SVG   template.HTML
	Note  string
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"dur": func(r results.Run) string {
		if r.Ended.IsZero() {
			return "—"
		}
		return fmtDur(r.Ended.Sub(r.Started))
	},
	"ms":  func(d time.Duration) string { return fmtMS(d.Seconds()) },
	"fms": func(ms float64) string { return fmtMS(ms / 1000) },
	"fs":  func(s float64) string { return fmtMS(s) },
	"hz":  fmtHz,
	"mbs": fmtMBps,
	"pct": fmtPct,
	"sec": func(s float64) string { return fmtDur(time.Duration(s * float64(time.Second))) },
	"rate": func(kind string, f float64) string {
		if kind == "open" {
			return fmtHz(f)
		}
		return fmtMBps(f)
	},
	"class": func(c string) string {
		switch c {
		case "ok":
			return "ok"
		case "to debug":
			return "bad"
		}
		return "none"
	},
	"figure": keyFigure,
	"label":  protoLabel,
}

// summaryMap decodes a run's summary.
func summaryMap(r results.Run) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Summary, &m)
	return m
}

func num(m map[string]any, k string) float64 {
	if v, ok := m[k].(float64); ok {
		return v
	}
	return math.NaN()
}

// keyFigure is the one number the runs table shows for a run.
func keyFigure(r results.Run) string {
	m := summaryMap(r)
	switch r.Kind {
	case "open":
		return fmt.Sprintf("%s of %s expected, %s failed", fmtHz(num(m, "observed_rate")), fmtHz(num(m, "expected_rate")),
			fmtPct(num(m, "fail_frac")))
	case "read":
		return fmt.Sprintf("%.0f of %.0f jobs sustained, block read %s", num(m, "sustained_last"), num(m, "target_jobs"),
			fmtMS(num(m, "mean_block_time")))
	case "io":
		if v, ok := m["verified"].(bool); ok && v {
			return "verified"
		}
		return "not verified"
	case "root":
		return fmt.Sprintf("%.0f calls", num(m, "calls"))
	}
	return ""
}

// protoLabel names the way a run reached its site, for the per-endpoint
// and per-protocol time series: the protocol from the target's scheme,
// and "via federator" when a site was pinned through one.
func protoLabel(r results.Run) string {
	u, err := url.Parse(r.Target)
	if err != nil {
		return r.Site
	}
	proto := u.Scheme
	if s, ok := endpoint.LookupScheme(u.Scheme); ok {
		proto = s.Protocol
	}
	if r.Site != "" && r.Site != u.Host {
		return fmt.Sprintf("%s via federator → %s", proto, r.Site)
	}
	return fmt.Sprintf("%s %s", proto, cmp.Or(u.Host, r.Site))
}

// recentBenchRuns lists the newest bench runs of every bench kind.
func (d *Dashboard) recentBenchRuns(ctx context.Context, n int) ([]results.Run, error) {
	var all []results.Run
	for _, k := range benchKinds {
		runs, err := d.o.Store.List(ctx, results.Filter{Kind: k, Limit: n})
		if err != nil {
			return nil, err
		}
		all = append(all, runs...)
	}
	slices.SortFunc(all, func(a, b results.Run) int { return cmp.Compare(b.ID, a.ID) })
	if len(all) > n {
		all = all[:n]
	}
	return all, nil
}

// siteRow is one row of the site table.
type siteRow struct {
	results.SiteStatus
	History []results.Run
}

type overview struct {
	Now       time.Time
	Endpoints []federation.EndpointStatus
	Excluded  map[string]bool
	Tests     *sitetest.Status
	Sites     []siteRow
	// Removed are the sites of scheduled tests whose endpoint a reload
	// removed: out of the tables, their latest run still linked.
	Removed    []results.SiteStatus
	Runs       []results.Run
	Plots      []namedPlot
	HealthPlot []namedPlot
	// Routes are the ways of reaching a site the protocol plots show;
	// Missing the ones no run has tried yet.
	Routes, Missing []string
}

func (d *Dashboard) serveOverview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ov := overview{Now: time.Now(), Excluded: map[string]bool{}}
	var current map[string]bool // endpoint names; nil: no federator, keep all
	if f := d.o.Federator; f != nil {
		ov.Endpoints = f.Endpoints()
		current = map[string]bool{}
		for _, e := range ov.Endpoints {
			ov.Excluded[e.Name] = f.Excluded(e.Name)
			current[e.Name] = true
		}
	}
	if d.o.Tests != nil {
		st := d.o.Tests.Status()
		if current != nil {
			st.Endpoints = slices.DeleteFunc(slices.Clone(st.Endpoints),
				func(e sitetest.EndpointState) bool { return !current[e.Name] })
		}
		ov.Tests = &st
	}
	sites, err := d.o.Store.Sites(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	var fnSeries []series
	for _, s := range sites {
		if s.Kind == sitetest.Kind && current != nil && !current[s.Site] {
			ov.Removed = append(ov.Removed, s)
			continue
		}
		h, err := d.o.Store.SiteHistory(ctx, s.Site, s.Kind, 24)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		ov.Sites = append(ov.Sites, siteRow{SiteStatus: s, History: h})
		if s.Kind == sitetest.Kind {
			fnSeries = append(fnSeries, functionalSeries(s.Site, h, ov.Now))
		}
	}
	if ov.Runs, err = d.recentBenchRuns(ctx, d.o.RecentRuns); err != nil {
		d.fail(w, r, err)
		return
	}
	ov.Runs = withLinkedRuns(ov.Runs, ov.Sites)
	if p, err := d.healthPlots(fnSeries, ov.Now); err != nil {
		d.fail(w, r, err)
		return
	} else {
		ov.HealthPlot = p
	}
	for _, k := range []struct{ kind, title string }{
		{"open", "Open time per endpoint and protocol"},
		{"read", "Block read time per endpoint and protocol"},
	} {
		p, err := d.protocolSeries(ctx, ov.Runs, k.kind, k.title)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if p.SVG != "" {
			ov.Plots = append(ov.Plots, p)
		}
	}
	ov.Routes, ov.Missing = routes(ov.Runs)
	d.render(w, r, "overview.html", ov)
}

// withLinkedRuns adds to the runs table every run the Sites table links
// to (its history strips, at most 24 a row, and latest runs): the
// scheduled tests' functional runs are not bench runs. Newest first.
func withLinkedRuns(runs []results.Run, sites []siteRow) []results.Run {
	add := func(run results.Run) {
		if !slices.ContainsFunc(runs, func(r results.Run) bool { return r.ID == run.ID }) {
			runs = append(runs, run)
		}
	}
	for _, s := range sites {
		add(s.Last)
		for _, h := range s.History {
			add(h)
		}
	}
	slices.SortFunc(runs, func(a, b results.Run) int { return cmp.Compare(b.ID, a.ID) })
	return runs
}

// routeKinds are the ways of reaching a site the protocol plots compare
// (as the Dynafed study did), each with how to add a run of it.
var routeKinds = []struct{ name, how string }{
	{"direct", "lakefed bench open http://SITE/"},
	{"via federator", "lakefed bench open --site NAME http://FEDERATOR/"},
	{"XRootD", "lakefed bench open root://SITE//"},
}

// routes names which routes the open and read runs cover, and which none.
func routes(runs []results.Run) (have, missing []string) {
	seen := map[string]bool{}
	for _, run := range runs {
		if run.Kind != "open" && run.Kind != "read" || run.Status == results.StatusFailed {
			continue
		}
		l := protoLabel(run)
		switch {
		case strings.Contains(l, "via federator"):
			seen["via federator"] = true
		case strings.HasPrefix(l, "XRootD"):
			seen["XRootD"] = true
		default:
			seen["direct"] = true
		}
	}
	for _, r := range routeKinds {
		if seen[r.name] {
			have = append(have, r.name)
		} else {
			missing = append(missing, fmt.Sprintf("%s (run %s)", r.name, r.how))
		}
	}
	return have, missing
}

// functionalSeries turns a site's functional runs into a latency series
// (seconds before now, ms).
func functionalSeries(site string, h []results.Run, now time.Time) series {
	s := series{Name: site, Line: true}
	for _, run := range h {
		lat := num(summaryMap(run), "latency")
		if math.IsNaN(lat) {
			continue
		}
		s.X = append(s.X, run.Started.Sub(now).Seconds())
		s.Y = append(s.Y, lat*1000)
	}
	return s
}

func (d *Dashboard) healthPlots(fn []series, now time.Time) ([]namedPlot, error) {
	var out []namedPlot
	hist := d.history()
	names := make([]string, 0, len(hist))
	for n := range hist {
		names = append(names, n)
	}
	slices.Sort(names)
	var ring []series
	for _, n := range names {
		s := series{Name: n, Line: true}
		for _, p := range hist[n] {
			s.X = append(s.X, p.T.Sub(now).Seconds())
			s.Y = append(s.Y, p.LatencyMS)
		}
		ring = append(ring, s)
	}
	for _, p := range []struct {
		id, title string
		s         []series
	}{
		{"latency", "Endpoint latency (federator probes, EWMA)", ring},
		{"functional", "Scheduled tests: stat latency", fn},
	} {
		svg, err := renderSVG(plotSpec{ID: p.id, Title: p.title, YLabel: "latency (ms)", YUnit: "ms",
			Series: p.s, YMin0: true, Ago: true})
		if err != nil {
			return nil, err
		}
		if svg != "" {
			out = append(out, namedPlot{ID: p.id, Title: p.title, SVG: svg})
		}
	}
	return out, nil
}

// protocolSeries draws the time series of operation times of the latest
// run of kind for each way of reaching a site (protocol and endpoint), as
// the Dynafed study drew direct WebDAV against the federation against
// XRootD.
func (d *Dashboard) protocolSeries(ctx context.Context, runs []results.Run, kind, title string) (namedPlot, error) {
	seen := map[string]bool{}
	var ss []series
	for _, run := range runs {
		if run.Kind != kind || run.Status == results.StatusFailed {
			continue
		}
		l := protoLabel(run)
		if seen[l] || len(ss) >= 6 {
			continue
		}
		seen[l] = true
		t, v, err := d.o.Store.SampleSeries(ctx, run.ID, kind, 300)
		if err != nil {
			return namedPlot{}, err
		}
		s := series{Name: fmt.Sprintf("#%d %s", run.ID, l), X: t}
		for _, x := range v {
			s.Y = append(s.Y, x*1000)
		}
		ss = append(ss, s)
	}
	id := kind + "-series"
	svg, err := renderSVG(plotSpec{ID: id, Title: title, XLabel: "time in run (s)", YLabel: kind + " time (ms)",
		XUnit: "s", YUnit: "ms", Series: ss, YMin0: true})
	return namedPlot{ID: id, Title: title, SVG: svg}, err
}

// kv is one row of a summary table.
type kv struct {
	Key, Value string
}

// flatten lists m's keys in order, each value with its unit for a run of
// kind (fmtKeyed).
func flatten(kind string, m map[string]any) []kv {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]kv, 0, len(keys))
	for _, k := range keys {
		out = append(out, kv{k, fmtKeyed(kind, k, m[k])})
	}
	return out
}

func fmtValue(v any) string {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return fmt.Sprintf("%.0f", x)
		}
		return fmt.Sprintf("%.4g", x)
	case nil:
		return ""
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}

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
		for _, k := range ks {
			t, v, err := d.o.Store.SampleSeries(ctx, run.ID, k, 500)
			if err != nil {
				return nil, err
			}
			if len(t) == 0 {
				continue
			}
			s := series{Name: name(run), X: t}
			for _, x := range v {
				s.Y = append(s.Y, x*1000)
			}
			if _, ok := byKind[k]; !ok {
				kinds = append(kinds, k)
			}
			byKind[k] = append(byKind[k], s)
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

type compareRow struct {
	Key    string
	Values []string
	Differ bool
}

type comparePage struct {
	Runs  []results.Run
	Rows  []compareRow
	Plots []namedPlot
	IDs   string
}

func (d *Dashboard) serveCompare(w http.ResponseWriter, r *http.Request) {
	ids, err := parseIDs(r.URL.Query()["ids"])
	if err != nil {
		d.fail(w, r, err)
		return
	}
	var (
		runs  []results.Run
		steps [][]results.Step
		sums  []map[string]any
		keys  []string
	)
	for _, id := range ids {
		run, err := d.o.Store.Get(r.Context(), id)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		st, err := d.o.Store.Steps(r.Context(), id)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		runs, steps = append(runs, run), append(steps, st)
		m := decodeJSON(run.Summary)
		sums = append(sums, m)
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	page := comparePage{Runs: runs}
	fixed := []struct {
		key string
		val func(results.Run) string
	}{
		{"kind", func(r results.Run) string { return r.Kind }},
		{"site", func(r results.Run) string { return r.Site }},
		{"route", protoLabel},
		{"started", func(r results.Run) string { return r.Started.Local().Format("2006-01-02 15:04:05") }},
		{"classification", func(r results.Run) string { return r.Classification }},
	}
	for _, f := range fixed {
		row := compareRow{Key: f.key}
		for _, run := range runs {
			row.Values = append(row.Values, f.val(run))
		}
		page.Rows = append(page.Rows, row.mark())
	}
	for _, k := range keys {
		row := compareRow{Key: k}
		for i, m := range sums {
			row.Values = append(row.Values, fmtKeyed(runs[i].Kind, k, m[k]))
		}
		page.Rows = append(page.Rows, row.mark())
	}
	page.Rows = append(page.Rows, paramRows(runs)...)
	if page.Plots, err = d.runPlots(r.Context(), runs, steps); err != nil {
		d.fail(w, r, err)
		return
	}
	var s []string
	for _, id := range ids {
		s = append(s, fmt.Sprint(id))
	}
	page.IDs = strings.Join(s, ",")
	d.render(w, r, "compare.html", page)
}

// paramRows are the compare rows of the runs' parameters, each key
// marked as one.
func paramRows(runs []results.Run) []compareRow {
	var (
		ps   []map[string]any
		keys []string
	)
	for _, run := range runs {
		m := decodeJSON(run.Params)
		ps = append(ps, m)
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	var rows []compareRow
	for _, k := range keys {
		row := compareRow{Key: k + " (parameter)"}
		for i, m := range ps {
			row.Values = append(row.Values, fmtKeyed(runs[i].Kind, k, m[k]))
		}
		rows = append(rows, row.mark())
	}
	return rows
}

func (c compareRow) mark() compareRow {
	for _, v := range c.Values[1:] {
		if v != c.Values[0] {
			c.Differ = true
		}
	}
	return c
}
