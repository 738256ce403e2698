package web

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/sitetest"
)

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
	// Shared is the state shared with the other federators of the lake:
	// "ok", "degraded" (Redis cannot be reached), or "" (none shared).
	Shared   string
	Excluded map[string]bool
	Tests    *sitetest.Status
	Sites    []siteRow
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
		ov.Shared = f.SharedState()
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
		t, v, err := d.o.Store.SampleSeries(ctx, run.ID, kind, "", 300)
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
