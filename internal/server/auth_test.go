package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server/servertest"
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
}
