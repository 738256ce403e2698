package federation

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the federator's Prometheus series, on a registry of its own
// (several federators in one test process must not collide).
type metrics struct {
	reg       *prometheus.Registry
	locates   *prometheus.CounterVec
	hits      prometheus.Counter
	misses    prometheus.Counter
	redirects *prometheus.CounterVec
	proxied   *prometheus.CounterVec
	// spliced: proxied bytes moved socket to socket by splice(2), a
	// part of proxied.
	spliced   prometheus.Counter
	up        *prometheus.GaugeVec
	changes   *prometheus.CounterVec
	errors    *prometheus.CounterVec
	failovers prometheus.Counter
	// mismatches: a replica answered a read with another version than
	// its metadata said (or no file); disagreements: two replicas of
	// one path were found to hold different bytes.
	mismatches    prometheus.Counter
	disagreements prometheus.Counter
	answers       *prometheus.CounterVec
	// answered is answers resolved by method and status class
	// (countAnswer), so that the hot path adds without a label look-up.
	answered   [len(answerMethods)][6]prometheus.Counter
	locFound   prometheus.Counter
	locMissing prometheus.Counter
	locUnavail prometheus.Counter
	// sharedHits: look-ups answered from the shared second level
	// (Redis), without asking the endpoints.
	sharedHits prometheus.Counter
	// fast: GETs and HEADs answered on the fast path (fast.go).
	fast prometheus.Counter
	// listings: directories listed to answer look-ups (dirlist.go), by
	// outcome; listedAnswers: endpoint answers taken from one rather
	// than from a Stat.
	listings       *prometheus.CounterVec
	listingsOK     prometheus.Counter
	listingsFailed prometheus.Counter
	listedAnswers  prometheus.Counter
}

// memberMetrics are one endpoint's series, resolved once so that the hot
// path only does an atomic add.
type memberMetrics struct {
	redirects prometheus.Counter
	proxied   prometheus.Counter
	up        prometheus.Gauge
	ups       prometheus.Counter
	downs     prometheus.Counter
	errors    prometheus.Counter
}

func newMetrics() *metrics {
	const ns = "lakefed_federation_"
	m := &metrics{
		reg: prometheus.NewRegistry(),
		locates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "locates_total",
			Help: "Locate fan-outs (metadata cache misses) by outcome: found, notfound, unavailable."}, []string{"result"}),
		hits: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "metadata_cache_hits_total",
			Help: "Look-ups answered from the metadata cache."}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "metadata_cache_misses_total",
			Help: "Look-ups the metadata cache could not answer."}),
		redirects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "redirects_total",
			Help: "Clients redirected, by endpoint."}, []string{"endpoint"}),
		proxied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "proxied_bytes_total",
			Help: "Bytes streamed through the federator, by endpoint."}, []string{"endpoint"}),
		spliced: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "spliced_bytes_total",
			Help: "Proxied bytes moved from a replica's socket to the client's by splice(2), without a copy through the federator's memory (also counted in proxied_bytes_total)."}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ns + "endpoint_up",
			Help: "1 when the endpoint is up, 0 when down."}, []string{"endpoint"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "endpoint_state_changes_total",
			Help: "Endpoint state changes, by endpoint and new state."}, []string{"endpoint", "state"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "endpoint_errors_total",
			Help: "Requests to the endpoint that failed as unavailable."}, []string{"endpoint"}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "proxy_failovers_total",
			Help: "Proxied reads moved to another replica mid-stream."}),
		mismatches: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "replica_version_mismatches_total",
			Help: "Proxied reads where a replica held another version of the file than its metadata said, or none."}),
		disagreements: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "replica_disagreements_total",
			Help: "Pairs of replicas of one path found holding different bytes (see /api/disagreements)."}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "answers_total",
			Help: "Namespace requests answered, by method and status code class."}, []string{"method", "code"}),
		sharedHits: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "shared_metadata_hits_total",
			Help: "Look-ups answered from the metadata the federators share (Redis), without asking the endpoints."}),
		fast: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "fast_path_requests_total",
			Help: "GET and HEAD requests answered by the lean HTTP/1.1 path instead of net/http (also counted in redirects_total and metadata_cache_hits_total)."}),
		listings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "directory_listings_total",
			Help: "Directories of an endpoint listed to answer look-ups of new paths in them, by outcome: complete, or failed (over list_max_entries, not listable as Stat, an error: Stat answers)."}, []string{"result"}),
		listedAnswers: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "listed_answers_total",
			Help: "Endpoint answers to look-ups taken from a directory listing instead of a Stat."}),
	}
	for i, method := range answerMethods {
		for c := range m.answered[i] {
			m.answered[i][c] = m.answers.WithLabelValues(method, answerClasses[c])
		}
	}
	m.locFound = m.locates.WithLabelValues("found")
	m.locMissing = m.locates.WithLabelValues("notfound")
	m.locUnavail = m.locates.WithLabelValues("unavailable")
	m.listingsOK = m.listings.WithLabelValues("complete")
	m.listingsFailed = m.listings.WithLabelValues("failed")
	m.reg.MustRegister(m.locates, m.hits, m.misses, m.redirects, m.proxied, m.spliced, m.up, m.changes, m.errors, m.failovers, m.mismatches, m.disagreements, m.answers, m.sharedHits, m.fast, m.listings, m.listedAnswers)
	return m
}

// answerMethods are the methods answers_total names; any other is
// "other" (a label per method a client invents would grow without bound).
var answerMethods = [...]string{"GET", "HEAD", "PUT", "DELETE", "PROPFIND", "MKCOL", "COPY", "MOVE", "OPTIONS", "other"}

// answerClasses are the status classes answers_total names, by code/100;
// "aborted" is an answer cut before its status (the handler aborted).
var answerClasses = [6]string{"aborted", "1xx", "2xx", "3xx", "4xx", "5xx"}

// countAnswer counts one namespace answer of method with status code (0:
// none was sent).
func (m *metrics) countAnswer(method string, code int) {
	i := len(answerMethods) - 1
	for k, name := range answerMethods[:i] {
		if name == method {
			i = k
			break
		}
	}
	c := code / 100
	if c < 1 || c > 5 {
		c = 0
	}
	m.answered[i][c].Inc()
}

func (m *metrics) forMember(name string) memberMetrics {
	return memberMetrics{
		redirects: m.redirects.WithLabelValues(name),
		proxied:   m.proxied.WithLabelValues(name),
		up:        m.up.WithLabelValues(name),
		ups:       m.changes.WithLabelValues(name, "up"),
		downs:     m.changes.WithLabelValues(name, "down"),
		errors:    m.errors.WithLabelValues(name),
	}
}

// forget drops the series of an endpoint removed by a reload.
func (m *metrics) forget(name string) {
	m.redirects.DeleteLabelValues(name)
	m.proxied.DeleteLabelValues(name)
	m.up.DeleteLabelValues(name)
	m.changes.DeleteLabelValues(name, "up")
	m.changes.DeleteLabelValues(name, "down")
	m.errors.DeleteLabelValues(name)
}

// Registry returns the federator's Prometheus registry, for a process that
// serves /metrics elsewhere or merges registries.
func (f *Federator) Registry() *prometheus.Registry { return f.m.reg }

// prefixCollector exports, at each scrape, how many endpoints can serve
// each configured prefix and how many of them are usable (up and not
// excluded): lakefed_federation_prefix_live_endpoints == 0 means every
// replica of the prefix is down, which lakefed_federation_endpoint_up
// alone cannot say (an endpoint for "/" also serves "/cms"). Reading the
// current snapshot when scraped keeps the series exact across reloads
// without bookkeeping.
//
// Only local endpoints count: an upstream federator is asked only when
// no local endpoint has a file, and is watched by its own metrics.
// Prefixes that only upstreams serve have no series.
type prefixCollector struct {
	f           *Federator
	live, total *prometheus.Desc
}

func newPrefixCollector(f *Federator) *prefixCollector {
	const ns = "lakefed_federation_"
	return &prefixCollector{f: f,
		live: prometheus.NewDesc(ns+"prefix_live_endpoints",
			"Local endpoints serving the prefix that are up and not excluded (0: every replica of the prefix is down).",
			[]string{"prefix"}, nil),
		total: prometheus.NewDesc(ns+"prefix_endpoints",
			"Local endpoints configured to serve the prefix (their own prefix is it or an ancestor of it).",
			[]string{"prefix"}, nil),
	}
}

func (c *prefixCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.live
	ch <- c.total
}

func (c *prefixCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.f.snap.Load()
	if s == nil {
		return // New has not applied its config yet
	}
	seen := map[string]bool{}
	for _, pm := range s.locals {
		p := pm.prefix
		if seen[p] {
			continue
		}
		seen[p] = true
		n, live := 0, 0
		for _, m := range s.locals {
			if m.matches(p) {
				n++
				if m.h.Up() {
					live++
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(live), p)
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(n), p)
	}
}
