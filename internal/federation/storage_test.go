package federation

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/testenv"
)

// site is a real storage server on loopback that a test can kill and
// bring back on the same address.
type site struct {
	name string
	dir  string
	addr string
	srv  *httptest.Server
	t    *testing.T
	// mu guards reqs (requests served, by method, and PROPFIND by
	// depth: "PROPFIND depth 1") and around (set, runs
	// each request in place of the storage role, which it calls as
	// next when it wants).
	mu     sync.Mutex
	reqs   map[string]int
	around func(w http.ResponseWriter, r *http.Request, next http.Handler)
}

func startSite(t *testing.T, name string) *site {
	s := &site{name: name, dir: t.TempDir(), t: t}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *site) start() {
	st, err := storage.New(storage.Config{Root: s.dir}, quiet())
	if err != nil {
		s.t.Fatal(err)
	}
	addr := s.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	// The old socket may linger a moment after a kill.
	testenv.Within(time.Second, func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	if err != nil {
		s.t.Fatalf("site %s: listen %s: %v", s.name, addr, err)
	}
	s.addr = ln.Addr().String()
	h := st.Handler()
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.reqs == nil {
			s.reqs = map[string]int{}
		}
		key := r.Method
		if key == "PROPFIND" {
			key += " depth " + r.Header.Get("Depth")
		}
		s.reqs[key]++
		around := s.around
		s.mu.Unlock()
		if around != nil {
			around(w, r, h)
			return
		}
		h.ServeHTTP(w, r)
	}))
	s.srv.Listener = ln
	s.srv.Start()
}

// kill drops every connection and stops listening, as a crash would.
func (s *site) kill() {
	if s.srv != nil {
		s.srv.CloseClientConnections()
		s.srv.Close()
		s.srv = nil
	}
}

func (s *site) url() string { return "http://" + s.addr + "/" }

// count returns how many requests of method the site served (reqs).
func (s *site) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[method]
}

// serveAround makes fn run every request from now on (site.around).
func (s *site) serveAround(fn func(w http.ResponseWriter, r *http.Request, next http.Handler)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.around = fn
}

func (s *site) write(t *testing.T, p string, data []byte) {
	full := filepath.Join(s.dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sum asks the site for p's adler32, which it then keeps (as it does
// for every file it receives by PUT), and returns it.
func (s *site) sum(t *testing.T, p string) string {
	req, _ := http.NewRequest("HEAD", s.url()+strings.TrimPrefix(p, "/"), nil)
	req.Header.Set("Want-Digest", "adler32")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	d := resp.Header.Get("Digest")
	if !strings.HasPrefix(d, "adler32=") {
		t.Fatalf("%s: HEAD %s with Want-Digest: Digest %q", s.name, p, d)
	}
	return d
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func realFed(t *testing.T, fedLines string, sites ...*site) *testFed {
	var eps []string
	for i, s := range sites {
		eps = append(eps, fmt.Sprintf("name: %s\nurl: %s\npriority: %d\nwritable: true\ntimeout: 2s", s.name, s.url(), i+1))
	}
	return startFed(t, cfgYAML("health: {interval: 100ms, timeout: 500ms, fail_after: 2, recover_after: 2}\n"+fedLines, eps...))
}

func TestRealSitesRedirectFailAndReturn(t *testing.T) {
	a, b, c := startSite(t, "site-a"), startSite(t, "site-b"), startSite(t, "site-c")
	data := randomBytes(t, 1<<20)
	a.write(t, "/data/rep.bin", data)
	b.write(t, "/data/rep.bin", data)
	c.write(t, "/data/only-c.bin", []byte("c"))
	tf := realFed(t, "", a, b, c)

	loc := func(p string) (int, string) {
		resp, _ := tf.do(t, "GET", p, nil, nil)
		return resp.StatusCode, resp.Header.Get("Location")
	}
	code, l := loc("/data/rep.bin")
	if code != 302 || l != a.url()+"data/rep.bin" {
		t.Fatalf("GET = %d %q, want 302 to site-a", code, l)
	}
	// A client following the redirect gets the bytes.
	resp, err := http.Get(tf.srv.URL + "/data/rep.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("curl -L equivalent got %d bytes, want the file", len(got))
	}
	if code, l := loc("/data/only-c.bin"); code != 302 || !strings.HasPrefix(l, c.url()) {
		t.Errorf("GET only-c = %d %q", code, l)
	}

	// Within 2 s of site-a dying no client is sent there (the probes run
	// every 100 ms and two failures mark it down: about 0.3 s).
	a.kill()
	testenv.Eventually(t, 2*time.Second, "site-a marked down within 2 s of its death", func() bool { return tf.state("site-a") == "down" })
	for range 20 {
		if code, l := loc("/data/rep.bin"); code != 302 || l != b.url()+"data/rep.bin" {
			t.Fatalf("with site-a dead: %d %q, want site-b", code, l)
		}
	}
	// Not found versus unavailable, with a real dead site.
	if resp, body := tf.do(t, "GET", "/data/none.bin", nil, nil); resp.StatusCode != 503 || !strings.Contains(body, "site-a: down") {
		t.Errorf("missing file with site-a dead = %d %q, want 503", resp.StatusCode, body)
	}
	a.start()
	testenv.Eventually(t, 10*time.Second, "site-a back up", func() bool { return tf.state("site-a") == "up" })
	if code, l := loc("/data/rep.bin"); l != a.url()+"data/rep.bin" {
		t.Errorf("site-a back: %d %q, want site-a used again", code, l)
	}
	if resp, _ := tf.do(t, "GET", "/data/none.bin", nil, nil); resp.StatusCode != 404 {
		t.Errorf("missing file with every site up = %d, want 404", resp.StatusCode)
	}

	// Merged listing over real servers.
	resp2, body := tf.do(t, "PROPFIND", "/data", http.Header{"Depth": {"1"}}, nil)
	if resp2.StatusCode != 207 || strings.Count(body, "/data/rep.bin<") != 1 || !strings.Contains(body, "/data/only-c.bin<") {
		t.Errorf("PROPFIND /data = %d:\n%s", resp2.StatusCode, body)
	}
	// PUT is redirected to site-a (priority 1), and the client's second
	// leg lands the file there.
	req, _ := http.NewRequest("PUT", tf.srv.URL+"/data/new.bin", bytes.NewReader([]byte("new")))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte("new"))), nil }
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT via redirect = %d", resp.StatusCode)
	}
	if got, err := os.ReadFile(filepath.Join(a.dir, "data", "new.bin")); err != nil || string(got) != "new" {
		t.Errorf("site-a has %q, %v", got, err)
	}
	if code, l := loc("/data/new.bin"); code != 302 || !strings.HasPrefix(l, a.url()) {
		t.Errorf("GET after PUT = %d %q", code, l)
	}
	if resp, body := tf.do(t, "DELETE", "/data/rep.bin", nil, nil); resp.StatusCode != 204 {
		t.Errorf("DELETE = %d %s", resp.StatusCode, body)
	}
	for _, s := range []*site{a, b} {
		if _, err := os.Stat(filepath.Join(s.dir, "data", "rep.bin")); !os.IsNotExist(err) {
			t.Errorf("%s still has rep.bin after DELETE (%v)", s.name, err)
		}
	}
}

func TestRealSitesProxyFailoverInFlight(t *testing.T) {
	a, b := startSite(t, "site-a"), startSite(t, "site-b")
	data := randomBytes(t, 48<<20)
	a.write(t, "/big.bin", data)
	b.write(t, "/big.bin", data)
	// The sites keep the files' adler32, as they do for every file they
	// receive by PUT: a failover goes only to a replica proven to hold
	// the same bytes, and the two sites' ETags differ.
	a.sum(t, "/big.bin")
	b.sum(t, "/big.bin")
	tf := realFed(t, "mode: proxy", a, b)

	resp, err := http.Get(tf.srv.URL + "/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	a.kill() // mid-stream: the federator must go on from site-b
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read after the kill: %v", err)
	}
	if got := append(head, rest...); !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, not byte-identical to the %d-byte file", len(got), len(data))
	}
	_, metrics := tf.do(t, "GET", "/metrics", nil, nil)
	if !strings.Contains(metrics, "lakefed_federation_proxy_failovers_total 1") {
		t.Errorf("no failover counted; was the whole file read before the kill? metrics:\n%s", grepLines(metrics, "failover"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// onFirstRead runs fn before the first byte of r is read.
type onFirstRead struct {
	r    io.Reader
	fn   func()
	done bool
}

func (o *onFirstRead) Read(b []byte) (int, error) {
	if !o.done {
		o.done = true
		o.fn()
	}
	return o.r.Read(b)
}

// Two conditional PUTs through the federator cannot both win: the
// client's If-Match or If-None-Match is checked against the look-up, and
// the write commits only on top of what the look-up saw on the endpoint
// (endpoint.PutIf, atomic on the storage role). Here another writer
// replaces the file while the body streams: the If-Match PUT is 412 and
// the other writer's bytes stay; likewise for If-None-Match: * against
// a file created meanwhile.
func TestRealConditionalPutRace(t *testing.T) {
	a := startSite(t, "site-a")
	tf := realFed(t, "mode: proxy", a)
	other := func(p string, data []byte) func() {
		return func() {
			req, _ := http.NewRequest("PUT", a.url()+strings.TrimPrefix(p, "/"), bytes.NewReader(data))
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode/100 != 2 {
				t.Errorf("the other writer's PUT: %v %v", resp, err)
				return
			}
			resp.Body.Close()
		}
	}
	a.write(t, "/f", []byte("version one"))
	resp, _ := tf.do(t, "HEAD", "/f", nil, nil)
	etag := resp.Header.Get("Etag")
	if etag == "" {
		t.Fatal("HEAD /f: no ETag")
	}
	body := &onFirstRead{r: strings.NewReader("mine, if nothing changed"), fn: other("/f", []byte("the other writer's"))}
	resp, msg := tf.do(t, "PUT", "/f", http.Header{"If-Match": {etag}}, body)
	got, _ := os.ReadFile(filepath.Join(a.dir, "f"))
	if resp.StatusCode != http.StatusPreconditionFailed || string(got) != "the other writer's" {
		t.Errorf("If-Match PUT racing another writer = %d %q, site holds %q; want 412 and the other writer's bytes", resp.StatusCode, msg, got)
	}
	body = &onFirstRead{r: strings.NewReader("mine, if nothing is there"), fn: other("/g", []byte("created meanwhile"))}
	resp, msg = tf.do(t, "PUT", "/g", http.Header{"If-None-Match": {"*"}}, body)
	got, _ = os.ReadFile(filepath.Join(a.dir, "g"))
	if resp.StatusCode != http.StatusPreconditionFailed || string(got) != "created meanwhile" {
		t.Errorf("If-None-Match PUT racing a create = %d %q, site holds %q; want 412 and the other writer's bytes", resp.StatusCode, msg, got)
	}
}
