package interop

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// TestSharedPartition: three federators sharing Redis, the first (A) in
// a network namespace of its own, reaching Redis and the sites over a
// veth link; the test takes the link down. B and C go on serving and
// see each other's writes at once; A says it is degraded (the
// X-Lakefed-Shared header of /api/endpoints and
// lakefed_federation_shared_degraded) and refuses writes with 503 and
// Retry-After. While A is cut off, B writes a new version of a file A
// had looked up. From the moment the link is up again A never answers
// with the old version (HEAD gives the new size and GET the new bytes),
// and it says ok again and takes writes.
func TestSharedPartition(t *testing.T) {
	ns := testenv.NewNetNS(t)
	l := startSharedLakeIn(t, ns)
	a, b, c := 0, 1, 2
	v1 := bytes.Repeat([]byte("one "), 1000)
	if err := os.WriteFile(filepath.Join(l.dirs[1], "f"), v1, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, u := range l.urls { // every federator remembers v1
		if resp, _ := doWith(t, l.clients[i], http.MethodHead, u+"/f", nil); resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(v1)) {
			t.Fatalf("HEAD %s/f = %d, %d bytes; want 200, %d", u, resp.StatusCode, resp.ContentLength, len(v1))
		}
	}
	waitUntilStateWith(t, l.clients[a], l.urls[a], "ok")

	ns.Cut(t)
	cut := time.Now()
	waitUntilStateWith(t, l.clients[a], l.urls[a], "degraded")
	degradedAfter := time.Since(cut)
	resp, msg := doWith(t, l.clients[a], http.MethodPut, l.urls[a]+"/g", []byte("from a"))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("PUT through A cut off = %d %s (Retry-After %q), want 503 with Retry-After",
			resp.StatusCode, msg, resp.Header.Get("Retry-After"))
	}
	v2 := bytes.Repeat([]byte("two!"), 3000)
	start := time.Now()
	putThrough(t, l, b, "/f", v2)
	firstPut := time.Since(start)
	seen(t, l, c, "/f", v2)
	v3 := bytes.Repeat([]byte("three"), 500)
	putThrough(t, l, c, "/h", v3)
	seen(t, l, b, "/h", v3)
	for _, i := range []int{b, c} {
		waitUntilState(t, l.urls[i], "ok")
	}

	ns.Heal(t)
	healed := time.Now()
	// From the heal on, A answers 503 until it is back and finds the
	// sites up again, then the new version; never the old one.
	var okAfter time.Duration
	testenv.Eventually(t, 20*time.Second, "A says ok and answers HEAD /f after the link came back", func() bool {
		resp, _ := doWith(t, l.clients[a], http.MethodHead, l.urls[a]+"/f", nil)
		if resp.StatusCode == http.StatusOK && resp.ContentLength != int64(len(v2)) {
			t.Fatalf("HEAD /f through A %v after the heal = %d bytes, want the version written meanwhile (%d)",
				time.Since(healed), resp.ContentLength, len(v2))
		}
		st, _ := doWith(t, l.clients[a], http.MethodGet, l.urls[a]+"/api/endpoints", nil)
		if okAfter == 0 && st.Header.Get("X-Lakefed-Shared") == "ok" {
			okAfter = time.Since(healed)
		}
		return resp.StatusCode == http.StatusOK && okAfter > 0
	})
	waitUntilStateWith(t, l.clients[a], l.urls[a], "ok")
	servedAfter := time.Since(healed)
	seen(t, l, a, "/f", v2)
	seen(t, l, a, "/h", v3)
	putThrough(t, l, a, "/g", []byte("from a, sharing again"))
	seen(t, l, b, "/g", []byte("from a, sharing again"))
	t.Logf("A degraded %v after the cut; B's first write took %v; after the heal A said ok after %v and served the file after %v",
		degradedAfter.Round(time.Millisecond), firstPut.Round(time.Millisecond), okAfter.Round(time.Millisecond), servedAfter.Round(time.Millisecond))
}

// putThrough writes data as p through federator i.
func putThrough(t *testing.T, l *sharedLake, i int, p string, data []byte) {
	t.Helper()
	if resp, msg := doWith(t, l.clients[i], http.MethodPut, l.urls[i]+p, data); resp.StatusCode/100 != 2 {
		t.Fatalf("PUT %s through %s = %d %s", p, l.urls[i], resp.StatusCode, msg)
	}
}

// seen checks at once that federator i gives data for p: the size on
// HEAD, and the bytes on a GET of the replica it redirects to.
func seen(t *testing.T, l *sharedLake, i int, p string, data []byte) {
	t.Helper()
	u := l.urls[i] + p
	resp, _ := doWith(t, l.clients[i], http.MethodHead, u, nil)
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(data)) {
		t.Fatalf("HEAD %s = %d, %d bytes; want 200, %d", u, resp.StatusCode, resp.ContentLength, len(data))
	}
	resp, _ = doWith(t, l.clients[i], http.MethodGet, u, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("GET %s = %d, want a redirect to a replica", u, resp.StatusCode)
	}
	got, err := http.Get(loc)
	if err != nil {
		t.Fatalf("GET %s's redirect %s: %v", u, loc, err)
	}
	b, err := io.ReadAll(got.Body)
	got.Body.Close()
	if err != nil || got.StatusCode != http.StatusOK || !bytes.Equal(b, data) {
		t.Fatalf("GET %s's redirect %s = %d, %d bytes (err %v); want the %d bytes written", u, loc, got.StatusCode, len(b), err, len(data))
	}
}
