package servertest_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// location is where the federator sends a GET of p.
func location(t *testing.T, fed *servertest.Fed, p string) string {
	t.Helper()
	resp, err := noRedirect.Get(fed.URL + p)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("Location")
}

// waitLocation polls until the federator sends GET p to want.
func waitLocation(t *testing.T, fed *servertest.Fed, p, want string) {
	t.Helper()
	var got string
	if !testenv.Within(10*time.Second, func() bool {
		got = location(t, fed, p)
		return got == want
	}) {
		t.Fatalf("GET %s goes to %q, want %q", p, got, want)
	}
}

// TestStopRestart: the federation in a box redirects to the best site,
// fails over when it is stopped and comes back to it when it restarts on
// its old port; the dashboard is mounted as lakefed serve mounts it.
func TestStopRestart(t *testing.T) {
	fed := servertest.Start(t, servertest.Options{Sites: 2, Configure: func(c *config.Config) {
		c.Federation.Health.Interval = config.Duration(50 * time.Millisecond)
		c.Federation.Health.Timeout = config.Duration(time.Second)
		c.Federation.Health.FailAfter = 1
		c.Federation.Health.RecoverAfter = 1
		c.Federation.MetadataCache.TTL = config.Duration(time.Millisecond)
	}})
	if len(fed.Sites) != 2 || fed.Site("site-b") != fed.Sites[1] || fed.Site("nope") != nil {
		t.Fatalf("sites %+v, want site-a and site-b", fed.Sites)
	}
	for _, s := range fed.Sites {
		if err := os.WriteFile(filepath.Join(s.Dir, "f"), []byte(s.Name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, b := fed.Sites[0].URL+"f", fed.Sites[1].URL+"f"
	if got := location(t, fed, "/f"); got != a {
		t.Fatalf("GET /f goes to %q, want site-a %q", got, a)
	}
	if err := fed.Sites[0].Stop(); err != nil {
		t.Fatal(err)
	}
	waitLocation(t, fed, "/f", b)
	if err := fed.Sites[0].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := fed.Sites[0].Restart(); err == nil {
		t.Errorf("Restart of a running site succeeded")
	}
	waitLocation(t, fed, "/f", a)

	resp, err := http.Get(fed.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "site-a") {
		t.Errorf("GET /ui/ = %s, want the dashboard naming site-a", resp.Status)
	}
}
