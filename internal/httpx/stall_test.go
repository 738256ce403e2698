package httpx_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
)

// sendServer serves GET /file (a file of size bytes, by sendfile through
// SendConn.ReadFrom) and GET /mem (the same bytes by Write) on loopback
// under a stall timeout of d, and returns its address.
func sendServer(t *testing.T, size int, d time.Duration) (addr string, data []byte) {
	t.Helper()
	data = bytes.Repeat([]byte("0123456789abcdef"), size/16)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mem" {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data)
			return
		}
		http.ServeFile(w, r, path)
	})}
	go srv.Serve(httpx.SendListener(ln, d))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), data
}

// A client that stops reading is reset once a step has waited the send
// timeout, by sendfile and by Write alike: it gets what the kernel held
// for it and then ECONNRESET, never the whole answer.
func TestSendTimeoutResetsStalledClient(t *testing.T) {
	const d = 500 * time.Millisecond
	addr, data := sendServer(t, 64<<20, d)
	for _, target := range []string{"/file", "/mem", "/file?range"} {
		t.Run(target, func(t *testing.T) {
			var hdr []string
			if target == "/file?range" {
				target, hdr = "/file", []string{"Range: bytes=1-"}
			}
			testenv.StallGetReset(t, d, int64(len(data)), addr, target, hdr...)
		})
	}
}

// A client that reads slowly but steadily is never cut, though its
// answer takes many times the stall timeout.
func TestSendTimeoutSpareSlowReader(t *testing.T) {
	const d = 2 * time.Second // 2 MiB within it: a tenth of the reader's pace
	addr, data := sendServer(t, 48<<20, d)
	for _, target := range []string{"/file", "/mem"} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			code, n, err := testenv.SlowGet(nil, "http://"+addr+target, 512<<10, 50*time.Millisecond)
			if err != nil || code != 200 || n != int64(len(data)) {
				t.Fatalf("%s: %d, %d bytes, %v; want 200 and %d bytes", target, code, n, err, len(data))
			}
			if took := time.Since(start); took < d {
				t.Errorf("%s took %v: not slow enough to show that the timeout is per step", target, took)
			}
		})
	}
}

// ReadFrom moves a source step by step and uses up an io.LimitedReader
// as io.Copy would, so that a caller can tell a short source from a
// whole one by its N: from a file (sendfile), a socket (splice) and a
// reader of neither kind.
func TestSendConnReadFromLimited(t *testing.T) {
	const size = 5<<20 + 3
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, bytes.Repeat([]byte{7}, size), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"file", "socket", "reader"} {
		t.Run(kind, func(t *testing.T) {
			dst, sink := testenv.TCPPair(t)
			got := make(chan int64, 1)
			go func() { n, _ := io.Copy(io.Discard, sink); got <- n }()
			var src io.Reader
			switch kind {
			case "file":
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				src = f
			case "socket":
				in, out := testenv.TCPPair(t)
				go func() { out.Write(make([]byte, size)); out.Close() }()
				src = in
			default:
				src = bytes.NewReader(make([]byte, size))
			}
			sc := httpx.NewSendConn(dst, time.Second)
			lr := &io.LimitedReader{R: src, N: size + 100}
			n, err := sc.ReadFrom(lr)
			if err != nil || n != size || lr.N != 100 {
				t.Fatalf("ReadFrom = %d, %v, N %d; want %d, nil, N 100", n, err, lr.N, size)
			}
			lr = &io.LimitedReader{R: src, N: 10}
			if n, err := sc.ReadFrom(lr); n != 0 || err != nil || lr.N != 10 {
				t.Fatalf("ReadFrom at the end = %d, %v, N %d; want 0, nil, N 10", n, err, lr.N)
			}
			dst.CloseWrite()
			if n := <-got; n != size {
				t.Fatalf("the peer got %d bytes, want %d", n, size)
			}
		})
	}
}

// Over HTTP/2 a client can leave a stream's window shut while it keeps
// its connection alive, so no write on the connection stalls: the
// stream's own write deadline must end the answer. A handler that writes
// to such a stream gets the deadline's error once a step has waited the
// send timeout, and the client gets a reset stream, never the whole body.
func TestSendTimeoutHTTP2Stream(t *testing.T) {
	const d = 500 * time.Millisecond
	const size = 64 << 20
	ended := make(chan error, 1)
	srv := httptest.NewUnstartedServer(httpx.StallHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		buf := make([]byte, 1<<20)
		var err error
		for n := 0; n < size && err == nil; n += len(buf) {
			_, err = w.Write(buf)
		}
		ended <- err
	}), d))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("answered over %s, want HTTP/2", resp.Proto)
	}
	start := time.Now()
	select {
	case err := <-ended:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the handler's write ended with %v, want the deadline's error", err)
		}
		if took := time.Since(start); took < d/2 {
			t.Errorf("the stream was cut after %v, well before the stall timeout %v", took, d)
		}
	case <-time.After(d + 10*time.Second):
		t.Fatal("the handler still writes to a stream nobody reads")
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil || n >= size {
		t.Fatalf("the client read %d bytes, ending in %v: want a reset stream", n, err)
	}
}

// bodyServer runs an HTTP/1 server (HTTP/2 too when tls) whose handler
// reads the request body to its end and reports how many bytes and the
// error it ended with; with work, it then works that long before it
// answers (and reports whether its context ended meanwhile).
type bodyServer struct {
	srv   *httptest.Server
	ended chan bodyEnd
}

type bodyEnd struct {
	n        int64
	err      error
	canceled bool
}

func newBodyServer(t *testing.T, d, work time.Duration, tls bool) *bodyServer {
	t.Helper()
	bs := &bodyServer{ended: make(chan bodyEnd, 4)}
	bs.srv = httptest.NewUnstartedServer(httpx.StallHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		canceled := false
		if err == nil && work > 0 {
			select {
			case <-r.Context().Done():
				canceled = true
			case <-time.After(work): // the handler's work after the body: the time is the test
			}
		}
		bs.ended <- bodyEnd{n, err, canceled}
		if err == nil {
			w.Write([]byte("stored"))
		}
	}), d))
	bs.srv.Config.ConnContext = httpx.StallConnContext
	if tls {
		bs.srv.EnableHTTP2 = true
		bs.srv.StartTLS()
	} else {
		bs.srv.Start()
	}
	t.Cleanup(bs.srv.Close)
	return bs
}

// A request body that stops arriving ends its connection once a step
// has waited the stall timeout: the handler's read fails, the client's
// connection is closed, and the handler is not left waiting.
func TestStallTimeoutBodyHTTP1(t *testing.T) {
	const d = 500 * time.Millisecond
	bs := newBodyServer(t, d, 0, false)
	rc := testenv.DialRaw(t, bs.srv.Listener.Addr().String())
	start := time.Now()
	rc.Send("PUT /f HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n" + strings.Repeat("x", 1<<20))
	select {
	case e := <-bs.ended:
		if e.err == nil || e.n >= 10<<20 {
			t.Fatalf("the handler read %d bytes, ending in %v: want a failed read", e.n, e.err)
		}
		if took := time.Since(start); took < d {
			t.Errorf("the body was cut after %v, before the stall timeout %v", took, d)
		}
	case <-time.After(d + 10*time.Second):
		t.Fatal("the handler still waits for a body nobody sends")
	}
	if closed, _ := rc.Closed(5 * time.Second); !closed {
		t.Error("the connection is still open")
	}
}

// A body sent slowly but steadily arrives whole, though it takes longer
// than the timeout; and a handler that works past the timeout once the
// body is in keeps its context (a read deadline left on the connection
// would end it through net/http's background read).
func TestStallTimeoutBodySlowAndWork(t *testing.T) {
	const d = 2 * time.Second // 2 MiB within it: a tenth of the sender's pace
	const size = 48 << 20
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[tls], func(t *testing.T) {
			t.Parallel()
			bs := newBodyServer(t, d, d+time.Second, tls)
			pr, pw := io.Pipe()
			go func() {
				chunk := make([]byte, 512<<10)
				for sent := 0; sent < size; sent += len(chunk) {
					if _, err := pw.Write(chunk); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond) // the sender's pace: a slow sender is the test
				}
				pw.Close()
			}()
			req, _ := http.NewRequest("PUT", bs.srv.URL+"/f", pr)
			req.ContentLength = size
			start := time.Now()
			resp, err := bs.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := <-bs.ended
			if e.err != nil || e.n != size || e.canceled || string(body) != "stored" {
				t.Fatalf("handler read %d bytes (%v), context ended %v, answer %q; want %d bytes, a live context, \"stored\"",
					e.n, e.err, e.canceled, body, size)
			}
			if tls && resp.ProtoMajor != 2 {
				t.Fatalf("answered over %s, want HTTP/2", resp.Proto)
			}
			if took := time.Since(start); took < d {
				t.Errorf("took %v: not slow enough to show that the timeout is per step", took)
			}
		})
	}
}

// Over HTTP/2 a body that stalls ends its stream, by its read deadline.
func TestStallTimeoutBodyHTTP2(t *testing.T) {
	const d = 500 * time.Millisecond
	bs := newBodyServer(t, d, 0, true)
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(make([]byte, 1<<20)) // then nothing more
	req, _ := http.NewRequest("PUT", bs.srv.URL+"/f", pr)
	req.ContentLength = 10 << 20
	go func() {
		if resp, err := bs.srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case e := <-bs.ended:
		if !errors.Is(e.err, os.ErrDeadlineExceeded) || e.n >= 10<<20 {
			t.Fatalf("the handler read %d bytes, ending in %v: want the deadline's error", e.n, e.err)
		}
	case <-time.After(d + 10*time.Second):
		t.Fatal("the handler still waits for a body nobody sends")
	}
}

// A handler slow to take its body (an upload written on to a slow
// endpoint) is not a stalled client: what a step may take is the time
// its reads wait, not the handler's work between them.
func TestStallTimeoutBodySlowHandler(t *testing.T) {
	const d = 300 * time.Millisecond
	const size = 4 << 20
	got := make(chan error, 1)
	srv := httptest.NewUnstartedServer(httpx.StallHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		var n int
		var err error
		for err == nil {
			var m int
			m, err = io.ReadFull(r.Body, buf)
			n += m
			time.Sleep(20 * time.Millisecond) // the handler's pace, 3 MiB/s: slow work is the test
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = nil
		}
		if err == nil && n != size {
			err = fmt.Errorf("%d bytes, want %d", n, size)
		}
		got <- err
	}), d))
	srv.Config.ConnContext = httpx.StallConnContext
	srv.Start()
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/octet-stream", bytes.NewReader(make([]byte, size)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-got; err != nil {
		t.Fatalf("the slow handler's body: %v", err)
	}
}

// A handler that answers without reading the body (a 307 to where the
// upload goes) leaves net/http's handling of it as it was: an
// "Expect: 100-continue" body is never asked for, and the connection
// closes after the answer. Handing the handler a wrapped body on
// net/http's own request made net/http ask for it and read on, and
// gfal-copy's upload through the federator hung.
func TestStallTimeoutBodyNotRead(t *testing.T) {
	srv := httptest.NewUnstartedServer(httpx.StallHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://elsewhere/f")
		w.WriteHeader(http.StatusTemporaryRedirect)
	}), time.Second))
	srv.Config.ConnContext = httpx.StallConnContext
	srv.Start()
	t.Cleanup(srv.Close) // after the client's connection closes (cleanups run last first)
	rc := testenv.DialRaw(t, srv.Listener.Addr().String())
	rc.Send("PUT /f HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\nExpect: 100-continue\r\n\r\n")
	status, lines := rc.Head()
	if status != "HTTP/1.1 307 Temporary Redirect" {
		t.Fatalf("first answer %q %q, want the 307 (no 100 Continue)", status, lines)
	}
	if !slices.Contains(lines, "Connection: close") {
		t.Errorf("307 head %q: want Connection: close (the body was never asked for)", lines)
	}
}

// BenchmarkStallBody: a 64 MiB upload over loopback HTTP/1.1 read by a
// handler into io.Discard, with the body under the stall timeout
// ("watched") and without ("plain"), in one run: what the watch costs
// per byte.
func BenchmarkStallBody(b *testing.B) {
	const size = 64 << 20
	data := make([]byte, size)
	discard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{{"plain", discard}, {"watched", httpx.StallHandler(discard, time.Minute)}} {
		b.Run(tc.name, func(b *testing.B) {
			srv := httptest.NewUnstartedServer(tc.h)
			srv.Config.ConnContext = httpx.StallConnContext
			srv.Start()
			defer srv.Close()
			b.SetBytes(size)
			for b.Loop() {
				resp, err := http.Post(srv.URL, "application/octet-stream", bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
