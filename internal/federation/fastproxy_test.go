package federation

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// realFastPair is startFastPair over storage-role sites, priority in
// their order.
func realFastPair(t *testing.T, fedLines string, sites ...*site) *fastPair {
	var eps []string
	for i, s := range sites {
		eps = append(eps, fmt.Sprintf("name: %s\nurl: %s\npriority: %d\ntimeout: 2s", s.name, s.url(), i+1))
	}
	return startFastPair(t, cfgYAML(slowHealth+"\n"+fedLines, eps...))
}

// spliced is lakefed_federation_spliced_bytes_total.
func (fp *fastPair) spliced(t testing.TB) float64 {
	return gathered(t, fp.Registry(), "lakefed_federation_spliced_bytes_total", "")
}

// fastConn is a raw client connection to the fast path, with a small
// receive buffer when slow, so that a test reading slowly holds the
// federator back (loopback buffers otherwise take megabytes at once).
type fastConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialFast(t *testing.T, addr string, slow bool) *fastConn {
	t.Helper()
	d := net.Dialer{}
	if slow {
		d.Control = func(network, address string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
			})
			return errors.Join(err, serr)
		}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return &fastConn{t: t, c: c, br: bufio.NewReaderSize(c, 64<<10)}
}

// get sends a GET of p and reads its answer's head.
func (fc *fastConn) get(p string) *http.Response {
	fc.t.Helper()
	if _, err := io.WriteString(fc.c, "GET "+p+" HTTP/1.1\r\nHost: fed\r\n\r\n"); err != nil {
		fc.t.Fatal(err)
	}
	resp, err := http.ReadResponse(fc.br, &http.Request{Method: "GET"})
	if err != nil {
		fc.t.Fatalf("GET %s: %v", p, err)
	}
	return resp
}

// closed reports whether the server closed the connection (nothing more
// comes) within 5 s.
func (fc *fastConn) closed() bool {
	fc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := fc.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestFastPathProxyMatchesHandler: a warm GET of a file the federator
// proxies is answered on the fast path with the handler's answer,
// status, header lines (Date aside) and bytes, from a storage-role
// replica (whose bytes are spliced socket to socket, every one of them)
// and from one that cannot splice (a fake); a second request on the same
// connection is answered after it.
func TestFastPathProxyMatchesHandler(t *testing.T) {
	data := randData(3<<20+17, 41)
	t.Run("storage", func(t *testing.T) {
		a := startSite(t, "site-a")
		a.write(t, "/d/f", data)
		a.sum(t, "/d/f")
		fp := realFastPair(t, "mode: proxy", a)
		testFastProxyMatches(t, fp, "/d/f", data, true)
	})
	t.Run("fake", func(t *testing.T) {
		a := newFake("site-a", false)
		a.put("/d/f", data)
		fp := startFastPair(t, cfgYAML(slowHealth, ep("site-a")), a)
		testFastProxyMatches(t, fp, "/d/f", data, false)
	})
}

func testFastProxyMatches(t *testing.T, fp *fastPair, p string, data []byte, splice bool) {
	req := "GET " + p + " HTTP/1.1\r\nHost: fed\r\nX-Request-ID: same-id\r\n\r\n"
	exchange(t, fp.handler, "HEAD", "HEAD "+p+" HTTP/1.1\r\nHost: fed\r\n\r\n") // the look-up
	n0, s0, ok0 := fp.fastCount(), fp.spliced(t), answers(t, fp.Registry(), "GET", "2xx")
	fast := exchange(t, fp.fast, "GET", req)
	if got := fp.fastCount() - n0; got != 1 {
		t.Errorf("fast path answered %v, want 1", got)
	}
	if got := answers(t, fp.Registry(), "GET", "2xx") - ok0; got != 1 {
		t.Errorf("answers_total{GET,2xx} went up by %v, want 1", got)
	}
	spliced := fp.spliced(t) - s0
	switch {
	case splice && spliced != float64(len(data)):
		t.Errorf("%v bytes spliced, want all %d", spliced, len(data))
	case !splice && spliced != 0:
		t.Errorf("%v bytes spliced from a replica that cannot splice", spliced)
	}
	handler := exchange(t, fp.handler, "GET", req)
	if fast.body != string(data) {
		t.Errorf("fast path body: %d bytes, not the file's %d", len(fast.body), len(data))
	}
	fast.body, handler.body = "", "" // compared above; too long to print
	if fast.String() != handler.String() || !strings.HasPrefix(fast.status, "HTTP/1.1 200 ") {
		t.Errorf("answer:\n%s\nhandler's:\n%s", fast, handler)
	}
	// Keep-alive: the connection goes on after a proxied answer.
	fc := dialFast(t, fp.fast, false)
	for i := range 2 {
		resp := fc.get(p)
		body, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || err != nil || !bytes.Equal(body, data) || resp.Close {
			t.Fatalf("GET %d on one connection = %d, %d bytes, %v, close %v", i, resp.StatusCode, len(body), err, resp.Close)
		}
	}
	if got := fp.fastCount() - n0; got != 3 {
		t.Errorf("fast path answered %v, want 3", got)
	}
}

// TestFastPathProxyBreaksNeverSplices: the replica served dies mid-body
// and the only other one holds other bytes of the same size: the client
// gets the 200 and Content-Length of the file, a prefix of the served
// replica's bytes, and the connection closed; never the other file's
// bytes after them, never a kept connection after a short body. From a
// storage-role replica (spliced) and from a fake (copied).
func TestFastPathProxyBreaksNeverSplices(t *testing.T) {
	t.Run("storage", func(t *testing.T) {
		a, b := startSite(t, "ra"), startSite(t, "rb")
		da, db := randData(48<<20, 42), randData(48<<20, 43)
		a.write(t, "/f", da)
		a.sum(t, "/f")
		b.write(t, "/f", db)
		b.sum(t, "/f")
		fp := realFastPair(t, "mode: proxy", a, b)
		testFastProxyBreaks(t, fp, da, a.kill)
	})
	t.Run("fake", func(t *testing.T) {
		a, b := newFake("ra", false), newFake("rb", false)
		da, db := randData(4<<20, 44), randData(4<<20, 45)
		a.put("/f", da)
		b.put("/f", db)
		a.failAfter.Store(1 << 20)
		fp := startFastPair(t, cfgYAML(slowHealth, ep("ra", "priority: 1"), ep("rb", "priority: 2")), a, b)
		testFastProxyBreaks(t, fp, da, func() {})
	})
}

func testFastProxyBreaks(t *testing.T, fp *fastPair, served []byte, kill func()) {
	exchange(t, fp.handler, "HEAD", "HEAD /f HTTP/1.1\r\nHost: fed\r\n\r\n")
	n0 := fp.fastCount()
	fc := dialFast(t, fp.fast, true)
	resp := fc.get("/f")
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(served)) {
		t.Fatalf("GET = %d, Content-Length %d; want 200, %d", resp.StatusCode, resp.ContentLength, len(served))
	}
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	kill()
	rest, err := io.ReadAll(resp.Body)
	got := append(head, rest...)
	if err == nil || len(got) >= len(served) {
		t.Fatalf("read %d of %d bytes, %v; want the body cut", len(got), len(served), err)
	}
	if !bytes.Equal(got, served[:len(got)]) {
		t.Fatalf("%d bytes received are not a prefix of the served replica's file: spliced", len(got))
	}
	if !fc.closed() {
		t.Error("the connection stays open after a short body")
	}
	if got := fp.fastCount() - n0; got != 1 {
		t.Errorf("fast path answered %v, want 1", got)
	}
}

// TestFastPathProxyStaleLooksAgain: a file replaced on its replica by a
// bigger one after its metadata was cached: the fast path's answer is
// the new file, whole, with its length (the look-up made again, as the
// handler makes it), never the old length.
func TestFastPathProxyStaleLooksAgain(t *testing.T) {
	a := startSite(t, "site-a")
	v1, v2 := randData(1_500_000, 46), randData(2_500_000, 47)
	a.write(t, "/f", v1)
	fp := realFastPair(t, "mode: proxy", a)
	exchange(t, fp.handler, "HEAD", "HEAD /f HTTP/1.1\r\nHost: fed\r\n\r\n")
	a.write(t, "/f", v2)
	n0 := fp.fastCount()
	fc := dialFast(t, fp.fast, false)
	resp := fc.get("/f")
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(v2)) || err != nil || !bytes.Equal(body, v2) {
		t.Fatalf("GET after the replacement = %d, Content-Length %d, %d bytes, %v; want the new file", resp.StatusCode, resp.ContentLength, len(body), err)
	}
	if got := fp.fastCount() - n0; got != 1 {
		t.Errorf("fast path answered %v, want 1", got)
	}
	resp = fc.get("/f") // on the same connection, from the new metadata
	if body, err := io.ReadAll(resp.Body); resp.StatusCode != 200 || err != nil || !bytes.Equal(body, v2) {
		t.Fatalf("second GET = %d, %d bytes, %v", resp.StatusCode, len(body), err)
	}
}

// TestFastPathProxyNoReplicaOpens: every replica gone after the metadata
// was cached: the fast path answers the handler's 503 with Retry-After,
// and the connection goes on.
func TestFastPathProxyNoReplicaOpens(t *testing.T) {
	a := newFake("site-a", false)
	a.put("/f", []byte("data"))
	fp := startFastPair(t, cfgYAML(slowHealth, ep("site-a")), a)
	exchange(t, fp.handler, "HEAD", "HEAD /f HTTP/1.1\r\nHost: fed\r\n\r\n")
	a.down.Store(true)
	req := "GET /f HTTP/1.1\r\nHost: fed\r\nX-Request-ID: same-id\r\n\r\n"
	n0 := fp.fastCount()
	fast := exchange(t, fp.fast, "GET", req)
	if got := fp.fastCount() - n0; got != 1 {
		t.Errorf("fast path answered %v, want 1", got)
	}
	handler := exchange(t, fp.handler, "GET", req)
	if fast.String() != handler.String() || !strings.HasPrefix(fast.status, "HTTP/1.1 503 ") || !strings.Contains(fast.String(), "Retry-After: ") {
		t.Errorf("answer:\n%s\nhandler's:\n%s", fast, handler)
	}
}

// TestFastPathWeakReplicaRestartedNeverSpliced is
// TestRealWeakReplicaRestartedNeverSpliced on the fast path, where the
// bytes from nginx are spliced: bytes spliced count as sent, so the
// restarted nginx, whose file nothing proves the same, is not resumed.
func TestFastPathWeakReplicaRestartedNeverSpliced(t *testing.T) {
	ng := testenv.StartNginx(t)
	const size = 256 << 20 // more than loopback buffers hold (see replicaPair)
	va, vb := randData(size, 48), randData(size, 49)
	if err := os.WriteFile(filepath.Join(ng.Dir, "f"), va, 0o644); err != nil {
		t.Fatal(err)
	}
	replace := replaceKeepingTime(t, ng.Dir, "f", vb)
	fp := startFastPair(t, cfgYAML("mode: proxy\nproxy_idle_timeout: 20s\n"+slowHealth,
		fmt.Sprintf("name: ng\nurl: %s\ntimeout: 2s", ng.URL)))
	exchange(t, fp.handler, "HEAD", "HEAD /f HTTP/1.1\r\nHost: fed\r\n\r\n")
	fc := dialFast(t, fp.fast, true)
	resp := fc.get("/f")
	if resp.StatusCode != 200 || resp.Header.Get("Etag") == "" {
		t.Fatalf("GET = %d, ETag %q", resp.StatusCode, resp.Header.Get("Etag"))
	}
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	if fp.spliced(t) == 0 {
		t.Fatal("nothing spliced: the test does not test the splice path")
	}
	ng.Kill()
	replace()
	ng.Restart(t)
	rest, err := io.ReadAll(resp.Body)
	got := append(head, rest...)
	if !bytes.Equal(got, va[:min(len(got), len(va))]) {
		t.Fatalf("%d bytes received are not a prefix of the file first served: the federator resumed on the replaced file (spliced)", len(got))
	}
	if err == nil {
		t.Fatalf("read all %d bytes without error, but the server died before sending them and nothing proves it came back with the same file", len(got))
	}
	if !fc.closed() {
		t.Error("the connection stays open after a short body")
	}
}

// TestFastPathProxyXRootDNeverSplicesTwo: a root:// replica's bytes are
// spliced on the fast path (kXR_read payloads, from the kind's own
// connection); when it dies mid-body, the other replica's file, of the
// same size but other bytes (a root:// open proves only the size), is
// never spliced after them: the client gets a prefix and a cut.
func TestFastPathProxyXRootDNeverSplicesTwo(t *testing.T) {
	a, b := testenv.StartXRootD(t), testenv.StartXRootD(t)
	const size = 160 << 20 // more than loopback buffers hold (see replicaPair)
	va, vb := randData(size, 50), randData(size, 51)
	for _, f := range []struct {
		dir  string
		data []byte
	}{{a.Dir, va}, {b.Dir, vb}} {
		if err := os.WriteFile(filepath.Join(f.dir, "f"), f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fp := startFastPair(t, cfgYAML("mode: proxy\n"+slowHealth,
		fmt.Sprintf("name: xa\nurl: %s/\npriority: 1\ntimeout: 2s", a.RootURL),
		fmt.Sprintf("name: xb\nurl: %s/\npriority: 2\ntimeout: 2s", b.RootURL)))
	testFastProxyBreaks(t, fp, va, func() {
		if fp.spliced(t) == 0 {
			t.Error("nothing spliced from the root:// replica")
		}
		a.Kill()
	})
}
