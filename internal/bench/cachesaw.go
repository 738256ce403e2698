package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
)

// CacheSaw is how a lakefed cache in front of the target saw one run's
// reads of a file: the figures its GET /api/cache/files gives for the
// file ("how jobs read"), less those it had before the
// run, so that the second run of `bench root --prefetch both` shows its
// own reads and not the sum of both. It is the server's side of the
// ROOTSummary's client-side figures: a cache that counts other clients'
// reads of the same file during the run counts them here too.
type CacheSaw struct {
	// Reads counts the byte ranges the cache was asked for, Requests the
	// HTTP requests carrying them, MultiRange those with several ranges.
	Reads      int64 `json:"reads"`
	Requests   int64 `json:"requests"`
	MultiRange int64 `json:"multi_range_requests"`
	// MedianRead and MeanRead are read sizes in bytes. The cache keeps a
	// sample of sizes, not one per run, so the median is of every read
	// it saw of the file: MedianOver reads, more than Reads when earlier
	// runs read the file too.
	MedianRead int64   `json:"median_read_bytes"`
	MedianOver int64   `json:"median_over_reads"`
	MeanRead   float64 `json:"mean_read_bytes"`
	// Requested is the bytes asked for; RequestedOfSize that over the
	// file's size (above 1: parts were read again).
	Requested       int64   `json:"requested_bytes"`
	RequestedOfSize float64 `json:"requested_of_size"`
	// Sequential is the fraction of reads that started where the one
	// before ended.
	Sequential float64 `json:"sequential_fraction"`
}

// String is the figures in one line, each with its unit: "2311 reads,
// median 90.0 KiB, mean 120.3 KiB, 47% sequential, 12 multi-range
// requests, 1.02× the file read".
func (c *CacheSaw) String() string {
	median := bytes1(float64(c.MedianRead))
	if c.MedianOver > c.Reads {
		median += fmt.Sprintf(" (of all %d reads of the file)", c.MedianOver)
	}
	return fmt.Sprintf("%d reads, median %s, mean %s, %.0f%% sequential, %d multi-range requests, %.2f× the file read",
		c.Reads, median, bytes1(c.MeanRead), 100*c.Sequential, c.MultiRange, c.RequestedOfSize)
}

// bytes1 renders n bytes with a binary unit and one decimal ("90.0 KiB").
func bytes1(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// cachePattern is one entry of a lakefed cache's /api/cache/files, with
// the JSON names of its FilePattern (internal/cache/pattern.go), which
// this package may not import: bench knows no role (internal/arch).
type cachePattern struct {
	Path            string  `json:"path"`
	Size            int64   `json:"size_bytes"`
	Reads           int64   `json:"reads"`
	Requests        int64   `json:"requests"`
	MultiRange      int64   `json:"multi_range_requests"`
	MedianRead      int64   `json:"median_read_bytes"`
	MeanRead        float64 `json:"mean_read_bytes"`
	Requested       int64   `json:"requested_bytes"`
	RequestedOfSize float64 `json:"requested_of_size"`
	Sequential      float64 `json:"sequential_fraction"`
}

// maxCacheAnswer bounds the /api/cache/files answer read: one file's
// entry is a few hundred bytes, and a server that is not a cache may
// answer anything.
const maxCacheAnswer = 1 << 20

// cachePattern asks the target's server for its cache's record of the
// file at u (GET /api/cache/files?path=..., at the server's root, where
// a lakefed cache serves its API whether it runs alone or beside a
// federator). ok is false when the server is not a lakefed cache: it
// answered with an error, not JSON, or JSON of another shape. A cache
// that has not seen the file gives ok and a zero pattern. It is best
// effort: the run's own figures never depend on it.
func (t *Target) cachePattern(ctx context.Context, u *url.URL) (p cachePattern, ok bool) {
	if t.base == nil {
		return p, false
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	api := url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/api/cache/files",
		RawQuery: url.Values{"path": {u.Path}}.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.String(), nil)
	if err != nil {
		return p, false
	}
	req.Header.Set("Accept", "application/json")
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return p, false
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || mt != "application/json" {
		return p, false
	}
	var files []cachePattern
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCacheAnswer)).Decode(&files); err != nil {
		return p, false
	}
	for _, f := range files {
		if f.Path == u.Path {
			return f, true
		}
	}
	return p, true
}

// cacheSaw is what the cache saw between the patterns before and after
// a run; nil when it saw no read. A pattern that went back (the cache
// dropped the file, as it does when the origin's copy changed) counts
// from zero.
func cacheSaw(before, after cachePattern) *CacheSaw {
	if after.Reads < before.Reads || after.Requests < before.Requests || after.Requested < before.Requested {
		before = cachePattern{}
	}
	reads := after.Reads - before.Reads
	if reads <= 0 {
		return nil
	}
	s := &CacheSaw{
		Reads: reads, Requests: after.Requests - before.Requests, MultiRange: after.MultiRange - before.MultiRange,
		MedianRead: after.MedianRead, MedianOver: after.Reads,
		Requested: after.Requested - before.Requested,
	}
	s.MeanRead = float64(s.Requested) / float64(reads)
	if before.Reads == 0 {
		// The cache's own figures, exactly.
		s.MeanRead, s.RequestedOfSize, s.Sequential = after.MeanRead, after.RequestedOfSize, after.Sequential
		return s
	}
	if after.Size > 0 {
		s.RequestedOfSize = float64(s.Requested) / float64(after.Size)
	}
	// The cache gives the sequential fraction over the pairs of reads
	// one after the other; the counts behind it come back exactly.
	seq := func(p cachePattern) (n, pairs int64) {
		pairs = max(p.Reads-1, 0)
		return int64(math.Round(p.Sequential * float64(pairs))), pairs
	}
	sa, pa := seq(after)
	sb, pb := seq(before)
	if pa > pb {
		s.Sequential = float64(sa-sb) / float64(pa-pb)
	}
	return s
}
