package federation

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lakefed/lakefed/internal/httpx"
)

// Header names the federator reads or writes.
const (
	// HopsHeader counts the federators a request has passed through; a
	// federator reached at max_hops asks no upstream (loop stop).
	HopsHeader = httpx.HopsHeader
	// DebugHeader: a request carrying it (any value) gets ChoiceHeader
	// back, saying how the replicas were ranked and what each endpoint
	// answered.
	DebugHeader = "X-Lakefed-Debug"
	// ChoiceHeader is the debug answer.
	ChoiceHeader = "X-Lakefed-Choice"
	// SiteParam is the query parameter that pins a request to one
	// endpoint, by name: "?lakefed.site=NAME" (lakefed bench --site). Only
	// that endpoint is asked, redirected to or proxied from, as the CMS
	// AAA scale tests pinned one site through the redirectors; a file it
	// lacks is 404 (503 when it is down) even if others have it. The
	// parameter never reaches an endpoint: endpoints get paths, and
	// redirects carry the endpoint's own URL.
	SiteParam = "lakefed.site"
)

// Handler returns the federator's HTTP handler: the namespace at every
// path, plus GET /api/endpoints, POST /api/reload, GET /api/disagreements,
// GET /api/health and GET /metrics (HEAD too, as ServeMux has it; files
// at those exact paths are shadowed for those methods).
//
// The control paths are ServeMux patterns. The namespace is not behind
// the mux: ServeMux answers a path that is not clean ("/a//b", "/a/../b")
// with a 301 to the cleaned one, for every method, where the namespace
// must serve it cleaned or refuse it (400) itself, as storage does; and
// the namespace is the hot path, which pays only a prefix test here.
func (f *Federator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(f.m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /api/endpoints", f.serveEndpoints)
	mux.HandleFunc("POST /api/reload", f.serveReload)
	mux.HandleFunc("GET /api/disagreements", f.serveDisagreements)
	mux.HandleFunc("GET /api/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	// Other methods on those paths, and the rest of /api/, are files.
	mux.HandleFunc("/", f.serveNamespace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isControlPath(r.URL.Path) {
			mux.ServeHTTP(w, r)
			return
		}
		f.serveNamespace(w, r)
	})
}

// isControlPath reports whether Handler routes p through its mux (the
// control paths, and the rest of /api/) rather than straight to the
// namespace.
func isControlPath(p string) bool {
	return (p == "/metrics" || strings.HasPrefix(p, "/api/")) && isClean(p)
}

// request is one request for a path of the namespace, as the router
// worked it out: every answer needs the same few things.
type request struct {
	w http.ResponseWriter
	r *http.Request
	// s is the endpoint set: the current snapshot, or the one of the
	// endpoint SiteParam pins.
	s *snapshot
	// p is the clean path.
	p string
	// hops counts the federators the request has passed (HopsHeader).
	hops int
}

// serveNamespace answers a request for a path of the federated namespace,
// and counts the answer (answers_total) by its method and status: the
// writer is a Meter from a pool, so a warm answer still allocates
// nothing.
func (f *Federator) serveNamespace(w http.ResponseWriter, r *http.Request) {
	mw := f.meters.Get().(*httpx.Meter)
	mw.Reset(w)
	defer func() {
		f.m.countAnswer(r.Method, mw.Status) // an aborted answer too (a panic passing)
		mw.Reset(nil)
		f.meters.Put(mw)
	}()
	f.serveNamespaceTo(mw, r)
}

func (f *Federator) serveNamespaceTo(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if !isClean(p) {
		var err error
		if p, err = httpx.CleanPath(p); err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	s := f.snap.Load()
	if r.URL.RawQuery != "" && strings.Contains(r.URL.RawQuery, SiteParam) {
		if site, _ := siteQuery(r.URL.RawQuery); site != "" {
			v := s.pins[site]
			if v == nil {
				httpError(w, http.StatusBadRequest, fmt.Sprintf("lakefed: %s=%q: no endpoint of that name in this federation", SiteParam, site))
				return
			}
			s = v
		}
	}
	rq := &request{w: w, r: r, s: s, p: p}
	if v := r.Header[HopsHeader]; len(v) > 0 {
		if n, err := strconv.Atoi(v[0]); err == nil && n > 0 {
			rq.hops = n
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		f.serveRead(rq)
	case "PROPFIND":
		f.servePropfind(rq)
	case http.MethodPut:
		f.servePut(rq)
	case http.MethodDelete:
		f.serveDelete(rq)
	case "MKCOL":
		f.serveMkcol(rq)
	case "COPY":
		f.serveCopy(rq)
	case "MOVE":
		f.serveMove(rq)
	case http.MethodOptions:
		h := w.Header()
		h.Set("Allow", allow)
		h.Set("DAV", "1")
		w.WriteHeader(http.StatusOK)
	default:
		w.Header().Set("Allow", allow)
		httpError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
	}
}

const allow = "OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, PROPFIND, COPY, MOVE"

// siteQuery reads SiteParam in a raw query string: site is its value, ""
// when there is none or the query does not parse; only reports that the
// query is that parameter, once, and nothing else. The handler and the
// fast path (fast.go) both read the pin with it, so they cannot differ
// on which requests are pinned, nor to what.
func siteQuery(raw string) (site string, only bool) {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return "", false
	}
	site = vals.Get(SiteParam)
	return site, site != "" && len(vals) == 1 && len(vals[SiteParam]) == 1
}

// isClean reports whether p is already what httpx.CleanPath would return,
// with a cheap scan, so that the common case allocates nothing.
func isClean(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) < 2 || len(p) > httpx.MaxPathLen || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	seg := 0
	for i := 1; i < len(p); i++ {
		c := p[i]
		switch {
		case c < 0x20 || c >= 0x7f || c == '\\' || c == '%':
			// Not ASCII: CleanPath checks it is UTF-8.
			return false
		case c == '/':
			n := i - seg - 1
			if n == 0 || n > httpx.MaxNameLen || (n == 1 && p[i-1] == '.') || (n == 2 && p[i-1] == '.' && p[i-2] == '.') {
				return false
			}
			seg = i
		}
	}
	n := len(p) - seg - 1
	return n <= httpx.MaxNameLen && !(n == 1 && p[len(p)-1] == '.') && !(n == 2 && p[len(p)-1] == '.' && p[len(p)-2] == '.')
}
