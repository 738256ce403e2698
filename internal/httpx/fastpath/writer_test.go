package fastpath

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// writerHandlers are handlers run both by net/http and through the fast
// path's Writer, whose answers must be the same.
var writerHandlers = map[string]http.HandlerFunc{
	"/length": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Etag", `"v1"`)
		w.Header().Set("Content-Length", "11")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "hello ")
		io.WriteString(w, "world")
	},
	"/no-length": func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>small</html>") // length and type from the body
	},
	"/nothing": func(w http.ResponseWriter, r *http.Request) {},
	"/request": func(w http.ResponseWriter, r *http.Request) { // what a handler reads (HTTPRequest)
		fmt.Fprintf(w, "%s %s %s %s %s close=%v accept=%q", r.Method, r.URL.Path, r.RequestURI, r.Host, r.Proto, r.Close, r.Header["Accept"])
	},
	"/error": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Length", "4")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "busy")
	},
	"/redirect": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://elsewhere/x")
		w.WriteHeader(http.StatusFound)
	},
	"/not-modified": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Etag", `"v1"`)
		w.WriteHeader(http.StatusNotModified)
	},
	"/multi": func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Link"] = []string{"<a>; rel=duplicate", "<b>; rel=duplicate"}
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
	},
}

// writerResponder answers the writerHandlers through the Writer, and a
// few answers that break; it declines /declined after setting a header.
type writerResponder struct{}

func (writerResponder) Respond(a *Answer, req *Request) bool {
	w := a.Writer()
	r := req.HTTPRequest(context.Background())
	switch p := string(req.Target); p {
	case "/short": // says 10 bytes, gives 5
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "12345")
	case "/aborted": // says 10 bytes, gives 3, and panics as ServeContent does
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "123")
		panic(http.ErrAbortHandler)
	case "/too-long":
		w.Header().Set("Content-Length", "3")
		if n, err := io.WriteString(w, "12345"); n != 3 || err != http.ErrContentLength {
			panic("Write past the Content-Length: " + strconv.Itoa(n))
		}
	case "/big": // no length, more than the Writer holds: in chunks
		w.Write([]byte(strings.Repeat("b", 3*holdMax)))
		w.Write([]byte("end"))
	case "/big-aborted": // the same, cut short as ServeContent cuts it
		w.Write([]byte(strings.Repeat("b", 3*holdMax)))
		panic(http.ErrAbortHandler)
	case "/flushed-aborted": // flushed, then cut short by a Responder that recovers
		io.WriteString(w, "abc")
		w.Flush()
		w.Abort()
	case "/splice":
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "0123")
		if !w.Spliceable() {
			panic("a GET over TCP is not Spliceable")
		}
		n, err := w.Splice(func(dst *net.TCPConn, limit int64) (int64, error) {
			if limit != 6 {
				panic("Splice's limit " + strconv.FormatInt(limit, 10) + ", want 6")
			}
			m, err := dst.Write([]byte("456789"))
			return int64(m), err
		})
		if n != 6 || err != nil {
			panic(err)
		}
	case "/declined":
		w.Header().Set("X-Begun", "1")
		return false
	default:
		h, ok := writerHandlers[p]
		if !ok {
			return false
		}
		h(w, r)
	}
	return true
}

// startWriterPair serves writerHandlers on net/http alone (plain) and
// through the fast path's Writer (fast), whose http.Server answers
// what is handed off with "handed off".
func startWriterPair(t *testing.T) (plain, fast string) {
	t.Helper()
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	mux := http.NewServeMux()
	for p, h := range writerHandlers {
		mux.Handle(p, h)
	}
	hs := &http.Server{Handler: mux}
	ln := listen()
	plain = ln.Addr().String()
	go hs.Serve(ln)
	fs := New(&http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handler", "yes")
		io.WriteString(w, "handed off")
	})}, writerResponder{}, Options{Log: slog.New(slog.DiscardHandler)})
	ln = listen()
	fast = ln.Addr().String()
	go fs.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		fs.Shutdown(ctx)
	})
	return plain, fast
}

// rawExchange sends req on a new connection and returns the answer's
// status line, header lines but Date and X-Request-Id (sorted), and
// body, as framed by its Content-Length.
func rawExchange(t *testing.T, addr, method, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, req)
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: read status: %v", req, err)
	}
	var lines []string
	length := 0
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: read head: %v", req, err)
		}
		if l == "\r\n" {
			break
		}
		if strings.HasPrefix(l, "Date: ") || strings.HasPrefix(l, "X-Request-Id: ") {
			continue
		}
		if v, ok := strings.CutPrefix(l, "Content-Length: "); ok {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
		lines = append(lines, l)
	}
	slices.Sort(lines)
	body := make([]byte, length)
	if method != http.MethodHead {
		if _, err := io.ReadFull(br, body); err != nil {
			t.Fatalf("%s: read body: %v", req, err)
		}
	}
	return status + strings.Join(lines, "") + "\r\n" + string(body)
}

// TestWriterMatchesNetHTTP: a handler answering through the Writer gives
// the answer it gives on net/http: status, header lines (Date and the
// request ID aside) and body, framed alike (a Content-Length from the
// handler, from a short body, 0 for an empty one, none for a 304).
func TestWriterMatchesNetHTTP(t *testing.T) {
	plain, fast := startWriterPair(t)
	for p := range writerHandlers {
		for _, m := range []string{"GET", "HEAD"} {
			for _, req := range []string{
				m + " " + p + " HTTP/1.1\r\nHost: x\r\n\r\n",
				m + " " + p + " HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nConnection: close\r\n\r\n",
				m + " " + p + " HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
			} {
				got, want := rawExchange(t, fast, m, req), rawExchange(t, plain, m, req)
				if got != want {
					t.Errorf("%q through the Writer:\n%s\nnet/http:\n%s", req, got, want)
				}
			}
		}
	}
}

// TestWriterFraming: a body shorter than its Content-Length (the handler
// returned or aborted early) closes the connection after it; bytes past
// it are refused; a body with no length that outgrows the buffer goes in
// chunks and keeps the connection, or, cut short, lacks its last chunk
// and closes it; to HTTP/1.0 it runs to the connection's end; spliced
// bytes count for the framing; a whole answer keeps the connection for
// the next request; a Responder that declines having set a header only
// hands off.
func TestWriterFraming(t *testing.T) {
	_, fast := startWriterPair(t)
	ts := &testServer{addr: fast}
	for _, tc := range []struct {
		target string
		body   string
		broken bool // the body is cut and the connection closed
	}{
		{"/short", "12345", true},
		{"/aborted", "123", true},
		{"/too-long", "123", false},
		{"/big", strings.Repeat("b", 3*holdMax) + "end", false},
		{"/big-aborted", strings.Repeat("b", 3*holdMax), true},
		{"/flushed-aborted", "abc", true},
		{"/splice", "0123456789", false},
		{"/length", "hello world", false},
	} {
		rc := testenv.DialRaw(t, ts.addr)
		rc.Send("GET " + tc.target + " HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(rc.BR, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		body, err := io.ReadAll(resp.Body)
		if string(body) != tc.body || (err != nil) != tc.broken {
			t.Errorf("%s: body %q, %v; want %q, broken %v", tc.target, body, err, tc.body, tc.broken)
		}
		if strings.HasPrefix(tc.target, "/big") && !slices.Equal(resp.TransferEncoding, []string{"chunked"}) {
			t.Errorf("%s: Transfer-Encoding %q; want chunked", tc.target, resp.TransferEncoding)
		}
		if tc.broken {
			if closed, _ := rc.Closed(5 * time.Second); !closed {
				t.Errorf("%s: connection left open", tc.target)
			}
			continue
		}
		rc.Send("GET /length HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := rc.Read("GET"); resp.StatusCode != 200 || body != "hello world" {
			t.Errorf("%s: the next answer on the connection = %d %q", tc.target, resp.StatusCode, body)
		}
	}
	// HTTP/1.0 cannot read chunks: the body runs to the connection's end.
	rc := testenv.DialRaw(t, ts.addr)
	rc.Send("GET /big HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	resp, err := http.ReadResponse(rc.BR, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	if body, err := io.ReadAll(resp.Body); err != nil || len(body) != 3*holdMax+3 || resp.ContentLength != -1 || !resp.Close {
		t.Errorf("/big to HTTP/1.0: %d bytes, %v, Content-Length %d, close %v; want the body to the connection's end", len(body), err, resp.ContentLength, resp.Close)
	}
	if closed, _ := rc.Closed(5 * time.Second); !closed {
		t.Errorf("/big to HTTP/1.0: connection left open")
	}
	rc = testenv.DialRaw(t, ts.addr)
	rc.Send("GET /declined HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, body := rc.Read("GET"); body != "handed off" || resp.Header.Get("X-Begun") != "" {
		t.Errorf("declined: %q, X-Begun %q; want the handler's answer alone", body, resp.Header.Get("X-Begun"))
	}
}
