package interop

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// sharedLake is three storage sites and three federators sharing Redis,
// each its own process, in redirect mode (a HEAD is answered from the
// metadata, so what a federator remembers shows).
type sharedLake struct {
	redis *testenv.Redis
	sites []*proc
	dirs  []string
	feds  []*proc
	urls  []string
	// clients reach each federator (from the test's own namespace, or
	// from the federator's) and answer redirects as they are.
	clients []*http.Client
}

func startSharedLake(t *testing.T) *sharedLake { return startSharedLakeIn(t, nil) }

// startSharedLakeIn is startSharedLake with the first federator in the
// network namespace ns (nil: none): Redis and the sites listen on
// ns.Host, the host's end of ns's link, so that the federator in ns
// reaches them through it; every federator listens on the loopback of
// its own namespace.
func startSharedLakeIn(t *testing.T, ns *testenv.NetNS) *sharedLake {
	bin := lakefedBinary(t)
	host := "127.0.0.1"
	if ns != nil {
		host = ns.Host
	}
	l := &sharedLake{redis: testenv.StartRedisOn(t, host)}
	dir := t.TempDir()
	var eps strings.Builder
	for i, name := range []string{"site-a", "site-b", "site-c"} {
		root := filepath.Join(dir, name)
		os.MkdirAll(root, 0o755)
		port := testenv.FreePort(t)
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		l.sites = append(l.sites, &proc{bin: bin, port: port, addr: addr, log: root + ".log",
			args: []string{"storage", "--root", root, "--listen", addr}})
		l.dirs = append(l.dirs, root)
		fmt.Fprintf(&eps, "    - {name: %s, url: \"http://%s/\", writable: true, priority: %d, timeout: 20s}\n", name, addr, i+1)
	}
	for i := range 3 {
		port := testenv.FreePort(t)
		cfg := fmt.Sprintf(`listen: 127.0.0.1:%d
shared: {redis: %q, lease: 1s, node: fed-%d}
federation:
  metadata_cache: {ttl: 1h, negative_ttl: 1h}
  health: {interval: 500ms, timeout: 5s, fail_after: 3, recover_after: 1}
  endpoints:
%s`, port, l.redis.URL, i, eps.String())
		f := filepath.Join(dir, fmt.Sprintf("fed-%d.yaml", i))
		if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		p := &proc{bin: bin, port: port, log: filepath.Join(dir, fmt.Sprintf("fed-%d.log", i)), args: []string{"serve", f}}
		client := noFollow
		if i == 0 && ns != nil {
			p.ns = ns
			client = &http.Client{Timeout: noFollow.Timeout, CheckRedirect: noFollow.CheckRedirect,
				Transport: &http.Transport{DialContext: ns.DialContext}}
		}
		l.feds = append(l.feds, p)
		l.urls = append(l.urls, "http://127.0.0.1:"+strconv.Itoa(port))
		l.clients = append(l.clients, client)
	}
	for _, p := range append(append([]*proc{}, l.sites...), l.feds...) {
		p.start(t)
		t.Cleanup(p.kill)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range l.feds {
				b, _ := os.ReadFile(p.log)
				t.Logf("%s:\n%s", p.log, b)
			}
		}
	})
	return l
}

// noFollow answers redirects as they are, so a HEAD shows what the
// federator itself says.
var noFollow = &http.Client{Timeout: 20 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func do(t *testing.T, method, u string, body []byte) (*http.Response, []byte) {
	t.Helper()
	return doWith(t, noFollow, method, u, body)
}

// doWith is do with client.
func doWith(t *testing.T, client *http.Client, method, u string, body []byte) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, u, rd)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// TestSharedFederatorsSeeWritesAtOnce: three federators of one lake. A
// PUT through one is seen through the others at once: their HEAD gives
// the new size and their GET (followed) the new bytes, never the old
// ones they had cached, never a 404; a DELETE through one is a 404
// through the others at once.
func TestSharedFederatorsSeeWritesAtOnce(t *testing.T) {
	l := startSharedLake(t)
	v1 := bytes.Repeat([]byte("one "), 1000)
	for round := range 20 {
		p := fmt.Sprintf("/d/f%d", round)
		if err := os.MkdirAll(filepath.Join(l.dirs[0], "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(l.dirs[0], "d", fmt.Sprintf("f%d", round)), v1, 0o644)
		for _, u := range l.urls { // every federator caches v1
			if resp, _ := do(t, http.MethodHead, u+p, nil); resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(v1)) {
				t.Fatalf("HEAD %s%s before = %d, %d bytes", u, p, resp.StatusCode, resp.ContentLength)
			}
		}
		w := l.urls[round%3]
		v2 := bytes.Repeat([]byte("two!"), 1500+round)
		resp, msg := do(t, http.MethodPut, w+p, v2)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("PUT through %s = %d %s", w, resp.StatusCode, msg)
		}
		for _, u := range l.urls {
			resp, _ := do(t, http.MethodHead, u+p, nil)
			if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(v2)) {
				t.Fatalf("round %d: HEAD through %s right after a PUT through %s = %d, %d bytes; want 200 with the new size %d",
					round, u, w, resp.StatusCode, resp.ContentLength, len(v2))
			}
			resp, _ = do(t, http.MethodGet, u+p, nil)
			loc := resp.Header.Get("Location")
			if got, err := http.Get(loc); err != nil || got.StatusCode != 200 {
				t.Fatalf("GET of %s's redirect %s: %v", u, loc, err)
			} else {
				b, _ := io.ReadAll(got.Body)
				got.Body.Close()
				if !bytes.Equal(b, v2) {
					t.Fatalf("round %d: GET through %s after the PUT gave %d bytes, not the new version", round, u, len(b))
				}
			}
		}
		d := l.urls[(round+1)%3]
		if resp, msg := do(t, http.MethodDelete, d+p, nil); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE through %s = %d %s", d, resp.StatusCode, msg)
		}
		for _, u := range l.urls {
			if resp, _ := do(t, http.MethodHead, u+p, nil); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("round %d: HEAD through %s right after a DELETE through %s = %d, want 404", round, u, d, resp.StatusCode)
			}
		}
	}
}

// TestSharedRedisKilled: Redis killed with kill -9 under reads. Files
// already seen are still served (no 5xx), writes are refused with 503
// and Retry-After; once Redis is back, sharing resumes, and a file
// changed directly on a site while Redis was away is not served in its
// old version (each federator flushed what it learned while apart).
func TestSharedRedisKilled(t *testing.T) {
	l := startSharedLake(t)
	v1 := bytes.Repeat([]byte("one "), 1000)
	os.WriteFile(filepath.Join(l.dirs[1], "f"), v1, 0o644)
	for _, u := range l.urls {
		if resp, _ := do(t, http.MethodHead, u+"/f", nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("HEAD %s/f = %d", u, resp.StatusCode)
		}
	}
	l.redis.Kill()
	for _, u := range l.urls { // each says so, within its lease
		waitUntilState(t, u, "degraded")
	}
	deadline := time.Now().Add(3 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		u := l.urls[n%3]
		if resp, _ := do(t, http.MethodHead, u+"/f", nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("HEAD %s/f with Redis down = %d, want 200 (a file seen before)", u, resp.StatusCode)
		}
	}
	resp, msg := do(t, http.MethodPut, l.urls[0]+"/g", []byte("new"))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("PUT with Redis down = %d %s (Retry-After %q), want 503 with Retry-After", resp.StatusCode, msg, resp.Header.Get("Retry-After"))
	}
	v2 := bytes.Repeat([]byte("two!"), 3000)
	os.WriteFile(filepath.Join(l.dirs[1], "f"), v2, 0o644) // behind the federation's back
	l.redis.Restart(t)
	for _, u := range l.urls {
		waitUntilState(t, u, "ok")
	}
	waitFor := time.Now().Add(20 * time.Second)
	for {
		resp, msg := do(t, http.MethodPut, l.urls[0]+"/g", []byte("new"))
		if resp.StatusCode/100 == 2 {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatalf("PUT after Redis came back = %d %s", resp.StatusCode, msg)
		}
	}
	for _, u := range l.urls {
		resp, _ := do(t, http.MethodHead, u+"/f", nil)
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(v2)) {
			t.Fatalf("HEAD %s/f after Redis came back = %d, %d bytes; want the version changed while it was away (%d)",
				u, resp.StatusCode, resp.ContentLength, len(v2))
		}
	}
}

// waitUntilState waits until the federator at u says the shared state is
// state, on /api/endpoints, in its metrics and on its dashboard.
func waitUntilState(t *testing.T, u, state string) {
	t.Helper()
	waitUntilStateWith(t, noFollow, u, state)
}

// waitUntilStateWith is waitUntilState with client.
func waitUntilStateWith(t *testing.T, client *http.Client, u, state string) {
	t.Helper()
	metric := "lakefed_federation_shared_degraded 0"
	if state == "degraded" {
		metric = "lakefed_federation_shared_degraded 1"
	}
	var resp *http.Response
	var page []byte
	if !testenv.Within(10*time.Second, func() bool {
		resp, _ = doWith(t, client, http.MethodGet, u+"/api/endpoints", nil)
		_, m := doWith(t, client, http.MethodGet, u+"/metrics", nil)
		_, page = doWith(t, client, http.MethodGet, u+"/ui/", nil)
		return resp.Header.Get("X-Lakefed-Shared") == state && strings.Contains(string(m), metric) &&
			strings.Contains(string(page), "shared: "+state)
	}) {
		t.Fatalf("%s: shared state %q, metrics without %q or /ui without %q; want %q",
			u, resp.Header.Get("X-Lakefed-Shared"), metric, "shared: "+state, state)
	}
}
