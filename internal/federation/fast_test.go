package federation

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/fastpath"
	"github.com/lakefed/lakefed/internal/testenv"
)

// fastPair serves one federator twice: handler, its Handler on net/http
// alone; fast, the same behind the fast path with FastResponder. Both
// tag requests with their IDs, as every lakefed listener does.
type fastPair struct {
	*testFed
	handler, fast string // addresses
}

func startFastPair(t testing.TB, yamlText string, fakes ...*fakeEP) *fastPair {
	t.Helper()
	tf := startFed(t, yamlText, fakes...)
	fp := &fastPair{testFed: tf}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	hs := &http.Server{Handler: httpx.RequestIDs(tf.Handler())}
	ln := listen()
	fp.handler = ln.Addr().String()
	go hs.Serve(ln)
	fs := fastpath.New(&http.Server{Handler: httpx.RequestIDs(tf.Handler())}, tf.FastResponder(), fastpath.Options{Log: quiet(), Query: true})
	ln = listen()
	fp.fast = ln.Addr().String()
	go fs.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		fs.Shutdown(ctx)
	})
	return fp
}

// rawAnswer is an answer as it came over the wire: its status line, its
// header lines as sent (but Date), sorted, and its body.
type rawAnswer struct {
	status string
	lines  []string
	body   string
}

func (a rawAnswer) String() string {
	return a.status + "\n" + strings.Join(a.lines, "\n") + "\n\n" + a.body
}

// exchange sends one raw request on a new connection to addr and reads
// its answer raw.
func exchange(t testing.TB, addr, method, req string) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var a rawAnswer
	length := -1
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read head: %v", err)
		}
		l = strings.TrimSuffix(l, "\r\n")
		if a.status == "" {
			a.status = l
			continue
		}
		if l == "" {
			break
		}
		if strings.HasPrefix(l, "Date: ") {
			continue
		}
		if v, ok := strings.CutPrefix(l, "Content-Length: "); ok {
			length, _ = strconv.Atoi(v)
		}
		a.lines = append(a.lines, l)
	}
	slices.Sort(a.lines)
	if method != http.MethodHead && length > 0 {
		b := make([]byte, length)
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatalf("read body: %v", err)
		}
		a.body = string(b)
	}
	return a
}

// fastCount is how many requests the fast path answered.
func (fp *fastPair) fastCount() float64 {
	var m dto.Metric
	if err := fp.m.fast.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// TestFastPathMatchesHandler: the fast path's answers to GET and HEAD,
// warm or not, are the handler's, status and header lines byte for byte
// (Date aside: field order between names carries no meaning, RFC 9110
// §5.3, and net/http sorts them); the requests fastpath never offers and
// the control paths are handed off and get the handler's answer.
func TestFastPathMatchesHandler(t *testing.T) {
	a, b, c := newFake("site-a", true), newFake("site-b", true), newFake("proxied", false)
	for _, f := range []*fakeEP{a, b} {
		f.put("/atlas/f.root", []byte("hello"))
	}
	c.put("/px/f", []byte("proxied bytes"))
	a.put("/atlas/dir/inner", []byte("x"))
	fp := startFastPair(t, cfgYAML(slowHealth, ep("site-a", "priority: 2"), ep("site-b", "priority: 1"), ep("proxied")), a, b, c)
	// Warm the metadata (the handler's look-up); a pinned view has a
	// cache of its own.
	for _, p := range []string{"/atlas/f.root", "/px/f", "/atlas/dir", "/missing",
		"/atlas/f.root?lakefed.site=site-a", "/atlas/f.root?lakefed.site=site-b", "/px/f?lakefed.site=proxied"} {
		exchange(t, fp.handler, "HEAD", "HEAD "+p+" HTTP/1.1\r\nHost: fed\r\n\r\n")
	}
	id := "X-Request-ID: same-id\r\n"
	tests := []struct {
		name, method, req string
		fast              bool // the fast path answers it
	}{
		{"warm GET", "GET", "GET /atlas/f.root HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"warm HEAD", "HEAD", "HEAD /atlas/f.root HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"warm GET, curl's headers", "GET", "GET /atlas/f.root HTTP/1.1\r\nHost: fed\r\nUser-Agent: curl/8\r\nAccept: */*\r\n" + id + "\r\n", true},
		{"warm GET, close", "GET", "GET /atlas/f.root HTTP/1.1\r\nHost: fed\r\nConnection: close\r\n" + id + "\r\n", true},
		{"warm GET, HTTP/1.0 keep-alive", "GET", "GET /atlas/f.root HTTP/1.0\r\nConnection: keep-alive\r\n" + id + "\r\n", true},
		{"warm HEAD, HTTP/1.0", "HEAD", "HEAD /atlas/f.root HTTP/1.0\r\n" + id + "\r\n", true},
		{"warm HEAD of a proxied file", "HEAD", "HEAD /px/f HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"warm GET of a proxied file", "GET", "GET /px/f HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"query", "GET", "GET /atlas/f.root?x=1 HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned GET", "GET", "GET /atlas/f.root?lakefed.site=site-a HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned GET, not the best", "GET", "GET /atlas/f.root?lakefed.site=site-b HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned HEAD", "HEAD", "HEAD /atlas/f.root?lakefed.site=site-b HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned GET of a proxied file", "GET", "GET /px/f?lakefed.site=proxied HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned, cold in that view", "GET", "GET /px/f?lakefed.site=site-a HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned to no endpoint", "GET", "GET /atlas/f.root?lakefed.site=nowhere HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned to nothing", "GET", "GET /atlas/f.root?lakefed.site= HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned twice", "GET", "GET /atlas/f.root?lakefed.site=site-a&lakefed.site=site-b HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned and more", "GET", "GET /atlas/f.root?lakefed.site=site-b&tried=site-b HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned, metalink", "GET", "GET /atlas/f.root?lakefed.site=site-a&metalink HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"pinned, escaped", "GET", "GET /atlas/f.root?lakefed.site=site%2Da HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", false},
		{"tried", "GET", "GET /atlas/f.root?tried=site-a HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"metalink query", "GET", "GET /atlas/f.root?metalink HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"metalink Accept", "GET", "GET /atlas/f.root HTTP/1.1\r\nHost: fed\r\nAccept: " + httpx.MetalinkType + "\r\n" + id + "\r\n", true},
		{"range", "GET", "GET /atlas/f.root HTTP/1.1\r\nHost: fed\r\nRange: bytes=0-1\r\n" + id + "\r\n", false},
		{"conditional GET", "GET", "GET /atlas/f.root HTTP/1.1\r\nHost: fed\r\nIf-None-Match: *\r\n" + id + "\r\n", false},
		{"conditional HEAD", "HEAD", "HEAD /atlas/f.root HTTP/1.1\r\nHost: fed\r\nIf-None-Match: *\r\n" + id + "\r\n", false},
		{"Want-Digest", "HEAD", "HEAD /atlas/f.root HTTP/1.1\r\nHost: fed\r\nWant-Digest: adler32\r\n" + id + "\r\n", false},
		{"debug", "GET", "GET /atlas/f.root HTTP/1.1\r\nHost: fed\r\nX-Lakefed-Debug: 1\r\n" + id + "\r\n", false},
		{"hops", "GET", "GET /atlas/f.root HTTP/1.1\r\nHost: fed\r\n" + httpx.HopsHeader + ": 1\r\n" + id + "\r\n", false},
		{"credentials", "GET", "GET /atlas/f.root HTTP/1.1\r\nHost: fed\r\nAuthorization: Bearer x\r\n" + id + "\r\n", false},
		{"not clean", "GET", "GET /atlas//f.root HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"directory GET", "GET", "GET /atlas/dir HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"directory", "HEAD", "HEAD /atlas/dir HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"missing", "GET", "GET /missing HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", true},
		{"control path", "GET", "GET /api/health HTTP/1.1\r\nHost: fed\r\n" + id + "\r\n", false},
		{"PUT", "PUT", "PUT /atlas/new HTTP/1.1\r\nHost: fed\r\nContent-Length: 0\r\n" + id + "\r\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := fp.fastCount()
			fast := exchange(t, fp.fast, tc.method, tc.req)
			if got := fp.fastCount() - before; got != map[bool]float64{true: 1}[tc.fast] {
				t.Errorf("fast path answered %v, want fast=%v", got, tc.fast)
			}
			if tc.method == "PUT" {
				return // the second PUT would find the file
			}
			handler := exchange(t, fp.handler, tc.method, tc.req)
			if fast.String() != handler.String() {
				t.Errorf("answer:\n%s\nhandler's:\n%s", fast, handler)
			}
		})
	}
}

// TestFastPathColdKeepsTheConnection: the first request for a path needs
// a look-up, which the handler makes through the fast path's Writer; the
// next, on the same connection, is answered from warm metadata with the
// same answer. Neither is handed to net/http.
func TestFastPathColdKeepsTheConnection(t *testing.T) {
	a := newFake("site-a", true)
	a.put("/f", []byte("data"))
	fp := startFastPair(t, cfgYAML(slowHealth, ep("site-a")), a)
	rc := testenv.DialRaw(t, fp.fast)
	req := "GET /f HTTP/1.1\r\nHost: fed\r\nX-Request-ID: one\r\n\r\n"
	rc.Send(req)
	cold, _ := rc.Read("GET")
	if n := fp.fastCount(); n != 1 {
		t.Errorf("fast path answered %v of the cold request, want 1", n)
	}
	rc.Send(req)
	warm, _ := rc.Read("GET")
	if n := fp.fastCount(); n != 2 {
		t.Errorf("fast path answered %v of the two requests on one connection, want 2", n)
	}
	if cold.StatusCode != http.StatusFound || warm.StatusCode != http.StatusFound || cold.Header.Get("Location") != warm.Header.Get("Location") {
		t.Errorf("cold answer %d %q, warm answer %d %q; want the same 302", cold.StatusCode, cold.Header.Get("Location"), warm.StatusCode, warm.Header.Get("Location"))
	}
}

// TestFastPathRedirectCounted: a redirect the fast path answers counts in
// lakefed_federation_redirects_total and the metadata cache hits, as one
// the handler answers does.
func TestFastPathRedirectCounted(t *testing.T) {
	a := newFake("site-a", true)
	a.put("/f", []byte("data"))
	fp := startFastPair(t, cfgYAML(slowHealth, ep("site-a")), a)
	redirects := func() float64 { return gathered(t, fp.Registry(), "lakefed_federation_redirects_total", "site-a") }
	hits := func() float64 { return gathered(t, fp.Registry(), "lakefed_federation_metadata_cache_hits_total", "") }
	req := "GET /f HTTP/1.1\r\nHost: fed\r\n\r\n"
	exchange(t, fp.handler, "GET", req) // the look-up: a miss, and a redirect
	if r := redirects(); r != 1 {
		t.Fatalf("redirects after the first GET = %v, want 1", r)
	}
	h0 := hits()
	exchange(t, fp.handler, "GET", req)
	if r, h := redirects(), hits(); r != 2 || h != h0+1 {
		t.Errorf("after a warm GET on the handler: redirects %v, hits %v; want 2, %v", r, h, h0+1)
	}
	exchange(t, fp.fast, "GET", req)
	if n := fp.fastCount(); n != 1 {
		t.Fatalf("fast path answered %v, want 1", n)
	}
	if r, h := redirects(), hits(); r != 3 || h != h0+2 {
		t.Errorf("after a warm GET on the fast path: redirects %v, hits %v; want 3, %v", r, h, h0+2)
	}
	exchange(t, fp.fast, "HEAD", "HEAD /f HTTP/1.1\r\nHost: fed\r\n\r\n")
	exchange(t, fp.handler, "GET", "GET /missing HTTP/1.1\r\nHost: fed\r\n\r\n")
	// answers_total counts both paths alike, by method and status class.
	for _, c := range []struct {
		method, class string
		want          float64
	}{{"GET", "3xx", 3}, {"HEAD", "2xx", 1}, {"GET", "4xx", 1}, {"GET", "2xx", 0}} {
		if got := answers(t, fp.Registry(), c.method, c.class); got != c.want {
			t.Errorf("answers_total{method=%s,code=%s} = %v, want %v", c.method, c.class, got, c.want)
		}
	}
}

// answers is lakefed_federation_answers_total{method, code} on reg.
func answers(t testing.TB, reg *prometheus.Registry, method, class string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "lakefed_federation_answers_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var mm, cm bool
			for _, l := range m.GetLabel() {
				mm = mm || l.GetName() == "method" && l.GetValue() == method
				cm = cm || l.GetName() == "code" && l.GetValue() == class
			}
			if mm && cm {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestFastPathPresignRefresh: a pre-signed URL past half its life is
// signed again on the fast path too (refreshURLs), in Location and Link.
func TestFastPathPresignRefresh(t *testing.T) {
	s3 := newFake("cloud", false)
	s3.presign = 1200 * time.Millisecond
	s3.put("/f", []byte("object"))
	fp := startFastPair(t, cfgYAML(slowHealth+"\nmetadata_cache: {ttl: 1200ms}", ep("cloud")), s3)
	req := "GET /f HTTP/1.1\r\nHost: fed\r\n\r\n"
	first := exchange(t, fp.handler, "GET", req)
	born := time.Now()
	time.Sleep(700 * time.Millisecond) // past half the URL's life, within the entry's TTL
	again := exchange(t, fp.fast, "GET", req)
	if time.Since(born) >= 1200*time.Millisecond {
		t.Skip("too slow to stay within the cache TTL")
	}
	if n := fp.fastCount(); n != 1 {
		t.Fatalf("fast path answered %v, want 1", n)
	}
	loc := func(a rawAnswer) string {
		for _, l := range a.lines {
			if v, ok := strings.CutPrefix(l, "Location: "); ok {
				return v
			}
		}
		return ""
	}
	if loc(again) == loc(first) || loc(again) == "" {
		t.Errorf("Location %q is the old signature %q", loc(again), loc(first))
	}
	if !slices.ContainsFunc(again.lines, func(l string) bool { return strings.Contains(l, "<"+loc(again)+">") }) {
		t.Errorf("Location %q is not the Link's URL: %q", loc(again), again.lines)
	}
}

// gathered is the value of the counter name (with endpoint label ep, ""
// for none) on reg.
func gathered(t testing.TB, reg *prometheus.Registry, name, ep string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if ep == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "endpoint" && l.GetValue() == ep }) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
