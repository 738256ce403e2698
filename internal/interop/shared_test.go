package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/shared"
	"github.com/lakefed/lakefed/internal/testenv"
)

// sharedLake is three storage sites and three federators sharing Redis,
// each its own process, in redirect mode (a HEAD is answered from the
// metadata, so what a federator remembers shows).
type sharedLake struct {
	bin   string
	dir   string
	redis *testenv.Redis
	sites []*proc
	dirs  []string
	feds  []*proc
	urls  []string
	// clients reach each federator (from the test's own namespace, or
	// from the federator's) and answer redirects as they are.
	clients []*http.Client
}

// lakeOptions add roles to the shared lake's federators.
type lakeOptions struct {
	// fed returns YAML added at the top level of federator i's config
	// (a buffer, a root:// door); "" adds nothing.
	fed func(i int) string
	// shared returns keys added to federator i's shared section.
	shared func(i int) string
	// mode is the federation's mode; "": redirect.
	mode string
	// redis returns the Redis URL federator i uses, given the lake's
	// Redis; "": the lake's.
	redis func(i int, r *testenv.Redis) string
}

func startSharedLake(t *testing.T, opts ...lakeOptions) *sharedLake {
	return startSharedLakeIn(t, nil, opts...)
}

// startSharedLakeIn is startSharedLake with the first federator in the
// network namespace ns (nil: none): Redis and the sites listen on
// ns.Host, the host's end of ns's link, so that the federator in ns
// reaches them through it; every federator listens on the loopback of
// its own namespace.
func startSharedLakeIn(t *testing.T, ns *testenv.NetNS, opts ...lakeOptions) *sharedLake {
	var o lakeOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	bin := lakefedBinary(t)
	host := "127.0.0.1"
	if ns != nil {
		host = ns.Host
	}
	l := &sharedLake{bin: bin, dir: t.TempDir(), redis: testenv.StartRedisOn(t, host)}
	dir := l.dir
	var eps strings.Builder
	for i, name := range []string{"site-a", "site-b", "site-c"} {
		root := filepath.Join(dir, name)
		os.MkdirAll(root, 0o755)
		port := testenv.FreePort(t)
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		l.sites = append(l.sites, &proc{bin: bin, port: port, addr: addr, log: root + ".log",
			args: []string{"storage", "--root", root, "--listen", addr, "--access-log"}})
		l.dirs = append(l.dirs, root)
		fmt.Fprintf(&eps, "    - {name: %s, url: \"http://%s/\", writable: true, priority: %d, timeout: 20s}\n", name, addr, i+1)
	}
	for i := range 3 {
		port := testenv.FreePort(t)
		var extra, sharedExtra string
		if o.fed != nil {
			extra = o.fed(i)
		}
		if o.shared != nil {
			if s := o.shared(i); s != "" {
				sharedExtra = ", " + s
			}
		}
		mode := o.mode
		if mode == "" {
			mode = "redirect"
		}
		redisURL := l.redis.URL
		if o.redis != nil {
			if u := o.redis(i, l.redis); u != "" {
				redisURL = u
			}
		}
		cfg := fmt.Sprintf(`listen: 127.0.0.1:%d
shared: {redis: %q, lease: 1s, node: fed-%d%s}
%sfederation:
  mode: %s
  metadata_cache: {ttl: 1h, negative_ttl: 1h}
  health: {interval: 500ms, timeout: 5s, fail_after: 3, recover_after: 1}
  endpoints:
%s`, port, redisURL, i, sharedExtra, extra, mode, eps.String())
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
				t.Logf("%s:\n%s", filepath.Base(p.log), b)
			}
		}
	})
	return l
}

// startCache starts a cache process (its own, sharing the lake's Redis)
// whose origin is the federator at origin, and returns its URL.
func (l *sharedLake) startCache(t *testing.T, origin string) string {
	port := testenv.FreePort(t)
	cfg := fmt.Sprintf(`shared: {redis: %q, lease: 1s, node: cache-0}
cache: {listen: "127.0.0.1:%d", dir: %q, origin: %q, revalidate_after: 1h}
`, l.redis.URL, port, filepath.Join(l.dir, "cache"), origin+"/")
	f := filepath.Join(l.dir, "cache.yaml")
	if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &proc{bin: l.bin, port: port, log: filepath.Join(l.dir, "cache.log"), args: []string{"serve", f}}
	p.start(t)
	t.Cleanup(p.kill)
	l.waitMember(t, "cache-0")
	return "http://127.0.0.1:" + strconv.Itoa(port)
}

// waitMember waits until node is a member of the lake's shared state:
// every write waits for it from then on.
func (l *sharedLake) waitMember(t *testing.T, node string) {
	t.Helper()
	c, err := shared.New(context.Background(), shared.Options{URL: l.redis.URL, Node: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got []string
	if !testenv.Within(10*time.Second, func() bool {
		got, _ = c.Members(context.Background())
		return slices.Contains(got, node)
	}) {
		t.Fatalf("%s is not a member of the shared state: members %v", node, got)
	}
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

// follow is a client that follows redirects, as curl -L does.
var follow = &http.Client{Timeout: 20 * time.Second}

// seesBytes checks, through the federator at u, that p is want: HEAD
// says 200 and its size, and GET (redirects followed) gives its bytes.
func seesBytes(t *testing.T, what, u, p string, want []byte) {
	t.Helper()
	resp, _ := do(t, http.MethodHead, u+p, nil)
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(want)) {
		_, msg := do(t, http.MethodGet, u+p, nil) // a HEAD has no body to say why
		t.Fatalf("%s: HEAD %s%s = %d, %d bytes; want 200 with %d bytes (GET: %s)", what, u, p, resp.StatusCode, resp.ContentLength, len(want), msg)
	}
	got, err := follow.Get(u + p)
	if err != nil {
		t.Fatalf("%s: GET %s%s: %v", what, u, p, err)
	}
	b, err := io.ReadAll(got.Body)
	got.Body.Close()
	if got.StatusCode != http.StatusOK || err != nil || !bytes.Equal(b, want) {
		t.Fatalf("%s: GET %s%s = %d, %d bytes (%v); want 200 with the %d bytes written", what, u, p, got.StatusCode, len(b), err, len(want))
	}
}

// seesNothing checks that p is not found through the federator at u.
func seesNothing(t *testing.T, what, u, p string) {
	t.Helper()
	for _, m := range []string{http.MethodHead, http.MethodGet} {
		if resp, msg := do(t, m, u+p, nil); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %s %s%s = %d %s; want 404", what, m, u, p, resp.StatusCode, msg)
		}
	}
}

// TestSharedDoorWriteSeenAtOnce: a file every federator has cached is
// written anew with xrdcp through B's root:// door; HEAD and GET through
// A and C give the new bytes at once. xrdfs rm through B's door is a 404
// through A and C at once.
func TestSharedDoorWriteSeenAtOnce(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	xrdfs := testenv.Require(t, "xrdfs")
	door := testenv.FreePort(t)
	l := startSharedLake(t, lakeOptions{fed: func(i int) string {
		if i != 1 {
			return ""
		}
		return fmt.Sprintf("listen_xroot: 127.0.0.1:%d\n", door)
	}})
	doorAddr := "127.0.0.1:" + strconv.Itoa(door)
	work := t.TempDir()
	for round := range 5 {
		p := fmt.Sprintf("/x/f%d", round)
		v1 := bytes.Repeat([]byte("old "), 1000+round)
		os.MkdirAll(filepath.Join(l.dirs[2], "x"), 0o755)
		if err := os.WriteFile(filepath.Join(l.dirs[2], p), v1, 0o644); err != nil {
			t.Fatal(err)
		}
		for i, u := range l.urls { // every federator caches v1
			seesBytes(t, fmt.Sprintf("before, fed-%d", i), u, p, v1)
		}
		v2 := bytes.Repeat([]byte("new!"), 3000+round)
		src := filepath.Join(work, "v2")
		os.WriteFile(src, v2, 0o644)
		run(t, doorEnv, xrdcp, "-f", src, "root://"+doorAddr+"/"+p)
		for _, i := range []int{0, 2} {
			seesBytes(t, fmt.Sprintf("round %d: right after xrdcp through fed-1's door, fed-%d", round, i), l.urls[i], p, v2)
		}
		run(t, doorEnv, xrdfs, doorAddr, "rm", p)
		for _, i := range []int{0, 2} {
			seesNothing(t, fmt.Sprintf("round %d: right after xrdfs rm through fed-1's door, fed-%d", round, i), l.urls[i], p)
		}
	}
}

// TestSharedCacheSeesWritesAtOnce: a cache process whose origin is
// federator C, sharing the lake's Redis, has a file cached; a PUT of a
// new version through A is answered only once the cache has dropped
// what it knew, so a GET through the cache right after gives the new
// bytes; a DELETE through B is a 404 through the cache at once.
func TestSharedCacheSeesWritesAtOnce(t *testing.T) {
	l := startSharedLake(t)
	c := l.startCache(t, l.urls[2])
	for round := range 5 {
		p := fmt.Sprintf("/c/f%d", round)
		v1 := bytes.Repeat([]byte("old "), 1000+round)
		os.MkdirAll(filepath.Join(l.dirs[1], "c"), 0o755)
		if err := os.WriteFile(filepath.Join(l.dirs[1], p), v1, 0o644); err != nil {
			t.Fatal(err)
		}
		seesBytes(t, "the cache, before", c, p, v1)
		seesBytes(t, "the cache, from its blocks", c, p, v1)
		v2 := bytes.Repeat([]byte("new!"), 3000+round)
		if resp, msg := do(t, http.MethodPut, l.urls[0]+p, v2); resp.StatusCode/100 != 2 {
			t.Fatalf("PUT through fed-0 = %d %s", resp.StatusCode, msg)
		}
		seesBytes(t, fmt.Sprintf("round %d: the cache right after a PUT through fed-0", round), c, p, v2)
		if resp, msg := do(t, http.MethodDelete, l.urls[1]+p, nil); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE through fed-1 = %d %s", resp.StatusCode, msg)
		}
		seesNothing(t, fmt.Sprintf("round %d: the cache right after a DELETE through fed-1", round), c, p)
	}
}

// bufferOn0 gives federator 0 a write buffer for /buf, whose target is
// site-a, spooled in dir; it retries fast and keeps a migrated file no
// longer than it takes to retire it.
func bufferOn0(dir string) lakeOptions {
	return lakeOptions{fed: func(i int) string {
		if i != 0 {
			return ""
		}
		return fmt.Sprintf(`buffer:
  dir: %q
  keep_after_migration: 10ms
  retry: {initial: 200ms, max: 500ms}
  prefixes:
    - {prefix: /buf, targets: [site-a]}
`, dir)
	}}
}

// absentWhileMoving is seesNothing while a buffered delete of p may be
// migrating: 404, or a 503 with Retry-After once the buffer retired its
// record and the federator has not yet seen the target come back (as
// readsAsWritten allows); never the file.
func absentWhileMoving(t *testing.T, what, u, p string) {
	t.Helper()
	for _, m := range []string{http.MethodHead, http.MethodGet} {
		resp, msg := do(t, m, u+p, nil)
		if resp.StatusCode != http.StatusNotFound && (resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "") {
			t.Fatalf("%s: %s %s%s = %d %s; want 404, or 503 with Retry-After", what, m, u, p, resp.StatusCode, msg)
		}
	}
}

// readsAsWritten reads p through the federator at u while the file may
// be moving from a buffer to its target: HEAD and GET (followed) must
// give want, never a 404 and never other bytes. A 503 with Retry-After
// (the federator has not yet seen the target come back) is allowed:
// readsAsWritten then reports false.
func readsAsWritten(t *testing.T, what, u, p string, want []byte) bool {
	t.Helper()
	resp, msg := do(t, http.MethodHead, u+p, nil)
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		return false
	case resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(want)):
		t.Fatalf("%s: HEAD %s%s = %d, %d bytes (%s); want 200 with %d bytes", what, u, p, resp.StatusCode, resp.ContentLength, msg, len(want))
	}
	got, err := follow.Get(u + p)
	if err != nil {
		t.Fatalf("%s: GET %s%s: %v", what, u, p, err)
	}
	b, err := io.ReadAll(got.Body)
	got.Body.Close()
	switch {
	case got.StatusCode == http.StatusServiceUnavailable && got.Header.Get("Retry-After") != "":
		return false
	case got.StatusCode != http.StatusOK || err != nil || !bytes.Equal(b, want):
		t.Fatalf("%s: GET %s%s = %d, %d bytes (%v); want 200 with the %d bytes written", what, u, p, got.StatusCode, len(b), err, len(want))
	}
	return true
}

// location is where the federator at u sends a GET of p.
func location(t *testing.T, u, p string) string {
	t.Helper()
	resp, msg := do(t, http.MethodGet, u+p, nil)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("GET %s%s = %d %s, want a redirect", u, p, resp.StatusCode, msg)
	}
	return resp.Header.Get("Location")
}

// TestSharedBufferedSeenEverywhere: federator A has a write buffer in
// front of site-a, which is down. A file A's buffer acknowledged (a new
// one, and a new version of one every federator had cached) is read
// through B and C at once, from A; a newer version through B goes to A's
// buffer too; a DELETE through C of a buffered file is a 404 everywhere
// at once. When site-a comes back the files migrate,
// their holds go, and B and C read the same bytes from site-a; the
// deleted file never comes back.
func TestSharedBufferedSeenEverywhere(t *testing.T) {
	spool := t.TempDir()
	l := startSharedLake(t, bufferOn0(spool))
	a, siteA := l.urls[0], fmt.Sprintf("http://127.0.0.1:%d/", l.sites[0].port)
	os.MkdirAll(filepath.Join(l.dirs[0], "buf"), 0o755)
	v1 := bytes.Repeat([]byte("old "), 1000)
	if err := os.WriteFile(filepath.Join(l.dirs[0], "buf", "old"), v1, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, u := range l.urls { // every federator caches v1
		seesBytes(t, fmt.Sprintf("before, fed-%d", i), u, "/buf/old", v1)
	}
	l.sites[0].kill() // the buffer's target is down

	files := map[string][]byte{
		"/buf/new":     bytes.Repeat([]byte("new!"), 2500),
		"/buf/old":     bytes.Repeat([]byte("two!"), 3000),
		"/buf/d/deep":  bytes.Repeat([]byte("deep"), 10),
		"/buf/d/empty": {},
	}
	for p, v := range files {
		if resp, msg := do(t, http.MethodPut, a+p, v); resp.StatusCode/100 != 2 || resp.Header.Get("Etag") == "" {
			t.Fatalf("PUT %s through fed-0 = %d %s (ETag %q); want it taken by the buffer", p, resp.StatusCode, msg, resp.Header.Get("Etag"))
		}
		for i, u := range l.urls {
			seesBytes(t, fmt.Sprintf("%s right after its PUT through fed-0, fed-%d", p, i), u, p, v)
		}
		for _, u := range l.urls[1:] {
			if loc := location(t, u, p); !strings.HasPrefix(loc, a+"/") {
				t.Fatalf("GET %s%s while fed-0's buffer holds it: sent to %s, want fed-0 (%s)", u, p, loc, a)
			}
		}
	}

	// A new version through fed-1 of a file fed-0's buffer holds goes to
	// that buffer: written on an endpoint instead, it would be undone
	// when the buffer's older version reaches site-a.
	v3 := bytes.Repeat([]byte("3rd!"), 2000)
	if resp, msg := do(t, http.MethodPut, l.urls[1]+"/buf/old", v3); resp.StatusCode/100 != 2 {
		t.Fatalf("PUT /buf/old through fed-1 = %d %s", resp.StatusCode, msg)
	}
	files["/buf/old"] = v3
	for i, u := range l.urls {
		seesBytes(t, fmt.Sprintf("/buf/old right after its PUT through fed-1, fed-%d", i), u, "/buf/old", v3)
	}
	if loc := location(t, l.urls[2], "/buf/old"); !strings.HasPrefix(loc, a+"/") {
		t.Fatalf("GET /buf/old through fed-2 after a PUT through fed-1: sent to %s, want fed-0's buffer (%s)", loc, a)
	}

	gone := bytes.Repeat([]byte("bye "), 700)
	if resp, msg := do(t, http.MethodPut, a+"/buf/gone", gone); resp.StatusCode/100 != 2 {
		t.Fatalf("PUT /buf/gone through fed-0 = %d %s", resp.StatusCode, msg)
	}
	seesBytes(t, "/buf/gone through fed-2", l.urls[2], "/buf/gone", gone)
	if resp, msg := do(t, http.MethodDelete, l.urls[2]+"/buf/gone", nil); resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE /buf/gone through fed-2 = %d %s", resp.StatusCode, msg)
	}
	for i, u := range l.urls {
		seesNothing(t, fmt.Sprintf("/buf/gone right after its DELETE through fed-2, fed-%d", i), u, "/buf/gone")
	}

	l.sites[0].start(t) // the target is back: the files migrate
	moved := map[string]bool{}
	if !testenv.Within(60*time.Second, func() bool {
		for p, v := range files {
			for i, u := range l.urls {
				readsAsWritten(t, fmt.Sprintf("%s while it migrates, fed-%d", p, i), u, p, v)
			}
			if !moved[p] {
				resp, _ := do(t, http.MethodGet, l.urls[2]+p, nil)
				moved[p] = resp.StatusCode == http.StatusFound && strings.HasPrefix(resp.Header.Get("Location"), siteA)
			}
		}
		for _, u := range l.urls {
			absentWhileMoving(t, "/buf/gone while the buffer carries its delete", u, "/buf/gone")
		}
		return len(moved) == len(files) && !slices.Contains(slices.Collect(maps.Values(moved)), false)
	}) {
		t.Fatalf("the buffered files were not read from site-a within 60s: %v", moved)
	}
	for p, v := range files {
		if got, err := os.ReadFile(filepath.Join(l.dirs[0], p)); err != nil || !bytes.Equal(got, v) {
			t.Errorf("%s on site-a's disk: %d bytes (%v), want the %d bytes written", p, len(got), err, len(v))
		}
		for i, u := range l.urls {
			if !readsAsWritten(t, fmt.Sprintf("%s after its migration, fed-%d", p, i), u, p, v) {
				t.Errorf("%s after its migration, fed-%d: 503", p, i)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(l.dirs[0], "buf", "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/buf/gone on site-a's disk after the buffer carried its delete: %v, want none", err)
	}
	for i, u := range l.urls {
		seesNothing(t, fmt.Sprintf("/buf/gone at the end, fed-%d", i), u, "/buf/gone")
	}
}

// TestSharedBufferHolderKilled: federator A's buffer holds a file its
// target (site-a, down) does not have yet, and A is killed with kill -9.
// Reads through B and C never get a 404 or the old version: 503 with
// Retry-After once A's lease has run out; a PUT or DELETE of the file
// through them is refused (503), as it would be undone when A's version
// reaches site-a. A restarted reads the file from its journal and holds
// it again; once site-a is back it migrates, and B and C read it there.
func TestSharedBufferHolderKilled(t *testing.T) {
	spool := t.TempDir()
	l := startSharedLake(t, bufferOn0(spool))
	a := l.urls[0]
	os.MkdirAll(filepath.Join(l.dirs[0], "buf"), 0o755)
	v1 := bytes.Repeat([]byte("old "), 1000)
	os.WriteFile(filepath.Join(l.dirs[0], "buf", "f"), v1, 0o644)
	for i, u := range l.urls {
		seesBytes(t, fmt.Sprintf("before, fed-%d", i), u, "/buf/f", v1)
	}
	l.sites[0].kill()
	v2 := bytes.Repeat([]byte("two!"), 3000)
	if resp, msg := do(t, http.MethodPut, a+"/buf/f", v2); resp.StatusCode/100 != 2 {
		t.Fatalf("PUT through fed-0 = %d %s", resp.StatusCode, msg)
	}
	for i, u := range l.urls {
		seesBytes(t, fmt.Sprintf("right after the PUT, fed-%d", i), u, "/buf/f", v2)
	}

	l.feds[0].kill() // kill -9, holding /buf/f
	others := l.urls[1:]
	if !testenv.Within(10*time.Second, func() bool {
		unavailable := true
		for _, u := range others {
			resp, msg := do(t, http.MethodHead, u+"/buf/f", nil)
			switch {
			case resp.StatusCode == http.StatusOK && resp.ContentLength == int64(len(v2)):
				unavailable = false // the holder's lease has not run out yet
			case resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "":
				t.Fatalf("HEAD %s/buf/f with its holder dead = %d, %d bytes %s; want 503 with Retry-After (or, within a lease, the new version)",
					u, resp.StatusCode, resp.ContentLength, msg)
			}
		}
		return unavailable
	}) {
		t.Fatal("reads of a file whose holder died are not refused with 503 after its lease")
	}
	for _, u := range others {
		if resp, msg := do(t, http.MethodGet, u+"/buf/f", nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("GET %s/buf/f with its holder dead = %d %s; want 503", u, resp.StatusCode, msg)
		}
		if resp, msg := do(t, http.MethodPut, u+"/buf/f", []byte("three")); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("PUT %s/buf/f with its holder dead = %d %s; want 503", u, resp.StatusCode, msg)
		}
		if resp, msg := do(t, http.MethodDelete, u+"/buf/f", nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("DELETE %s/buf/f with its holder dead = %d %s; want 503", u, resp.StatusCode, msg)
		}
	}

	l.feds[0].start(t) // the same spool and journal
	l.waitMember(t, "fed-0")
	for i, u := range l.urls {
		if !testenv.Within(5*time.Second, func() bool {
			return readsAsWritten(t, fmt.Sprintf("after fed-0's restart, fed-%d", i), u, "/buf/f", v2)
		}) {
			t.Fatalf("fed-%d: /buf/f unavailable after fed-0's restart", i)
		}
	}
	l.sites[0].start(t)
	siteA := fmt.Sprintf("http://127.0.0.1:%d/", l.sites[0].port)
	if !testenv.Within(60*time.Second, func() bool {
		for i, u := range l.urls {
			readsAsWritten(t, fmt.Sprintf("while it migrates, fed-%d", i), u, "/buf/f", v2)
		}
		resp, _ := do(t, http.MethodGet, l.urls[2]+"/buf/f", nil)
		return resp.StatusCode == http.StatusFound && strings.HasPrefix(resp.Header.Get("Location"), siteA)
	}) {
		t.Fatal("/buf/f was not read from site-a within 60s of its return")
	}
	if got, _ := os.ReadFile(filepath.Join(l.dirs[0], "buf", "f")); !bytes.Equal(got, v2) {
		t.Fatalf("/buf/f on site-a's disk: %d bytes, want the %d bytes of the version the killed buffer held", len(got), len(v2))
	}
}

// TestSharedBufferedProxied: in proxy mode, B and C stream a file A's
// buffer holds from A, with the size and the ETag A's buffer answered
// the PUT with (the version A recorded, which the proxied read is
// checked against), and the newer version after a PUT through C; once
// site-a is back they stream the same bytes from it.
func TestSharedBufferedProxied(t *testing.T) {
	o := bufferOn0(t.TempDir())
	o.mode = "proxy"
	l := startSharedLake(t, o)
	l.sites[0].kill()
	v := map[int][]byte{0: bytes.Repeat([]byte("v0! "), 3000), 2: bytes.Repeat([]byte("v2! "), 2000)}
	for _, w := range []int{0, 2} { // a PUT through A, then one through C (sent to A's buffer)
		resp, msg := do(t, http.MethodPut, l.urls[w]+"/buf/p", v[w])
		if resp.StatusCode/100 != 2 {
			t.Fatalf("PUT through fed-%d = %d %s", w, resp.StatusCode, msg)
		}
		etag := resp.Header.Get("Etag")
		if w == 0 && etag == "" {
			t.Fatal("the buffer's PUT answer has no ETag")
		}
		for i, u := range l.urls {
			seesBytes(t, fmt.Sprintf("after a PUT through fed-%d, fed-%d", w, i), u, "/buf/p", v[w])
			resp, _ := do(t, http.MethodGet, u+"/buf/p", nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s/buf/p = %d, want the bytes themselves (proxy mode)", u, resp.StatusCode)
			}
			if w == 0 && resp.Header.Get("Etag") != etag {
				t.Fatalf("GET %s/buf/p: ETag %q, want the buffer's %q", u, resp.Header.Get("Etag"), etag)
			}
		}
	}
	held, _ := do(t, http.MethodHead, l.urls[0]+"/buf/p", nil) // the buffer's version
	l.sites[0].start(t)
	if !testenv.Within(60*time.Second, func() bool {
		for i, u := range l.urls {
			readsAsWritten(t, fmt.Sprintf("while it migrates, fed-%d", i), u, "/buf/p", v[2])
		}
		got, _ := os.ReadFile(filepath.Join(l.dirs[0], "buf", "p"))
		return bytes.Equal(got, v[2])
	}) {
		t.Fatal("/buf/p did not reach site-a within 60s of its return")
	}
	// Retired: the version C serves becomes site-a's.
	if !testenv.Within(30*time.Second, func() bool {
		resp, _ := do(t, http.MethodHead, l.urls[2]+"/buf/p", nil)
		return resp.StatusCode == http.StatusOK && resp.Header.Get("Etag") != held.Header.Get("Etag")
	}) {
		t.Fatal("fed-2 still serves /buf/p from the buffer 30s after its migration")
	}
	for i, u := range l.urls {
		seesBytes(t, fmt.Sprintf("after its migration, fed-%d", i), u, "/buf/p", v[2])
	}
}
