package storage

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// methods are the request methods metrics are kept for; anything else is
// counted as "other". The index of a method here is its metrics slot.
var methods = [...]string{"GET", "HEAD", "PUT", "DELETE", "MKCOL", "PROPFIND", "PROPPATCH",
	"COPY", "MOVE", "LOCK", "UNLOCK", "OPTIONS", "other"}

// methodIndex returns the metrics slot of method without allocating.
func methodIndex(method string) int {
	for i, m := range methods[:len(methods)-1] {
		if m == method {
			return i
		}
	}
	return len(methods) - 1
}

// metrics holds every series pre-resolved, so the request path only does
// atomic adds (no label hashing, no map look-ups, no allocations).
type metrics struct {
	requests  [len(methods)][6]prometheus.Counter // by method and status class (index status/100; 0 = other)
	latency   [len(methods)]prometheus.Observer
	sent      prometheus.Counter
	received  prometheus.Counter
	computed  prometheus.Counter // whole-file checksum passes (cache misses)
	cacheHits prometheus.Counter // checksums answered from the kept sums (.lakefed-sums)
	fast      prometheus.Counter // requests answered by the fast path (fast.go)

	staleRemoved prometheus.Counter // upload and copy temp entries removed by the janitor
	busy         prometheus.Counter // expensive requests refused with 503 (listing semaphore full)
	fdExhausted  prometheus.Counter // requests answered 503 because the process ran out of descriptors
}

func newMetrics(reg *prometheus.Registry) *metrics {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lakefed_storage_requests_total",
		Help: "Requests answered, by method and status class (2xx, 4xx, ...).",
	}, []string{"method", "code"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lakefed_storage_request_duration_seconds",
		Help:    "Time from request headers read to handler return, by method.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"method"})
	m := &metrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakefed_storage_sent_bytes_total", Help: "Response body bytes sent.",
		}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakefed_storage_received_bytes_total", Help: "Upload (PUT body) bytes received.",
		}),
		computed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakefed_storage_checksums_computed_total",
			Help: "Checksums computed by reading a whole file (no kept sum matched the file).",
		}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakefed_storage_checksum_cache_hits_total",
			Help: "Checksums answered from the extended-attribute cache.",
		}),
		fast: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakefed_storage_fast_path_requests_total",
			Help: "GET and HEAD requests answered by the lean HTTP/1.1 path instead of net/http (also counted in requests_total).",
		}),
		staleRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakefed_storage_stale_uploads_removed_total",
			Help: "Temp entries of uploads and copies left by a crash (files, or directories with their trees) removed by the janitor.",
		}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakefed_storage_listings_refused_total",
			Help: "PROPFIND Depth 1 and directory GETs refused with 503 because max_listings were already running.",
		}),
		fdExhausted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakefed_storage_fd_exhausted_total",
			Help: "Requests answered 503 because the process or system ran out of file descriptors (EMFILE, ENFILE).",
		}),
	}
	reg.MustRegister(requests, latency, m.sent, m.received, m.computed, m.cacheHits, m.fast,
		m.staleRemoved, m.busy, m.fdExhausted)
	for i, meth := range methods {
		for c := range m.requests[i] {
			class := "other"
			if c > 0 {
				class = strconv.Itoa(c) + "xx"
			}
			m.requests[i][c] = requests.WithLabelValues(meth, class)
		}
		m.latency[i] = latency.WithLabelValues(meth)
	}
	return m
}
