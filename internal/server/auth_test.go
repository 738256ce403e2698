package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/auth/authtest"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/davxml"
	"github.com/lakefed/lakefed/internal/server"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/testenv"
)

// An auth section guards every listener: the federator's namespace, the
// storage servers behind it and the cache; the operator's pages stay
// open.
func TestAuthGuardsEveryListener(t *testing.T) {
	fed := servertest.Start(t, servertest.Options{Sites: 1, Configure: func(c *config.Config) {
		c.Auth = &config.Auth{Rules: []config.Rule{{Prefix: "/public", Anonymous: []string{"read", "list"}}}}
		c.Cache = &config.Cache{Dir: t.TempDir(), Origin: config.OriginFederation, Listen: "127.0.0.1:0"}
	}})
	site := fed.Sites[0]
	for _, name := range []string{"public/f", "private/f", "api/secret"} {
		p := filepath.Join(site.Dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cacheURL := fed.Server.CacheURL()
	for _, tc := range []struct {
		method, url string
		want        int
	}{
		{"GET", fed.URL + "/public/f", http.StatusOK}, // followed to the storage, which lets it through too
		{"GET", fed.URL + "/private/f", http.StatusUnauthorized},
		{"PUT", fed.URL + "/public/new", http.StatusUnauthorized},
		{"DELETE", fed.URL + "/public/f", http.StatusUnauthorized},
		{"GET", strings.TrimSuffix(site.URL, "/") + "/private/f", http.StatusUnauthorized},
		{"PUT", strings.TrimSuffix(site.URL, "/") + "/public/x", http.StatusUnauthorized},
		{"GET", cacheURL + "/public/f", http.StatusOK},
		{"GET", cacheURL + "/private/f", http.StatusUnauthorized},
		{"GET", fed.URL + "/api/health", http.StatusOK},
		{"GET", fed.URL + "/api/secret", http.StatusUnauthorized}, // a file under /api/ is a file
		{"PUT", fed.URL + "/api/x", http.StatusUnauthorized},
		{"GET", fed.URL + "/metrics", http.StatusOK},
	} {
		req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader("x"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.url, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusUnauthorized && resp.Header.Get("Www-Authenticate") == "" {
			t.Errorf("%s %s: 401 without WWW-Authenticate", tc.method, tc.url)
		}
	}
	// The refusals of every listener of the process show once, on the
	// federator's /metrics: a Prometheus summing the job counts each
	// refusal once. (The federator's own anonymous health probes of the
	// site may be refused too: at least the 8 above.)
	if n, ok := refusals(t, fed.URL+"/metrics"); !ok || n < 8 {
		t.Errorf("lakefed_auth_refused_total on the federator's /metrics sums to %v (present %v), want the 8 refusals above at least", n, ok)
	}
	if n, ok := refusals(t, cacheURL+"/metrics"); ok {
		t.Errorf("the cache's /metrics shows lakefed_auth_refused_total (%v) beside the federator's", n)
	}
}

// refusals sums the lakefed_auth_refused_total series of a /metrics page
// and reports whether there were any.
func refusals(t *testing.T, url string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
	}
	var sum float64
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "lakefed_auth_refused_total{") {
			continue
		}
		found = true
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", url, line, err)
		}
		sum += v
	}
	return sum, found
}

// A token that may only create (storage.create) writes a new file while
// the endpoints answer, and while one is down gets 503 with Retry-After
// (an outage, worth retrying), never a 403 (which tells a client not to
// retry): whether the file exists cannot be told then, so the write is
// passed on with If-None-Match: * and the answer is the outage's. Both
// through the federator and under a buffered prefix.
func TestCreateOnlyTokenDuringOutage(t *testing.T) {
	is := authtest.NewIssuer(t)
	// site-b is a storage role of its own, outside the auth rules of
	// the federator's process (as a remote site is), which the test
	// takes down by closing its listener.
	b, err := storage.New(storage.Config{Root: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	siteB := httptest.NewServer(b.Handler())
	defer siteB.Close()
	fed := servertest.Start(t, servertest.Options{Sites: 2, Configure: func(c *config.Config) {
		c.Auth = &config.Auth{Issuers: []config.Issuer{{Issuer: is.URL}}}
		c.Storage = c.Storage[:1]
		c.Federation.Endpoints[1].URL = siteB.URL + "/"
		c.Buffer = &config.Buffer{Dir: t.TempDir(), Prefixes: []config.BufferPrefix{{Prefix: "/buf", Targets: []string{"site-b"}}}}
	}})
	tok := is.Token(t, "storage.create:/", time.Hour)
	put := func(p string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, fed.URL+p, strings.NewReader("new file"))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After") + " " + string(b)
	}
	for _, p := range []string{"/fed/one", "/buf/one"} {
		if code, msg := put(p); code != http.StatusCreated {
			t.Fatalf("PUT %s with the endpoints up = %d %q, want 201", p, code, msg)
		}
	}
	// Down: connections refused. The listener first: a connection
	// accepted before it closed (a probe's) would otherwise outlive the
	// outage and answer 404 for the new file.
	siteB.Listener.Close()
	siteB.CloseClientConnections()
	for _, p := range []string{"/fed/two", "/buf/two"} {
		code, msg := put(p)
		if code != http.StatusServiceUnavailable || msg[0] == ' ' {
			t.Errorf("PUT %s with site-b down = %d %q, want 503 with Retry-After", p, code, msg)
		}
	}
}

// The operator's pages and the dashboard pass the auth rules unguarded,
// but those listing paths of the namespace list only what their caller
// may list (PROPFIND): under /private anyone may read and write but only
// a token for it may list, so an anonymous caller, a token for another
// path and an invalid token see the /public entries of /api/cache/files
// (on the cache's listener), /api/buffer's failures, /api/disagreements
// and the dashboard's cache and buffer pages, and not the /private ones,
// which a token for /private sees.
func TestOperatorAPIsListOnlyListable(t *testing.T) {
	is := authtest.NewIssuer(t)
	fed := servertest.Start(t, servertest.Options{Sites: 2, Log: testLog(), Configure: func(c *config.Config) {
		c.Auth = &config.Auth{
			Issuers: []config.Issuer{{Issuer: is.URL}},
			Rules: []config.Rule{
				{Prefix: "/public", Anonymous: []string{"read", "list", "create", "modify"}},
				{Prefix: "/private", Anonymous: []string{"read", "create", "modify"}},
			},
		}
		c.Cache = &config.Cache{Dir: t.TempDir(), Origin: config.OriginFederation, Listen: "127.0.0.1:0"}
		c.Buffer = &config.Buffer{Dir: t.TempDir(),
			Retry: config.Retry{Initial: config.Duration(50 * time.Millisecond), Max: config.Duration(time.Second)},
			Prefixes: []config.BufferPrefix{
				{Prefix: "/public/out", Targets: []string{"site-b"}},
				{Prefix: "/private/out", Targets: []string{"site-b"}},
			}}
	}})
	do := func(method, url, tok, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	for i, site := range fed.Sites {
		for _, area := range []string{"public", "private"} {
			// f for the cache; dis differs between the sites.
			for name, data := range map[string]string{"f": "cached " + area, "dis": strings.Repeat("x", i+1)} {
				p := filepath.Join(site.Dir, area, name)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cacheURL := fed.Server.CacheURL()
	for _, area := range []string{"/public", "/private"} {
		if code, body := do("GET", cacheURL+area+"/f", "", ""); code != http.StatusOK {
			t.Fatalf("GET %s/f through the cache = %d %q", area, code, body)
		}
		if code, _ := do("HEAD", fed.URL+area+"/dis", "", ""); code/100 != 3 && code != http.StatusOK {
			t.Fatalf("HEAD %s/dis = %d", area, code)
		}
	}
	if err := fed.Sites[1].Stop(); err != nil { // the buffer's target: its copies fail
		t.Fatal(err)
	}
	for _, area := range []string{"/public", "/private"} {
		if code, body := do("PUT", fed.URL+area+"/out/x", "", "to migrate"); code != http.StatusCreated {
			t.Fatalf("PUT %s/out/x = %d %q", area, code, body)
		}
	}

	private := is.Token(t, "storage.read:/private", time.Hour)
	pages := map[string]string{
		"/api/cache/files":    cacheURL + "/api/cache/files",
		"/api/buffer":         fed.URL + "/api/buffer",
		"/api/disagreements":  fed.URL + "/api/disagreements",
		"/ui/api/cache/files": fed.URL + "/ui/api/cache/files",
		"/ui/api/buffer":      fed.URL + "/ui/api/buffer",
		"/ui/cache":           fed.URL + "/ui/cache",
		"/ui/buffer":          fed.URL + "/ui/buffer",
	}
	want := map[string][]string{ // the paths each page must show to the /private token
		"/api/cache/files":    {"/public/f", "/private/f"},
		"/api/buffer":         {"/public/out/x", "/private/out/x"},
		"/api/disagreements":  {"/public/dis", "/private/dis"},
		"/ui/api/cache/files": {"/public/f", "/private/f"},
		"/ui/api/buffer":      {"/public/out/x", "/private/out/x"},
		"/ui/cache":           {"/public/f", "/private/f"},
		"/ui/buffer":          {"/public/out/x", "/private/out/x"},
	}
	// Wait for the buffer's first failed copies.
	var body string
	if !testenv.Within(20*time.Second, func() bool {
		_, body = do("GET", pages["/api/buffer"], private, "")
		return strings.Contains(body, `"/public/out/x"`) && strings.Contains(body, `"/private/out/x"`)
	}) {
		t.Fatalf("/api/buffer lists no failure of both files within 20s:\n%s", body)
	}
	for _, c := range []struct {
		name, tok   string
		seesPrivate bool
	}{
		{"anonymous", "", false},
		{"token for another path", is.Token(t, "storage.read:/other", time.Hour), false},
		{"invalid token", "not-a-jwt", false},
		{"token for /private", private, true},
	} {
		for page, url := range pages {
			code, body := do("GET", url, c.tok, "")
			if code != http.StatusOK {
				t.Errorf("%s: GET %s = %d %q", c.name, page, code, body)
				continue
			}
			for _, p := range want[page] {
				show := !strings.HasPrefix(p, "/private") || c.seesPrivate
				shown := `"` + p + `"` // a JSON string
				if strings.HasPrefix(page, "/ui/") && !strings.HasPrefix(page, "/ui/api/") {
					shown = ">" + p + "<" // the text of an HTML element
				}
				if got := strings.Contains(body, shown); got != show {
					t.Errorf("%s: GET %s shows %s = %v, want %v:\n%s", c.name, page, p, got, show, body)
				}
			}
		}
	}
}

// A storage site's /metrics is an operator page, as the federator's is:
// open to the operator's networks (loopback by default) whatever the
// auth rules say of the namespace, and the rules still hold everywhere
// else on the site.
func TestSiteMetricsAreAnOperatorPage(t *testing.T) {
	cfg := &config.Config{Auth: &config.Auth{Rules: []config.Rule{{Prefix: "/private", Anonymous: []string{"read"}}}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Storage = []config.Storage{{Listen: ln.Addr().String(), Root: t.TempDir()}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(context.Background(), cfg, server.Options{Listeners: map[string]net.Listener{ln.Addr().String(): ln},
		Log: slog.New(slog.DiscardHandler), Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	site := srv.Sites()[0].URL
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "metrics", http.StatusOK},         // an operator page, from loopback
		{http.MethodHead, "metrics", http.StatusOK},        // the same
		{http.MethodGet, "other", http.StatusUnauthorized}, // no rule grants it: the rules hold
		{http.MethodPut, "metrics", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(c.method, site+c.path, strings.NewReader(""))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("anonymous %s /%s from loopback = %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
}

// A process with storage sites only shows its auth refusals on its first
// site's /metrics, and again after that site restarts (a new storage
// server, with a new registry).
func TestAuthRefusalsOnFirstSite(t *testing.T) {
	// Anyone may read, so that Prometheus scrapes /metrics.
	cfg := &config.Config{Auth: &config.Auth{Rules: []config.Rule{{Prefix: "/", Anonymous: []string{"read"}}}}}
	lns := map[string]net.Listener{} // open before the config names them: no other process takes them
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[ln.Addr().String()] = ln
		cfg.Storage = append(cfg.Storage, config.Storage{Listen: ln.Addr().String(), Root: t.TempDir()})
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(context.Background(), cfg, server.Options{Listeners: lns, Log: slog.New(slog.DiscardHandler), Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sites := srv.Sites()
	put := func() {
		req, _ := http.NewRequest(http.MethodPut, sites[1].URL+"f", strings.NewReader("x"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("anonymous PUT on the second site = %d, want 401", resp.StatusCode)
		}
	}
	put()
	if n, ok := refusals(t, sites[0].URL+"metrics"); !ok || n != 1 {
		t.Errorf("the first site's /metrics: refusals %v (present %v), want the second site's 1", n, ok)
	}
	if n, ok := refusals(t, sites[1].URL+"metrics"); ok {
		t.Errorf("the second site's /metrics shows lakefed_auth_refused_total (%v) beside the first's", n)
	}
	if err := sites[0].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := sites[0].Restart(); err != nil {
		t.Fatal(err)
	}
	put()
	if n, ok := refusals(t, sites[0].URL+"metrics"); !ok || n != 2 {
		t.Errorf("the first site's /metrics after its restart: refusals %v (present %v), want 2", n, ok)
	}
}

// TestSiteListingSaysWhatHeadSays: under the rules, a storage site's
// listing describes only the members its caller may read, and names the
// others with a refusal, so that a federator taking it for a HEAD per
// member finds no file a HEAD would refuse.
func TestSiteListingSaysWhatHeadSays(t *testing.T) {
	fed := servertest.Start(t, servertest.Options{Sites: 1, Configure: func(c *config.Config) {
		c.Auth = &config.Auth{Rules: []config.Rule{
			{Prefix: "/d", Anonymous: []string{"list"}},
			{Prefix: "/d/pub", Anonymous: []string{"read"}},
		}}
	}})
	site := fed.Sites[0]
	for _, name := range []string{"d/pub", "d/secret"} {
		p := filepath.Join(site.Dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := strings.TrimSuffix(site.URL, "/")
	req, _ := http.NewRequest("PROPFIND", base+"/d/", strings.NewReader(davxml.PropfindBody))
	req.Header.Set("Depth", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := davxml.Decode(resp.Body, davxml.MaxBody)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusMultiStatus || resp.Header.Get(httpx.ListedAsHeadHeader) != "1" {
		t.Fatalf("PROPFIND /d/ = %d, %s %q, %v; want 207, 1", resp.StatusCode, httpx.ListedAsHeadHeader, resp.Header.Get(httpx.ListedAsHeadHeader), err)
	}
	described := map[string]bool{}
	for _, r := range ms.Responses {
		described[r.Href] = davxml.StatusOK(r.Status) && len(r.Propstats) > 0
	}
	if !described["/d/pub"] || described["/d/secret"] {
		t.Errorf("PROPFIND /d/ described %v, want /d/pub and not /d/secret", described)
	}
	if _, ok := described["/d/secret"]; !ok {
		t.Errorf("PROPFIND /d/ left /d/secret out, want it named with a refusal")
	}
	head, err := http.Head(base + "/d/secret")
	if err != nil {
		t.Fatal(err)
	}
	head.Body.Close()
	if head.StatusCode/100 != 4 {
		t.Errorf("HEAD /d/secret = %d, want a refusal as its listing says", head.StatusCode)
	}
}
