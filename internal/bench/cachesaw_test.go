package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lakefed/lakefed/internal/httpx"
)

// fakeCache is memServer behind a front that counts, as a lakefed cache
// does, the ranges of every GET of a file and answers /api/cache/files
// with them (the JSON names of internal/cache's FilePattern, written out
// here so that a renamed tag on either side shows).
type fakeCache struct {
	m *memServer

	mu    sync.Mutex // guards files
	files map[string]*fakePattern
}

type fakePattern struct {
	size                               int64
	reads, requests, multi, bytes, seq int64
	lastEnd                            int64
	sizes                              []int64
}

func (c *fakeCache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api/cache/files" {
		c.serveFiles(w, r)
		return
	}
	if r.Method == http.MethodGet {
		c.m.mu.Lock()
		b, ok := c.m.files[r.URL.Path]
		c.m.mu.Unlock()
		if ok {
			size := int64(len(b))
			rs, err := httpx.ParseRange(r.Header.Get("Range"), size)
			if err != nil || len(rs) == 0 {
				rs = []httpx.Range{{Start: 0, Length: size}}
			}
			c.mu.Lock()
			p := c.files[r.URL.Path]
			if p == nil {
				p = &fakePattern{size: size}
				c.files[r.URL.Path] = p
			}
			p.requests++
			if len(rs) > 1 {
				p.multi++
			}
			for _, rg := range rs {
				if p.reads > 0 && rg.Start == p.lastEnd {
					p.seq++
				}
				p.reads++
				p.bytes += rg.Length
				p.lastEnd = rg.Start + rg.Length
				p.sizes = append(p.sizes, rg.Length)
			}
			c.mu.Unlock()
		}
	}
	c.m.ServeHTTP(w, r)
}

func (c *fakeCache) serveFiles(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []map[string]any{}
	for path, p := range c.files {
		if q := r.URL.Query().Get("path"); q != "" && q != path {
			continue
		}
		s := slices.Clone(p.sizes)
		slices.Sort(s)
		e := map[string]any{
			"path": path, "size_bytes": p.size, "cached_bytes": p.size, "reads": p.reads, "requests": p.requests,
			"multi_range_requests": p.multi, "requested_bytes": p.bytes,
			"requested_of_size": float64(p.bytes) / float64(p.size), "median_read_bytes": s[len(s)/2],
			"mean_read_bytes": float64(p.bytes) / float64(p.reads), "sequential_fraction": 0.0,
			"verified": false,
		}
		if p.reads > 1 {
			e["sequential_fraction"] = float64(p.seq) / float64(p.reads-1)
		}
		out = append(out, e)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// snapshot returns the counts of path so far.
func (c *fakeCache) snapshot(path string) fakePattern {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.files[path]; p != nil {
		s := *p
		s.sizes = slices.Clone(p.sizes)
		return s
	}
	return fakePattern{}
}

// TestROOTCacheSaw: against a server that is a lakefed cache, each run of
// the ROOT test reports what the cache counted during that run alone
// (the second run's figures are not the sum of both), and prints it;
// against servers that are not a cache it reports nothing.
func TestROOTCacheSaw(t *testing.T) {
	m := &memServer{files: map[string][]byte{}}
	fc := &fakeCache{m: m, files: map[string]*fakePattern{}}
	srv := httptest.NewServer(fc)
	t.Cleanup(srv.Close)
	tg := newTarget(t, srv.URL+"/base/", "")
	if _, err := Prepare(context.Background(), tg, PrepareOptions{OpenFiles: -1, ReadFiles: -1, ROOTEvents: 20000,
		Common: Common{Seed: 5}}); err != nil {
		t.Fatalf("Prepare = %v", err)
	}
	path := "/base" + SamplePath
	var prev fakePattern
	for _, pf := range []bool{false, true} {
		res, err := ROOT(context.Background(), tg, ROOTOptions{Prefetch: pf})
		if err != nil {
			t.Fatalf("ROOT(prefetch=%v) = %v", pf, err)
		}
		s := res.Summary.(*ROOTSummary)
		now := fc.snapshot(path)
		if s.Cache == nil {
			t.Fatalf("prefetch=%v: no cache figures; the fake cache counted %d reads of %s", pf, now.reads, path)
		}
		got := *s.Cache
		reads, reqs, multi, byts := now.reads-prev.reads, now.requests-prev.requests, now.multi-prev.multi, now.bytes-prev.bytes
		if got.Reads != reads || got.Requests != reqs || got.MultiRange != multi || got.Requested != byts {
			t.Errorf("prefetch=%v: cache saw %d reads, %d requests, %d multi-range, %d bytes; the cache counted %d, %d, %d, %d this run",
				pf, got.Reads, got.Requests, got.MultiRange, got.Requested, reads, reqs, multi, byts)
		}
		// The client's own count of requests is the cache's: nothing else reads.
		if int64(s.Calls) != got.Requests || s.BytesRead != got.Requested {
			t.Errorf("prefetch=%v: the client sent %d requests for %d bytes, the cache saw %d for %d",
				pf, s.Calls, s.BytesRead, got.Requests, got.Requested)
		}
		if pf != (got.MultiRange > 0) {
			t.Errorf("prefetch=%v: %d multi-range requests", pf, got.MultiRange)
		}
		wantSeq := float64(now.seq-prev.seq) / float64(now.reads-1-max(prev.reads-1, 0))
		if d := got.Sequential - wantSeq; d > 1e-9 || d < -1e-9 {
			t.Errorf("prefetch=%v: sequential %.4f, want %.4f", pf, got.Sequential, wantSeq)
		}
		if want := float64(byts) / float64(now.size); got.RequestedOfSize != want {
			t.Errorf("prefetch=%v: requested of size %.4f, want %.4f", pf, got.RequestedOfSize, want)
		}
		if want := float64(byts) / float64(reads); got.MeanRead != want {
			t.Errorf("prefetch=%v: mean %.1f B, want %.1f B", pf, got.MeanRead, want)
		}
		if got.MedianOver != now.reads {
			t.Errorf("prefetch=%v: median over %d reads, want all %d the cache saw", pf, got.MedianOver, now.reads)
		}
		var out bytes.Buffer
		if err := WriteSummary(&out, res, Verdict{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "cache saw") || !strings.Contains(out.String(), got.String()) {
			t.Errorf("prefetch=%v: summary has no cache line %q:\n%s", pf, got.String(), out.String())
		}
		// Stored and shown again, the figures survive.
		raw, _ := json.Marshal(res.Summary)
		if back, ok := DecodeSummary("root", raw).(*ROOTSummary); !ok || back.Cache == nil || *back.Cache != got {
			t.Errorf("prefetch=%v: the stored summary decodes to %+v, want cache %+v", pf, back, got)
		}
		t.Logf("prefetch=%v: cache saw: %s", pf, got.String())
		prev = now
	}

	notCaches := map[string]http.Handler{
		"404": nil, // memServer: no such file
		"html": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/cache/files" {
				w.Header().Set("Content-Type", "text/html")
				_, _ = w.Write([]byte("<html>a file</html>"))
				return
			}
			m.ServeHTTP(w, r)
		}),
		"other json": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/cache/files" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"files": 3}`))
				return
			}
			m.ServeHTTP(w, r)
		}),
	}
	for name, h := range notCaches {
		t.Run(name, func(t *testing.T) {
			if h == nil {
				h = m
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			res, err := ROOT(context.Background(), newTarget(t, srv.URL+"/base/", ""), ROOTOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c := res.Summary.(*ROOTSummary).Cache; c != nil {
				t.Errorf("a server that is not a cache gave cache figures %+v", c)
			}
			var out bytes.Buffer
			if err := WriteSummary(&out, res, Verdict{}); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out.String(), "cache saw") {
				t.Errorf("summary shows a cache line for a server that is not a cache:\n%s", out.String())
			}
		})
	}
}

func TestCacheSawDelta(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after cachePattern
		want          *CacheSaw
		line          string
	}{{
		name:  "first run: the cache's figures",
		after: cachePattern{Size: 1000, Reads: 4, Requests: 3, MultiRange: 1, MedianRead: 100, MeanRead: 250, Requested: 1000, RequestedOfSize: 1, Sequential: 2.0 / 3},
		want:  &CacheSaw{Reads: 4, Requests: 3, MultiRange: 1, MedianRead: 100, MedianOver: 4, MeanRead: 250, Requested: 1000, RequestedOfSize: 1, Sequential: 2.0 / 3},
		line:  "4 reads, median 100 B, mean 250 B, 67% sequential, 1 multi-range requests, 1.00× the file read",
	}, {
		name:   "second run: its own reads",
		before: cachePattern{Size: 1 << 20, Reads: 4, Requests: 3, MultiRange: 1, MedianRead: 100, Requested: 1000, Sequential: 2.0 / 3},
		after:  cachePattern{Size: 1 << 20, Reads: 14, Requests: 5, MultiRange: 3, MedianRead: 92160, Requested: 1000 + 10*123187, Sequential: 9.0 / 13},
		want: &CacheSaw{Reads: 10, Requests: 2, MultiRange: 2, MedianRead: 92160, MedianOver: 14, MeanRead: 123187,
			Requested: 10 * 123187, RequestedOfSize: 10 * 123187.0 / (1 << 20), Sequential: 7.0 / 10},
		line: "10 reads, median 90.0 KiB (of all 14 reads of the file), mean 120.3 KiB, 70% sequential, 2 multi-range requests, 1.17× the file read",
	}, {
		name:   "nothing read meanwhile",
		before: cachePattern{Reads: 4, Requests: 3},
		after:  cachePattern{Reads: 4, Requests: 3},
	}, {
		name:   "the cache dropped the file: counted from zero",
		before: cachePattern{Size: 100, Reads: 40, Requests: 30, Requested: 4000},
		after:  cachePattern{Size: 100, Reads: 2, Requests: 1, MultiRange: 1, MedianRead: 50, MeanRead: 50, Requested: 100, RequestedOfSize: 1},
		want:   &CacheSaw{Reads: 2, Requests: 1, MultiRange: 1, MedianRead: 50, MedianOver: 2, MeanRead: 50, Requested: 100, RequestedOfSize: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := cacheSaw(tc.before, tc.after)
			switch {
			case (got == nil) != (tc.want == nil):
				t.Fatalf("cacheSaw = %+v, want %+v", got, tc.want)
			case got == nil:
				return
			}
			const eps = 1e-9
			g, w := *got, *tc.want
			if d := g.Sequential - w.Sequential; d > eps || d < -eps {
				t.Errorf("sequential = %v, want %v", g.Sequential, w.Sequential)
			}
			if d := g.RequestedOfSize - w.RequestedOfSize; d > eps || d < -eps {
				t.Errorf("requested of size = %v, want %v", g.RequestedOfSize, w.RequestedOfSize)
			}
			g.Sequential, g.RequestedOfSize, w.Sequential, w.RequestedOfSize = 0, 0, 0, 0
			if g != w {
				t.Errorf("cacheSaw = %+v, want %+v", g, w)
			}
			if tc.line != "" && got.String() != tc.line {
				t.Errorf("String() = %q, want %q", got.String(), tc.line)
			}
		})
	}
}
