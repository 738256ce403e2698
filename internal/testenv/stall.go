package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Stalled is a client that asks for an answer and then reads nothing,
// with a small receive buffer, so that its window shuts at once: the
// slow-read attack a server's stall timeout must end.
type Stalled struct {
	t testing.TB
	c *net.TCPConn
}

// StallGet dials addr (host:port) and sends a GET of target with the
// extra header lines given ("Range: bytes=0-"), then reads nothing.
func StallGet(t testing.TB, addr, target string, header ...string) *Stalled {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) {
			// Before connect, so that the window offered is small
			// from the handshake on.
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 16<<10)
		})
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "GET " + target + " HTTP/1.1\r\nHost: " + addr + "\r\n"
	for _, h := range header {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return &Stalled{t: t, c: c.(*net.TCPConn)}
}

// StallGetReset is StallGet, then the test that the server let the
// client go: it resets the connection no sooner than the stall timeout
// d after the request and within 10 s more, and the client then drains
// less than the answer's size bytes, ending in ECONNRESET.
func StallGetReset(t testing.TB, d time.Duration, size int64, addr, target string, header ...string) {
	t.Helper()
	start := time.Now() // before the request: the server's first step starts after it
	st := StallGet(t, addr, target, header...)
	Eventually(t, d+10*time.Second, "the stalled client reset", st.Reset)
	if took := time.Since(start); took < d {
		t.Errorf("reset after %v, before the stall timeout %v", took, d)
	}
	n, err := st.Drain()
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("drained %d bytes, ending in %v; want ECONNRESET", n, err)
	}
	if n >= size {
		t.Errorf("drained %d bytes: the whole answer went out", n)
	}
}

// Reset reports whether the server has reset the connection: its state
// is CLOSE, asked of the kernel without reading a byte (a read would be
// progress).
func (s *Stalled) Reset() bool {
	rc, err := s.c.SyscallConn()
	if err != nil {
		s.t.Fatal(err)
	}
	var state uint8
	var serr error
	rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if serr == nil {
			state = info.State
		}
	})
	if serr != nil {
		s.t.Fatal(serr)
	}
	return state == unix.BPF_TCP_CLOSE
}

// Drain reads what the kernel still holds for the client and returns
// how many bytes, head included, and the error the reading ended with.
func (s *Stalled) Drain() (int64, error) {
	s.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	return io.Copy(io.Discard, s.c)
}

// SlowGet reads the answer to a GET of url by c (nil:
// http.DefaultClient) a step bytes at a time with a pause between steps,
// as a client that is slow but keeps reading, and returns the status and
// the body's length. A broken body is an error.
func SlowGet(c *http.Client, url string, step int, pause time.Duration) (int, int64, error) {
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Get(url)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, step)
	var n int64
	buf := make([]byte, step)
	for {
		m, err := io.ReadFull(br, buf)
		n += int64(m)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			if resp.ContentLength >= 0 && n != resp.ContentLength {
				return resp.StatusCode, n, fmt.Errorf("body of %d bytes, Content-Length %d", n, resp.ContentLength)
			}
			return resp.StatusCode, n, nil
		}
		if err != nil {
			return resp.StatusCode, n, err
		}
		time.Sleep(pause) // the client's pace: a slow reader is the test
	}
}
