// Package web is lakefed's dashboard at /ui: endpoint health with latency
// history, the scheduled tests, the site table of "ok" / "to debug" with
// its history across runs, every bench run with its plots (observed
// against expected open rate with the y = x line, failure fraction, block
// read time, read rate and I/O wait against jobs, time series of open and
// read times per endpoint and protocol) and side-by-side comparison of
// runs, when the process runs a cache, how jobs read through it
// (/ui/cache), and, when it runs a write buffer, what waits to migrate
// and what fails (/ui/buffer). Plots are drawn on the server with
// gonum/plot as inline SVG, so the page needs no JavaScript and no
// internet access; a JSON API under /ui/api serves the same data to
// scripts.
//
//	dash := web.New(web.Options{Store: st, Federator: fed, Tests: sched, Cache: c, Buffer: b, Log: log})
//	go dash.Run(ctx) // latency history of the federator's endpoints
//	srv := &http.Server{Handler: web.Front(fed.Handler(), dash)}
package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/sitetest"
)

//go:embed templates/*.html static/*
var assets embed.FS

// TestStatus is what the dashboard reads of the scheduled tests
// (*sitetest.Scheduler implements it).
type TestStatus interface {
	Status() sitetest.Status
}

// CacheSource is what the dashboard reads of a cache (*cache.Cache
// implements it): its usage and group, and the access pattern of each
// file. Both are called on every request of /ui/cache, concurrently.
type CacheSource interface {
	Status() cache.Status
	Files() []cache.FilePattern
}

// Options configure the dashboard.
type Options struct {
	// Store holds the bench runs. Required.
	Store *results.Store
	// Federator, when not nil, gives the endpoint table and, with Run,
	// the latency history.
	Federator *federation.Federator
	// Tests, when not nil, shows the scheduled tests' state.
	Tests TestStatus
	// Cache, when not nil, adds the cache page (/ui/cache) and its link
	// in the navigation, and its data under /ui/api/cache. Nil: no cache
	// page (404). Leave it unset rather than setting a nil *cache.Cache,
	// which is a CacheSource that is not nil.
	Cache CacheSource
	// Buffer, when not nil, adds the write buffer page (/ui/buffer) and
	// its link in the navigation, and its data under /ui/api/buffer. Nil:
	// no buffer page (404). As with Cache, leave it unset rather than
	// setting a nil *buffer.Buffer.
	Buffer BufferSource
	// MayList reports whether the caller of r may list the path p (the
	// auth rules' list permission, with the caller's identity in r's
	// context). The cache and buffer pages, and their data under /ui/api,
	// show only the files it allows: /ui passes the auth rules unguarded.
	// Nil: every file is shown.
	MayList func(r *http.Request, p string) bool
	// Log receives errors of page rendering. Nil: slog.Default().
	Log *slog.Logger
	// PollInterval is how often Run samples the endpoints' latency.
	// Zero: 5s.
	PollInterval time.Duration
	// RecentRuns is how many runs the overview lists. Zero: 40.
	RecentRuns int
}

// Dashboard is the /ui handler. Safe for concurrent use.
type Dashboard struct {
	o    Options
	log  *slog.Logger
	mux  *http.ServeMux
	tmpl *template.Template

	mu   sync.Mutex
	ring map[string]*latRing // endpoint name -> latency samples
}

// ringLen is how many latency samples each endpoint keeps (10 minutes at
// the default poll interval).
const ringLen = 120

type latRing struct {
	t    []time.Time
	ms   []float64
	up   []bool
	next int
}

func (r *latRing) add(t time.Time, ms float64, up bool) {
	if len(r.t) < ringLen {
		r.t, r.ms, r.up = append(r.t, t), append(r.ms, ms), append(r.up, up)
		return
	}
	r.t[r.next], r.ms[r.next], r.up[r.next] = t, ms, up
	r.next = (r.next + 1) % ringLen
}

// New returns the dashboard. It starts nothing; Run samples latencies.
func New(o Options) *Dashboard {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 5 * time.Second
	}
	if o.RecentRuns <= 0 {
		o.RecentRuns = 40
	}
	d := &Dashboard{o: o, log: o.Log.With("component", "web"), ring: map[string]*latRing{}}
	// hasCache and hasBuffer are per dashboard: the navigation links the
	// cache and buffer pages only when there is one.
	roles := template.FuncMap{
		"hasCache":  func() bool { return o.Cache != nil },
		"hasBuffer": func() bool { return o.Buffer != nil },
	}
	d.tmpl = template.Must(template.New("").Funcs(funcs).Funcs(roles).ParseFS(assets, "templates/*.html"))
	static, _ := fs.Sub(assets, "static")
	m := http.NewServeMux()
	m.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	m.HandleFunc("GET /ui/{$}", d.serveOverview)
	m.HandleFunc("GET /ui/run/{id}", d.serveRun)
	m.HandleFunc("GET /ui/compare", d.serveCompare)
	m.HandleFunc("GET /ui/plot/run/{id}/{name}", d.servePlot)
	m.HandleFunc("GET /ui/api/runs", d.apiRuns)
	m.HandleFunc("GET /ui/api/runs/{id}", d.apiRun)
	m.HandleFunc("GET /ui/api/sites", d.apiSites)
	m.HandleFunc("GET /ui/api/endpoints", d.apiEndpoints)
	m.HandleFunc("GET /ui/cache", d.serveCache)
	m.HandleFunc("GET /ui/plot/cache/{name}", d.serveCachePlot)
	m.HandleFunc("GET /ui/api/cache", d.apiCache)
	m.HandleFunc("GET /ui/api/cache/files", d.apiCacheFiles)
	m.HandleFunc("GET /ui/buffer", d.serveBuffer)
	m.HandleFunc("GET /ui/plot/buffer/{name}", d.serveBufferPlot)
	m.HandleFunc("GET /ui/api/buffer", d.apiBuffer)
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	d.mux = m
	return d
}

// ServeHTTP serves /ui and everything below it.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.mux.ServeHTTP(w, r) }

// Run samples the federator's endpoint latencies every PollInterval until
// ctx ends, for the latency history. Without a federator it returns at
// once. Run at most once.
func (d *Dashboard) Run(ctx context.Context) {
	if d.o.Federator == nil {
		return
	}
	t := time.NewTicker(d.o.PollInterval)
	defer t.Stop()
	for {
		d.Sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample records the federator's endpoint latencies now (Run calls it
// every PollInterval).
func (d *Dashboard) Sample() {
	if d.o.Federator == nil {
		return
	}
	now := time.Now()
	eps := d.o.Federator.Endpoints()
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range eps {
		seen[e.Name] = true
		r := d.ring[e.Name]
		if r == nil {
			r = &latRing{}
			d.ring[e.Name] = r
		}
		r.add(now, e.LatencyMS, e.State == "up")
	}
	for n := range d.ring {
		if !seen[n] {
			delete(d.ring, n)
		}
	}
}

func badRequest(format string, a ...any) error {
	return httpx.NewError(http.StatusBadRequest, "web: "+fmt.Sprintf(format, a...), nil)
}

// fail answers err: its status when it has one (an *httpx.Error), 404
// for an unknown run, else 500 (logged; the client sees a short message).
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, results.ErrNotFound) {
		err = httpx.NewError(http.StatusNotFound, "web: "+err.Error(), err)
	}
	code, msg, ok := httpx.StatusOf(err)
	if !ok {
		d.log.ErrorContext(r.Context(), "dashboard request failed", "path", r.URL.Path, "err", err)
		msg = "web: internal error"
	}
	httpx.WriteError(w, code, msg)
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	var b strings.Builder
	if err := d.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		d.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(b.String()))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("bad run id %q", r.PathValue("id"))
	}
	return id, nil
}

// parseIDs parses "1,2,3" (also repeated ids= parameters), at most 8.
func parseIDs(vals []string) ([]int64, error) {
	var ids []int64
	for _, v := range vals {
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil || id <= 0 {
				return nil, badRequest("bad run id %q", f)
			}
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, badRequest("give ?ids=1,2")
	}
	if len(ids) > 8 {
		return nil, badRequest("compare at most 8 runs")
	}
	return ids, nil
}

func (d *Dashboard) apiRuns(w http.ResponseWriter, r *http.Request) {
	f := results.Filter{Kind: r.URL.Query().Get("kind"), Site: r.URL.Query().Get("site")}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			d.fail(w, r, badRequest("bad limit %q", v))
			return
		}
		f.Limit = n
	}
	runs, err := d.o.Store.List(r.Context(), f)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, nonNilRuns(runs))
}

func nonNilRuns(r []results.Run) []results.Run {
	if r == nil {
		return []results.Run{}
	}
	return r
}

func (d *Dashboard) apiRun(w http.ResponseWriter, r *http.Request) {
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
	writeJSON(w, struct {
		results.Run
		Steps []results.Step `json:"steps"`
	}{run, steps})
}

func (d *Dashboard) apiSites(w http.ResponseWriter, r *http.Request) {
	sites, err := d.o.Store.Sites(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if sites == nil {
		sites = []results.SiteStatus{}
	}
	writeJSON(w, sites)
}

// endpointsJSON is /ui/api/endpoints: the federator's view, the latency
// history and the scheduled tests' view.
type endpointsJSON struct {
	Endpoints []federation.EndpointStatus `json:"endpoints"`
	History   map[string][]historyPoint   `json:"history"`
	Tests     *sitetest.Status            `json:"tests,omitempty"`
}

type historyPoint struct {
	T         time.Time `json:"t"`
	LatencyMS float64   `json:"latency_ms"`
	Up        bool      `json:"up"`
}

func (d *Dashboard) history() map[string][]historyPoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string][]historyPoint{}
	for name, r := range d.ring {
		n := len(r.t)
		h := make([]historyPoint, 0, n)
		for i := range n {
			k := (r.next + i) % n
			h = append(h, historyPoint{T: r.t[k], LatencyMS: r.ms[k], Up: r.up[k]})
		}
		out[name] = h
	}
	return out
}

func (d *Dashboard) apiEndpoints(w http.ResponseWriter, r *http.Request) {
	out := endpointsJSON{Endpoints: []federation.EndpointStatus{}, History: d.history()}
	if d.o.Federator != nil {
		out.Endpoints = d.o.Federator.Endpoints()
	}
	if d.o.Tests != nil {
		st := d.o.Tests.Status()
		out.Tests = &st
	}
	writeJSON(w, out)
}
