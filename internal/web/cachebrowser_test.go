package web

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// cacheReads are the jobs the browser test runs through a real cache:
// path, size, and the Range headers of its requests ("" reads it all).
type cacheRead struct {
	path   string
	size   int
	ranges []string
}

func cacheWorkload() []cacheRead {
	r := rand.New(rand.NewPCG(7, 11))
	var noTTC, ttc, stream, events []string
	// A ROOT job without TTreeCache: small reads all over the file.
	for range 300 {
		n := 2000 + r.IntN(1500)
		off := r.IntN(8<<20 - n)
		noTTC = append(noTTC, fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	}
	// With it: a few multi-range requests of about 90 KiB baskets.
	for i := range 12 {
		var rs []string
		for k := range 4 {
			off := (i*4 + k) * 160 << 10
			rs = append(rs, fmt.Sprintf("%d-%d", off, off+90<<10-1))
		}
		ttc = append(ttc, "bytes="+strings.Join(rs, ","))
	}
	// A copy streaming the file in 256 KiB reads.
	for i := range 16 {
		stream = append(stream, fmt.Sprintf("bytes=%d-%d", i*256<<10, (i+1)*256<<10-1))
	}
	// Runs of sequential 16 KiB reads with a jump between them.
	for i := range 60 {
		off := (i/10)*(300<<10) + (i%10)*(16<<10)
		events = append(events, fmt.Sprintf("bytes=%d-%d", off, off+16<<10-1))
	}
	return []cacheRead{
		{"atlas/noTTC.root", 8 << 20, noTTC},
		{"atlas/TTC.root", 8 << 20, ttc},
		{"cms/stream.dat", 4 << 20, stream},
		{"cms/whole.txt", 300 << 10, []string{"", ""}},
		{"lhcb/events.root", 2 << 20, events},
	}
}

// TestBrowserCache runs a real cache (in a group with a member that is
// down) over a storage role, reads five files through it the ways jobs
// do, and loads /ui/cache in headless Chromium at 1400 px wide: both
// plots have a point per file, nothing overflows, every plot fills its
// figure, every number of the tables has its unit, and the screenshot
// ($TMPDIR/lakefed-ui/cache.png) is not blank.
func TestBrowserCache(t *testing.T) {
	chromium := testenv.Require(t, "chromium")
	ctx := t.Context()
	site := storagetest.Start(t, storage.Config{})
	origin, err := kinds.New(ctx, endpoint.Config{Name: "origin", URL: site.URL}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	work := cacheWorkload()
	r := rand.New(rand.NewPCG(1, 2))
	for _, w := range work {
		b := make([]byte, w.size)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		p := filepath.Join(site.Dir, w.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close() // a member that refuses connections
	self := "http://" + ln.Addr().String()
	c, err := cache.New(ctx, cache.Config{Dir: t.TempDir(), MaxBytes: 256 << 20, MaxInodes: 1000,
		Group: []string{self, deadURL}, Self: self}, origin, cache.Options{Log: quiet})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cacheSrv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = cacheSrv.Serve(ln) }()
	t.Cleanup(func() { cacheSrv.Close() })

	for _, w := range work {
		for _, rg := range w.ranges {
			readThrough(t, self+"/"+w.path, rg)
		}
	}
	// The group's health check marks the dead member down (it probes
	// every second).
	if !testenv.Within(15*time.Second, func() bool { return memberDown(c.Status(), deadURL) }) {
		t.Fatalf("the group never marked %s down: %+v", deadURL, c.Status().Group)
	}
	if n := len(c.Files()); n != len(work) {
		t.Fatalf("the cache lists %d files, want %d", n, len(work))
	}

	st, err := results.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dash := New(Options{Store: st, Cache: c, Log: quiet})
	mux := http.NewServeMux()
	mux.Handle("/ui/", withLayoutCheck(dash))
	base := serve(t, mux)

	dom := runChromium(t, chromium, "--window-size=1400,1800", "--dump-dom", base+checkURL("/ui/cache"))
	pts := domPoints(dom)
	for _, id := range []string{plotReadSize, plotRequested} {
		if pts[id] != len(work) {
			t.Errorf("/ui/cache in Chromium: plot %q has %d points, want %d (one per file; plots: %v)", id, pts[id], len(work), pts)
		}
	}
	for _, w := range []string{"/atlas/noTTC.root", "300 reads", "0 of 300 requests", "12 of 12 requests", "down"} {
		if !strings.Contains(dom, w) {
			t.Errorf("/ui/cache in Chromium: no %q", w)
		}
	}
	checkLayout(t, "/ui/cache", dom)

	shots := filepath.Join(os.TempDir(), "lakefed-ui")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(shots, "cache.png")
	runChromium(t, chromium, "--screenshot="+shot, "--window-size=1400,1800", "--hide-scrollbars", base+"/ui/cache")
	t.Logf("screenshot of /ui/cache: %s", shot)
	checkNotBlank(t, shot)
}

// readThrough GETs url with the Range header rg ("" for all of it) and
// reads the answer, which must be 200 or 206.
func readThrough(t *testing.T, url, rg string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rg != "" {
		req.Header.Set("Range", rg)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s (%s): %v", url, rg, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("GET %s (%s): reading: %v", url, rg, err)
	}
	if want := map[bool]int{true: 200, false: 206}[rg == ""]; resp.StatusCode != want {
		t.Fatalf("GET %s (%s) = %d, want %d", url, rg, resp.StatusCode, want)
	}
}

func memberDown(st cache.Status, url string) bool {
	for _, m := range st.Group {
		if m.URL == url {
			return !m.Up
		}
	}
	return false
}
