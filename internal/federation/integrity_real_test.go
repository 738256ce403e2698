package federation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// The proxy's promises against real servers: two storage roles, and two
// nginx WebDAV servers (whose ETags differ for the same bytes and which
// offer no checksums, so nothing proves their replicas identical).

// replicaPair is two real servers holding /f, one of which a test kills.
type replicaPair struct {
	// size is a file size big enough that a replica killed after the
	// client read 1 MiB has not sent it all: loopback socket buffers
	// grow to tens of megabytes (tcp_rmem), and nginx's sendfile fills
	// them at once.
	size  int
	urls  [2]string
	write func(t *testing.T, i int, data []byte)
	kill  func(i int)
}

func storagePair(t *testing.T) *replicaPair {
	a, b := startSite(t, "ra"), startSite(t, "rb")
	sites := []*site{a, b}
	return &replicaPair{
		size:  64 << 20,
		urls:  [2]string{a.url(), b.url()},
		write: func(t *testing.T, i int, data []byte) { sites[i].write(t, "/f", data); sites[i].sum(t, "/f") },
		kill:  func(i int) { sites[i].kill() },
	}
}

func nginxPair(t *testing.T) *replicaPair {
	a, b := testenv.StartNginx(t), testenv.StartNginx(t)
	srv := []*testenv.Server{a, b}
	return &replicaPair{
		size: 256 << 20,
		urls: [2]string{a.URL, b.URL},
		write: func(t *testing.T, i int, data []byte) {
			if err := os.WriteFile(filepath.Join(srv[i].Dir, "f"), data, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		kill: func(i int) { srv[i].Kill() },
	}
}

func pairFed(t *testing.T, rp *replicaPair, extra string) *testFed {
	eps := []string{
		fmt.Sprintf("name: ra\nurl: %s\npriority: 1\ntimeout: 2s", rp.urls[0]),
		fmt.Sprintf("name: rb\nurl: %s\npriority: 2\ntimeout: 2s", rp.urls[1]),
	}
	return startFed(t, cfgYAML("mode: proxy\n"+slowHealth+"\n"+extra, eps...))
}

// slowClient is a client with a small receive buffer, so that a test
// reading slowly holds the server back rather than letting the kernel
// take the whole file into socket buffers (loopback buffers grow to
// megabytes).
var slowClient = &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
	Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		})
		return errors.Join(err, serr)
	},
}).DialContext}}

// readKill starts a GET, reads 1 MiB, kills replica 0 and reads the rest.
func readKill(t *testing.T, tf *testFed, rp *replicaPair) (int, []byte, error) {
	resp, err := slowClient.Get(tf.srv.URL + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		return resp.StatusCode, head, err
	}
	rp.kill(0)
	rest, err := io.ReadAll(resp.Body)
	return resp.StatusCode, append(head, rest...), err
}

// Replicas of one size with different bytes: killing the one served
// mid-stream breaks the answer; what arrived is a prefix of its file.
func TestRealReplicasDisagreeNeverSpliced(t *testing.T) {
	for _, kind := range []struct {
		name string
		pair func(*testing.T) *replicaPair
	}{{"storage", storagePair}, {"nginx", nginxPair}} {
		t.Run(kind.name, func(t *testing.T) {
			rp := kind.pair(t)
			va, vb := randData(rp.size, 21), randData(rp.size, 22)
			rp.write(t, 0, va)
			rp.write(t, 1, vb)
			tf := pairFed(t, rp, "")
			code, got, err := readKill(t, tf, rp)
			if code != 200 {
				t.Fatalf("GET = %d", code)
			}
			if err == nil {
				t.Fatalf("read %d bytes without error after the served replica died; rb holds other bytes", len(got))
			}
			if !bytes.Equal(got, va[:len(got)]) {
				t.Fatalf("%d bytes received are not a prefix of ra's file: spliced", len(got))
			}
		})
	}
}

// Identical replicas on nginx: nothing proves them identical (different
// ETags, no checksums), so the failover is refused: the client may get a
// broken transfer, never wrong bytes. On storage roles, whose kept
// checksums prove it, the failover goes through.
func TestRealReplicasSameBytes(t *testing.T) {
	for _, kind := range []struct {
		name     string
		pair     func(*testing.T) *replicaPair
		complete bool
	}{{"storage", storagePair, true}, {"nginx", nginxPair, false}} {
		t.Run(kind.name, func(t *testing.T) {
			rp := kind.pair(t)
			data := randData(rp.size, 23)
			rp.write(t, 0, data)
			rp.write(t, 1, data)
			tf := pairFed(t, rp, "")
			_, got, err := readKill(t, tf, rp)
			if !bytes.Equal(got, data[:min(len(got), len(data))]) || len(got) > len(data) {
				t.Fatalf("%d bytes received are not the file's prefix", len(got))
			}
			if kind.complete && (err != nil || len(got) != len(data)) {
				t.Fatalf("got %d of %d bytes, %v; the failover is proven safe by the checksums", len(got), len(data), err)
			}
		})
	}
}

// A file replaced on every replica by a bigger one after its size was
// cached: the new length and bytes, never the old length.
func TestRealStaleSizeLooksAgain(t *testing.T) {
	rp := storagePair(t)
	v1, v2 := randData(1_000_000, 24), randData(2_000_000, 25)
	rp.write(t, 0, v1)
	rp.write(t, 1, v1)
	tf := pairFed(t, rp, "")
	if _, body, err := tf.get(t, "/f", nil); err != nil || !bytes.Equal(body, v1) {
		t.Fatalf("first GET: %d bytes, %v", len(body), err)
	}
	rp.write(t, 0, v2)
	rp.write(t, 1, v2)
	resp, body, err := tf.get(t, "/f", nil)
	if err != nil || resp.StatusCode != 200 || resp.ContentLength != 2_000_000 || !bytes.Equal(body, v2) {
		t.Fatalf("GET after the replacement = %d, Content-Length %d, %d bytes, %v; want the new file", resp.StatusCode, resp.ContentLength, len(body), err)
	}
}

// Every replica gone after the metadata was cached: 503 (killed) or 404
// (deleted), never a 200 with no body.
func TestRealNoStatusBeforeBytes(t *testing.T) {
	t.Run("deleted", func(t *testing.T) {
		a, b := startSite(t, "ra"), startSite(t, "rb")
		data := randData(100_000, 26)
		a.write(t, "/f", data)
		b.write(t, "/f", data)
		tf := realFed(t, "mode: proxy", a, b)
		tf.get(t, "/f", nil)
		os.Remove(filepath.Join(a.dir, "f"))
		os.Remove(filepath.Join(b.dir, "f"))
		for _, hdr := range []http.Header{nil, {"Range": {"bytes=5-10"}}} {
			resp, body, err := tf.get(t, "/f", hdr)
			if err != nil || resp.StatusCode != 404 {
				t.Errorf("GET %v = %d %q, %v; want 404", hdr, resp.StatusCode, body, err)
			}
		}
	})
	t.Run("killed", func(t *testing.T) {
		a, b := startSite(t, "ra"), startSite(t, "rb")
		data := randData(100_000, 27)
		a.write(t, "/f", data)
		b.write(t, "/f", data)
		tf := realFed(t, "mode: proxy", a, b)
		tf.get(t, "/f", nil)
		a.kill()
		b.kill()
		for _, hdr := range []http.Header{nil, {"Range": {"bytes=5-10"}}} {
			resp, body, err := tf.get(t, "/f", hdr)
			if err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
				t.Errorf("GET %v = %d %q (Retry-After %q), %v; want 503 with Retry-After", hdr, resp.StatusCode, body, resp.Header.Get("Retry-After"), err)
			}
		}
	})
}

// kill -STOP of the replica serving a proxied read: the federator leaves
// it after proxy_idle_timeout and finishes from the other replica.
func TestRealStalledReplicaLeft(t *testing.T) {
	a, b := startSite(t, "ra"), startSite(t, "rb")
	data := randData(64<<20, 28)
	a.write(t, "/f", data)
	b.write(t, "/f", data)
	a.sum(t, "/f")
	b.sum(t, "/f")
	fz := newFreezer(t, a.addr)
	eps := []string{
		"name: ra\nurl: http://" + fz.addr + "/\npriority: 1\ntimeout: 2s",
		"name: rb\nurl: " + b.url() + "\npriority: 2\ntimeout: 2s",
	}
	tf := startFed(t, cfgYAML("mode: proxy\nproxy_idle_timeout: 500ms\n"+slowHealth, eps...))
	resp, err := http.Get(tf.srv.URL + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	fz.freeze() // kill -STOP: connections stay open, nothing moves
	start := time.Now()
	rest, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(append(head, rest...), data) {
		t.Fatalf("read after the stall: %d bytes, %v; want the file whole", len(head)+len(rest), err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the rest took %v after the stall; want about the idle timeout", d)
	}
}

// freezer is a TCP relay to a server that a test can freeze, as kill
// -STOP freezes the server: connections stay open and nothing moves.
type freezer struct {
	addr   string
	mu     sync.Mutex
	frozen chan struct{} // closed when thawed; nil when not frozen
}

func newFreezer(t *testing.T, target string) *freezer {
	fz := &freezer{}
	fz.addr = testenv.Relay(t, target, fz.pipe, fz.pipe)
	t.Cleanup(fz.thaw) // before the relay's: its copies wait on the gate
	return fz
}

func (fz *freezer) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		fz.mu.Lock()
		gate := fz.frozen
		fz.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (fz *freezer) freeze() {
	fz.mu.Lock()
	defer fz.mu.Unlock()
	if fz.frozen == nil {
		fz.frozen = make(chan struct{})
	}
}

func (fz *freezer) thaw() {
	fz.mu.Lock()
	defer fz.mu.Unlock()
	if fz.frozen != nil {
		close(fz.frozen)
		fz.frozen = nil
	}
}

// replaceKeepingTime prepares, beside name in dir, a file of data with
// name's modification time, and returns the rename that puts it in
// place: as cp -p, touch -r or an rsync restore leave a replaced file,
// with the size and time (so nginx's ETag and Last-Modified) of the old.
func replaceKeepingTime(t *testing.T, dir, name string, data []byte) func() {
	t.Helper()
	old := filepath.Join(dir, name)
	st, err := os.Stat(old)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "."+name+".new")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Rename(tmp, old); err != nil {
			t.Fatal(err)
		}
	}
}

// The one nginx serving a proxied read is killed mid-transfer (kill -9)
// and comes back with the file replaced by one of the same size and
// time. Its ETag is the same (modification second and size), and nginx
// offers no checksum, so nothing proves the restarted server holds the
// bytes already sent: the federator must not resume at the offset
// reached. The answer breaks; what arrived is a prefix of the first file.
func TestRealWeakReplicaRestartedNeverSpliced(t *testing.T) {
	ng := testenv.StartNginx(t)
	const size = 256 << 20 // more than loopback buffers hold (see replicaPair)
	va, vb := randData(size, 41), randData(size, 42)
	if err := os.WriteFile(filepath.Join(ng.Dir, "f"), va, 0o644); err != nil {
		t.Fatal(err)
	}
	replace := replaceKeepingTime(t, ng.Dir, "f", vb)
	// The idle timeout is how long a broken read retries the same
	// replica: long enough for the restart below.
	tf := startFed(t, cfgYAML("mode: proxy\nproxy_idle_timeout: 20s\n"+slowHealth,
		fmt.Sprintf("name: ng\nurl: %s\ntimeout: 2s", ng.URL)))
	resp, err := slowClient.Get(tf.srv.URL + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Etag") == "" {
		t.Fatalf("GET = %d, ETag %q", resp.StatusCode, resp.Header.Get("Etag"))
	}
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	ng.Kill()
	replace()
	ng.Restart(t)
	probe, err := http.Head(ng.URL + "f")
	if err != nil {
		t.Fatal(err)
	}
	probe.Body.Close()
	if probe.Header.Get("Etag") != resp.Header.Get("Etag") {
		t.Fatalf("nginx's ETag changed (%s, was %s): the test does not test a replacement under the same validators",
			probe.Header.Get("Etag"), resp.Header.Get("Etag"))
	}
	rest, err := io.ReadAll(resp.Body)
	got := append(head, rest...)
	if !bytes.Equal(got, va[:min(len(got), len(va))]) {
		t.Fatalf("%d bytes received are not a prefix of the file first served: the federator resumed on the replaced file (spliced)", len(got))
	}
	if err == nil {
		t.Fatalf("read all %d bytes without error, but the server died before sending them and nothing proves it came back with the same file", len(got))
	}
}

// /api/endpoints says which endpoints have weak validators: nginx (its
// ETag is the modification second and the size), not a storage role
// (its ETag holds the inode and the ctime).
func TestRealEndpointsShowValidators(t *testing.T) {
	site := startSite(t, "st")
	site.write(t, "/a", randData(1000, 43))
	ng := testenv.StartNginx(t)
	if err := os.WriteFile(filepath.Join(ng.Dir, "b"), randData(1000, 44), 0o644); err != nil {
		t.Fatal(err)
	}
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth,
		"name: st\nurl: "+site.url(), "name: ng\nurl: "+ng.URL))
	for _, p := range []string{"/a", "/b"} {
		if resp, body, err := tf.get(t, p, nil); err != nil || resp.StatusCode != 200 || len(body) != 1000 {
			t.Fatalf("GET %s = %d, %d bytes, %v", p, resp.StatusCode, len(body), err)
		}
	}
	resp, body := tf.do(t, "GET", "/api/endpoints", nil, nil)
	var got []EndpointStatus
	if err := json.Unmarshal([]byte(body), &got); resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET /api/endpoints = %d, %v: %s", resp.StatusCode, err, body)
	}
	want := map[string]endpoint.Validators{"st": endpoint.ValidatorsStrong, "ng": endpoint.ValidatorsWeak}
	for _, e := range got {
		if e.Validators != want[e.Name] {
			t.Errorf("/api/endpoints: %s validators %q, want %q", e.Name, e.Validators, want[e.Name])
		}
	}
}
