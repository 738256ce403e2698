package federation

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/testenv"
)

// fakeNew builds the named fakes, and other endpoints with the kind table.
func fakeNew(fakes ...*fakeEP) NewEndpointFunc {
	return func(ctx context.Context, ec config.Endpoint, log *slog.Logger) (endpoint.Endpoint, error) {
		for _, f := range fakes {
			if f.name == ec.Name {
				return f.asEndpoint(), nil
			}
		}
		return DefaultNewEndpoint(ctx, ec, log)
	}
}

func parseFed(t *testing.T, text string) config.Federation {
	t.Helper()
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return *cfg.Federation
}

// TestPresignExpiryCheck: an endpoint whose redirect URLs expire sooner
// than the metadata cache keeps them is refused at start and at reload,
// naming the field; proxied, it is accepted (its URLs are never handed out).
func TestPresignExpiryCheck(t *testing.T) {
	s3 := newFake("cloud", false)
	s3.presign = 10 * time.Second
	opts := Options{Log: quiet(), NewEndpoint: fakeNew(s3)}

	short := parseFed(t, cfgYAML(slowHealth+"\nmetadata_cache: {ttl: 60s}", ep("site-a"), ep("cloud")))
	_, err := New(t.Context(), short, opts)
	if err == nil || !strings.Contains(err.Error(), "federation.endpoints[1].s3.presign_expiry") ||
		!strings.Contains(err.Error(), "metadata_cache.ttl") {
		t.Fatalf("New with presign 10s < ttl 60s = %v, want an error naming endpoints[1].s3.presign_expiry and metadata_cache.ttl", err)
	}

	proxied := parseFed(t, cfgYAML(slowHealth+"\nmetadata_cache: {ttl: 60s}", ep("site-a"), ep("cloud", "mode: proxy")))
	fed, err := New(t.Context(), proxied, opts)
	if err != nil {
		t.Fatalf("New with the endpoint proxied = %v, want nil", err)
	}
	defer fed.Close()

	ok := parseFed(t, cfgYAML(slowHealth+"\nmetadata_cache: {ttl: 10s}", ep("site-a"), ep("cloud")))
	if err := fed.Reload(ok); err != nil {
		t.Fatalf("Reload with presign 10s = ttl 10s: %v", err)
	}
	if err := fed.Reload(short); err == nil || !strings.Contains(err.Error(), "presign_expiry") {
		t.Fatalf("Reload raising the ttl above the expiry = %v, want an error", err)
	}
	if got := fed.snap.Load().cfg.MetadataCache.TTL.D(); got != 10*time.Second {
		t.Errorf("after a refused reload the ttl is %v, want the old 10s", got)
	}
}

// TestPresignedRedirects: GET is redirected to a pre-signed URL, HEAD is
// answered by the federator (a pre-signed GET URL is refused for HEAD by
// S3), a PUT is written through the federator (a pre-signed PUT would
// store no adler32), and a cached URL past half its life is re-signed.
func TestPresignedRedirects(t *testing.T) {
	s3 := newFake("cloud", false)
	s3.presign = 400 * time.Millisecond
	s3.put("/d/f", []byte("object"))
	tf := startFed(t, cfgYAML(slowHealth+"\nmetadata_cache: {ttl: 400ms}", ep("cloud", "writable: true")), s3)

	resp, _ := tf.do(t, "GET", "/d/f", nil, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "http://cloud.example/d/f?op=read&sig=") {
		t.Fatalf("GET = %d Location %q, want 302 to a pre-signed read URL", resp.StatusCode, loc)
	}
	signs := s3.signs.Load()
	resp, body := tf.do(t, "HEAD", "/d/f", nil, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "" || resp.ContentLength != 6 || body != "" {
		t.Errorf("HEAD = %d Location %q length %d, want 200 from metadata, length 6", resp.StatusCode, resp.Header.Get("Location"), resp.ContentLength)
	}
	if s3.signs.Load() != signs {
		t.Errorf("HEAD made a pre-signed URL")
	}

	// Within the entry's TTL the URL is re-signed once half its life is
	// gone; the client never gets one that old.
	testenv.Eventually(t, 5*time.Second, "a fresh signature", func() bool {
		resp, _ := tf.do(t, "GET", "/d/f", nil, nil)
		return resp.StatusCode == http.StatusFound && resp.Header.Get("Location") != loc
	})

	puts := s3.puts.Load()
	resp, body = tf.do(t, "PUT", "/d/new", nil, strings.NewReader("uploaded"))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d %s, want 201 (written through the federator)", resp.StatusCode, body)
	}
	if got, _ := s3.get("/d/new"); string(got) != "uploaded" || s3.puts.Load() != puts+1 {
		t.Errorf("endpoint has %q after PUT (%d puts), want the body, one put", got, s3.puts.Load()-puts)
	}
}

// TestRootProxiedByDefault: a root:// endpoint without http_url is proxied
// even in redirect mode (HTTP clients cannot follow a redirect to root://);
// with http_url it is redirected to the HTTP door.
func TestRootProxiedByDefault(t *testing.T) {
	tf := startFed(t, cfgYAML(slowHealth,
		"name: grid\nurl: root://127.0.0.1:1//store",
		"name: door\nurl: root://127.0.0.1:1//store\nhttp_url: http://127.0.0.1:2/"))
	modes := map[string]string{}
	for _, e := range tf.Endpoints() {
		modes[e.Name] = e.Mode
	}
	if modes["grid"] != "proxy" || modes["door"] != "redirect" {
		t.Errorf("modes = %v, want grid proxy, door redirect", modes)
	}
}

// TestSitePin: ?lakefed.site=NAME uses only that endpoint for locate,
// redirect, proxy and PUT; a file it lacks is 404 (503 when it is down)
// even when another endpoint has it; an unknown name is 400.
func TestSitePin(t *testing.T) {
	a, b, c := newFake("site-a", true), newFake("site-b", false), newFake("site-c", true)
	a.put("/f", []byte("from-a"))
	b.put("/f", []byte("from-b"))
	a.put("/only-a", []byte("a"))
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a", "priority: 1", "writable: true"),
		ep("site-b", "priority: 2", "writable: true"), ep("site-c", "priority: 3")), a, b, c)

	resp, body := tf.do(t, "GET", "/f?lakefed.site=site-b", nil, nil)
	if resp.StatusCode != http.StatusOK || body != "from-b" {
		t.Errorf("GET pinned to site-b = %d %q, want 200 from-b (proxied)", resp.StatusCode, body)
	}
	if a.stats.Load()+c.stats.Load() != 0 {
		t.Errorf("a request pinned to site-b asked site-a %d and site-c %d times", a.stats.Load(), c.stats.Load())
	}
	resp, _ = tf.do(t, "GET", "/f?lakefed.site=site-a", nil, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != "http://site-a.example/f" {
		t.Errorf("GET pinned to site-a = %d %q, want 302 to site-a, without the pin", resp.StatusCode, loc)
	}
	if link := resp.Header.Get("Link"); strings.Contains(link, "site-b") || strings.Contains(link, "site-c") {
		t.Errorf("pinned Link = %q names other sites", link)
	}
	resp, _ = tf.do(t, "HEAD", "/only-a?lakefed.site=site-b", nil, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD of a file site-b lacks, pinned to site-b = %d, want 404", resp.StatusCode)
	}
	resp, _ = tf.do(t, "GET", "/only-a", nil, nil)
	if resp.StatusCode != http.StatusFound {
		t.Errorf("GET unpinned = %d, want 302: the pinned 404 must not leak into the shared cache", resp.StatusCode)
	}
	resp, _ = tf.do(t, "GET", "/f?lakefed.site=nowhere", nil, nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET pinned to an unknown site = %d, want 400", resp.StatusCode)
	}

	// A PUT pinned to site-b lands there, though site-a has the better
	// priority, and a pinned GET sees it at once.
	resp, body = tf.do(t, "PUT", "/new?lakefed.site=site-b", nil, strings.NewReader("put-b"))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT pinned to site-b = %d %s", resp.StatusCode, body)
	}
	if _, onA := a.get("/new"); onA {
		t.Errorf("PUT pinned to site-b was stored on site-a")
	}
	if _, body = tf.do(t, "GET", "/new?lakefed.site=site-b", nil, nil); body != "put-b" {
		t.Errorf("GET after pinned PUT = %q", body)
	}
	resp, _ = tf.do(t, "GET", "/new?lakefed.site=site-a", nil, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET pinned to site-a of a file only site-b has = %d, want 404", resp.StatusCode)
	}

	b.down.Store(true)
	resp, _ = tf.do(t, "GET", "/g?lakefed.site=site-b", nil, nil)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET pinned to a site that cannot answer = %d, want 503", resp.StatusCode)
	}
}

// TestSitePinStripped: the pin never reaches an endpoint, proxied or
// redirected.
func TestSitePinStripped(t *testing.T) {
	st, err := storage.New(storage.Config{Root: t.TempDir()}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.Method+" "+r.URL.RawQuery)
		mu.Unlock()
		st.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	tf := startFed(t, cfgYAML(slowHealth,
		"name: direct\nurl: "+srv.URL+"/\nwritable: true",
		"name: proxied\nurl: "+srv.URL+"/\nmode: proxy\nwritable: true"))

	for _, site := range []string{"direct", "proxied"} {
		req, _ := http.NewRequest("PUT", tf.srv.URL+"/"+site+"?lakefed.site="+site, strings.NewReader("data of "+site))
		resp, err := http.DefaultClient.Do(req) // follows the 307
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("PUT pinned to %s = %d", site, resp.StatusCode)
		}
		resp, err = http.Get(tf.srv.URL + "/" + site + "?lakefed.site=" + site)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != "data of "+site {
			t.Errorf("GET pinned to %s = %q", site, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queries) == 0 {
		t.Fatal("the endpoint saw no request")
	}
	for _, q := range queries {
		if strings.Contains(q, "lakefed.site") {
			t.Errorf("the endpoint got %q: the pin was not stripped", q)
		}
	}
}
