package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/logging"
	"github.com/lakefed/lakefed/internal/logging/logtest"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// fastAnswers is lakefed_federation_fast_path_requests_total on the
// federator's /metrics (loopback may see it).
func fastAnswers(t *testing.T, fed *servertest.Fed) float64 {
	t.Helper()
	resp, err := http.Get(fed.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "lakefed_federation_fast_path_requests_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no lakefed_federation_fast_path_requests_total on /metrics (%d):\n%.2000s", resp.StatusCode, b)
	return 0
}

// rawGet sends method path on one keep-alive connection per call and
// returns the answer, redirects not followed.
func rawGet(t *testing.T, c net.Conn, br *bufio.Reader, method, path, extra string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, method+" "+path+" HTTP/1.1\r\nHost: fed\r\n"+extra+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func dialFed(t *testing.T, fed *servertest.Fed) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(fed.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

// TestFrontFastPath: on a plain front listener with nothing in front of
// the namespace, a warm GET redirect and a warm HEAD are answered on the
// fast path, with the handler's status and Location, the client's
// request ID, and an access log line as the handler's; the operator's
// pages are still behind their gate.
func TestFrontFastPath(t *testing.T) {
	var buf testenv.SyncBuffer
	log, err := logging.New(&buf, logging.JSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	fed := servertest.Start(t, servertest.Options{Log: log, Configure: func(c *config.Config) {
		c.AccessLog = true
		c.Operator.Anonymous = []string{"10.0.0.0/8"} // loopback is refused the operator's pages
	}})
	if err := os.WriteFile(filepath.Join(fed.Sites[0].Dir, "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The cold GET (the handler's look-up, through the fast path) and
	// the warm ones share a connection.
	c, br := dialFed(t, fed)
	cold := rawGet(t, c, br, "GET", "/f", "")
	warm := rawGet(t, c, br, "GET", "/f", "X-Request-ID: warm-get\r\n")
	head := rawGet(t, c, br, "HEAD", "/f", "X-Request-ID: warm-head\r\n")
	if cold.StatusCode != 302 || warm.StatusCode != 302 || warm.Header.Get("Location") != cold.Header.Get("Location") ||
		warm.Header.Get("Link") != cold.Header.Get("Link") || warm.Header.Get("X-Request-Id") != "warm-get" {
		t.Errorf("cold GET %d %q, warm GET %d %q %q; want the same 302", cold.StatusCode, cold.Header.Get("Location"),
			warm.StatusCode, warm.Header.Get("Location"), warm.Header.Get("X-Request-Id"))
	}
	if head.StatusCode != 200 || head.ContentLength != 5 {
		t.Errorf("warm HEAD = %d, %d bytes; want 200, 5", head.StatusCode, head.ContentLength)
	}
	if refused := rawGet(t, c, br, "GET", "/metrics", ""); refused.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics from loopback = %d, want 401 (operator gate)", refused.StatusCode)
	}
	if refused := rawGet(t, c, br, "GET", "/ui/", ""); refused.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /ui/ from loopback = %d, want 401 (operator gate)", refused.StatusCode)
	}
	for _, want := range []struct{ id, method, status string }{{"warm-get", "GET", "302"}, {"warm-head", "HEAD", "200"}} {
		var line logtest.Line
		if !testenv.Within(10*time.Second, func() bool {
			lines, _ := logtest.Parse(buf.String())
			for _, l := range lines {
				if l[logging.RequestIDKey] == want.id && l["msg"] == "request" {
					line = l
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no access log line for %s:\n%s", want.id, buf.String())
		}
		if line["method"] != want.method || line["path"] != "/f" || line["status"] != want.status || line["bytes"] != "0" ||
			!strings.HasPrefix(line["remote"], "127.0.0.1:") || line["duration"] == "" {
			t.Errorf("access log line %v, want %s /f %s of 0 bytes from loopback", line, want.method, want.status)
		}
	}
	// /metrics itself is refused to loopback here: read the counter
	// through a federator that lets loopback see it.
	fed2 := servertest.Start(t, servertest.Options{})
	os.WriteFile(filepath.Join(fed2.Sites[0].Dir, "f"), []byte("12345"), 0o644)
	c2, br2 := dialFed(t, fed2)
	rawGet(t, c2, br2, "GET", "/f", "")
	rawGet(t, c2, br2, "GET", "/f", "")
	rawGet(t, c2, br2, "HEAD", "/f", "")
	if n := fastAnswers(t, fed2); n != 3 {
		t.Errorf("fast path answered %v requests, want 3 (the cold GET, the warm GET and HEAD)", n)
	}
	// A read pinned to a site (lakefed bench --site) is answered there
	// too.
	pinned := "/f?lakefed.site=" + fed2.Sites[0].Name
	first := rawGet(t, c2, br2, "GET", pinned, "")
	again := rawGet(t, c2, br2, "GET", pinned, "")
	if first.StatusCode != 302 || again.StatusCode != 302 || again.Header.Get("Location") != first.Header.Get("Location") {
		t.Errorf("pinned GET = %d %q, then %d %q; want the same 302", first.StatusCode, first.Header.Get("Location"),
			again.StatusCode, again.Header.Get("Location"))
	}
	if n := fastAnswers(t, fed2); n != 5 {
		t.Errorf("fast path answered %v requests, want 5 (and the two pinned GETs)", n)
	}
}

// TestFrontFastPathOff: with anything in the chain that may change an
// answer (auth rules, a cache on the front listener, a write buffer), no
// request is answered on the fast path, and every answer is the chain's.
func TestFrontFastPathOff(t *testing.T) {
	for _, tc := range []struct {
		name      string
		configure func(t *testing.T, c *config.Config)
		public    string // a path anonymous readers get redirected or answered from
		wantGet   int
		private   string // a path anonymous readers are refused, "" for none
	}{
		{"auth", func(t *testing.T, c *config.Config) {
			c.Auth = &config.Auth{Rules: []config.Rule{{Prefix: "/public", Anonymous: []string{"read", "list"}}}}
		}, "/public/f", http.StatusFound, "/private/f"},
		{"cache on the front listener", func(t *testing.T, c *config.Config) {
			c.Cache = &config.Cache{Dir: t.TempDir(), Origin: config.OriginFederation}
		}, "/public/f", http.StatusOK, ""},
		{"write buffer", func(t *testing.T, c *config.Config) {
			c.Buffer = &config.Buffer{Dir: t.TempDir(), Prefixes: []config.BufferPrefix{{Prefix: "/buf", Targets: []string{"site-a"}}}}
		}, "/public/f", http.StatusFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fed := servertest.Start(t, servertest.Options{Configure: func(c *config.Config) { tc.configure(t, c) }})
			for _, name := range []string{"public/f", "private/f"} {
				p := filepath.Join(fed.Sites[0].Dir, name)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				// A new connection each round: on one, the first
				// declined request would keep the rest on net/http.
				c, br := dialFed(t, fed)
				if resp := rawGet(t, c, br, "GET", tc.public, ""); resp.StatusCode != tc.wantGet {
					t.Errorf("GET %s = %d, want %d", tc.public, resp.StatusCode, tc.wantGet)
				}
				if resp := rawGet(t, c, br, "HEAD", tc.public, ""); resp.StatusCode != http.StatusOK {
					t.Errorf("HEAD %s = %d, want 200", tc.public, resp.StatusCode)
				}
				if tc.private == "" {
					continue
				}
				if resp := rawGet(t, c, br, "GET", tc.private, ""); resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("GET %s = %d, want 401", tc.private, resp.StatusCode)
				}
				if resp := rawGet(t, c, br, "HEAD", tc.private, ""); resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("HEAD %s = %d, want 401", tc.private, resp.StatusCode)
				}
			}
			if n := fastAnswers(t, fed); n != 0 {
				t.Errorf("fast path answered %v requests, want 0", n)
			}
		})
	}
}

// TestFrontFastPathProxied: in proxy mode a warm GET is answered on the
// fast path with the file's bytes, the client's request ID and an access
// log line with the bytes sent, and the connection goes on after it.
func TestFrontFastPathProxied(t *testing.T) {
	var buf testenv.SyncBuffer
	log, err := logging.New(&buf, logging.JSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	fed := servertest.Start(t, servertest.Options{Log: log, Configure: func(c *config.Config) {
		c.AccessLog = true
		c.Federation.Mode = "proxy"
	}})
	data := strings.Repeat("0123456789", 300_000)
	if err := os.WriteFile(filepath.Join(fed.Sites[0].Dir, "f"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	c, br := dialFed(t, fed)
	rawGet(t, c, br, "GET", "/f", "") // cold: the handler's, and the connection with it
	before := fastAnswers(t, fed)
	c, br = dialFed(t, fed)
	for _, id := range []string{"proxied-1", "proxied-2"} {
		if _, err := io.WriteString(c, "GET /f HTTP/1.1\r\nHost: fed\r\nX-Request-ID: "+id+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || err != nil || string(body) != data || resp.Header.Get("X-Request-Id") != id {
			t.Fatalf("%s: GET = %d, %d bytes, %v, ID %q", id, resp.StatusCode, len(body), err, resp.Header.Get("X-Request-Id"))
		}
	}
	if n := fastAnswers(t, fed) - before; n != 2 {
		t.Errorf("fast path answered %v requests, want 2", n)
	}
	var line logtest.Line
	if !testenv.Within(10*time.Second, func() bool {
		lines, _ := logtest.Parse(buf.String())
		for _, l := range lines {
			if l[logging.RequestIDKey] == "proxied-2" && l["msg"] == "request" {
				line = l
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no access log line for proxied-2:\n%.3000s", buf.String())
	}
	if line["method"] != "GET" || line["path"] != "/f" || line["status"] != "200" || line["bytes"] != strconv.Itoa(len(data)) {
		t.Errorf("access log line %v, want GET /f 200 of %d bytes", line, len(data))
	}
}
