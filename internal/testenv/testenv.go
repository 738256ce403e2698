// Package testenv starts the real servers and finds the real clients of the
// field for lakefed's tests: nginx WebDAV, XRootD with XrdHttp, and tools
// such as curl, davix, gfal-copy, rclone and litmus.
//
// A test that needs a tool calls Require: when the tool is missing the test
// is skipped locally but fails when LAKEFED_REQUIRE_INTEROP=1 (as in CI), so
// CI can never go green by skipping.
//
//	curl := testenv.Require(t, "curl")
//	ng := testenv.StartNginx(t)       // stopped by t.Cleanup
//	os.WriteFile(filepath.Join(ng.Dir, "f"), data, 0o644)
//	resp, _ := http.Get(ng.URL + "f")
package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Strict reports whether missing tools must fail tests (CI).
func Strict() bool { return os.Getenv("LAKEFED_REQUIRE_INTEROP") == "1" }

// Require returns the path of the named program, or ends the test: Fatal
// when Strict, Skip otherwise.
func Require(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, fmt.Sprintf("%s not found on PATH (run scripts/install-deps.sh)", name))
	}
	return p
}

// Missing ends the test because something it needs is not there: Fatal
// when Strict, Skip otherwise.
func Missing(t testing.TB, why string) {
	t.Helper()
	if Strict() {
		t.Fatalf("LAKEFED_REQUIRE_INTEROP=1 and %s", why)
	}
	t.Skip(why)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Servers that can take port 0 should; this is for those that cannot.
//
// It picks below the kernel's ephemeral range (32768-60999 by default),
// which port 0 would give: the outgoing connections of the tests running
// at the same time draw their local ports from that range, and now and
// then one of them took the port between FreePort and the server's bind
// ("address already in use"). A server on such a port behind a cut
// NetNS link is not reached through the default route (NetNS.Cut).
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitPort waits until something accepts connections on 127.0.0.1:port.
func WaitPort(port int, within time.Duration) error {
	return WaitListen(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), within, nil)
}

// WaitAddr waits until something accepts connections on addr (host:port).
func WaitAddr(addr string, within time.Duration) error { return WaitListen(addr, within, nil) }

// WaitListen waits until something accepts connections on addr, dialed
// with dial (nil: from this process's network namespace; a NetNS's
// DialContext for a server inside one).
func WaitListen(addr string, within time.Duration, dial func(ctx context.Context, network, addr string) (net.Conn, error)) error {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	var err error
	if Within(within, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		var c net.Conn
		if c, err = dial(ctx, "tcp", addr); err == nil {
			c.Close()
		}
		return err == nil
	}) {
		return nil
	}
	return fmt.Errorf("nothing listens on %s after %v: %w", addr, within, err)
}

// Server is an external server a test started.
type Server struct {
	// URL is the base URL, ending in "/" (http://127.0.0.1:PORT/).
	URL string
	// RootURL is the root:// URL for XRootD ("root://127.0.0.1:PORT/"), else "".
	RootURL string
	// Dir is the directory the server serves; tests may write into it.
	Dir string
	// Port is the HTTP port.
	Port int

	cmd   *exec.Cmd
	state string
	// host is the address it listens on (default 127.0.0.1); env is
	// added to its environment.
	host string
	env  []string
	// How it was started, for Restart.
	log  string
	bin  string
	args []string
}

// Stop kills the server and waits for it. Safe to call twice.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Restart starts a server that Kill or Stop ended again, as it was
// started: same binary, arguments and port (the files it serves stay).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.cmd != nil {
		t.Fatal("testenv: Restart of a server that runs")
	}
	start(t, s, s.log, []int{s.Port}, s.bin, s.args...)
}

// Signal sends sig (SIGSTOP, SIGCONT) to the server.
func (s *Server) Signal(sig syscall.Signal) error {
	if s.cmd == nil || s.cmd.Process == nil {
		return fmt.Errorf("%s is not running", s.bin)
	}
	return s.cmd.Process.Signal(sig)
}

// Kill kills the server and every process it started with SIGKILL, as a
// crash would: connections drop mid-transfer. Stop is then a no-op.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

func start(t testing.TB, s *Server, log string, ports []int, name string, args ...string) {
	t.Helper()
	if err := tryStart(t, s, log, ports, name, args...); err != nil {
		t.Fatal(err)
	}
}

// tryStart is start returning its failure, for callers that retry on
// other ports (a port FreePort gave can be taken before the server binds
// it, by another test package running at the same time).
func tryStart(t testing.TB, s *Server, log string, ports []int, name string, args ...string) error {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	cmd := exec.Command(name, args...)
	// A group of its own, so that Kill reaches the server's workers too
	// (nginx's master does not take its workers down on SIGKILL); and
	// killed with the test binary, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = f, f
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
	s.log, s.bin, s.args = log, name, args
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	f.Close()
	s.cmd = cmd
	t.Cleanup(s.Stop)
	host := s.host
	if host == "" {
		host = "127.0.0.1"
	}
	for _, p := range ports {
		if err := WaitAddr(net.JoinHostPort(host, strconv.Itoa(p)), 15*time.Second); err != nil {
			out, _ := os.ReadFile(log)
			s.Stop()
			return fmt.Errorf("%s did not start: %v\n%s", name, err, out)
		}
	}
	return nil
}

// StartNginx starts nginx as a WebDAV server (dav + dav-ext modules, with
// LOCK/UNLOCK) on a fresh directory, bound to 127.0.0.1.
func StartNginx(t testing.TB) *Server {
	t.Helper()
	bin := Require(t, "nginx")
	out, _ := exec.Command(bin, "-V").CombinedOutput()
	modDir := "/usr/lib/nginx/modules"
	if _, after, ok := strings.Cut(string(out), "--modules-path="); ok {
		modDir = strings.Fields(after)[0]
	}
	mod := filepath.Join(modDir, "ngx_http_dav_ext_module.so")
	if _, err := os.Stat(mod); err != nil {
		Missing(t, "nginx dav-ext module missing (apt-get install libnginx-mod-http-dav-ext)")
	}
	state := t.TempDir()
	data := filepath.Join(state, "data")
	for _, d := range []string{data, filepath.Join(state, "tmp"), filepath.Join(state, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := FreePort(t)
	user := "root root"
	if os.Geteuid() != 0 {
		user = ""
	}
	conf := fmt.Sprintf(`load_module %[1]s;
%[4]s
worker_processes 2;
pid %[2]s/nginx.pid;
error_log %[2]s/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path %[2]s/tmp/body;
  proxy_temp_path %[2]s/tmp/proxy;
  fastcgi_temp_path %[2]s/tmp/fastcgi;
  uwsgi_temp_path %[2]s/tmp/uwsgi;
  scgi_temp_path %[2]s/tmp/scgi;
  dav_ext_lock_zone zone=davlock:10m;
  server {
    listen 127.0.0.1:%[3]d;
    root %[5]s;
    client_max_body_size 0;
    location / {
      dav_methods PUT DELETE MKCOL COPY MOVE;
      dav_ext_methods PROPFIND OPTIONS LOCK UNLOCK;
      dav_ext_lock zone=davlock;
      create_full_put_path on;
      dav_access user:rw group:rw all:r;
      autoindex on;
    }
  }
}
`, mod, state, port, map[bool]string{true: "user " + user + ";", false: ""}[user != ""], data)
	cfg := filepath.Join(state, "nginx.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d/", port), Dir: data, Port: port, state: state}
	start(t, s, filepath.Join(state, "logs", "stdout.log"), []int{port},
		bin, "-p", state, "-e", filepath.Join(state, "logs", "error.log"), "-c", cfg, "-g", "daemon off;")
	return s
}

// XRootDUser is the unprivileged user XRootD runs as when tests run as
// root (it refuses to run as root); the Debian package creates it.
const XRootDUser = "xrootd"

// StartXRootD starts one XRootD data server exporting a fresh directory,
// with the XrdHttp protocol on a second port. Run as root, it drops to
// XRootDUser and hands the directory to that user; files a test writes into
// Dir must be world-readable (0644), and directories it makes there should
// be chowned with ChownToXRootD if XRootD is to write into them.
func StartXRootD(t testing.TB) *Server {
	t.Helper()
	return StartXRootDWith(t, "")
}

// ChownToXRootD gives path (recursively) to XRootDUser when running as
// root, so the server can write there. It does nothing otherwise.
func ChownToXRootD(t testing.TB, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	if out, err := exec.Command("chown", "-R", XRootDUser+":", path).CombinedOutput(); err != nil {
		Missing(t, fmt.Sprintf("chown to %s: %v: %s", XRootDUser, err, out))
	}
}
