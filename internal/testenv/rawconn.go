package testenv

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// RawConn is a client connection that writes raw bytes and reads the
// answers in order: for the tests of servers that parse HTTP/1.1
// themselves (pipelining, framing, hand-off to net/http), where a client
// library would hide what went over the wire.
type RawConn struct {
	t  testing.TB
	C  net.Conn
	BR *bufio.Reader
}

// DialRaw connects to addr (host:port), with a 20 s deadline on the
// whole exchange, closed when the test ends.
func DialRaw(t testing.TB, addr string) *RawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &RawConn{t: t, C: c, BR: bufio.NewReader(c)}
}

// Send writes s as it is.
func (rc *RawConn) Send(s string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.C, s); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// Head reads one answer's head, raw: the status line and the header
// lines, each of which must end in CRLF.
func (rc *RawConn) Head() (status string, lines []string) {
	rc.t.Helper()
	for {
		l, err := rc.BR.ReadString('\n')
		if err != nil {
			rc.t.Fatalf("read head: %v (so far %q %q)", err, status, lines)
		}
		if !strings.HasSuffix(l, "\r\n") {
			rc.t.Fatalf("line %q does not end in CRLF", l)
		}
		l = strings.TrimSuffix(l, "\r\n")
		switch {
		case status == "":
			status = l
		case l == "":
			return status, lines
		default:
			lines = append(lines, l)
		}
	}
}

// Read reads one answer to method and its whole body.
func (rc *RawConn) Read(method string) (*http.Response, string) {
	rc.t.Helper()
	resp, err := http.ReadResponse(rc.BR, &http.Request{Method: method})
	if err != nil {
		rc.t.Fatalf("read %s answer: %v", method, err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		rc.t.Fatalf("read %s body: %v", method, err)
	}
	return resp, string(b)
}

// Closed reports whether the server closed the connection within d
// (nothing more to read, EOF or a reset), and how long that took.
func (rc *RawConn) Closed(d time.Duration) (bool, time.Duration) {
	start := time.Now()
	rc.C.SetReadDeadline(start.Add(d))
	_, err := rc.BR.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, time.Since(start)
	}
	return err != nil, time.Since(start)
}

// EOF reports whether the server closed the connection cleanly within
// 10 s (nothing more to read).
func (rc *RawConn) EOF() bool {
	rc.C.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := rc.BR.ReadByte()
	return err == io.EOF
}

// TCPPair returns the two ends of a loopback TCP connection, closed when
// the test ends: a socket to splice to or from.
func TCPPair(t testing.TB) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}
