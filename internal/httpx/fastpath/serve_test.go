package fastpath

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// freshID is a request ID the server made.
var freshID = regexp.MustCompile(`^[0-9a-f]{16}$`)

// testResponder answers a few targets and declines the rest.
type testResponder struct {
	calls   atomic.Int64
	entered chan struct{} // /block says it started
	release chan struct{} // /block waits for it
}

func (tr *testResponder) Respond(a *Answer, req *Request) bool {
	tr.calls.Add(1)
	switch string(req.Target) {
	case "/hello":
		a.Status(http.StatusOK)
		a.Header("Content-Type", "text/plain")
		a.Body([]byte("hello"))
	case "/redirect":
		a.Status(http.StatusFound)
		a.Header("Location", "http://elsewhere.example/x")
		a.End()
	case "/id":
		a.Status(http.StatusOK)
		a.Body([]byte(req.ID()))
	case "/begun-then-declined":
		a.Status(http.StatusOK)
		a.Header("X-Begun", "1")
		return false
	case "/block":
		tr.entered <- struct{}{}
		<-tr.release
		a.Status(http.StatusOK)
		a.Body([]byte("late"))
	case "/query":
		if string(req.Query) != "answer=me" {
			return false
		}
		a.Status(http.StatusOK)
		a.Body([]byte("fast " + req.HTTPRequest(context.Background()).RequestURI))
	case "/unended":
		a.Status(http.StatusOK)
		return true // a Responder bug: the connection must close, nothing sent
	default:
		return false
	}
	return true
}

// testServer is a Server on loopback with testResponder in front of a
// handler that says it answered (X-Handler) and what it got.
type testServer struct {
	s        *Server
	tr       *testResponder
	addr     string
	handled  atomic.Int64
	log      *testenv.SyncBuffer
	serveErr chan error
}

func startServer(t *testing.T, configure func(*http.Server)) *testServer {
	t.Helper()
	return startServerOpts(t, configure, Options{})
}

// startServerOpts is startServer with opts (Log is the test's).
func startServerOpts(t *testing.T, configure func(*http.Server), opts Options) *testServer {
	t.Helper()
	ts := &testServer{tr: &testResponder{entered: make(chan struct{}, 4), release: make(chan struct{})},
		log: &testenv.SyncBuffer{}, serveErr: make(chan error, 1)}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ts.handled.Add(1)
			w.Header().Set("X-Handler", "yes")
			body, _ := io.ReadAll(r.Body)
			io.WriteString(w, "handler "+r.Method+" "+r.URL.RequestURI()+" "+string(body))
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug),
	}
	if configure != nil {
		configure(srv)
	}
	opts.Log = slog.New(slog.NewTextHandler(ts.log, nil))
	ts.s = New(srv, ts.tr, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	go func() { ts.serveErr <- ts.s.Serve(ln) }()
	t.Cleanup(func() {
		select {
		case <-ts.tr.release:
		default:
			close(ts.tr.release)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ts.s.Shutdown(ctx)
	})
	return ts
}

// conns is how many connections the fast path holds.
func (ts *testServer) conns() int {
	ts.s.mu.Lock()
	defer ts.s.mu.Unlock()
	return len(ts.s.conns)
}

// header returns the value of name among raw header lines, and whether
// it is there.
func header(lines []string, name string) (string, bool) {
	for _, l := range lines {
		if k, v, ok := strings.Cut(l, ": "); ok && strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// TestAnswerFraming: the headers every answer gets, and Content-Length as
// net/http frames it: a body's length; 0 for a GET without body; none
// but the Responder's for a HEAD.
func TestAnswerFraming(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		method, target, status string
		length                 string // "" for none
		body                   string
	}{
		{"GET", "/hello", "HTTP/1.1 200 OK", "5", "hello"},
		{"HEAD", "/hello", "HTTP/1.1 200 OK", "5", ""},
		{"GET", "/redirect", "HTTP/1.1 302 Found", "0", ""},
		{"HEAD", "/redirect", "HTTP/1.1 302 Found", "", ""},
	} {
		rc := testenv.DialRaw(t, ts.addr)
		rc.Send(tc.method + " " + tc.target + " HTTP/1.1\r\nHost: x\r\n\r\n")
		status, lines := rc.Head()
		if status != tc.status {
			t.Errorf("%s %s: status line %q, want %q", tc.method, tc.target, status, tc.status)
		}
		if v, ok := header(lines, "Content-Length"); v != tc.length || ok != (tc.length != "") {
			t.Errorf("%s %s: Content-Length %q (present %v), want %q", tc.method, tc.target, v, ok, tc.length)
		}
		if v, _ := header(lines, "Date"); v == "" {
			t.Errorf("%s %s: no Date", tc.method, tc.target)
		} else if d, err := http.ParseTime(v); err != nil || time.Since(d) > time.Minute {
			t.Errorf("%s %s: Date %q: %v", tc.method, tc.target, v, err)
		}
		if v, _ := header(lines, "X-Request-Id"); !freshID.MatchString(v) {
			t.Errorf("%s %s: X-Request-Id %q, want a fresh one", tc.method, tc.target, v)
		}
		if _, ok := header(lines, "Connection"); ok {
			t.Errorf("%s %s: Connection header on a kept HTTP/1.1 connection: %q", tc.method, tc.target, lines)
		}
		body := make([]byte, len(tc.body))
		if _, err := io.ReadFull(rc.BR, body); err != nil || string(body) != tc.body {
			t.Errorf("%s %s: body %q, %v; want %q", tc.method, tc.target, body, err, tc.body)
		}
		// Nothing more: the next answer starts right after.
		rc.Send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := rc.Read("GET"); resp.StatusCode != 200 || body != "hello" {
			t.Errorf("%s %s: the next answer on the connection = %d %q", tc.method, tc.target, resp.StatusCode, body)
		}
	}
	if n := ts.handled.Load(); n != 0 {
		t.Errorf("the handler answered %d requests, want 0", n)
	}
}

// TestRequestID: a sane X-Request-ID is echoed and is the ID the
// Responder sees; any other gets a fresh one.
func TestRequestID(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		sent  string
		fresh bool
	}{
		{"", true},
		{"trace-1.a_b", false},
		{strings.Repeat("i", 64), false},
		{strings.Repeat("i", 65), true},
		{"has space", true},
		{`quote"`, true},
	} {
		rc := testenv.DialRaw(t, ts.addr)
		hdr := ""
		if tc.sent != "" {
			hdr = "X-Request-ID: " + tc.sent + "\r\n"
		}
		rc.Send("GET /id HTTP/1.1\r\nHost: x\r\n" + hdr + "\r\n")
		resp, body := rc.Read("GET")
		id := resp.Header.Get("X-Request-Id")
		if id != body {
			t.Errorf("sent %q: answered ID %q, the Responder saw %q", tc.sent, id, body)
		}
		if tc.fresh && !freshID.MatchString(id) || !tc.fresh && id != tc.sent {
			t.Errorf("sent %q: ID %q, want fresh=%v", tc.sent, id, tc.fresh)
		}
	}
}

// TestPersistence: keep-alive and close as net/http does them (RFC 9112
// §9.3).
func TestPersistence(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		proto, conn string
		wantHeader  string // the answer's Connection header, "" for none
		wantClose   bool
	}{
		{"HTTP/1.1", "", "", false},
		{"HTTP/1.1", "keep-alive", "", false},
		{"HTTP/1.1", "close", "close", true},
		{"HTTP/1.0", "", "", true},
		{"HTTP/1.0", "Keep-Alive", "keep-alive", false},
		{"HTTP/1.0", "close", "", true},
	} {
		rc := testenv.DialRaw(t, ts.addr)
		hdr := "Host: x\r\n"
		if tc.conn != "" {
			hdr += "Connection: " + tc.conn + "\r\n"
		}
		rc.Send("GET /hello " + tc.proto + "\r\n" + hdr + "\r\n")
		status, lines := rc.Head()
		if want := tc.proto + " 200 OK"; status != want {
			t.Errorf("%s %q: status line %q, want %q (net/http's)", tc.proto, tc.conn, status, want)
		}
		if got, _ := header(lines, "Connection"); got != tc.wantHeader {
			t.Errorf("%s %q: Connection %q, want %q", tc.proto, tc.conn, got, tc.wantHeader)
		}
		io.ReadFull(rc.BR, make([]byte, 5))
		if closed, _ := rc.Closed(300 * time.Millisecond); closed != tc.wantClose {
			t.Errorf("%s %q: closed %v, want %v", tc.proto, tc.conn, closed, tc.wantClose)
		}
	}
}

// TestHandoff: what the fast path must not answer goes to net/http with
// every byte intact, and the Responder is not asked when the request is
// not plain.
func TestHandoff(t *testing.T) {
	ts := startServer(t, func(srv *http.Server) { srv.MaxHeaderBytes = 8 << 10 })
	host := "Host: x\r\n"
	tests := []struct {
		name, req, method string
		code              int
		body              string // "" when not checked
		asked             bool   // the Responder was asked first
	}{
		{"declined", "GET /other HTTP/1.1\r\n" + host + "\r\n", "GET", 200, "handler GET /other ", true},
		{"declined after Status", "GET /begun-then-declined HTTP/1.1\r\n" + host + "\r\n", "GET", 200, "handler GET /begun-then-declined ", true},
		{"bare LF", "GET /hello HTTP/1.1\nHost: x\n\n", "GET", 200, "handler GET /hello ", false},
		{"query", "GET /hello?x=1 HTTP/1.1\r\n" + host + "\r\n", "GET", 200, "handler GET /hello?x=1 ", false},
		{"escape", "GET /h%65llo HTTP/1.1\r\n" + host + "\r\n", "GET", 200, "handler GET /h%65llo ", false},
		{"POST with body", "POST /hello HTTP/1.1\r\n" + host + "Content-Length: 3\r\n\r\nabc", "POST", 200, "handler POST /hello abc", false},
		{"range", "GET /hello HTTP/1.1\r\n" + host + "Range: bytes=0-1\r\n\r\n", "GET", 200, "handler GET /hello ", false},
		{"conditional", "GET /hello HTTP/1.1\r\n" + host + "If-None-Match: *\r\n\r\n", "GET", 200, "handler GET /hello ", false},
		{"header line over the buffer", "GET /hello HTTP/1.1\r\n" + host + "X-Pad: " + strings.Repeat("p", DefaultBufferSize) + "\r\n\r\n", "GET", 200, "handler GET /hello ", false},
		{"head over MaxHeaderBytes", "GET /hello HTTP/1.1\r\n" + host + "X-Big: " + strings.Repeat("b", 64<<10) + "\r\n\r\n", "GET", 431, "", false},
		{"NUL in a value", "GET /hello HTTP/1.1\r\n" + host + "User-Agent: a\x00b\r\n\r\n", "GET", 400, "", false},
		{"no Host", "GET /hello HTTP/1.1\r\n\r\n", "GET", 400, "", false},
		{"two Hosts", "GET /hello HTTP/1.1\r\n" + host + host + "\r\n", "GET", 400, "", false},
		{"space before colon", "GET /hello HTTP/1.1\r\n" + host + "Accept : x\r\n\r\n", "GET", 400, "", false},
		{"HTTP/1.2", "GET /hello HTTP/1.2\r\n" + host + "\r\n", "GET", 200, "handler GET /hello ", false},
		{"absolute form", "GET http://x/hello HTTP/1.1\r\n" + host + "\r\n", "GET", 200, "handler GET /hello ", false},
		{"upgrade", "GET /hello HTTP/1.1\r\n" + host + "Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n", "GET", 200, "handler GET /hello ", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := testenv.DialRaw(t, ts.addr)
			calls, handled := ts.tr.calls.Load(), ts.handled.Load()
			rc.Send(tc.req)
			resp, err := http.ReadResponse(rc.BR, &http.Request{Method: tc.method})
			if err != nil {
				t.Fatalf("read answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code {
				t.Errorf("status %d, want %d (%s)", resp.StatusCode, tc.code, body)
			}
			if tc.body != "" && string(body) != tc.body {
				t.Errorf("body %q, want %q", body, tc.body)
			}
			if tc.code == 200 && resp.Header.Get("X-Handler") != "yes" {
				t.Error("not the handler's answer")
			}
			if resp.Header.Get("X-Begun") != "" {
				t.Error("a declined answer's headers reached the client")
			}
			if asked := ts.tr.calls.Load() != calls; asked != tc.asked {
				t.Errorf("Responder asked: %v, want %v", asked, tc.asked)
			}
			if tc.code == 200 && ts.handled.Load() != handled+1 {
				t.Errorf("handler answered %d, want 1", ts.handled.Load()-handled)
			}
		})
	}
}

// TestQuery: a request with a query reaches the Responder only with
// Options.Query, which sees it as net/http would (Request.Query,
// HTTPRequest); a query that is not plain, or one the Responder
// declines, goes to the handler as sent.
func TestQuery(t *testing.T) {
	off := startServer(t, nil)
	on := startServerOpts(t, nil, Options{Query: true})
	for _, tc := range []struct {
		name, target string
		ts           *testServer
		asked        bool
		body         string
	}{
		{"off", "/query?answer=me", off, false, "handler GET /query?answer=me "},
		{"on", "/query?answer=me", on, true, "fast /query?answer=me"},
		{"on, declined", "/query?other=1&x", on, true, "handler GET /query?other=1&x "},
		{"on, escaped", "/query?answer=m%65", on, false, "handler GET /query?answer=m%65 "},
		{"on, semicolon", "/query?answer=me;x", on, false, "handler GET /query?answer=me;x "},
		{"on, empty", "/query?", on, false, "handler GET /query? "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := testenv.DialRaw(t, tc.ts.addr)
			calls := tc.ts.tr.calls.Load()
			rc.Send("GET " + tc.target + " HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(rc.BR, &http.Request{Method: "GET"})
			if err != nil {
				t.Fatalf("read answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != tc.body {
				t.Errorf("GET %s = %d %q, want 200 %q", tc.target, resp.StatusCode, body, tc.body)
			}
			if asked := tc.ts.tr.calls.Load() != calls; asked != tc.asked {
				t.Errorf("Responder asked: %v, want %v", asked, tc.asked)
			}
		})
	}
}

// TestPipelining: requests sent back to back in one write are answered
// in order, including the one the fast path hands off mid-stream and
// those after it, which net/http answers.
func TestPipelining(t *testing.T) {
	ts := startServer(t, nil)
	rc := testenv.DialRaw(t, ts.addr)
	h := "Host: x\r\n"
	rc.Send("GET /hello HTTP/1.1\r\n" + h + "\r\n" +
		"HEAD /hello HTTP/1.1\r\n" + h + "\r\n" +
		"GET /redirect HTTP/1.1\r\n" + h + "\r\n" +
		"GET /hello HTTP/1.1\r\nX-Request-ID: fourth\r\n" + h + "\r\n" +
		"POST /posted HTTP/1.1\r\n" + h + "Content-Length: 3\r\n\r\nabc" +
		"GET /hello HTTP/1.1\r\n" + h + "\r\n" +
		"GET /after HTTP/1.1\r\n" + h + "Connection: close\r\n\r\n")
	want := []struct {
		method  string
		code    int
		body    string
		handler bool
	}{
		{"GET", 200, "hello", false},
		{"HEAD", 200, "", false},
		{"GET", 302, "", false},
		{"GET", 200, "hello", false},
		{"POST", 200, "handler POST /posted abc", true},
		{"GET", 200, "handler GET /hello ", true},
		{"GET", 200, "handler GET /after ", true},
	}
	for i, w := range want {
		resp, body := rc.Read(w.method)
		if resp.StatusCode != w.code || body != w.body || (resp.Header.Get("X-Handler") == "yes") != w.handler {
			t.Errorf("answer %d (%s) = %d %q handler %q, want %d %q handler %v", i, w.method, resp.StatusCode, body,
				resp.Header.Get("X-Handler"), w.code, w.body, w.handler)
		}
		if i == 3 && resp.Header.Get("X-Request-Id") != "fourth" {
			t.Errorf("answer 3 has ID %q, want fourth: answers out of order", resp.Header.Get("X-Request-Id"))
		}
	}
	if closed, _ := rc.Closed(5 * time.Second); !closed {
		t.Error("connection still open after Connection: close")
	}
}

// TestSplitHead: a head that arrives in pieces is still answered by the
// fast path.
func TestSplitHead(t *testing.T) {
	ts := startServer(t, nil)
	rc := testenv.DialRaw(t, ts.addr)
	for _, part := range []string{"GET /hel", "lo HTTP/1.1\r\nHo", "st: x\r", "\n", "\r\n"} {
		rc.Send(part)
		time.Sleep(20 * time.Millisecond) // separate reads on the server
	}
	resp, body := rc.Read("GET")
	if resp.StatusCode != 200 || body != "hello" || resp.Header.Get("X-Handler") != "" {
		t.Errorf("GET = %d %q (handler %q), want the fast path's hello", resp.StatusCode, body, resp.Header.Get("X-Handler"))
	}
}

// TestClientClosesMidHead: a client gone before its head is complete gets
// nothing, and leaves nothing behind.
func TestClientClosesMidHead(t *testing.T) {
	ts := startServer(t, nil)
	rc := testenv.DialRaw(t, ts.addr)
	rc.Send("GET /hello HTTP/1.1\r\nHo")
	testenv.Eventually(t, 5*time.Second, "the connection to be served", func() bool { return ts.conns() == 1 })
	rc.C.Close()
	testenv.Eventually(t, 5*time.Second, "the connection to be gone", func() bool { return ts.conns() == 0 })
	if n := ts.tr.calls.Load(); n != 0 {
		t.Errorf("Responder asked %d times", n)
	}
	if n := ts.handled.Load(); n != 0 {
		t.Errorf("handler asked %d times", n)
	}
}

// TestSlowHead: a client that trickles its head a byte at a time is cut
// when ReadHeaderTimeout has passed since the head began, as net/http
// does it; every byte it sends does not buy it more time.
func TestSlowHead(t *testing.T) {
	const timeout = 400 * time.Millisecond
	ts := startServer(t, func(srv *http.Server) { srv.ReadHeaderTimeout = timeout })
	rc := testenv.DialRaw(t, ts.addr)
	rc.Send("GET /hello HTTP/1.1\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := rc.C.Write([]byte("X")); err != nil {
					return
				}
			}
		}
	}()
	closed, after := rc.Closed(5 * time.Second)
	if !closed {
		t.Fatalf("a head trickled for %v is still read", after)
	}
	if after < timeout-50*time.Millisecond || after > 3*timeout {
		t.Errorf("closed after %v, want about %v", after, timeout)
	}
	if ts.tr.calls.Load() != 0 || ts.handled.Load() != 0 {
		t.Error("a request was answered")
	}
}

// TestIdleTimeout: a kept connection with nothing to do is closed after
// IdleTimeout.
func TestIdleTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts := startServer(t, func(srv *http.Server) { srv.IdleTimeout = timeout })
	rc := testenv.DialRaw(t, ts.addr)
	rc.Send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
	rc.Read("GET")
	closed, after := rc.Closed(5 * time.Second)
	if !closed || after < timeout-timeout/64-50*time.Millisecond || after > 3*timeout {
		t.Errorf("closed %v after %v, want closed after about %v", closed, after, timeout)
	}
}

// TestResponderMisuse: a Responder that says it answered without ending
// the answer gets the connection closed with nothing sent, and a log
// line.
func TestResponderMisuse(t *testing.T) {
	ts := startServer(t, nil)
	rc := testenv.DialRaw(t, ts.addr)
	rc.Send("GET /unended HTTP/1.1\r\nHost: x\r\n\r\n")
	if closed, _ := rc.Closed(5 * time.Second); !closed {
		t.Fatal("connection left open")
	}
	testenv.Eventually(t, 5*time.Second, "the log line", func() bool { return strings.Contains(ts.log.String(), "panic in fast path") })
}

// TestShutdown: Shutdown closes idle connections of both paths at once,
// waits for an answer in progress, and returns nil.
func TestShutdown(t *testing.T) {
	ts := startServer(t, nil)
	idle, handed, active := testenv.DialRaw(t, ts.addr), testenv.DialRaw(t, ts.addr), testenv.DialRaw(t, ts.addr)
	idle.Send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.Read("GET")
	handed.Send("GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
	handed.Read("GET")
	active.Send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-ts.tr.entered
	done := make(chan error, 1)
	go func() { done <- ts.s.Shutdown(context.Background()) }()
	if closed, _ := idle.Closed(5 * time.Second); !closed {
		t.Error("idle fast-path connection left open")
	}
	if closed, _ := handed.Closed(5 * time.Second); !closed {
		t.Error("idle handed-off connection left open")
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with an answer in progress", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(ts.tr.release)
	if resp, body := active.Read("GET"); resp.StatusCode != 200 || body != "late" {
		t.Errorf("the answer in progress = %d %q", resp.StatusCode, body)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown = %v, want nil", err)
	}
	if err := <-ts.serveErr; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve = %v, want http.ErrServerClosed", err)
	}
	if _, err := net.Dial("tcp", ts.addr); err == nil {
		t.Error("the listener still accepts")
	}
}

// TestShutdownCutsStragglers: an answer still in progress when
// Shutdown's context ends has its connection closed, and Shutdown says
// so.
func TestShutdownCutsStragglers(t *testing.T) {
	ts := startServer(t, nil)
	active := testenv.DialRaw(t, ts.addr)
	active.Send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-ts.tr.entered
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ts.s.Shutdown(ctx) }()
	closed, after := active.Closed(5 * time.Second)
	if !closed || after > 3*time.Second {
		t.Errorf("connection closed %v after %v, want closed once the context ended", closed, after)
	}
	close(ts.tr.release) // the Responder returns; its goroutine ends
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want context.DeadlineExceeded", err)
	}
}

// TestServeUntilCancelled: Serve answers until its context ends, then
// shuts down and returns nil.
func TestServeUntilCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := &http.Server{Handler: http.NotFoundHandler()}
	go func() { done <- Serve(ctx, ln, srv, &testResponder{}, Options{}) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET = %v, %v", resp, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v after cancel, want nil", err)
	}
}
