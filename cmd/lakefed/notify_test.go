package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/logging"
	"github.com/lakefed/lakefed/internal/logging/logtest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// notifySocket is a unixgram socket standing in for systemd's
// $NOTIFY_SOCKET: it receives what the process under test sends.
type notifySocket struct {
	path string
	conn *net.UnixConn
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	// A short directory: a socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &notifySocket{path: p, conn: conn}
}

// next returns the next message, or fails the test after a minute.
func (n *notifySocket) next(t *testing.T) string {
	t.Helper()
	n.conn.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 4096)
	k, err := n.conn.Read(buf)
	if err != nil {
		t.Fatalf("no sd_notify message: %v", err)
	}
	return string(buf[:k])
}

// expect reads the next message and fails unless its first line is want.
func (n *notifySocket) expect(t *testing.T, want string) string {
	t.Helper()
	msg := n.next(t)
	if first, _, _ := strings.Cut(msg, "\n"); first != want {
		t.Fatalf("sd_notify message %q, want %s", msg, want)
	}
	return msg
}

// startNotified starts lakefed with args and $NOTIFY_SOCKET set to n. It
// returns the command, the lines it prints on stdout (read as they come)
// and its stderr, whole once the command has exited.
func startNotified(t *testing.T, n *notifySocket, args ...string) (*exec.Cmd, <-chan string, *syncBuf) {
	t.Helper()
	cmd := exec.Command(lakefedBin, args...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+n.path, "LAKEFED_BENCH_DB="+filepath.Join(t.TempDir(), "bench.db"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("lakefed %s stderr:\n%s", strings.Join(args, " "), stderr)
		}
	})
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines, stderr
}

// printed returns the rest of the first line from lines that starts with
// prefix. The process prints it before READY=1, so it is there already.
func printed(t *testing.T, lines <-chan string, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stdout ended without a line starting %q", prefix)
			}
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return rest
			}
		case <-timeout:
			t.Fatalf("no line starting %q on stdout", prefix)
		}
	}
}

// getNow GETs url once, without retrying: the listener must answer now.
func getNow(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s right after READY=1: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestServeNotify: lakefed serve says READY=1 once its federator and its
// storage server both answer, RELOADING=1 (with MONOTONIC_USEC) then
// READY=1 around a SIGHUP reload, and STOPPING=1 on SIGTERM, then exits
// cleanly.
func TestServeNotify(t *testing.T) {
	n := newNotifySocket(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "lakefed.yaml")
	// Port 0 for the federator; the storage server needs another
	// address, which check-config insists on.
	storageAddr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nstorage:\n  - {listen: '"+storageAddr+"', root: "+dir+"}\n"+
		"federation:\n  endpoints:\n    - {name: a, url: 'http://"+storageAddr+"/'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, lines, stderr := startNotified(t, n, "serve", cfg)
	n.expect(t, "READY=1")
	site := strings.Fields(printed(t, lines, "storage "))[0]
	fed, _, _ := strings.Cut(printed(t, lines, "federator "), "/ ")
	if resp := getNow(t, site+"f"); resp.StatusCode != 200 {
		t.Errorf("GET %sf = %d, want 200", site, resp.StatusCode)
	}
	if resp := getNow(t, fed+"/f"); resp.StatusCode != 200 {
		t.Errorf("GET %s/f (redirected to the site) = %d, want 200", fed, resp.StatusCode)
	}

	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	msg := n.expect(t, "RELOADING=1")
	if !strings.Contains(msg, "\nMONOTONIC_USEC=") {
		t.Errorf("reloading message %q, want MONOTONIC_USEC= too", msg)
	}
	n.expect(t, "READY=1")
	if resp := getNow(t, fed+"/api/endpoints"); resp.StatusCode != 200 {
		t.Errorf("GET %s/api/endpoints after the reload = %d, want 200", fed, resp.StatusCode)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.expect(t, "STOPPING=1")
	if err := cmd.Wait(); err != nil {
		t.Errorf("lakefed serve exited with %v after SIGTERM, want 0\n%s", err, stderr)
	}
}

// TestStorageNotifyAndJSONLog: lakefed storage says READY=1 once its
// listener answers and STOPPING=1 on SIGTERM; with --log-format json and
// --access-log its request lines are JSON and carry the X-Request-ID of
// the answer, the client's own when it sent one.
func TestStorageNotifyAndJSONLog(t *testing.T) {
	n := newNotifySocket(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, lines, stderr := startNotified(t, n, "storage", "--root", root, "--listen", "127.0.0.1:0", "--access-log", "--log-format", "json")
	n.expect(t, "READY=1")
	_, base, _ := strings.Cut(printed(t, lines, "lakefed storage: serving "), " at ")
	fresh := getNow(t, base+"f")
	sent := getNow(t, base+"f", "X-Request-ID", "job-7")
	if fresh.StatusCode != 200 || len(fresh.Header.Get("X-Request-ID")) != 16 {
		t.Errorf("GET f = %d, X-Request-ID %q; want 200 and a fresh ID", fresh.StatusCode, fresh.Header.Get("X-Request-ID"))
	}
	if id := sent.Header.Get("X-Request-ID"); id != "job-7" {
		t.Errorf("GET f with X-Request-ID job-7: answered %q", id)
	}
	for _, id := range []string{fresh.Header.Get("X-Request-ID"), "job-7"} {
		if !testenv.Within(10*time.Second, func() bool {
			_, ok := logtest.Find(stderr.String(), logging.RequestIDKey, id)
			return ok
		}) {
			t.Errorf("no log line with request_id %s:\n%s", id, stderr)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.expect(t, "STOPPING=1")
	if err := cmd.Wait(); err != nil {
		t.Errorf("lakefed storage exited with %v after SIGTERM, want 0\n%s", err, stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !strings.HasPrefix(l, "{") {
			t.Errorf("--log-format json wrote a line that is not JSON: %q", l)
		}
	}
	if _, err := logtest.Parse(stderr.String()); err != nil {
		t.Error(err)
	}
}

// TestCacheNotify: lakefed cache, started from a unit of its own, says
// READY=1 once it answers, and STOPPING=1 on SIGTERM.
func TestCacheNotify(t *testing.T) {
	n := newNotifySocket(t)
	origin := t.TempDir()
	if err := os.WriteFile(filepath.Join(origin, "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, lines, stderr := startNotified(t, n, "cache", "--dir", t.TempDir(), "--origin", "file://"+origin, "--listen", "127.0.0.1:0")
	n.expect(t, "READY=1")
	base, _, _ := strings.Cut(printed(t, lines, "cache "), "/ ")
	if resp := getNow(t, base+"/f"); resp.StatusCode != 200 || len(resp.Header.Get("X-Request-ID")) != 16 {
		t.Errorf("GET %s/f = %d, X-Request-ID %q; want 200 and a fresh ID", base, resp.StatusCode, resp.Header.Get("X-Request-ID"))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.expect(t, "STOPPING=1")
	if err := cmd.Wait(); err != nil {
		t.Errorf("lakefed cache exited with %v after SIGTERM, want 0\n%s", err, stderr)
	}
}

// TestSystemdRun: under a real systemd, a Type=notify transient unit of
// lakefed storage is started (systemd-run returns) only once it said
// READY=1, and it answers at that moment.
func TestSystemdRun(t *testing.T) {
	if fi, err := os.Stat("/run/systemd/system"); err != nil || !fi.IsDir() {
		// sd_booted(3)'s test. Containers run something else as PID 1,
		// and systemd-run has then no manager to ask for a unit; the
		// notify protocol itself is tested above without one.
		t.Skip("systemd is not PID 1 here (no /run/systemd/system): no manager for systemd-run to start a unit in")
	}
	systemdRun := testenv.Require(t, "systemd-run")
	root := t.TempDir()
	os.Chmod(root, 0o755)
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	unit := "lakefed-test-" + strconv.Itoa(os.Getpid())
	args := []string{"--collect", "--unit", unit, "-p", "Type=notify"}
	if os.Getuid() != 0 {
		args = append([]string{"--user"}, args...)
	}
	args = append(args, lakefedBin, "storage", "--root", root, "--listen", "127.0.0.1:"+strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, systemdRun, args...).CombinedOutput(); err != nil {
		t.Fatalf("systemd-run: %v\n%s", err, out)
	}
	systemctl := []string{"stop", unit}
	if os.Getuid() != 0 {
		systemctl = append([]string{"--user"}, systemctl...)
	}
	defer exec.Command("systemctl", systemctl...).Run()
	if resp := getNow(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/f"); resp.StatusCode != 200 {
		t.Errorf("GET /f once systemd-run returned = %d, want 200", resp.StatusCode)
	}
}

// syncBuf collects a child's output for reading while it runs.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
