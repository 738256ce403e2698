package federation

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// switchable is an httptest server whose handler is set after its URL is
// known, so two federators can name each other.
func switchable(t *testing.T) (*httptest.Server, *atomic.Pointer[http.Handler]) {
	var h atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := h.Load(); p != nil {
			(*p).ServeHTTP(w, r)
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv, &h
}

func TestUpstreamFallbackAndLoopStop(t *testing.T) {
	srvA, hA := switchable(t)
	srvB, hB := switchable(t)
	a1, b1 := newFake("a1", true), newFake("b1", true)
	a1.put("/only-a", []byte("a"))
	a1.put("/both", []byte("x"))
	b1.put("/only-b", []byte("b"))
	b1.put("/both", []byte("x"))
	up := func(name, u string) string {
		return "name: " + name + "\nurl: lakefed://" + strings.TrimPrefix(u, "http://") + "/\npriority: 10"
	}
	fa := startFed(t, cfgYAML(slowHealth, ep("a1"), up("fed-b", srvB.URL)), a1)
	fb := startFed(t, cfgYAML(slowHealth, ep("b1"), up("fed-a", srvA.URL)), b1)
	ha, hb := fa.Handler(), fb.Handler()
	hA.Store(&ha)
	hB.Store(&hb)
	get := func(base, p string, hdr http.Header) (*http.Response, string) {
		req, _ := http.NewRequest("GET", base+p, nil)
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		return resp, buf.String()
	}

	// A local replica: the upstream is not asked.
	resp, _ := get(srvA.URL, "/only-a", nil)
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "http://a1.example/only-a" {
		t.Fatalf("GET /only-a at A = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = get(srvA.URL, "/both", nil)
	if got := resp.Header.Get("Location"); got != "http://a1.example/both" {
		t.Errorf("GET /both at A = %q, want the local replica", got)
	}
	if n := b1.stats.Load(); n != 0 {
		t.Errorf("B was asked %d times for files A has locally", n)
	}

	// Only upstream has it: redirect to the upstream, which redirects on.
	resp, _ = get(srvA.URL, "/only-b", nil)
	if resp.StatusCode != 302 || resp.Header.Get("Location") != srvB.URL+"/only-b" {
		t.Fatalf("GET /only-b at A = %d %q, want 302 to B", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = get(srvB.URL, "/only-b", nil)
	if resp.Header.Get("Location") != "http://b1.example/only-b" {
		t.Errorf("GET /only-b at B = %q", resp.Header.Get("Location"))
	}
	// HEAD through the hierarchy carries the size.
	req, _ := http.NewRequest("HEAD", srvA.URL+"/only-b", nil)
	hresp, err := noFollow.Do(req)
	if err != nil || hresp.StatusCode != 200 || hresp.ContentLength != 1 {
		t.Errorf("HEAD /only-b at A = %v %v", hresp, err)
	}

	// A missing file: A and B name each other, and the hop limit ends it.
	a0, b0 := a1.stats.Load(), b1.stats.Load()
	resp, body := get(srvA.URL, "/missing", nil)
	if resp.StatusCode != 404 {
		t.Fatalf("GET /missing = %d, want 404:\n%s", resp.StatusCode, body)
	}
	da, db := a1.stats.Load()-a0, b1.stats.Load()-b0
	if da < 1 || da > 2 || db < 1 || db > 2 {
		t.Errorf("a missing file cost %d Stats on a1 and %d on b1; want 1-2 each (max_hops 3)", da, db)
	}

	// A request already at the hop limit asks no upstream.
	resp, body = get(srvA.URL, "/only-b-again", http.Header{HopsHeader: {"3"}})
	if resp.StatusCode != 404 || !strings.Contains(body, "fed-b: not asked: hop limit reached") {
		t.Errorf("at the hop limit: %d %q", resp.StatusCode, body)
	}
}

func TestReloadWithRequestsInFlight(t *testing.T) {
	a, b, c := newFake("site-a", false), newFake("site-b", true), newFake("site-c", true)
	big := bytes.Repeat([]byte("0123456789"), 100000)
	a.put("/big", big)
	c.put("/new", []byte("n"))
	cfg1 := cfgYAML(slowHealth, ep("site-a", "timeout: 50ms"), ep("site-b"))
	cfg2 := cfgYAML(slowHealth, ep("site-b"), ep("site-c"))
	tf := startFed(t, cfg1, a, b, c)
	oldA, oldB := tf.snap.Load().byName["site-a"], tf.snap.Load().byName["site-b"]

	gate := make(chan struct{})
	a.openGate.Store(&gate)
	type result struct {
		code int
		body string
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Get(tf.srv.URL + "/big")
		if err != nil {
			done <- result{}
			return
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		done <- result{resp.StatusCode, buf.String()}
	}()
	testenv.Eventually(t, 5*time.Second, "proxied read in flight", func() bool { return a.opens.Load() == 1 })

	// Reload through the API: site-a goes, site-c comes.
	parsed, err := config.Parse([]byte(cfg2))
	if err != nil {
		t.Fatal(err)
	}
	tf.opts.Reload = func(context.Context) (*config.Federation, error) { return parsed.Federation, nil }
	resp, body := tf.do(t, "POST", "/api/reload", http.Header{"Content-Type": {"application/json"}}, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("reload = %d %s", resp.StatusCode, body)
	}
	if got := tf.state("site-a"); got != "absent" {
		t.Errorf("site-a after reload: %s, want absent", got)
	}
	if tf.snap.Load().byName["site-b"] != oldB {
		t.Error("site-b's config did not change but it was rebuilt (health lost)")
	}
	resp, _ = tf.do(t, "GET", "/new", nil, nil)
	if resp.Header.Get("Location") != "http://site-c.example/new" {
		t.Errorf("GET /new after reload = %d %q, want site-c", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := tf.do(t, "GET", "/big", nil, nil); resp.StatusCode != 404 {
		t.Errorf("GET /big after site-a left = %d, want 404", resp.StatusCode)
	}
	// site-a, removed, is closed only once its read in flight ends: its
	// timeout (50ms) has passed when the closer waits for its streams.
	testenv.Eventually(t, 5*time.Second, "removed site-a's closer waiting for its stream", func() bool {
		oldA.streams.mu.Lock()
		defer oldA.streams.mu.Unlock()
		return oldA.streams.idle != nil
	})
	if n := a.closes.Load(); n != 0 {
		t.Errorf("site-a closed %d times with a read in flight", n)
	}
	close(gate)
	r := <-done
	if r.code != 200 || r.body != string(big) {
		t.Errorf("in-flight read across the reload = %d, %d bytes; want 200 and %d bytes", r.code, len(r.body), len(big))
	}
	testenv.Eventually(t, 5*time.Second, "removed site-a closed once its read ended", func() bool { return a.closes.Load() == 1 })
	if n := b.closes.Load(); n != 0 {
		t.Errorf("site-b, kept, closed %d times", n)
	}

	// A bad config changes nothing.
	bad := *parsed.Federation
	bad.Endpoints = append([]config.Endpoint(nil), bad.Endpoints...)
	bad.Endpoints[0].URL = "gopher://x/"
	tf.opts.NewEndpoint = DefaultNewEndpoint
	bad.Endpoints[0].Name = "site-x"
	if err := tf.Reload(bad); err == nil {
		t.Error("Reload with an unbuildable endpoint succeeded")
	}
	if got := tf.state("site-c"); got != "up" {
		t.Errorf("after a failed reload site-c is %s", got)
	}

	// An endpoint a failed reload built is closed: nothing will use it.
	d := newFake("site-d", true)
	tf.opts.NewEndpoint = func(ctx context.Context, ec config.Endpoint, log *slog.Logger) (endpoint.Endpoint, error) {
		if ec.Name == d.name {
			return d.asEndpoint(), nil
		}
		return DefaultNewEndpoint(ctx, ec, log)
	}
	bad.Endpoints = append(append([]config.Endpoint(nil), parsed.Federation.Endpoints...), bad.Endpoints[0])
	bad.Endpoints[len(bad.Endpoints)-2].Name = d.name
	if err := tf.Reload(bad); err == nil {
		t.Error("Reload with an unbuildable endpoint succeeded")
	}
	if n := d.closes.Load(); n != 1 {
		t.Errorf("site-d, built by a failed reload, closed %d times; want 1", n)
	}
}

// An upstream's 503 about one path (its own endpoints for that path are
// down) says nothing of the upstream's health: many such answers must not
// mark it down, or one client could cut off every file behind it.
func TestUpstreamPerPathUnavailableKeepsItUp(t *testing.T) {
	srvB, hB := switchable(t)
	dead, live := newFake("dead", true), newFake("live", true)
	dead.down.Store(true)
	live.put("/f", []byte("ok")) // at prefix /ok
	fb := startFed(t, cfgYAML(slowHealth,
		ep("dead", "prefix: /dead"), ep("live", "prefix: /ok")), dead, live)
	hb := fb.Handler()
	hB.Store(&hb)
	fa := startFed(t, cfgYAML("health: {interval: 1h, error_limit: 3}",
		"name: fed-b\nurl: lakefed://"+strings.TrimPrefix(srvB.URL, "http://")+"/\npriority: 10"))
	for i := range 10 {
		resp, body := fa.do(t, "GET", "/dead/x", nil, nil)
		if resp.StatusCode != 503 {
			t.Fatalf("GET /dead/x #%d = %d %q, want 503", i, resp.StatusCode, body)
		}
	}
	if st := fa.state("fed-b"); st != "up" {
		t.Fatalf("after ten per-path 503s the upstream is %q, want up", st)
	}
	if resp, body := fa.do(t, "GET", "/ok/f", nil, nil); resp.StatusCode != 302 {
		t.Errorf("GET /ok/f = %d %q, want 302 (the upstream is healthy)", resp.StatusCode, body)
	}
	// A real failure of the upstream still counts.
	srvB.CloseClientConnections()
	hB.Store(nil)
	for range 5 {
		fa.do(t, "GET", "/ok/g", nil, nil)
	}
	if st := fa.state("fed-b"); st != "down" {
		t.Errorf("after 5 plain 503s the upstream is %q, want down", st)
	}
}

// Two federators naming each other as upstream: a file deleted behind
// one is gone from both within about two TTLs, not kept alive by each
// serving the other the entry it learned from it.
func TestMutualUpstreamsForgetDeletedFile(t *testing.T) {
	srvA, hA := switchable(t)
	srvB, hB := switchable(t)
	a1, b1 := newFake("a1", true), newFake("b1", true)
	a1.put("/f", []byte("a"))
	up := func(name, u string) string {
		return "name: " + name + "\nurl: lakefed://" + strings.TrimPrefix(u, "http://") + "/\npriority: 10"
	}
	const ttl = 300 * time.Millisecond
	cache := "metadata_cache: {ttl: 300ms, negative_ttl: 50ms}\n" + slowHealth
	fa := startFed(t, cfgYAML(cache, ep("a1"), up("fed-b", srvB.URL)), a1)
	fb := startFed(t, cfgYAML(cache, ep("b1"), up("fed-a", srvA.URL)), b1)
	ha, hb := fa.Handler(), fb.Handler()
	hA.Store(&ha)
	hB.Store(&hb)
	// Keep both caches warm from both sides while the file is deleted.
	stop := time.Now().Add(2 * ttl)
	for time.Now().Before(stop) {
		fa.do(t, "HEAD", "/f", nil, nil)
		fb.do(t, "HEAD", "/f", nil, nil)
		time.Sleep(20 * time.Millisecond) // paces the warm-up over two TTLs: the time itself is the test
	}
	a1.Delete(t.Context(), "/f")
	deleted := time.Now()
	var ra, rb *http.Response
	if !testenv.Within(3*ttl, func() bool {
		ra, _ = fa.do(t, "HEAD", "/f", nil, nil)
		rb, _ = fb.do(t, "HEAD", "/f", nil, nil)
		return ra.StatusCode == 404 && rb.StatusCode == 404
	}) {
		t.Fatalf("%v after the delete: A says %d, B says %d; want both 404 within about 2 TTLs (%v)", time.Since(deleted), ra.StatusCode, rb.StatusCode, 2*ttl)
	}
}

// The rule behind the test above, without timing: an entry a federator
// learned from its upstream does not answer a request that came from a
// federator (it may be that federator's own answer coming back).
func TestUpstreamEntryNotServedToFederators(t *testing.T) {
	srvA, hA := switchable(t)
	srvB, hB := switchable(t)
	a1, b1 := newFake("a1", true), newFake("b1", true)
	a1.put("/f", []byte("a"))
	up := func(name, u string) string {
		return "name: " + name + "\nurl: lakefed://" + strings.TrimPrefix(u, "http://") + "/\npriority: 10"
	}
	fa := startFed(t, cfgYAML("metadata_cache: {ttl: 1ms, negative_ttl: 1ms}\n"+slowHealth, ep("a1"), up("fed-b", srvB.URL)), a1)
	fb := startFed(t, cfgYAML("metadata_cache: {ttl: 1h}\n"+slowHealth, ep("b1"), up("fed-a", srvA.URL)), b1)
	ha, hb := fa.Handler(), fb.Handler()
	hA.Store(&ha)
	hB.Store(&hb)
	if resp, _ := fb.do(t, "HEAD", "/f", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("HEAD at B = %d", resp.StatusCode)
	}
	a1.Delete(t.Context(), "/f")
	time.Sleep(5 * time.Millisecond) // A's entry (1ms TTL) is gone
	resp, body := fb.do(t, "HEAD", "/f", http.Header{HopsHeader: {"1"}}, nil)
	if resp.StatusCode != 404 {
		t.Errorf("HEAD at B from a federator = %d %q; want 404, not B's entry learned from A", resp.StatusCode, body)
	}
	// A client (no hops) may still be answered from B's cache until its TTL.
	if resp, _ := fb.do(t, "HEAD", "/f", nil, nil); resp.StatusCode != 200 && resp.StatusCode != 404 {
		t.Errorf("HEAD at B from a client = %d", resp.StatusCode)
	}
}
