package storage

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv marks a re-executed test binary: its value names the test that
// is to do the child's part.
const childEnv = "LAKEFED_STORAGE_TEST_CHILD"

// runChild re-executes the test binary to run only test name, with
// childEnv set to name, and fails t with the child's output when the
// child fails. wrap, when set, is a shell command line that runs the
// binary as "$0" (e.g. to change a limit first).
func runChild(t *testing.T, name, wrap string) string {
	t.Helper()
	args := []string{"-test.run=^" + name + "$", "-test.v"}
	var cmd *exec.Cmd
	if wrap != "" {
		cmd = exec.Command("sh", append([]string{"-c", wrap + ` "$@"`, os.Args[0]}, args...)...)
	} else {
		cmd = exec.Command(os.Args[0], args...)
	}
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// TestRlimitNofileRaised checks what limits.go relies on instead of doing
// it itself: a Go program on Linux starts with its soft RLIMIT_NOFILE
// raised to the hard limit minus one (Go 1.19+, package syscall's init;
// minus one so that a later prlimit from outside can be told apart). The
// child is started with a soft limit of 256.
func TestRlimitNofileRaised(t *testing.T) {
	if os.Getenv(childEnv) == t.Name() {
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		if lim.Cur < lim.Max-1 {
			t.Fatalf("RLIMIT_NOFILE soft %d, hard %d: want soft raised to hard-1 at start", lim.Cur, lim.Max)
		}
		return
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max <= 256 {
		t.Skipf("hard RLIMIT_NOFILE is %d: nothing to raise", lim.Max)
	}
	runChild(t, t.Name(), "ulimit -S -n 256 && exec \"$0\"")
}

// fdLimit is the soft RLIMIT_NOFILE of the child of TestFDExhaustionIs503.
const fdLimit = 128

// TestFDExhaustionIs503: when the process is out of file descriptors,
// GET, HEAD, PUT and PROPFIND answer 503 with Retry-After (the condition is
// transient), not 500; once descriptors are free again they work. A child
// process lowers its RLIMIT_NOFILE, opens its connections, then uses up
// every descriptor.
func TestFDExhaustionIs503(t *testing.T) {
	if os.Getenv(childEnv) != t.Name() {
		runChild(t, t.Name(), "")
		return
	}
	lim := syscall.Rlimit{Cur: fdLimit, Max: fdLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, Config{})
	<-ts.s.swept // the janitor holds no descriptor from here on
	ts.write(t, "f", content, time.Time{})
	ts.write(t, "d/g", content, time.Time{})

	cases := []struct {
		name string
		req  string
	}{
		{"GET file", "GET /f HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"HEAD file", "HEAD /f HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"GET listing", "GET /d/ HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"GET with Range", "GET /f HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n\r\n"},
		{"PUT", "PUT /new HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"},
		{"PUT overwrite", "PUT /f HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"},
		{"PROPFIND depth 0", "PROPFIND /f HTTP/1.1\r\nHost: x\r\nDepth: 0\r\n\r\n"},
		{"PROPFIND depth 1", "PROPFIND /d/ HTTP/1.1\r\nHost: x\r\nDepth: 1\r\n\r\n"},
	}
	// One accepted connection per case, opened while descriptors last.
	conns := make([]*clientConn, len(cases))
	for i := range cases {
		conns[i] = dialClient(t, ts.host)
		if code, _ := conns[i].roundTrip(t, "HEAD /f HTTP/1.1\r\nHost: x\r\n\r\n"); code != http.StatusOK {
			t.Fatalf("warm-up HEAD /f = %d, want 200", code)
		}
	}
	hoard := exhaustFDs(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, resp := conns[i].roundTrip(t, tc.req)
			if code != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s out of descriptors = %d Retry-After %q, want 503 with Retry-After",
					tc.name, code, resp.Header.Get("Retry-After"))
			}
		})
	}
	for _, f := range hoard {
		f.Close()
	}
	if code, _ := conns[0].roundTrip(t, cases[0].req); code != http.StatusOK {
		t.Errorf("GET /f with descriptors free again = %d, want 200", code)
	}
	if _, err := os.Stat(filepath.Join(ts.root, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("PUT /new refused with 503 left a file: %v", err)
	}
}

// exhaustFDs opens /dev/null until the process runs out of descriptors.
func exhaustFDs(t *testing.T) []*os.File {
	t.Helper()
	var hoard []*os.File
	t.Cleanup(func() {
		for _, f := range hoard {
			f.Close()
		}
	})
	for range fdLimit + 1 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("open: %v, want EMFILE", err)
			}
			return hoard
		}
		hoard = append(hoard, f)
	}
	t.Fatalf("opened %d files under a limit of %d", len(hoard), fdLimit)
	return nil
}

// clientConn is a raw keep-alive HTTP/1.1 connection.
type clientConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialClient(t *testing.T, host string) *clientConn {
	t.Helper()
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &clientConn{c: c, br: bufio.NewReader(c)}
}

// roundTrip sends one raw request and reads its response.
func (cc *clientConn) roundTrip(t *testing.T, req string) (int, *http.Response) {
	t.Helper()
	cc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(cc.c, req); err != nil {
		t.Fatal(err)
	}
	method, _, _ := strings.Cut(req, " ")
	resp, err := http.ReadResponse(cc.br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s: %v", strings.SplitN(req, "\r\n", 2)[0], err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp
}
