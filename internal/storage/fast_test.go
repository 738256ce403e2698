package storage

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/httpx/fastpath"
	"github.com/lakefed/lakefed/internal/testenv"
)

// freshID is a request ID the server made (httpx.TagRequest).
var freshID = regexp.MustCompile(`^[0-9a-f]{16}$`)

// slowHeader is a header the fast path does not know, so a request that
// carries it is handed to net/http: the reference answer.
const slowHeader = "X-Test-Slow"

func fastCount(ts *testServer) float64 { return counterValue(ts.s.m.fast) }

// waitFast waits (up to 5 s) for the fast-path counter to reach want: a
// GET is counted after its body has gone out, so the client can be first.
func waitFast(ts *testServer, want float64) float64 {
	var got float64
	testenv.Within(5*time.Second, func() bool {
		got = fastCount(ts)
		return got >= want
	})
	return got
}

// comparable returns a response's headers without Date, and with a fresh
// request ID masked (each answer has its own), for comparing the fast
// path's answer with net/http's.
func comparable(h http.Header) string {
	var lines []string
	for k, v := range h {
		switch {
		case k == "Date":
		case k == "X-Request-Id" && len(v) == 1 && freshID.MatchString(v[0]):
			lines = append(lines, k+": <fresh>")
		default:
			lines = append(lines, k+": "+strings.Join(v, ","))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestFastPathMatchesHandler: every request the fast path answers gets the
// same status, headers (but Date) and body as from the handler, and every
// request it must not answer still gets the handler's answer.
func TestFastPathMatchesHandler(t *testing.T) {
	ts := startServer(t, Config{})
	for name, data := range map[string]string{
		"f.root": "root file", "a/b/deep.txt": "text", "empty": "", "metrics": "shadowed",
	} {
		p := filepath.Join(ts.root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("f.root", filepath.Join(ts.root, "link"))
	os.Symlink("/etc/passwd", filepath.Join(ts.root, "escape"))
	os.Mkdir(filepath.Join(ts.root, "dir"), 0o755)
	tests := []struct {
		target string
		fast   bool // the fast path answers it
	}{
		{"/f.root", true},
		{"/a/b/deep.txt", true},
		{"/a//b/./deep.txt", true},
		{"//f.root", false},
		{"/empty", true},
		{"/link", true},
		{"/escape", false},
		{"/missing", true},
		{"/missing/deeper", true},
		{"/f.root/under-a-file", false},
		{"/dir", false},
		{"/", false},
		{"/metrics", false},
		{"/.lakefed-upload-x", false},
		{"/../f.root", false},
		{"/%66.root", false},
		{"/f.root?x=1", false},
	}
	for _, tc := range tests {
		for _, method := range []string{"HEAD", "GET"} {
			t.Run(method+tc.target, func(t *testing.T) {
				rc := testenv.DialRaw(t, ts.host)
				before := fastCount(ts)
				rc.Send(fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: test\r\nAccept: */*\r\n\r\n", method, tc.target, ts.host))
				fast, fastBody := rc.Read(method)
				want := before
				if tc.fast {
					want++
				}
				if got := waitFast(ts, want); got != want {
					t.Errorf("fast path answered %v requests, want fast=%v", got, tc.fast)
				}
				rc2 := testenv.DialRaw(t, ts.host)
				rc2.Send(fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n%s: 1\r\n\r\n", method, tc.target, ts.host, slowHeader))
				slow, slowBody := rc2.Read(method)
				if tc.target == "/metrics" { // the counters move between the two requests
					if fast.StatusCode != 200 || method == "GET" && !strings.Contains(fastBody, "lakefed_storage_requests_total") {
						t.Errorf("/metrics = %d %.40q", fast.StatusCode, fastBody)
					}
					return
				}
				if fast.StatusCode != slow.StatusCode {
					t.Errorf("status = %d, handler says %d", fast.StatusCode, slow.StatusCode)
				}
				if f, s := comparable(fast.Header), comparable(slow.Header); f != s {
					t.Errorf("headers:\n%s\nhandler's:\n%s", f, s)
				}
				if fast.Header.Get("Date") == "" {
					t.Error("no Date header")
				}
				if fastBody != slowBody {
					t.Errorf("body = %q, handler's %q", fastBody, slowBody)
				}
			})
		}
	}
}

// TestFastPathPipelining sends requests back to back in one write,
// including one the fast path hands to net/http mid-stream (a PUT) and
// plain ones after it: every answer comes, in order.
func TestFastPathPipelining(t *testing.T) {
	ts := startServer(t, Config{})
	os.WriteFile(filepath.Join(ts.root, "f"), []byte("hello"), 0o644)
	rc := testenv.DialRaw(t, ts.host)
	h := "Host: " + ts.host + "\r\n"
	rc.Send("HEAD /f HTTP/1.1\r\n" + h + "\r\n" +
		"GET /f HTTP/1.1\r\n" + h + "\r\n" +
		"HEAD /f HTTP/1.1\r\n" + h + "\r\n" +
		"PUT /g HTTP/1.1\r\n" + h + "Content-Length: 3\r\n\r\nabc" +
		"GET /g HTTP/1.1\r\n" + h + "\r\n" +
		"GET /f HTTP/1.1\r\n" + h + "Connection: close\r\n\r\n")
	want := []struct {
		method string
		code   int
		body   string
	}{{"HEAD", 200, ""}, {"GET", 200, "hello"}, {"HEAD", 200, ""}, {"PUT", 201, ""}, {"GET", 200, "abc"}, {"GET", 200, "hello"}}
	for i, w := range want {
		resp, body := rc.Read(w.method)
		if resp.StatusCode != w.code || body != w.body {
			t.Errorf("response %d (%s) = %d %q, want %d %q", i, w.method, resp.StatusCode, body, w.code, w.body)
		}
	}
	if got := waitFast(ts, 3); got != 3 {
		t.Errorf("fast path answered %v, want 3 (the rest after the hand-off go to net/http)", got)
	}
	if !rc.EOF() {
		t.Error("connection still open after Connection: close")
	}
}

// TestFastPathConnection covers keep-alive and closing for HTTP/1.1 and
// HTTP/1.0, as net/http does it.
func TestFastPathConnection(t *testing.T) {
	ts := startServer(t, Config{})
	os.WriteFile(filepath.Join(ts.root, "f"), []byte("x"), 0o644)
	tests := []struct {
		name, proto, conn string
		wantHdr           string // the response's Connection header, once "close" is taken out (resp.Close)
		wantClose         bool
	}{
		{"1.1 default", "HTTP/1.1", "", "", false},
		{"1.1 keep-alive", "HTTP/1.1", "keep-alive", "", false},
		{"1.1 close", "HTTP/1.1", "close", "", true},
		{"1.0 default", "HTTP/1.0", "", "", true},
		{"1.0 keep-alive", "HTTP/1.0", "Keep-Alive", "keep-alive", false},
	}
	for _, tc := range tests {
		for _, method := range []string{"HEAD", "GET"} {
			t.Run(tc.name+" "+method, func(t *testing.T) {
				rc := testenv.DialRaw(t, ts.host)
				hdr := "Host: " + ts.host + "\r\n"
				if tc.conn != "" {
					hdr += "Connection: " + tc.conn + "\r\n"
				}
				before := fastCount(ts)
				rc.Send(method + " /f " + tc.proto + "\r\n" + hdr + "\r\n")
				resp, _ := rc.Read(method)
				if got := waitFast(ts, before+1); resp.StatusCode != 200 || got != before+1 {
					t.Fatalf("status %d, fast %v; want 200 from the fast path", resp.StatusCode, got-before)
				}
				if got := resp.Header.Get("Connection"); got != tc.wantHdr {
					t.Errorf("Connection: %q, want %q", got, tc.wantHdr)
				}
				if tc.proto == "HTTP/1.1" && resp.Close != tc.wantClose {
					t.Errorf("Connection: close said %v, want %v", resp.Close, tc.wantClose)
				}
				if tc.wantClose {
					if !rc.EOF() {
						t.Error("connection left open")
					}
					return
				}
				rc.Send(method + " /f " + tc.proto + "\r\n" + hdr + "\r\n")
				if resp, _ := rc.Read(method); resp.StatusCode != 200 {
					t.Errorf("second request on the connection = %d", resp.StatusCode)
				}
			})
		}
	}
	t.Run("1.0 without Host", func(t *testing.T) {
		rc := testenv.DialRaw(t, ts.host)
		rc.Send("HEAD /f HTTP/1.0\r\n\r\n")
		if resp, _ := rc.Read("HEAD"); resp.StatusCode != 200 {
			t.Errorf("status %d, want 200", resp.StatusCode)
		}
	})
	t.Run("1.1 without Host", func(t *testing.T) {
		rc := testenv.DialRaw(t, ts.host)
		rc.Send("HEAD /f HTTP/1.1\r\n\r\n")
		if resp, _ := rc.Read("HEAD"); resp.StatusCode != 400 {
			t.Errorf("status %d, want 400 (net/http's answer)", resp.StatusCode)
		}
	})
	t.Run("keep-alive reuse through http.Client", func(t *testing.T) {
		reused := 0
		for range 3 {
			trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
				if i.Reused {
					reused++
				}
			}}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", ts.url+"/f", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if reused != 2 {
			t.Errorf("%d of 3 requests reused the connection, want 2", reused)
		}
	})
}

// TestFastPathOddRequests: what the fast path must not answer goes to
// net/http with every byte intact.
func TestFastPathOddRequests(t *testing.T) {
	ts := startServer(t, Config{})
	os.WriteFile(filepath.Join(ts.root, "f"), []byte("data"), 0o644)
	host := "Host: " + ts.host + "\r\n"
	tests := []struct {
		name, req, method string
		code              int
		body              string
	}{
		{"bare LF", "GET /f HTTP/1.1\nHost: x\n\n", "GET", 200, "data"},
		{"range", "GET /f HTTP/1.1\r\n" + host + "Range: bytes=1-2\r\n\r\n", "GET", 206, "at"},
		{"if-none-match", "GET /f HTTP/1.1\r\n" + host + "If-None-Match: *\r\n\r\n", "GET", 304, ""},
		{"header just over the buffer", "GET /f HTTP/1.1\r\n" + host + "X-Pad: " + strings.Repeat("p", fastpath.DefaultBufferSize) + "\r\n\r\n", "GET", 200, "data"},
		{"oversized header", "GET /f HTTP/1.1\r\n" + host + "X-Big: " + strings.Repeat("b", 100<<10) + "\r\n\r\n", "GET", 431, ""},
		{"two hosts", "GET /f HTTP/1.1\r\n" + host + host + "\r\n", "GET", 400, ""},
		{"HTTP/1.2", "GET /f HTTP/1.2\r\n" + host + "\r\n", "GET", 200, "data"},
		{"absolute form", "GET http://" + ts.host + "/f HTTP/1.1\r\n" + host + "\r\n", "GET", 200, "data"},
		{"chunked PUT", "PUT /c HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", "PUT", 201, ""},
		{"body on GET", "GET /f HTTP/1.1\r\n" + host + "Content-Length: 2\r\n\r\nzz", "GET", 200, "data"},
		{"control char in header", "GET /f HTTP/1.1\r\n" + host + "User-Agent: a\x01b\r\n\r\n", "GET", 400, ""},
		{"space before colon", "GET /f HTTP/1.1\r\n" + host + "Accept : x\r\n\r\n", "GET", 400, ""},
		{"obs-fold", "GET /f HTTP/1.1\r\n" + host + "Accept: a\r\n b\r\n\r\n", "GET", 200, "data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := testenv.DialRaw(t, ts.host)
			before := fastCount(ts)
			rc.Send(tc.req)
			if tc.code == 431 { // net/http closes without reading the rest: only the status is sure to arrive
				resp, err := http.ReadResponse(rc.BR, nil)
				if err != nil || resp.StatusCode != 431 {
					t.Errorf("oversized header: %v, %v; want 431", resp, err)
				}
				return
			}
			resp, body := rc.Read(tc.method)
			if resp.StatusCode != tc.code {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.code)
			}
			if tc.body != "" && body != tc.body {
				t.Errorf("body %q, want %q", body, tc.body)
			}
			if fastCount(ts) != before {
				t.Error("the fast path answered it")
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(ts.root, "c")); err != nil || string(b) != "abcde" {
		t.Errorf("chunked PUT stored %q, %v; want abcde", b, err)
	}
}

// TestFastPathExpectContinue: a PUT with Expect: 100-continue after a fast
// GET on the same connection gets its 100, then its 201.
func TestFastPathExpectContinue(t *testing.T) {
	ts := startServer(t, Config{})
	os.WriteFile(filepath.Join(ts.root, "f"), []byte("data"), 0o644)
	rc := testenv.DialRaw(t, ts.host)
	host := "Host: " + ts.host + "\r\n"
	rc.Send("GET /f HTTP/1.1\r\n" + host + "\r\n")
	if resp, body := rc.Read("GET"); resp.StatusCode != 200 || body != "data" {
		t.Fatalf("GET = %d %q", resp.StatusCode, body)
	}
	rc.Send("PUT /e HTTP/1.1\r\n" + host + "Content-Length: 4\r\nExpect: 100-continue\r\n\r\n")
	line, err := rc.BR.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("first line %q, %v; want 100 Continue", line, err)
	}
	if _, err := rc.BR.ReadString('\n'); err != nil { // the empty line ending the 100
		t.Fatal(err)
	}
	rc.Send("body")
	if resp, _ := rc.Read("PUT"); resp.StatusCode != 201 {
		t.Errorf("PUT = %d, want 201", resp.StatusCode)
	}
	if b, _ := os.ReadFile(filepath.Join(ts.root, "e")); string(b) != "body" {
		t.Errorf("stored %q, want body", b)
	}
}

// TestFastPathSplitHead: a request head that arrives in pieces is still
// answered by the fast path.
func TestFastPathSplitHead(t *testing.T) {
	ts := startServer(t, Config{})
	os.WriteFile(filepath.Join(ts.root, "f"), []byte("data"), 0o644)
	rc := testenv.DialRaw(t, ts.host)
	for _, part := range []string{"GET /f HT", "TP/1.1\r\nHo", "st: " + ts.host + "\r", "\n", "\r\n"} {
		rc.Send(part) // separate writes (TCP_NODELAY): usually separate reads on the server; the test holds either way
	}
	if resp, body := rc.Read("GET"); resp.StatusCode != 200 || body != "data" {
		t.Errorf("GET = %d %q", resp.StatusCode, body)
	}
	if got := waitFast(ts, 1); got != 1 {
		t.Errorf("fast path answered %v, want 1", got)
	}
}

// TestFastPathMetricsAndLog: fast answers are counted and logged like the
// handler's.
func TestFastPathMetricsAndLog(t *testing.T) {
	var logBuf testenv.SyncBuffer
	s, err := New(Config{Root: t.TempDir(), AccessLog: true}, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.cfg.Root, "f"), []byte("12345"), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	ts := &testServer{s: s, url: "http://" + ln.Addr().String(), host: ln.Addr().String(), root: s.cfg.Root}
	ts.do(t, "GET", "/f", nil)
	ts.do(t, "HEAD", "/f", nil)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v after cancel, want nil", err)
	}
	s.Close()
	if got := counterValue(s.m.requests[methodIndex("GET")][2]); got != 1 {
		t.Errorf("GET 2xx = %v, want 1", got)
	}
	if got := counterValue(s.m.requests[methodIndex("HEAD")][2]); got != 1 {
		t.Errorf("HEAD 2xx = %v, want 1", got)
	}
	if got := counterValue(s.m.sent); got != 5 {
		t.Errorf("sent bytes = %v, want 5", got)
	}
	if got := counterValue(s.m.fast); got != 2 {
		t.Errorf("fast = %v, want 2", got)
	}
	log := logBuf.String()
	for _, want := range []string{"method=GET path=/f status=200 bytes=5", "method=HEAD path=/f status=200 bytes=0"} {
		if !strings.Contains(log, want) {
			t.Errorf("access log lacks %q:\n%s", want, log)
		}
	}
}

// TestFastPathShutdown: cancelling Serve closes idle keep-alive
// connections of both paths, and Serve returns nil.
func TestFastPathShutdown(t *testing.T) {
	s, err := New(Config{Root: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	os.WriteFile(filepath.Join(s.cfg.Root, "f"), []byte("x"), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	ts := &testServer{s: s, host: ln.Addr().String()}
	fast, slow := testenv.DialRaw(t, ts.host), testenv.DialRaw(t, ts.host)
	fast.Send("HEAD /f HTTP/1.1\r\nHost: x\r\n\r\n")
	fast.Read("HEAD")
	slow.Send("HEAD /f HTTP/1.1\r\nHost: x\r\n" + slowHeader + ": 1\r\n\r\n")
	slow.Read("HEAD")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v after cancel, want nil", err)
	}
	if !fast.EOF() {
		t.Error("idle fast-path connection left open")
	}
	if !slow.EOF() {
		t.Error("idle handed-off connection left open")
	}
}
