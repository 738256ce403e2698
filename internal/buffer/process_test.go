package buffer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// The tests here run lakefed itself as child processes: the write buffer
// (lakefed serve with a buffer section) and its target (lakefed storage),
// so that a target can really go away (kill -9) and the buffer really
// be killed and started again on its directory.

// buildLakefed builds cmd/lakefed into a temporary directory.
func buildLakefed(t *testing.T) string {
	t.Helper()
	goBin := testenv.Require(t, "go")
	bin := filepath.Join(t.TempDir(), "lakefed")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "../../cmd/lakefed").CombinedOutput(); err != nil {
		t.Fatalf("go build lakefed: %v\n%s", err, out)
	}
	return bin
}

// child is one lakefed process, restartable on the same port.
type child struct {
	t    *testing.T
	bin  string
	args []string
	env  []string
	port int
	log  string
	cmd  *exec.Cmd
}

func (c *child) start() {
	c.t.Helper()
	lf, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer lf.Close()
	cmd := exec.Command(c.bin, c.args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", c.bin, err)
	}
	c.cmd = cmd
	if err := testenv.WaitPort(c.port, 60*time.Second); err != nil {
		c.kill()
		c.t.Fatalf("lakefed %s: %v\n%s", c.args[0], err, c.tail())
	}
}

// kill kills the process with SIGKILL and reaps it.
func (c *child) kill() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	_ = c.cmd.Wait()
	c.cmd = nil
}

// tail is the end of the process's log, for failure messages.
func (c *child) tail() string {
	b, _ := os.ReadFile(c.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// world is a storage role and a buffer in front of it, as processes.
type world struct {
	t                *testing.T
	storage, buffer  *child
	storeDir, bufURL string
	client           *http.Client
}

// startWorld starts lakefed storage and a lakefed serve whose federation
// has it as endpoint "site" and whose buffer takes /buf. The buffer's
// target is "site", or the URL target when set (a middlebox in front of
// the storage role).
func startWorld(t *testing.T, bin string, target func(storageURL string) string) *world {
	scratch := t.TempDir()
	w := &world{t: t, storeDir: filepath.Join(scratch, "store"), client: &http.Client{Timeout: 60 * time.Second}}
	t.Cleanup(w.client.CloseIdleConnections)
	if err := os.Mkdir(w.storeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sp, bp := testenv.FreePort(t), testenv.FreePort(t)
	w.storage = &child{t: t, bin: bin, port: sp, log: filepath.Join(scratch, "storage.log"),
		args: []string{"storage", "-root", w.storeDir, "-listen", fmt.Sprintf("127.0.0.1:%d", sp)}}
	storageURL := fmt.Sprintf("http://127.0.0.1:%d/", sp)
	tgt := "site"
	if target != nil {
		tgt = target(storageURL)
	}
	cfg := fmt.Sprintf(`listen: 127.0.0.1:%d
federation:
  metadata_cache: {ttl: 1s, negative_ttl: 1s}
  health: {interval: 200ms, timeout: 1s, fail_after: 1, recover_after: 1}
  endpoints:
    - {name: site, url: %q, writable: true, timeout: 2s}
buffer:
  dir: %s
  keep_after_migration: 100ms
  retry: {initial: 50ms, max: 300ms}
  prefixes:
    - {prefix: /buf, targets: [%q]}
`, bp, storageURL, filepath.Join(scratch, "spool"), tgt)
	cfgFile := filepath.Join(scratch, "lakefed.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	w.buffer = &child{t: t, bin: bin, port: bp, log: filepath.Join(scratch, "buffer.log"),
		args: []string{"serve", cfgFile}, env: []string{"LAKEFED_BENCH_DB=" + filepath.Join(scratch, "results.db")}}
	w.bufURL = fmt.Sprintf("http://127.0.0.1:%d", bp)
	t.Cleanup(func() {
		w.buffer.kill()
		w.storage.kill()
		if t.Failed() {
			t.Logf("buffer log:\n%s\nstorage log:\n%s", w.buffer.tail(), w.storage.tail())
		}
	})
	w.storage.start()
	w.buffer.start()
	return w
}

// do sends one request to the buffer and returns its status and body.
func (w *world) do(method, p string, body []byte) (int, []byte) {
	w.t.Helper()
	req, err := http.NewRequest(method, w.bufURL+p, bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	if body == nil {
		req.Body = http.NoBody
	}
	resp, err := w.client.Do(req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", method, p, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatalf("%s %s: body: %v", method, p, err)
	}
	return resp.StatusCode, b
}

// status is the buffer's /api/buffer, or false while it does not answer.
func (w *world) status() (Status, bool) {
	resp, err := w.client.Get(w.bufURL + "/api/buffer")
	if err != nil {
		return Status{}, false
	}
	defer resp.Body.Close()
	var st Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return Status{}, false
	}
	return st, true
}

// settled waits until the buffer has nothing pending and holds no file.
func (w *world) settled(what string) {
	w.t.Helper()
	testenv.Eventually(w.t, 60*time.Second, what, func() bool {
		st, ok := w.status()
		return ok && st.PendingFiles == 0 && st.PendingDeletes == 0 && st.HeldFiles == 0
	})
}

// answer GETs p through the buffer until the federator gives an answer
// that is not about a site being down (502, 503, 504), and returns it.
func (w *world) answer(p string) (int, []byte) {
	w.t.Helper()
	var code int
	var body []byte
	testenv.Eventually(w.t, 60*time.Second, "GET "+p+" kept failing as unavailable", func() bool {
		code, body = w.do(http.MethodGet, p, nil)
		return code != http.StatusBadGateway && code != http.StatusServiceUnavailable && code != http.StatusGatewayTimeout
	})
	return code, body
}

// onTarget returns the file the storage role holds at p, or false.
func (w *world) onTarget(p string) ([]byte, bool) {
	b, err := os.ReadFile(filepath.Join(w.storeDir, filepath.FromSlash(p)))
	return b, err == nil
}

// TestWithProcesses runs the buffer and its target as lakefed processes.
func TestWithProcesses(t *testing.T) {
	bin := buildLakefed(t)
	t.Run("DeleteWhileTargetDown", func(t *testing.T) { testDeleteWhileTargetDown(t, bin) })
	t.Run("DeleteBehindMiddlebox", func(t *testing.T) { testDeleteBehindMiddlebox(t, bin) })
	t.Run("NewerVersionBehindMiddlebox", func(t *testing.T) { testNewerVersionBehindMiddlebox(t, bin) })
}

// testDeleteWhileTargetDown: version 0 has migrated; the target is
// killed; a PUT of version 1 is acknowledged; then a DELETE. Whatever it
// answers must be what happened, across a kill -9 of the buffer and the
// target's return: 2xx means the file is gone for good (and reads say
// 404 at once), 503 means nothing changed (version 1 stays). Version 0
// coming back is neither.
func testDeleteWhileTargetDown(t *testing.T, bin string) {
	w := startWorld(t, bin, nil)
	v0, v1 := []byte("version 0"), []byte("version 1, written while the target was down")
	if code, _ := w.do(http.MethodPut, "/buf/f", v0); code != http.StatusCreated {
		t.Fatalf("PUT version 0 = %d", code)
	}
	w.settled("version 0 not migrated and retired")
	if got, ok := w.onTarget("/buf/f"); !ok || !bytes.Equal(got, v0) {
		t.Fatalf("target holds %q, want version 0", got)
	}

	w.storage.kill()
	if code, _ := w.do(http.MethodPut, "/buf/f", v1); code/100 != 2 {
		t.Fatalf("PUT version 1 while the target is down = %d, want 2xx", code)
	}
	code, body := w.do(http.MethodDelete, "/buf/f", nil)
	t.Logf("DELETE while the target is down = %d %s", code, bytes.TrimSpace(body))
	deleted := false
	switch {
	case code == http.StatusAccepted || code == http.StatusNoContent:
		deleted = true
		if got, _ := w.do(http.MethodGet, "/buf/f", nil); got != http.StatusNotFound {
			t.Errorf("GET after the DELETE answered %d = %d, want 404", code, got)
		}
	case code == http.StatusServiceUnavailable:
	default:
		t.Fatalf("DELETE = %d, want 202, 204 or 503", code)
	}

	w.buffer.kill() // whatever was answered must survive this
	w.buffer.start()
	w.storage.start()
	w.settled("the buffer did not settle once the target was back")
	got, body := w.answer("/buf/f")
	onTarget, there := w.onTarget("/buf/f")
	switch {
	case deleted && (got != http.StatusNotFound || there):
		t.Errorf("DELETE answered %d, but then GET = %d %q and the target holds %q (%v): the file came back", code, got, body, onTarget, there)
	case !deleted && (got != http.StatusOK || !bytes.Equal(body, v1)):
		t.Errorf("DELETE answered %d, so nothing may have changed, but then GET = %d %q (want version 1): the buffer dropped version 1", code, got, body)
	}
}

// middlebox stands between the buffer and its target like nginx with
// proxy_request_buffering: it reads a PUT's whole body before it sends it
// on, and sends it on even when the client has gone. When hold is set it
// keeps the next PUT's body until release is closed; closing cut before
// that drops the client's connection at once (the answer is lost), and
// the body still goes on when released.
type middlebox struct {
	target  *url.URL
	proxy   *httputil.ReverseProxy
	hold    atomic.Bool
	got     chan []byte // a held PUT's body, read whole
	cut     chan struct{}
	release chan struct{}
	sent    chan int // the status the target gave a held PUT
}

func newMiddlebox(t *testing.T, target string) *middlebox {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	m := &middlebox{target: u, proxy: httputil.NewSingleHostReverseProxy(u),
		got: make(chan []byte, 1), cut: make(chan struct{}), release: make(chan struct{}), sent: make(chan int, 1)}
	m.proxy.ErrorLog = nil
	return m
}

func (m *middlebox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut || !m.hold.CompareAndSwap(true, false) {
		m.proxy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.got <- body
	select {
	case <-m.release:
	case <-m.cut:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
		<-m.release
		w = nil
	}
	// The client may be gone by now; the upload goes on regardless.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, m.target.ResolveReference(&url.URL{Path: r.URL.Path}).String(), bytes.NewReader(body))
	if err != nil {
		m.sent <- 0
		return
	}
	for k, v := range r.Header {
		if k != "Expect" && k != "Connection" {
			req.Header[k] = v
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		m.sent <- 0
		if w != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	m.sent <- resp.StatusCode
	if w != nil {
		w.WriteHeader(resp.StatusCode)
	}
}

// testDeleteBehindMiddlebox: version 0 has migrated. The mover's copy of
// version 1 has gone whole into a middlebox that has not delivered it
// yet when a DELETE is answered (the federator deleted on the target
// directly); the middlebox then delivers it. The deleted file must not
// come back.
// startMiddleboxWorld is startWorld with a middlebox between the
// buffer and the storage role, after version 0 of /buf/f has migrated;
// the next copy the mover sends is held in the middlebox, whole.
func startMiddleboxWorld(t *testing.T, bin string) (*world, *middlebox) {
	var mb *middlebox
	w := startWorld(t, bin, func(storageURL string) string {
		mb = newMiddlebox(t, storageURL)
		srv := httptest.NewServer(mb)
		t.Cleanup(func() {
			select {
			case <-mb.release:
			default:
				close(mb.release)
			}
			srv.Close()
		})
		return srv.URL + "/"
	})
	if code, _ := w.do(http.MethodPut, "/buf/f", []byte("version 0")); code != http.StatusCreated {
		t.Fatalf("PUT version 0 = %d", code)
	}
	w.settled("version 0 not migrated and retired")
	mb.hold.Store(true)
	return w, mb
}

// held waits for the middlebox to hold a copy of want, whole.
func (m *middlebox) held(t *testing.T, want []byte) {
	t.Helper()
	select {
	case got := <-m.got:
		if !bytes.Equal(got, want) {
			t.Fatalf("the middlebox got %q, want %q", got, want)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the mover's copy of %q never reached the middlebox", want)
	}
}

// deliver lets the held copy go on to the target and waits for its
// answer there.
func (m *middlebox) deliver(t *testing.T) {
	t.Helper()
	close(m.release)
	select {
	case code := <-m.sent:
		t.Logf("the target answered the held copy, delivered late, with %d", code)
	case <-time.After(60 * time.Second):
		t.Fatal("the middlebox did not deliver the copy")
	}
}

func testDeleteBehindMiddlebox(t *testing.T, bin string) {
	w, mb := startMiddleboxWorld(t, bin)
	v1 := []byte("version 1, held up in the middlebox")
	if code, _ := w.do(http.MethodPut, "/buf/f", v1); code/100 != 2 {
		t.Fatalf("PUT version 1 = %d", code)
	}
	mb.held(t, v1)
	if code, body := w.do(http.MethodDelete, "/buf/f", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s, want 204", code, body)
	}
	if code, _ := w.do(http.MethodGet, "/buf/f", nil); code != http.StatusNotFound {
		t.Errorf("GET after the DELETE = %d, want 404", code)
	}
	mb.deliver(t)
	testenv.Eventually(t, 60*time.Second, "the deleted file came back on the target after the DELETE was answered 204", func() bool {
		_, there := w.onTarget("/buf/f")
		st, ok := w.status()
		return !there && ok && st.PendingFiles == 0 && st.PendingDeletes == 0
	})
	if code, body := w.answer("/buf/f"); code != http.StatusNotFound {
		t.Errorf("GET once settled = %d %q, want 404", code, strings.TrimSpace(string(body)))
	}
}

// testNewerVersionBehindMiddlebox: the mover's copy of version 1 is held
// whole in a middlebox when version 2 is written; the middlebox then
// loses the copy's answer (it drops the connection), version 2 migrates,
// and only then does the middlebox deliver version 1. Version 2 must be
// what the target keeps: version 1's copy was conditional on version 0,
// which is gone.
func testNewerVersionBehindMiddlebox(t *testing.T, bin string) {
	w, mb := startMiddleboxWorld(t, bin)
	v1, v2 := []byte("version 1, held up in the middlebox"), []byte("version 2")
	if code, _ := w.do(http.MethodPut, "/buf/f", v1); code/100 != 2 {
		t.Fatalf("PUT version 1 = %d", code)
	}
	mb.held(t, v1)
	if code, _ := w.do(http.MethodPut, "/buf/f", v2); code/100 != 2 {
		t.Fatalf("PUT version 2 = %d", code)
	}
	if code, body := w.do(http.MethodGet, "/buf/f", nil); code != http.StatusOK || !bytes.Equal(body, v2) {
		t.Errorf("GET after version 2 = %d %q", code, body)
	}
	close(mb.cut)
	testenv.Eventually(t, 60*time.Second, "version 2 did not migrate", func() bool {
		got, _ := w.onTarget("/buf/f")
		st, ok := w.status()
		return bytes.Equal(got, v2) && ok && st.PendingFiles == 0 && st.HeldFiles == 0
	})
	mb.deliver(t)
	if got, _ := w.onTarget("/buf/f"); !bytes.Equal(got, v2) {
		t.Errorf("after version 1 was delivered late the target holds %q, want version 2", got)
	}
	if code, body := w.answer("/buf/f"); code != http.StatusOK || !bytes.Equal(body, v2) {
		t.Errorf("GET once settled = %d %q, want version 2", code, body)
	}
}
