package cache

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the cache's Prometheus series, on a registry of its own
// (several caches in one test process must not collide); MetricsHandler
// serves them.
type metrics struct {
	reg            *prometheus.Registry
	hitBytes       prometheus.Counter
	missBytes      prometheus.Counter
	originBytes    prometheus.Counter
	bypassBytes    prometheus.Counter
	peerBytes      prometheus.Counter
	peerFillBytes  prometheus.Counter
	peerResumes    prometheus.Counter
	prefetchUsed   prometheus.Counter
	prefetchWasted prometheus.Counter
	evictions      *prometheus.CounterVec
	revalidations  prometheus.Counter
	changed        prometheus.Counter
	staleServes    prometheus.Counter
	corruptBlocks  prometheus.Counter
	sumMismatches  prometheus.Counter
	verified       prometheus.Counter
	unverified     prometheus.Counter
	fillsRefused   prometheus.Counter
	probes         prometheus.Counter
	diskErrors     prometheus.Counter
	diskReadBytes  prometheus.Counter
	handedBytes    prometheus.Counter
	// zeroCopyBytes and zeroCopyFallbacks: zerocopy.go.
	zeroCopyBytes     prometheus.Counter
	zeroCopyFallbacks prometheus.Counter
	readAheadBytes    prometheus.Counter
	waits             prometheus.Counter
	fillsPaused       prometheus.Gauge
	bytes, inodes     prometheus.Gauge
	files             prometheus.Gauge
}

func newMetrics() *metrics {
	const ns = "lakefed_cache_"
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: ns + name, Help: help})
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: ns + name, Help: help})
	}
	m := &metrics{
		reg:            prometheus.NewRegistry(),
		hitBytes:       c("hit_bytes_total", "Bytes served from blocks already on disk (or in RAM) when asked for."),
		missBytes:      c("miss_bytes_total", "Bytes served that had to be fetched from the origin first."),
		originBytes:    c("origin_bytes_total", "Bytes read from the origin to fill blocks."),
		bypassBytes:    c("bypass_bytes_total", "Bytes streamed from the origin without caching, because the disk could not keep up (back pressure) or refused a write."),
		peerBytes:      c("peer_bytes_total", "Bytes served by reading from the group member that owns the path."),
		peerFillBytes:  c("peer_fill_bytes_total", "Bytes filled from the group member that owned the path before this node, instead of from the origin."),
		peerResumes:    c("peer_resumes_total", "Answers read from a group member whose body broke off (the member died), finished from the path's next owner."),
		prefetchUsed:   c("prefetch_used_bytes_total", "Bytes fetched ahead of a sequential reader and then read."),
		prefetchWasted: c("prefetch_wasted_bytes_total", "Bytes fetched ahead and dropped (purge, change) before anyone read them."),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "evictions_total",
			Help: "Whole files removed by the purge, by the bound that was passed (bytes, inodes, or disk: the file system itself nearly full)."}, []string{"reason"}),
		revalidations:     c("revalidations_total", "Times the origin was asked whether a file changed."),
		changed:           c("origin_changes_total", "Files whose origin version changed: their blocks were dropped."),
		staleServes:       c("unrevalidated_serves_total", "Requests served from the version last confirmed because the origin could not be asked."),
		corruptBlocks:     c("corrupt_blocks_total", "Blocks whose bytes on disk did not match their CRC-32C; fetched again, never served."),
		sumMismatches:     c("checksum_mismatches_total", "Complete files whose adler32 did not match the origin's; dropped."),
		verified:          c("verified_files_total", "Complete files checked against the origin's adler32."),
		unverified:        c("unverified_files_total", "Complete files the origin gave no adler32 for (blocks still checked by CRC-32C)."),
		fillsRefused:      c("fills_refused_total", "Fills not started because every fill slot was taken (back pressure)."),
		probes:            c("continuity_probes_total", "Blocks read again from an origin whose validators are weak, to prove that a new read of it is of the version on disk."),
		diskErrors:        c("disk_errors_total", "Block writes the disk refused (full, I/O error)."),
		diskReadBytes:     c("disk_read_bytes_total", "Bytes of blocks read from disk (and checked) to serve them."),
		handedBytes:       c("handed_bytes_total", "Bytes of blocks served as the fill that fetched them handed them to the readers waiting, without reading them back from disk."),
		zeroCopyBytes:     c("zero_copy_bytes_total", "Bytes of blocks on disk sent with sendfile(2): checked in place in the page cache and pinned there (mlock) until sent, never copied into the process."),
		zeroCopyFallbacks: c("zero_copy_fallbacks_total", "Blocks on disk that could not be pinned in the page cache (RLIMIT_MEMLOCK, a file that cannot be mapped) and were copied and checked instead."),
		readAheadBytes:    c("read_ahead_bytes_total", "Bytes of blocks on disk read and checked ahead of a stream, while the block before them was being sent (also in disk_read_bytes_total)."),
		waits:             c("fill_waits_total", "Times a reader waited for a fill to fetch the block it needed."),
		fillsPaused:       g("fills_paused", "Fills waiting for their reader to claim the next block (the reader is slower than the origin); their origin reads stay open."),
		bytes:             g("bytes", "Bytes of blocks on disk."),
		inodes:            g("inodes", "Files on disk (two per cached file)."),
		files:             g("files", "Files cached."),
	}
	m.reg.MustRegister(m.hitBytes, m.missBytes, m.originBytes, m.bypassBytes, m.peerBytes, m.peerFillBytes, m.peerResumes, m.prefetchUsed,
		m.prefetchWasted, m.evictions, m.revalidations, m.changed, m.staleServes, m.corruptBlocks,
		m.sumMismatches, m.verified, m.unverified, m.fillsRefused, m.probes, m.diskErrors, m.diskReadBytes, m.handedBytes, m.zeroCopyBytes, m.zeroCopyFallbacks, m.readAheadBytes, m.waits, m.fillsPaused, m.bytes, m.inodes, m.files)
	return m
}

func (m *metrics) setUsage(u Usage) {
	m.bytes.Set(float64(u.Bytes))
	m.inodes.Set(float64(u.Inodes))
	m.files.Set(float64(u.Files))
}

// Registry is the registry of the cache's series, for a process that
// serves them on another listener's /metrics.
func (c *Cache) Registry() *prometheus.Registry { return c.m.reg }

// MetricsHandler serves the cache's series.
func (c *Cache) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(c.m.reg, promhttp.HandlerOpts{})
}
