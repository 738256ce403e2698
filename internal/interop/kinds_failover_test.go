package interop

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/lakefed/lakefed/internal/testenv"
)

// failovers reads the federator's proxy_failovers_total.
func (f *kindFed) failovers(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(f.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^lakefed_federation_proxy_failovers_total (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no proxy_failovers_total in /metrics")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestCrossKindFailover: in proxy mode a read in flight from one kind
// moves to a replica of another kind at the same offset when its server
// dies, if a checksum proves the two hold the same bytes: S3 to lakefed
// storage, XRootD to storage. The client gets every byte, in order, in
// one response. nginx offers no checksum, so a move from XRootD to nginx
// cannot be proven safe: the transfer breaks, and what arrived is the
// file's prefix (never bytes of another version).
func TestCrossKindFailover(t *testing.T) {
	data := make([]byte, 96<<20)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < len(data); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	for _, tc := range []struct {
		name     string
		sites    func(t *testing.T) (first, second *kindSite)
		unproven bool // no checksum on the second: the read must break
	}{
		{"s3 to storage", func(t *testing.T) (*kindSite, *kindSite) {
			s3, _ := startS3Site(t, "s3")
			return s3, startStorageSite(t, "storage")
		}, false},
		{"xrootd to storage", func(t *testing.T) (*kindSite, *kindSite) {
			x, _ := startXRootDChecksumSite(t, "xrootd")
			return x, startStorageSite(t, "storage")
		}, false},
		{"xrootd to nginx", func(t *testing.T) (*kindSite, *kindSite) {
			x, _ := startXRootDSite(t, "xrootd")
			return x, startNginxSite(t, "nginx")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, second := tc.sites(t)
			first.put(t, "/f.bin", data)
			second.put(t, "/f.bin", data)
			fed := startKindFed(t, "mode: proxy\nhealth: {interval: 1h}", first, second)
			before := fed.failovers(t)

			resp, err := http.Get(fed.url + "/f.bin")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET = %d", resp.StatusCode)
			}
			head := make([]byte, 4<<20)
			if _, err := io.ReadFull(resp.Body, head); err != nil {
				t.Fatalf("first 4 MiB: %v", err)
			}
			first.kill() // the rest must come from the second site
			rest, err := io.ReadAll(resp.Body)
			if tc.unproven {
				got := append(head, rest...)
				if err == nil || len(got) >= len(data) || !bytes.Equal(got, data[:len(got)]) {
					t.Fatalf("after %s died: %d bytes, %v; want a broken transfer holding the file's prefix", first.name, len(got), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("read after %s died: %v (after %d bytes)", first.name, err, len(head)+len(rest))
			}
			if got := append(head, rest...); !bytes.Equal(got, data) {
				t.Errorf("body: %d bytes, not the original %d", len(got), len(data))
			}
			if n := fed.failovers(t) - before; n < 1 {
				t.Errorf("proxy_failovers_total grew by %d, want at least 1 (did %s die mid-stream?)", n, first.name)
			}
		})
	}
}

// TestSitePinRealKinds: ?lakefed.site=NAME (lakefed bench --site) reads
// from that endpoint only, whatever its kind, and says 503 when it is down
// though other replicas live.
func TestSitePinRealKinds(t *testing.T) {
	testenv.Require(t, "xrootd")
	store := startStorageSite(t, "storage")
	s3, _ := startS3Site(t, "s3")
	xrd, _ := startXRootDSite(t, "xrootd")
	data := []byte("pinned replica")
	for _, s := range []*kindSite{store, s3, xrd} {
		s.put(t, "/p/f", data)
	}
	fed := startKindFed(t, fastHealth, store, s3, xrd)
	for _, tc := range []struct {
		site, locPrefix string
	}{{"storage", store.urlPrefix}, {"s3", s3.urlPrefix}, {"xrootd", ""}} {
		code, loc := fed.peek(t, "/p/f?lakefed.site="+tc.site)
		switch {
		case tc.locPrefix == "" && code != http.StatusOK:
			t.Errorf("GET pinned to %s = %d %q, want 200 (proxied)", tc.site, code, loc)
		case tc.locPrefix != "" && (code != http.StatusFound || len(loc) < len(tc.locPrefix) || loc[:len(tc.locPrefix)] != tc.locPrefix):
			t.Errorf("GET pinned to %s = %d %q, want 302 to %s...", tc.site, code, loc, tc.locPrefix)
		}
		resp, err := http.Get(fed.url + "/p/f?lakefed.site=" + tc.site)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(got, data) {
			t.Errorf("GET pinned to %s (followed) = %q", tc.site, got)
		}
	}
	xrd.kill()
	fed.waitState(t, "xrootd", "down")
	if code, _ := fed.peek(t, "/p/f?lakefed.site=xrootd"); code != http.StatusServiceUnavailable {
		t.Errorf("GET pinned to a dead xrootd = %d, want 503", code)
	}
	if code, _ := fed.peek(t, "/p/f"); code != http.StatusFound {
		t.Errorf("GET unpinned with xrootd dead = %d, want 302 to another replica", code)
	}
}

// TestXRootDHTTPDoor: a root:// endpoint with http_url is redirected to,
// at its XrdHttp door; without it, the same server is proxied.
func TestXRootDHTTPDoor(t *testing.T) {
	x := testenv.StartXRootD(t)
	data := bytes.Repeat([]byte("xrootd door "), 100000)
	writeUnder(t, x.Dir, "/d/f", data)
	door := &kindSite{name: "door", yaml: "url: " + x.RootURL + "/\nhttp_url: " + x.URL}
	grid := &kindSite{name: "grid", yaml: "url: " + x.RootURL + "/"}
	fed := startKindFed(t, fastHealth, door, grid)
	for _, tc := range []struct{ site, wantLoc string }{{"door", x.URL + "d/f"}, {"grid", ""}} {
		code, loc := fed.peek(t, "/d/f?lakefed.site="+tc.site)
		if (tc.wantLoc == "" && code != http.StatusOK) || (tc.wantLoc != "" && (code != http.StatusFound || loc != tc.wantLoc)) {
			t.Errorf("GET pinned to %s = %d %q, want %q (200 when empty)", tc.site, code, loc, tc.wantLoc)
		}
		resp, err := http.Get(fed.url + "/d/f?lakefed.site=" + tc.site)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(got, data) {
			t.Errorf("GET pinned to %s (followed): %d bytes, want %d", tc.site, len(got), len(data))
		}
	}
}
