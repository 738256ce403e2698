package federation

import (
	"bytes"
	"encoding/xml"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
)

const slowHealth = "health: {interval: 1h}"

func ep(name string, extra ...string) string {
	return "name: " + name + "\nurl: http://" + name + ".example/\n" + strings.Join(extra, "\n")
}

func TestRedirectAndLinkHeaders(t *testing.T) {
	a, b, c := newFake("site-a", true), newFake("site-b", true), newFake("site-c", true)
	a.put("/atlas/f.root", []byte("hello"))
	b.put("/atlas/f.root", []byte("hello"))
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a", "priority: 2"), ep("site-b", "priority: 1"), ep("site-c", "priority: 3")), a, b, c)

	resp, _ := tf.do(t, "GET", "/atlas/f.root", nil, nil)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("GET status = %d, want 302", resp.StatusCode)
	}
	if got, want := resp.Header.Get("Location"), "http://site-b.example/atlas/f.root"; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	wantLink := "<http://site-b.example/atlas/f.root>; rel=duplicate; pri=1, <http://site-a.example/atlas/f.root>; rel=duplicate; pri=2"
	if got := resp.Header.Get("Link"); got != wantLink {
		t.Errorf("Link = %q, want %q", got, wantLink)
	}
	// Warm: the next requests are answered without asking anyone.
	before := a.stats.Load() + b.stats.Load() + c.stats.Load()
	for range 10 {
		tf.do(t, "GET", "/atlas/f.root", nil, nil)
	}
	if after := a.stats.Load() + b.stats.Load() + c.stats.Load(); after != before {
		t.Errorf("warm GETs made %d Stat calls, want 0", after-before)
	}
	if before != 3 {
		t.Errorf("first GET made %d Stat calls, want 3 (one per endpoint)", before)
	}
}

func TestMetalink(t *testing.T) {
	a, b := newFake("site-a", true), newFake("site-b", true)
	data := []byte("metalink me")
	a.put("/f", data)
	b.put("/f", data)
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a", "priority: 1"), ep("site-b", "priority: 2")), a, b)
	want, _, _ := httpx.Sums(bytes.NewReader(data), httpx.Adler32)
	for _, tc := range []struct {
		name string
		path string
		hdr  http.Header
	}{
		{"accept", "/f", http.Header{"Accept": {httpx.MetalinkType}}},
		{"query", "/f?metalink", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tf.do(t, "GET", tc.path, tc.hdr, nil)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != httpx.MetalinkType {
				t.Fatalf("status %d type %q, want 200 %s", resp.StatusCode, resp.Header.Get("Content-Type"), httpx.MetalinkType)
			}
			m, err := httpx.ParseMetalink(strings.NewReader(body))
			if err != nil {
				t.Fatalf("ParseMetalink: %v\n%s", err, body)
			}
			if m.XMLName.Space != httpx.MetalinkNS || len(m.Files) != 1 {
				t.Fatalf("metalink = %+v", m)
			}
			f := m.Files[0]
			if f.Name != "f" || f.Size != int64(len(data)) {
				t.Errorf("file = %q size %d, want f size %d", f.Name, f.Size, len(data))
			}
			if len(f.Hashes) != 1 || f.Hashes[0].Type != "adler32" || f.Hashes[0].Value != want["adler32"] {
				t.Errorf("hashes = %+v, want adler32 %s", f.Hashes, want["adler32"])
			}
			var urls []string
			for i, u := range f.URLs {
				urls = append(urls, u.URL)
				if u.Priority != i+1 {
					t.Errorf("url %d priority %d", i, u.Priority)
				}
			}
			if wantURLs := []string{"http://site-a.example/f", "http://site-b.example/f"}; !slices.Equal(urls, wantURLs) {
				t.Errorf("urls = %q, want %q", urls, wantURLs)
			}
		})
	}
}

func TestHeadFromMetadata(t *testing.T) {
	a := newFake("site-a", true)
	data := bytes.Repeat([]byte("x"), 1234)
	a.put("/d/f", data)
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a")), a)
	want, _, _ := httpx.Sums(bytes.NewReader(data), httpx.Adler32)
	for range 3 {
		resp, _ := tf.do(t, "HEAD", "/d/f", http.Header{"Want-Digest": {"adler32"}}, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("HEAD = %d", resp.StatusCode)
		}
		checks := map[string]string{
			"Content-Length": "1234",
			"Last-Modified":  time.Unix(1700000000, 0).UTC().Format(http.TimeFormat),
			"Digest":         "adler32=" + want["adler32"],
			"Accept-Ranges":  "bytes",
			"Link":           "<http://site-a.example/d/f>; rel=duplicate; pri=1",
		}
		for k, v := range checks {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
	}
	if n := a.stats.Load(); n != 1 {
		t.Errorf("Stat calls = %d, want 1", n)
	}
	if n := a.opens.Load(); n != 0 {
		t.Errorf("HEAD opened the file %d times", n)
	}
	// A directory says so.
	resp, _ := tf.do(t, "HEAD", "/d", nil, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "httpd/unix-directory" {
		t.Errorf("HEAD dir = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestNotFoundVersusUnavailable(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(a, b *fakeEP)
		wantStatus int
		wantBody   []string
	}{
		{"all say no", func(a, b *fakeEP) {}, 404, []string{"site-a: not found", "site-b: not found"}},
		{"one unavailable", func(a, b *fakeEP) { b.statErr.Store(error(&net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded})) },
			503, []string{"site-a: not found", "site-b: unavailable"}},
		{"one hangs", func(a, b *fakeEP) { b.hang.Store(true) }, 503, []string{"site-b: unavailable"}},
		{"one refuses", func(a, b *fakeEP) { b.statErr.Store(error(endpoint.ErrRefused)) }, 403, []string{"site-b: refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newFake("site-a", true), newFake("site-b", true)
			tt.setup(a, b)
			tf := startFed(t, cfgYAML(slowHealth, ep("site-a"), ep("site-b", "timeout: 200ms")), a, b)
			resp, body := tf.do(t, "GET", "/nothing/here", nil, nil)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body:\n%s", resp.StatusCode, tt.wantStatus, body)
			}
			for _, w := range tt.wantBody {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q:\n%s", w, body)
				}
			}
			if tt.wantStatus == 503 && resp.Header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
		})
	}
	t.Run("down endpoint not asked", func(t *testing.T) {
		a, b := newFake("site-a", true), newFake("site-b", true)
		tf := startFed(t, cfgYAML("health: {interval: 20ms, fail_after: 1}", ep("site-a"), ep("site-b")), a, b)
		b.down.Store(true)
		testenv.Eventually(t, 5*time.Second, "site-b down", func() bool { return tf.state("site-b") == "down" })
		n := b.stats.Load()
		resp, body := tf.do(t, "GET", "/x", nil, nil)
		if resp.StatusCode != 503 || !strings.Contains(body, "site-b: down, not asked") {
			t.Errorf("status %d body %q, want 503 naming site-b as down", resp.StatusCode, body)
		}
		if b.stats.Load() != n {
			t.Error("a down endpoint was asked")
		}
	})
}

func TestLookupCoalesced(t *testing.T) {
	a, b := newFake("site-a", true), newFake("site-b", true)
	a.put("/f", []byte("x"))
	gate := make(chan struct{})
	a.gate.Store(&gate)
	b.gate.Store(&gate)
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a"), ep("site-b")), a, b)
	var entered atomic.Int64
	h := tf.srv.Config.Handler
	tf.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		h.ServeHTTP(w, r)
	})
	var wg sync.WaitGroup
	codes := make([]int, 100)
	for i := range 100 {
		wg.Go(func() {
			resp, err := noFollow.Get(tf.srv.URL + "/f")
			if err != nil {
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	// Wait until every request is in and the one flight is under way,
	// then let it finish.
	testenv.Eventually(t, 10*time.Second, "100 requests in", func() bool {
		return entered.Load() == 100 && a.stats.Load() >= 1 && b.stats.Load() >= 1
	})
	close(gate)
	wg.Wait()
	if na, nb := a.stats.Load(), b.stats.Load(); na != 1 || nb != 1 {
		t.Errorf("Stat calls = %d, %d; want 1 per endpoint", na, nb)
	}
	for i, c := range codes {
		if c != 302 {
			t.Fatalf("request %d: status %d, want 302", i, c)
		}
	}
}

func TestCacheTTLAndInvalidation(t *testing.T) {
	a := newFake("site-a", true)
	a.put("/old", []byte("x"))
	tf := startFed(t, cfgYAML(slowHealth+"\nmetadata_cache: {ttl: 1h, negative_ttl: 1h}", ep("site-a", "writable: true")), a)

	// A miss is cached (negative TTL).
	if resp, _ := tf.do(t, "GET", "/new", nil, nil); resp.StatusCode != 404 {
		t.Fatalf("GET /new = %d, want 404", resp.StatusCode)
	}
	a.put("/new", []byte("y"))
	if resp, _ := tf.do(t, "GET", "/new", nil, nil); resp.StatusCode != 404 {
		t.Fatalf("GET /new after a write behind our back = %d, want the cached 404", resp.StatusCode)
	}
	// A PUT through the federator invalidates it (carried, not
	// redirected: the file exists).
	resp, _ := tf.do(t, "PUT", "/new", nil, strings.NewReader("y"))
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT = %d, want 204", resp.StatusCode)
	}
	if resp, _ := tf.do(t, "GET", "/new", nil, nil); resp.StatusCode != 302 {
		t.Errorf("GET /new after PUT = %d, want 302", resp.StatusCode)
	}
	// DELETE through the federator invalidates a found entry.
	if resp, _ := tf.do(t, "GET", "/old", nil, nil); resp.StatusCode != 302 {
		t.Fatalf("GET /old = %d", resp.StatusCode)
	}
	if resp, body := tf.do(t, "DELETE", "/old", nil, nil); resp.StatusCode != 204 {
		t.Fatalf("DELETE = %d %s", resp.StatusCode, body)
	}
	if resp, _ := tf.do(t, "GET", "/old", nil, nil); resp.StatusCode != 404 {
		t.Errorf("GET /old after DELETE = %d, want 404", resp.StatusCode)
	}

	t.Run("short negative ttl expires", func(t *testing.T) {
		b := newFake("site-b", true)
		tf := startFed(t, cfgYAML(slowHealth+"\nmetadata_cache: {negative_ttl: 30ms}", ep("site-b")), b)
		if resp, _ := tf.do(t, "GET", "/late", nil, nil); resp.StatusCode != 404 {
			t.Fatal("want 404 first")
		}
		b.put("/late", []byte("z"))
		testenv.Eventually(t, 5*time.Second, "negative entry expires", func() bool {
			resp, _ := tf.do(t, "GET", "/late", nil, nil)
			return resp.StatusCode == 302
		})
	})
}

func TestCacheBounded(t *testing.T) {
	c := newCache(64, testHot, nil) // one entry per shard
	now := time.Now().UnixNano()
	for i := range 1000 {
		c.put("/f"+string(rune('a'+i%26))+strings.Repeat("x", i), &entry{expires: now + int64(time.Hour)}, now)
	}
	if n := c.len(); n > 64 {
		t.Errorf("cache holds %d entries, want at most 64", n)
	}
	c.put("/e", &entry{expires: now - 1}, now)
	if c.get("/e", now) != nil {
		t.Error("expired entry returned")
	}
}

func TestRankingPriorityAndProximity(t *testing.T) {
	// The test client is 127.0.0.1: placed in Geneva by client_networks.
	geneva, chicago := "location: [46.23, 6.05]", "location: [41.85, -88.27]"
	nets := "client_networks: [{networks: [127.0.0.0/8], location: [46.2, 6.1]}]"
	mk := func() (*fakeEP, *fakeEP, *fakeEP) {
		a, b, c := newFake("site-a", true), newFake("site-b", true), newFake("site-c", true)
		for _, f := range []*fakeEP{a, b, c} {
			f.put("/f", []byte("x"))
		}
		return a, b, c
	}
	first := func(tf *testFed) string {
		resp, _ := tf.do(t, "GET", "/f", nil, nil)
		return strings.TrimSuffix(strings.TrimPrefix(resp.Header.Get("Location"), "http://"), ".example/f")
	}
	t.Run("priority beats proximity", func(t *testing.T) {
		a, b, c := mk()
		tf := startFed(t, cfgYAML(slowHealth+"\n"+nets, ep("site-a", geneva, "priority: 2"), ep("site-b", chicago, "priority: 1"), ep("site-c", geneva, "priority: 3")), a, b, c)
		for range 20 {
			if got := first(tf); got != "site-b" {
				t.Fatalf("first = %s, want site-b (priority 1)", got)
			}
		}
	})
	t.Run("proximity by client network", func(t *testing.T) {
		a, b, c := mk()
		tf := startFed(t, cfgYAML(slowHealth+"\n"+nets, ep("site-a", chicago), ep("site-b", geneva), ep("site-c")), a, b, c)
		for range 20 {
			resp, _ := tf.do(t, "GET", "/f", nil, nil)
			link := resp.Header.Get("Link")
			if !strings.HasPrefix(link, "<http://site-b.example/f>; rel=duplicate; pri=1, <http://site-a.example/f>; rel=duplicate; pri=2") {
				t.Fatalf("Link = %q, want site-b (near) then site-a (far) then the unlocated", link)
			}
		}
	})
	t.Run("proximity by geoip", func(t *testing.T) {
		db := writeGeoIP(t, "127.0.0.0/8", 41.9, -87.6) // the client is in Chicago now
		a, b, c := mk()
		tf := startFed(t, cfgYAML(slowHealth+"\n"+nets+"\ngeoip_db: "+db, ep("site-a", chicago), ep("site-b", geneva), ep("site-c")), a, b, c)
		for range 20 {
			if got := first(tf); got != "site-a" {
				t.Fatalf("first = %s, want site-a (GeoIP puts the client in Chicago)", got)
			}
		}
	})
	t.Run("spread among near-equals", func(t *testing.T) {
		a, b, c := mk()
		tf := startFed(t, cfgYAML(slowHealth+"\n"+nets+"\nfuzz_latency: 1h", ep("site-a", geneva), ep("site-b", "location: [46.3, 6.2]"), ep("site-c", chicago)), a, b, c)
		seen := map[string]int{}
		for range 100 {
			seen[first(tf)]++
		}
		if seen["site-a"] == 0 || seen["site-b"] == 0 || seen["site-c"] != 0 {
			t.Errorf("first choices = %v, want site-a and site-b both, never site-c", seen)
		}
	})
}

// writeGeoIP writes a tiny GeoIP2-City database placing network at lat, lon.
func writeGeoIP(t *testing.T, network string, lat, lon float64) string {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoIP2-City", RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	_, n, err := net.ParseCIDR(network)
	if err != nil {
		t.Fatal(err)
	}
	rec := mmdbtype.Map{"location": mmdbtype.Map{"latitude": mmdbtype.Float64(lat), "longitude": mmdbtype.Float64(lon)}}
	if err := tree.Insert(n, rec); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "city.mmdb")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(fh); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProxyRanges(t *testing.T) {
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	a := newFake("site-a", false) // no Redirecter: always proxied
	a.put("/f", data)
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a")), a)

	resp, body := tf.do(t, "GET", "/f", nil, nil)
	if resp.StatusCode != 200 || body != string(data) {
		t.Fatalf("GET = %d, %d bytes; want 200 and the file", resp.StatusCode, len(body))
	}
	resp, body = tf.do(t, "GET", "/f", http.Header{"Range": {"bytes=100-199"}}, nil)
	if resp.StatusCode != 206 || body != string(data[100:200]) || resp.Header.Get("Content-Range") != "bytes 100-199/1048576" {
		t.Errorf("single range = %d %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Range"), len(body))
	}
	resp, body = tf.do(t, "GET", "/f", http.Header{"Range": {"bytes=-10"}}, nil)
	if resp.StatusCode != 206 || body != string(data[len(data)-10:]) {
		t.Errorf("suffix range = %d, %d bytes", resp.StatusCode, len(body))
	}
	resp, body = tf.do(t, "GET", "/f", http.Header{"Range": {"bytes=0-9,500000-500099,1048570-"}}, nil)
	if resp.StatusCode != 206 {
		t.Fatalf("multi-range = %d", resp.StatusCode)
	}
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" {
		t.Fatalf("multi-range type %q: %v", resp.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(strings.NewReader(body), params["boundary"])
	want := []struct {
		cr   string
		data []byte
	}{{"bytes 0-9/1048576", data[:10]}, {"bytes 500000-500099/1048576", data[500000:500100]}, {"bytes 1048570-1048575/1048576", data[1048570:]}}
	for i, w := range want {
		part, err := mr.NextPart()
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		got, _ := io.ReadAll(part)
		if part.Header.Get("Content-Range") != w.cr || !bytes.Equal(got, w.data) {
			t.Errorf("part %d = %q, %d bytes; want %q", i, part.Header.Get("Content-Range"), len(got), w.cr)
		}
	}
	if _, err := mr.NextPart(); err != io.EOF {
		t.Errorf("after the last part: %v, want EOF", err)
	}
	resp, _ = tf.do(t, "GET", "/f", http.Header{"Range": {"bytes=2000000-"}}, nil)
	if resp.StatusCode != 416 || resp.Header.Get("Content-Range") != "bytes */1048576" {
		t.Errorf("unsatisfiable = %d %q", resp.StatusCode, resp.Header.Get("Content-Range"))
	}
}

func TestProxyFailoverMidStream(t *testing.T) {
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	a, b, c := newFake("site-a", true), newFake("site-b", true), newFake("site-c", true)
	for _, f := range []*fakeEP{a, b, c} {
		f.put("/f", data)
	}
	a.failAfter.Store(1<<20 + 17) // site-a breaks a little after 1 MiB
	b.failAfter.Store(2<<20 + 5)  // site-b a little after 2 MiB
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("site-a", "priority: 1"), ep("site-b", "priority: 2"), ep("site-c", "priority: 3")), a, b, c)
	resp, body := tf.do(t, "GET", "/f", nil, nil)
	if resp.StatusCode != 200 || !bytes.Equal([]byte(body), data) {
		t.Fatalf("GET = %d, %d bytes; want 200 and the file byte-identical", resp.StatusCode, len(body))
	}
	if a.opens.Load() != 1 || b.opens.Load() != 1 || c.opens.Load() != 1 {
		t.Errorf("opens = %d %d %d, want 1 each", a.opens.Load(), b.opens.Load(), c.opens.Load())
	}
	// A range across the break points too.
	resp, body = tf.do(t, "GET", "/f", http.Header{"Range": {"bytes=1048000-2200000"}}, nil)
	if resp.StatusCode != 206 || !bytes.Equal([]byte(body), data[1048000:2200001]) {
		t.Errorf("range across failovers = %d, %d bytes", resp.StatusCode, len(body))
	}
}

func TestPropfindMerged(t *testing.T) {
	a, b, c := newFake("site-a", true), newFake("site-b", true), newFake("site-c", true)
	a.put("/d/x", []byte("1"))
	a.put("/d/y", []byte("22"))
	b.put("/d/y", []byte("22"))
	b.put("/d/z", []byte("333"))
	b.put("/d/sub/w", []byte("4"))
	c.put("/q", []byte("5")) // c holds /cms; its /q is /cms/q
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a"), ep("site-b"), ep("site-c", "prefix: /cms/data")), a, b, c)

	type ms struct {
		Responses []struct {
			Href string `xml:"href"`
			Coll *struct {
				C *struct{} `xml:"collection"`
			} `xml:"propstat>prop>resourcetype"`
			Len int64 `xml:"propstat>prop>getcontentlength"`
		} `xml:"response"`
	}
	propfind := func(p, depth string) (int, map[string]bool) {
		resp, body := tf.do(t, "PROPFIND", p, http.Header{"Depth": {depth}}, nil)
		if resp.StatusCode != 207 {
			return resp.StatusCode, nil
		}
		var m ms
		if err := xml.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("multistatus: %v\n%s", err, body)
		}
		out := map[string]bool{}
		for _, r := range m.Responses {
			if out[r.Href] {
				t.Errorf("%s listed twice", r.Href)
			}
			out[r.Href] = r.Coll != nil && r.Coll.C != nil
		}
		return 207, out
	}
	code, got := propfind("/d", "1")
	want := map[string]bool{"/d/": true, "/d/x": false, "/d/y": false, "/d/z": false, "/d/sub/": true}
	if code != 207 || !equalMaps(got, want) {
		t.Errorf("PROPFIND /d depth 1 = %d %v, want %v", code, got, want)
	}
	code, got = propfind("/d/y", "0")
	if code != 207 || !equalMaps(got, map[string]bool{"/d/y": false}) {
		t.Errorf("PROPFIND /d/y depth 0 = %d %v", code, got)
	}
	// The root shows the prefix of site-c as a virtual directory.
	code, got = propfind("/", "1")
	if code != 207 || !got["/cms/"] || !got["/d/"] {
		t.Errorf("PROPFIND / = %d %v, want /cms/ and /d/ as directories", code, got)
	}
	code, got = propfind("/cms/data", "1")
	if code != 207 || !equalMaps(got, map[string]bool{"/cms/data/": true, "/cms/data/q": false}) {
		t.Errorf("PROPFIND /cms/data = %d %v", code, got)
	}
	if code, _ := propfind("/nope", "1"); code != 404 {
		t.Errorf("PROPFIND /nope = %d, want 404", code)
	}
	if code, _ := propfind("/d", "infinity"); code != 403 {
		t.Errorf("PROPFIND depth infinity = %d, want 403", code)
	}
}

func equalMaps(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func TestPutPlacement(t *testing.T) {
	t.Run("priority", func(t *testing.T) {
		a, b, c := newFake("site-a", true), newFake("site-b", true), newFake("site-c", true)
		tf := startFed(t, cfgYAML("health: {interval: 20ms, fail_after: 1}", ep("site-a", "priority: 2", "writable: true"),
			ep("site-b", "priority: 1", "writable: true"), ep("site-c", "priority: 0")), a, b, c)
		resp, _ := tf.do(t, "PUT", "/new", nil, strings.NewReader("data"))
		if resp.StatusCode != 307 || resp.Header.Get("Location") != "http://site-b.example/new" {
			t.Fatalf("PUT = %d %q, want 307 to site-b", resp.StatusCode, resp.Header.Get("Location"))
		}
		// With site-b down, a PUT is refused rather than placed on
		// site-a: site-b may hold the path, and its version would come
		// back with it (TestPutWhileReplicaDown).
		b.down.Store(true)
		testenv.Eventually(t, 5*time.Second, "site-b down", func() bool { return tf.state("site-b") == "down" })
		resp, _ = tf.do(t, "PUT", "/new", nil, strings.NewReader("data"))
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("PUT with site-b down = %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	})
	t.Run("spread", func(t *testing.T) {
		a, b := newFake("site-a", true), newFake("site-b", true)
		tf := startFed(t, cfgYAML(slowHealth+"\nplacement: spread", ep("site-a", "writable: true"), ep("site-b", "writable: true")), a, b)
		seen := map[string]int{}
		for range 10 {
			resp, _ := tf.do(t, "PUT", "/new", nil, strings.NewReader("data"))
			seen[resp.Header.Get("Location")]++
		}
		if seen["http://site-a.example/new"] != 5 || seen["http://site-b.example/new"] != 5 {
			t.Errorf("spread placement = %v, want 5 and 5", seen)
		}
	})
	t.Run("proxied endpoint", func(t *testing.T) {
		a := newFake("site-a", false)
		tf := startFed(t, cfgYAML(slowHealth, ep("site-a", "writable: true", "prefix: /scratch", "path: /base")), a)
		resp, body := tf.do(t, "PUT", "/scratch/f", nil, strings.NewReader("stored"))
		if resp.StatusCode != 201 {
			t.Fatalf("PUT = %d %s", resp.StatusCode, body)
		}
		if got, ok := a.get("/base/f"); !ok || string(got) != "stored" {
			t.Errorf("endpoint has %q (%v) at /base/f", got, ok)
		}
		resp, body = tf.do(t, "GET", "/scratch/f", nil, nil)
		if resp.StatusCode != 200 || body != "stored" {
			t.Errorf("GET after proxied PUT = %d %q", resp.StatusCode, body)
		}
	})
	t.Run("nothing writable", func(t *testing.T) {
		a := newFake("site-a", true)
		tf := startFed(t, cfgYAML(slowHealth, ep("site-a")), a)
		if resp, _ := tf.do(t, "PUT", "/f", nil, strings.NewReader("x")); resp.StatusCode != 403 {
			t.Errorf("PUT with no writable endpoint = %d, want 403", resp.StatusCode)
		}
	})
}

func TestDeleteAndMkcol(t *testing.T) {
	a, b, c := newFake("site-a", true), newFake("site-b", true), newFake("site-c", true)
	a.put("/f", []byte("1"))
	b.put("/f", []byte("1"))
	c.put("/f", []byte("1"))
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a", "writable: true"), ep("site-b", "writable: true"), ep("site-c")), a, b, c)
	resp, body := tf.do(t, "DELETE", "/f", nil, nil)
	if resp.StatusCode != 403 || !strings.Contains(body, "site-c: read-only") {
		t.Errorf("DELETE with a read-only replica = %d %q, want 403 naming site-c", resp.StatusCode, body)
	}
	_, okA := a.get("/f")
	_, okB := b.get("/f")
	if okA || okB {
		t.Errorf("after DELETE: site-a has it %v, site-b %v; want both gone", okA, okB)
	}
	c.mu.Lock()
	delete(c.files, "/f")
	c.mu.Unlock()
	if resp, _ := tf.do(t, "DELETE", "/f", nil, nil); resp.StatusCode != 404 {
		t.Errorf("second DELETE = %d, want 404", resp.StatusCode)
	}
	a.put("/g", []byte("1"))
	b.put("/g", []byte("1"))
	if resp, _ := tf.do(t, "DELETE", "/g", nil, nil); resp.StatusCode != 204 {
		t.Errorf("DELETE of two writable replicas = %d, want 204", resp.StatusCode)
	}
	if resp, _ := tf.do(t, "MKCOL", "/newdir/sub", nil, nil); resp.StatusCode != 201 {
		t.Errorf("MKCOL = %d, want 201", resp.StatusCode)
	}
	a.mu.Lock()
	okA = a.dirs["/newdir/sub"]
	a.mu.Unlock()
	c.mu.Lock()
	okC := c.dirs["/newdir/sub"]
	c.mu.Unlock()
	if !okA || okC {
		t.Errorf("MKCOL made the dir on site-a %v (want true), on read-only site-c %v (want false)", okA, okC)
	}
}

func TestHealthDownAndBack(t *testing.T) {
	a, b := newFake("site-a", true), newFake("site-b", true)
	a.put("/f", []byte("x"))
	b.put("/f", []byte("x"))
	tf := startFed(t, cfgYAML("health: {interval: 50ms, timeout: 200ms, fail_after: 2, recover_after: 2}",
		ep("site-a", "priority: 1"), ep("site-b", "priority: 2")), a, b)
	loc := func() string {
		resp, _ := tf.do(t, "GET", "/f", nil, nil)
		return resp.Header.Get("Location")
	}
	if got := loc(); got != "http://site-a.example/f" {
		t.Fatalf("Location = %q, want site-a", got)
	}
	a.down.Store(true)
	testenv.Eventually(t, 5*time.Second, "site-a marked down", func() bool { return tf.state("site-a") == "down" })
	for range 10 {
		if got := loc(); got != "http://site-b.example/f" {
			t.Fatalf("with site-a down, Location = %q", got)
		}
	}
	a.down.Store(false)
	testenv.Eventually(t, 5*time.Second, "site-a back up", func() bool { return tf.state("site-a") == "up" })
	if got := loc(); got != "http://site-a.example/f" {
		t.Errorf("site-a back: Location = %q", got)
	}
	// A slow probe fails too.
	b.hang.Store(true)
	testenv.Eventually(t, 5*time.Second, "hanging site-b marked down", func() bool { return tf.state("site-b") == "down" })
}

func TestPassiveHealth(t *testing.T) {
	a := newFake("site-a", true)
	tf := startFed(t, cfgYAML("health: {interval: 1h, error_limit: 3}", ep("site-a")), a)
	a.statErr.Store(error(endpoint.ErrUnavailable))
	for i := range 3 {
		if tf.state("site-a") != "up" {
			t.Fatalf("down after %d errors, want after 3", i)
		}
		tf.do(t, "GET", "/x"+string(rune('a'+i)), nil, nil)
	}
	if tf.state("site-a") != "down" {
		t.Error("still up after 3 consecutive request errors")
	}
}

func TestTried(t *testing.T) {
	a, b := newFake("site-a", true), newFake("site-b", true)
	a.put("/f", []byte("x"))
	b.put("/f", []byte("x"))
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a", "priority: 1"), ep("site-b", "priority: 2")), a, b)
	resp, _ := tf.do(t, "GET", "/f?tried=site-a", nil, nil)
	if got := resp.Header.Get("Location"); got != "http://site-b.example/f" {
		t.Errorf("tried=site-a: Location = %q, want site-b", got)
	}
	if link := resp.Header.Get("Link"); strings.Contains(link, "site-a") {
		t.Errorf("tried=site-a: Link still offers it: %q", link)
	}
	resp, body := tf.do(t, "GET", "/f?tried=site-a,site-b", nil, nil)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("tried both = %d %q, want 503 with Retry-After", resp.StatusCode, body)
	}
}

func TestDebugHeader(t *testing.T) {
	a := newFake("site-a", true)
	a.put("/f", []byte("x"))
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a")), a)
	resp, _ := tf.do(t, "GET", "/f", http.Header{DebugHeader: {"1"}}, nil)
	if got := resp.Header.Get(ChoiceHeader); !strings.Contains(got, "site-a priority=1") || !strings.Contains(got, "site-a=found") {
		t.Errorf("%s = %q", ChoiceHeader, got)
	}
}

func TestBadPaths(t *testing.T) {
	a := newFake("site-a", true)
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a")), a)
	for _, p := range []string{"/a/%2e%2e/b", "/a/%00", "/a/%FF%FE"} {
		resp, _ := tf.do(t, "GET", p, nil, nil)
		if resp.StatusCode != 400 {
			t.Errorf("GET %s = %d, want 400", p, resp.StatusCode)
		}
	}
	for _, tc := range []struct {
		p     string
		clean bool
	}{{"/", true}, {"/a/b", true}, {"/a/", false}, {"/a//b", false}, {"/a/./b", false}, {"/a/../b", false}, {"/..", false}, {"/.x", true}, {"/a..", true}, {"/a/\xff", false}, {"/\u00e9", false}} {
		if got := isClean(tc.p); got != tc.clean {
			t.Errorf("isClean(%q) = %v, want %v", tc.p, got, tc.clean)
		}
		if c, err := httpx.CleanPath(tc.p); tc.clean && (err != nil || c != tc.p) {
			t.Errorf("isClean(%q) but CleanPath = %q, %v", tc.p, c, err)
		}
	}
}

func TestMetricsAndAPI(t *testing.T) {
	a := newFake("site-a", true)
	a.put("/f", []byte("x"))
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a")), a)
	tf.do(t, "GET", "/f", nil, nil)
	tf.do(t, "GET", "/f", nil, nil)
	_, body := tf.do(t, "GET", "/metrics", nil, nil)
	for _, w := range []string{
		`lakefed_federation_redirects_total{endpoint="site-a"} 2`,
		`lakefed_federation_metadata_cache_hits_total 1`,
		`lakefed_federation_metadata_cache_misses_total 1`,
		`lakefed_federation_locates_total{result="found"} 1`,
		`lakefed_federation_endpoint_up{endpoint="site-a"} 1`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
	resp, body := tf.do(t, "GET", "/api/endpoints", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"name": "site-a"`) || !strings.Contains(body, `"state": "up"`) {
		t.Errorf("/api/endpoints = %d %s", resp.StatusCode, body)
	}
	if resp, _ := tf.do(t, "POST", "/api/reload", nil, nil); resp.StatusCode != 501 {
		t.Errorf("reload without a reloader = %d, want 501", resp.StatusCode)
	}
}

// TestPrefixMostSpecific: an endpoint configured for /scratch takes the
// writes under /scratch even when an endpoint for / is preferred by
// priority, and reads under /scratch find what it holds.
func TestPrefixMostSpecific(t *testing.T) {
	cases := []struct {
		name     string
		mode     string // "" (redirect) or "proxy"
		path     string
		wantSite string
	}{
		{"scratch redirect", "", "/scratch/s.txt", "site-c"},
		{"scratch proxied", "mode: proxy", "/scratch/sub/s.txt", "site-c"},
		{"outside the prefix", "", "/other/s.txt", "site-a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, c := newFake("site-a", tc.mode == ""), newFake("site-c", tc.mode == "")
			extra := []string{"writable: true", "prefix: /scratch", "priority: 5"}
			if tc.mode != "" {
				extra = append(extra, tc.mode)
			}
			tf := startFed(t, cfgYAML(slowHealth, ep("site-a", "writable: true", "priority: 1"), ep("site-c", extra...)), a, c)
			resp, body := tf.do(t, "PUT", tc.path, nil, strings.NewReader("data"))
			site := resp.Header.Get("X-Lakefed-Endpoint")
			if loc := resp.Header.Get("Location"); loc != "" {
				site, _, _ = strings.Cut(strings.TrimPrefix(loc, "http://"), ".example")
				// A redirected write is the client's to make: make it.
				f := map[string]*fakeEP{"site-a": a, "site-c": c}[site]
				rest := tc.path
				if site == "site-c" {
					rest = strings.TrimPrefix(tc.path, "/scratch")
				}
				if f != nil {
					f.put(rest, []byte("data"))
				}
			} else if resp.StatusCode != 201 {
				t.Fatalf("PUT %s = %d %s", tc.path, resp.StatusCode, body)
			}
			if site != tc.wantSite {
				t.Fatalf("PUT %s went to %q, want %q", tc.path, site, tc.wantSite)
			}
			other := map[string]*fakeEP{"site-a": c, "site-c": a}[tc.wantSite]
			if _, ok := other.get(tc.path); ok {
				t.Errorf("the other site holds %s too", tc.path)
			}
			resp, body = tf.do(t, "GET", tc.path, nil, nil)
			got := resp.Header.Get("X-Lakefed-Endpoint")
			if loc := resp.Header.Get("Location"); loc != "" {
				got, _, _ = strings.Cut(strings.TrimPrefix(loc, "http://"), ".example")
			}
			if got == "" && body == "data" {
				got = tc.wantSite // proxied: the only replica is there (checked above)
			}
			if resp.StatusCode >= 400 || got != tc.wantSite {
				t.Errorf("GET %s = %d from %q (%q), want it from %s", tc.path, resp.StatusCode, got, body, tc.wantSite)
			}
		})
	}
}

// TestDeleteReport: a DELETE that leaves replicas says, on the first line
// of its body (the line clients show), which replicas went and which were
// refused and why.
func TestDeleteReport(t *testing.T) {
	cases := []struct {
		name     string
		holders  []string // sites holding /f
		wantLine string
	}{
		{"only replica read-only", []string{"site-c"},
			"lakefed: delete /f: no replica was deleted; refused: site-c (read-only in the federation)"},
		{"one deleted one refused", []string{"site-a", "site-c"},
			"lakefed: delete /f: deleted: site-a; refused: site-c (read-only in the federation)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, c := newFake("site-a", true), newFake("site-c", true)
			fakes := map[string]*fakeEP{"site-a": a, "site-c": c}
			for _, h := range tc.holders {
				fakes[h].put("/f", []byte("1"))
			}
			tf := startFed(t, cfgYAML(slowHealth, ep("site-a", "writable: true"), ep("site-c")), a, c)
			resp, body := tf.do(t, "DELETE", "/f", nil, nil)
			first, _, _ := strings.Cut(body, "\n")
			if resp.StatusCode != 403 || first != tc.wantLine {
				t.Errorf("DELETE = %d, first line %q, want 403 %q", resp.StatusCode, first, tc.wantLine)
			}
			if _, ok := c.get("/f"); !ok {
				t.Errorf("the read-only replica was deleted")
			}
		})
	}
}
