package interop

// The federation of four endpoint kinds the kinds_*_test.go files share:
// lakefed storage (in process), nginx WebDAV, S3 (s3proxy) and XRootD, each
// a real server on loopback that a test can kill, behind one federator.

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/testenv"
)

// kindSite is one endpoint of the federation under test.
type kindSite struct {
	name string
	// yaml is the endpoint's entry in the federation config (without the
	// leading "- "), one key per line.
	yaml string
	// put stores data as the endpoint path p, as a site would have it.
	put func(t *testing.T, p string, data []byte)
	// kill stops the server as a crash would.
	kill func()
	// urlPrefix is what a redirect to this site starts with; "" when the
	// federator proxies it.
	urlPrefix string
}

// startStorageSite runs lakefed's storage role in this process, killable
// by closing its listener and connections.
func startStorageSite(t *testing.T, name string) *kindSite {
	t.Helper()
	dir := t.TempDir()
	st, err := storage.New(storage.Config{Root: dir}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("storage.New: %v", err)
	}
	srv := httptest.NewServer(st.Handler())
	kill := func() {
		srv.CloseClientConnections()
		srv.Close()
	}
	t.Cleanup(kill)
	return &kindSite{
		name: name, yaml: "url: " + srv.URL + "/", urlPrefix: srv.URL + "/",
		put: func(t *testing.T, p string, data []byte) { writeUnder(t, dir, p, data) }, kill: kill,
	}
}

// startNginxSite runs nginx with WebDAV.
func startNginxSite(t *testing.T, name string) *kindSite {
	t.Helper()
	ng := testenv.StartNginx(t)
	return &kindSite{
		name: name, yaml: "url: " + ng.URL, urlPrefix: ng.URL,
		put: func(t *testing.T, p string, data []byte) { writeUnder(t, ng.Dir, p, data) }, kill: ng.Stop,
	}
}

// s3Yaml is the endpoint config of the bucket of srv, with extra s3:
// options ("presign_expiry: 2s").
func s3Yaml(srv *testenv.S3Server, extra ...string) string {
	opts := append([]string{"endpoint: " + srv.URL, "region: " + srv.Region, "access_key: " + srv.AccessKey,
		"secret_key: " + srv.SecretKey, "path_style: true"}, extra...)
	return "url: s3://" + srv.Bucket + "/\ns3: {" + strings.Join(opts, ", ") + "}"
}

// startS3Site runs s3proxy; files are stored with the s3 kind's Put, so
// they carry their adler32 as lakefed's own uploads do.
func startS3Site(t *testing.T, name string, extra ...string) (*kindSite, *testenv.S3Server) {
	t.Helper()
	srv := testenv.StartS3(t)
	y := s3Yaml(srv, extra...)
	return &kindSite{
		name: name, yaml: y, urlPrefix: srv.URL + "/" + srv.Bucket + "/",
		put: func(t *testing.T, p string, data []byte) {
			ep := newEndpoint(t, name, y)
			if err := ep.Put(t.Context(), p, strings.NewReader(string(data)), int64(len(data))); err != nil {
				t.Fatalf("s3 put %s: %v", p, err)
			}
		},
		kill: srv.Stop,
	}, srv
}

// startXRootDSite runs xrootd; the federator reaches it over root:// and so
// proxies it.
func startXRootDSite(t *testing.T, name string) (*kindSite, *testenv.Server) {
	t.Helper()
	return xrootdSite(name, testenv.StartXRootD(t))
}

// startXRootDChecksumSite is startXRootDSite with the server computing
// adler32 (kXR_query checksum answers).
func startXRootDChecksumSite(t *testing.T, name string) (*kindSite, *testenv.Server) {
	t.Helper()
	return xrootdSite(name, testenv.StartXRootDChecksum(t))
}

func xrootdSite(name string, x *testenv.Server) (*kindSite, *testenv.Server) {
	return &kindSite{
		name: name, yaml: "url: " + x.RootURL + "/",
		put:  func(t *testing.T, p string, data []byte) { writeUnder(t, x.Dir, p, data) },
		kill: x.Stop,
	}, x
}

// writeUnder writes data at the endpoint path p below dir, readable by
// every server user (XRootD runs unprivileged).
func writeUnder(t *testing.T, dir, p string, data []byte) {
	t.Helper()
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// newEndpoint builds an endpoint from YAML lines such as kindSite.yaml.
func newEndpoint(t *testing.T, name, y string) endpoint.Endpoint {
	t.Helper()
	// The shortest cache TTL, so any presign_expiry a test sets passes the
	// config's expiry >= TTL rule: only the endpoint's part is used here.
	cfg, err := config.Parse([]byte(fedYAML("metadata_cache: {ttl: 1s}", []*kindSite{{name: name, yaml: y}})))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ep, err := kinds.New(t.Context(), cfg.Federation.Endpoints[0].Config, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("endpoint %s: %v", name, err)
	}
	if c, ok := ep.(interface{ Close() error }); ok {
		t.Cleanup(func() { c.Close() })
	}
	return ep
}

// fastHealth notices a dead endpoint within a few hundred milliseconds.
const fastHealth = "health: {interval: 100ms, timeout: 1s, fail_after: 1, recover_after: 2, error_limit: 2}"

// fedYAML is a config with the federation lines fedLines and the sites as
// endpoints, in order, priorities 1, 2, ...
func fedYAML(fedLines string, sites []*kindSite) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nfederation:\n")
	for _, l := range strings.Split(strings.TrimSpace(fedLines), "\n") {
		if l != "" {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("  endpoints:\n")
	for i, s := range sites {
		fmt.Fprintf(&b, "    - name: %s\n      priority: %d\n      writable: true\n      timeout: 3s\n", s.name, i+1)
		for _, l := range strings.Split(strings.TrimSpace(s.yaml), "\n") {
			b.WriteString("      " + l + "\n")
		}
	}
	return b.String()
}

// kindFed is a federator under test behind an httptest server.
type kindFed struct {
	*federation.Federator
	url string // base URL, no trailing slash
}

// startKindFed starts a federator over sites.
func startKindFed(t *testing.T, fedLines string, sites ...*kindSite) *kindFed {
	t.Helper()
	cfg, err := config.Parse([]byte(fedYAML(fedLines, sites)))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, fedYAML(fedLines, sites))
	}
	fed, err := federation.New(t.Context(), *cfg.Federation, federation.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("federation.New: %v", err)
	}
	srv := httptest.NewServer(fed.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		fed.Close()
	})
	return &kindFed{Federator: fed, url: srv.URL}
}

// state returns the federator's view of an endpoint: "up" or "down".
func (f *kindFed) state(name string) string {
	for _, e := range f.Endpoints() {
		if e.Name == name {
			return e.State
		}
	}
	return "absent"
}

// waitState polls until the endpoint is in state, or fails the test.
func (f *kindFed) waitState(t *testing.T, name, state string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "endpoint "+name+" "+state, func() bool { return f.state(name) == state })
}

// noRedirect is a client that shows a redirect instead of following it.
var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       cmdTimeout,
}

// peek GETs p without following a redirect and returns the status and
// Location.
func (f *kindFed) peek(t *testing.T, p string) (int, string) {
	t.Helper()
	resp, err := noRedirect.Get(f.url + p)
	if err != nil {
		t.Fatalf("GET %s: %v", p, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// lakefedBinary builds cmd/lakefed (testenv.LakefedBinary).
func lakefedBinary(t *testing.T) string { return testenv.LakefedBinary(t) }
