package buffer

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// storageTarget runs the storage role and returns it as an http endpoint,
// with a reverse proxy to it standing in for the federator behind the
// buffer.
func storageTarget(t *testing.T, name string) (*storagetest.Site, endpoint.Endpoint, http.Handler) {
	t.Helper()
	site := storagetest.Start(t, storage.Config{})
	ep, err := kinds.New(context.Background(), endpoint.Config{Name: name, URL: site.URL}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(site.URL)
	return site, ep, httputil.NewSingleHostReverseProxy(u)
}

// TestReadYourWrites: a written file is read back, whole, by range, by
// HEAD, PROPFIND and through the Overlay, while its migration is held
// up, while a newer version replaces it, after its migration, and after
// its local copy is retired (then from the target): at no moment does a
// reader see it missing or with old bytes. The older version's copy in
// flight is cancelled and never lands.
func TestReadYourWrites(t *testing.T) {
	site, siteEp, next := storageTarget(t, "site")
	gated := &fake{Endpoint: siteEp, gate: make(chan struct{}), started: make(chan string, 1)}
	disk, diskDir := newPosix(t, "disk")
	var hookMu sync.Mutex
	hooked := map[string]int{} // path → calls of the write hook
	b, srv := start(t, fastRetry(Config{
		KeepAfterMigration: 300 * time.Millisecond,
		Prefixes:           []Prefix{{Prefix: "/store/user", Targets: []endpoint.Endpoint{gated, disk}}},
	}), next, Options{OnWrite: func(_ context.Context, p string) error { hookMu.Lock(); hooked[p]++; hookMu.Unlock(); return nil }})

	r := rand.New(rand.NewPCG(1, 2))
	v1, v2 := randBytes(r, 300_000), randBytes(r, 200_000)
	const p = "/store/user/a/f.root"
	resp := put(t, srv.URL+p, v1, "Want-Digest", "adler32")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d, want 201", resp.StatusCode)
	}
	if d := resp.Header.Get("Digest"); d != "adler32="+httpx.Adler32Of(v1) {
		t.Fatalf("PUT Digest = %q, want adler32=%s", d, httpx.Adler32Of(v1))
	}
	// The copy to the gated target has started and is held.
	select {
	case <-gated.started:
	case <-time.After(10 * time.Second):
		t.Fatal("migration did not start")
	}

	resp, body := get(t, srv.URL+p)
	if resp.StatusCode != 200 || !bytes.Equal(body, v1) {
		t.Fatalf("GET while pending = %d, %d bytes, want 200 and v1", resp.StatusCode, len(body))
	}
	etag := resp.Header.Get("Etag")
	resp, body = get(t, srv.URL+p, "Range", "bytes=1000-1999")
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, v1[1000:2000]) {
		t.Fatalf("ranged GET = %d, %d bytes, want 206 and bytes 1000-1999", resp.StatusCode, len(body))
	}
	if resp, _ = get(t, srv.URL+p, "If-None-Match", etag); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("GET If-None-Match = %d, want 304", resp.StatusCode)
	}
	if resp, _ = get(t, srv.URL+p, "Want-Digest", "adler32"); resp.Header.Get("Digest") != "adler32="+httpx.Adler32Of(v1) {
		t.Fatalf("GET Digest = %q", resp.Header.Get("Digest"))
	}
	hreq, _ := http.NewRequest(http.MethodHead, srv.URL+p, nil)
	hresp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != 200 || hresp.ContentLength != int64(len(v1)) {
		t.Fatalf("HEAD = %d, length %d, want 200 and %d", hresp.StatusCode, hresp.ContentLength, len(v1))
	}
	// PROPFIND of the file, and of its directory, which no target has yet.
	ms := propfind(t, srv.URL+p, "0")
	if !strings.Contains(ms, "<D:getcontentlength>300000<") {
		t.Fatalf("PROPFIND Depth 0 of the pending file:\n%s", ms)
	}
	ms = propfind(t, srv.URL+"/store/user/a", "1")
	if !strings.Contains(ms, "<D:href>/store/user/a/f.root</D:href>") {
		t.Fatalf("PROPFIND Depth 1 of its directory does not list it:\n%s", ms)
	}
	// The overlay sees it too, and says which version it reads.
	ov := b.Overlay(siteEp)
	in, err := ov.Stat(context.Background(), p)
	if err != nil || in.Size != int64(len(v1)) || in.Checksums["adler32"] != httpx.Adler32Of(v1) {
		t.Fatalf("Overlay Stat = %+v, %v", in, err)
	}
	rc, err := ov.Open(context.Background(), p, 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(rc)
	ver, ok := endpoint.VersionOf(rc)
	rc.Close()
	if !bytes.Equal(part, v1[10:30]) || !ok || ver.Size != int64(len(v1)) {
		t.Fatalf("Overlay Open = %d bytes, version %+v %v", len(part), ver, ok)
	}
	if sum, err := endpoint.Checksum(context.Background(), ov, p, "md5"); err != nil || len(sum) != 32 {
		t.Fatalf("Overlay Checksum md5 = %q, %v", sum, err)
	}
	items, err := ov.List(context.Background(), "/store/user/a")
	if err != nil || len(items) != 1 || items[0].Name != "f.root" {
		t.Fatalf("Overlay List = %+v, %v", items, err)
	}

	// A newer version while v1's copy is in flight: 204, and from now on
	// every read gives v2 until the end, through migration and
	// retirement.
	resp = put(t, srv.URL+p, v2)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT over a pending version = %d, want 204", resp.StatusCode)
	}
	stopReads := make(chan struct{})
	var reads, buffered, wrong atomic.Int64
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stopReads:
				return
			default:
			}
			resp, err := http.Get(srv.URL + p)
			if err != nil {
				wrong.Add(1)
				continue
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			reads.Add(1)
			if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, v2) {
				wrong.Add(1)
			}
			if resp.Header.Get("X-Lakefed-Buffered") != "" {
				buffered.Add(1)
			}
		}
	})
	close(gated.gate)
	testenv.Eventually(t, 15*time.Second, "v2 not migrated and retired", func() bool {
		st := b.Status()
		return st.Migrated >= 1 && st.HeldFiles == 0
	})
	// Reads after retirement come from the target.
	r0 := reads.Load()
	testenv.Eventually(t, 10*time.Second, "no reads after retirement", func() bool { return reads.Load() >= r0+3 })
	close(stopReads)
	readers.Wait()
	if wrong.Load() != 0 {
		t.Fatalf("%d of %d reads saw the file missing or with other bytes than v2", wrong.Load(), reads.Load())
	}
	if buffered.Load() == 0 || buffered.Load() == reads.Load() {
		t.Fatalf("%d of %d reads from the buffer: want some from the buffer and some from the target", buffered.Load(), reads.Load())
	}
	resp, body = get(t, srv.URL+p)
	if resp.StatusCode != 200 || !bytes.Equal(body, v2) || resp.Header.Get("X-Lakefed-Buffered") != "" {
		t.Fatalf("GET after retirement = %d, %d bytes, buffered %q; want v2 from the target", resp.StatusCode, len(body), resp.Header.Get("X-Lakefed-Buffered"))
	}
	if got := readFile(t, site.Dir, p); !bytes.Equal(got, v2) {
		t.Fatalf("storage target holds %d bytes, want v2", len(got))
	}
	if got := readFile(t, diskDir, p); !bytes.Equal(got, v2) {
		t.Fatalf("posix target holds %d bytes, want v2", len(got))
	}
	// v1's held copy was cancelled: only v2 ever landed on the gated target.
	if sums := gated.storedSums(); len(sums) != 1 || sums[0] != httpx.Adler32Of(v2) {
		t.Fatalf("gated target stored %v, want only v2 (%s)", sums, httpx.Adler32Of(v2))
	}
	hookMu.Lock()
	calls := hooked[p]
	hookMu.Unlock()
	if calls < 3 {
		t.Fatalf("the write hook was called %d times for %s, want 3: two PUTs and the retirement", calls, p)
	}
	if n := len(dirNames(t, filepath.Join(b.cfg.Dir, "data"))); n != 0 {
		t.Fatalf("%d spool files left after retirement", n)
	}
}

func propfind(t *testing.T, u, depth string) string {
	t.Helper()
	req, _ := http.NewRequest("PROPFIND", u, nil)
	req.Header.Set("Depth", depth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusMultiStatus {
		t.Fatalf("PROPFIND %s Depth %s = %d, want 207: %s", u, depth, resp.StatusCode, body)
	}
	return string(body)
}

// TestPropfindMerge: a directory the target has is listed with the
// buffered files merged in, the buffer's version winning.
func TestPropfindMerge(t *testing.T) {
	site, siteEp, next := storageTarget(t, "site")
	gated := &fake{Endpoint: siteEp, gate: make(chan struct{})}
	defer close(gated.gate)
	_, srv := start(t, Config{Prefixes: []Prefix{{Prefix: "/d", Targets: []endpoint.Endpoint{gated}}}}, next, Options{})
	if err := os.MkdirAll(filepath.Join(site.Dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(site.Dir, "d", "old"), []byte("on the target"), 0o644)
	os.WriteFile(filepath.Join(site.Dir, "d", "both"), []byte("old bytes"), 0o644)
	put(t, srv.URL+"/d/new", []byte("buffered only"))
	put(t, srv.URL+"/d/both", []byte("the newest version"))
	put(t, srv.URL+"/d/sub/deep", []byte("x"))
	ms := propfind(t, srv.URL+"/d", "1")
	for _, want := range []string{
		"<D:href>/d/old</D:href>", "<D:href>/d/new</D:href>", "<D:href>/d/sub/</D:href>",
		"<D:href>/d/both</D:href><D:propstat><D:prop><D:displayname>both</D:displayname><D:resourcetype/><D:getcontentlength>18<",
	} {
		if !strings.Contains(ms, want) {
			t.Errorf("PROPFIND Depth 1 lacks %s:\n%s", want, ms)
		}
	}
	if strings.Count(ms, "<D:href>/d/both</D:href>") != 1 {
		t.Errorf("a file both buffered and on the target is listed twice:\n%s", ms)
	}
}

// TestTargetDownThenUp: a target that is down keeps the file pending,
// with its failures visible (Status, metrics), retried with backoff; when
// it comes back the file migrates.
func TestTargetDownThenUp(t *testing.T) {
	disk, dir := newPosix(t, "disk")
	f := &fake{Endpoint: disk}
	f.down.Store(true)
	reg := prometheus.NewRegistry()
	b, srv := start(t, fastRetry(Config{KeepAfterMigration: time.Hour,
		Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{f}}}}), nil, Options{Registerer: reg})
	data := []byte("written while the target is down")
	if resp := put(t, srv.URL+"/x/f", data); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d", resp.StatusCode)
	}
	testenv.Eventually(t, 10*time.Second, "no repeated failures recorded", func() bool {
		st := b.Status()
		return len(st.Failures) == 1 && st.Failures[0].Attempts >= 3
	})
	st := b.Status()
	fl := st.Failures[0]
	if st.PendingFiles != 1 || fl.Target != "disk" || fl.Reason != "unavailable" || fl.Path != "/x/f" || fl.Error == "" {
		t.Fatalf("Status while down = %+v", st)
	}
	if n := counter(t, reg, "lakefed_buffer_failures_total", map[string]string{"target": "disk", "reason": "unavailable"}); n < 3 {
		t.Fatalf("failures_total{disk,unavailable} = %v, want >= 3", n)
	}
	if n := counter(t, reg, "lakefed_buffer_pending_files", nil); n != 1 {
		t.Fatalf("pending_files = %v, want 1", n)
	}
	if n := counter(t, reg, "lakefed_buffer_failing_files", nil); n != 1 {
		t.Fatalf("failing_files = %v, want 1", n)
	}
	firstFailing := counter(t, reg, "lakefed_buffer_oldest_failing_seconds", nil)
	if firstFailing <= 0 {
		t.Fatalf("oldest_failing_seconds = %v, want > 0", firstFailing)
	}
	// More files while it is down: the target is held off as a whole,
	// so it gets one probing copy per backoff, not one per file.
	for i := range 20 {
		put(t, fmt.Sprintf("%s/x/more%d", srv.URL, i), data)
	}
	// A copy starts with a look at the target (the condition of its
	// write), so a probe of a target that is down is a Stat.
	p0 := f.puts.Load() + f.stats.Load()
	time.Sleep(400 * time.Millisecond) // the window the probes are counted in
	// Backoff is 5 ms doubling to 40 ms with jitter: at most ~40 probes
	// in 400 ms with a few in parallel; 21 files each retrying on their
	// own would make hundreds.
	if n := f.puts.Load() + f.stats.Load() - p0; n > 60 || n == 0 {
		t.Fatalf("%d copies tried in 400 ms while the target was down, want a few probes", n)
	}
	if st := b.Status(); st.PendingFiles != 21 || st.Targets[0].DownUntil.IsZero() && st.Targets[0].Failures == 0 {
		t.Fatalf("Status while down = %+v", st)
	}
	// Counted from the first failure, not the latest (retries come
	// every 40 ms at most): what an alert on a migration failing for N
	// minutes needs.
	if n := counter(t, reg, "lakefed_buffer_oldest_failing_seconds", nil); n < firstFailing+0.4 {
		t.Fatalf("oldest_failing_seconds = %v after 400 ms more of failures, want >= %v", n, firstFailing+0.4)
	}
	f.down.Store(false)
	testenv.Eventually(t, 10*time.Second, "not migrated after the target came back", func() bool { return b.Status().PendingFiles == 0 })
	if got := readFile(t, dir, "/x/f"); !bytes.Equal(got, data) {
		t.Fatalf("target holds %q", got)
	}
	st = b.Status()
	if len(st.Failures) != 0 || st.Migrated != 21 || st.Targets[0].Bytes != 21*int64(len(data)) || st.Targets[0].Failures < 3 ||
		!st.Targets[0].DownUntil.IsZero() {
		t.Fatalf("Status after = %+v", st)
	}
	if n := counter(t, reg, "lakefed_buffer_migrated_bytes_total", map[string]string{"target": "disk"}); n != 21*float64(len(data)) {
		t.Fatalf("migrated_bytes_total = %v", n)
	}
	for _, name := range []string{"lakefed_buffer_failing_files", "lakefed_buffer_oldest_failing_seconds", "lakefed_buffer_max_bytes"} {
		if n := counter(t, reg, name, nil); n != 0 {
			t.Errorf("%s after the migration = %v, want 0", name, n)
		}
	}
}

// TestBadTarget: a target that corrupts or truncates what it receives,
// and says nothing (the buffer reads the copy back) or offers its own
// adler32 (transfer compares it): verification catches each bad copy, it
// is sent again, and the file is marked migrated only with the right
// bytes there.
func TestBadTarget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   string
		sums   bool
		reason string
	}{
		{"corrupt, read back", "corrupt", false, "verify_adler32"},
		{"truncate, read back", "truncate", false, "verify_size"},
		{"corrupt, target's adler32", "corrupt", true, "verify_adler32"},
		{"truncate, target's adler32", "truncate", true, "verify_adler32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk, dir := newPosix(t, "disk")
			f := &fake{Endpoint: disk}
			if tc.mode == "corrupt" {
				f.corrupt.Store(2)
			} else {
				f.truncate.Store(2)
			}
			var target endpoint.Endpoint = f
			if tc.sums {
				target = summing{f}
			}
			reg := prometheus.NewRegistry()
			b, srv := start(t, fastRetry(Config{KeepAfterMigration: time.Hour,
				Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{target}}}}), nil, Options{Registerer: reg})
			data := randBytes(rand.New(rand.NewPCG(3, 4)), 100_000)
			put(t, srv.URL+"/f", data)
			testenv.Eventually(t, 10*time.Second, "not migrated", func() bool { return b.Status().PendingFiles == 0 })
			if got := readFile(t, dir, "/f"); !bytes.Equal(got, data) {
				t.Fatalf("target holds %d bytes, not the file", len(got))
			}
			if n := f.puts.Load(); n != 3 {
				t.Fatalf("%d Puts, want 3 (two bad copies sent again)", n)
			}
			if n := counter(t, reg, "lakefed_buffer_failures_total", map[string]string{"target": "disk", "reason": tc.reason}); n != 2 {
				t.Fatalf("failures_total{disk,%s} = %v, want 2", tc.reason, n)
			}
		})
	}
}

// TestFull: with the length known, a PUT that does not fit is refused
// with 507 before a byte of its body is read, or sent with 307 to the
// first target that can take clients (when_full: direct); one of unknown
// length that outgrows the space fails cleanly (507, nothing kept,
// nothing journaled); migrated files are retired early to make room.
func TestFull(t *testing.T) {
	t.Run("reject", func(t *testing.T) {
		disk, _ := newPosix(t, "disk")
		gated := &fake{Endpoint: disk, gate: make(chan struct{})}
		defer close(gated.gate)
		b, srv := start(t, Config{MaxBytes: 1000, Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{gated}}}}, nil, Options{})
		if resp := put(t, srv.URL+"/a", make([]byte, 600)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT 600 of 1000 = %d", resp.StatusCode)
		}
		// Unknown length that fits: taken, though less than a growth
		// chunk is left.
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/small", io.MultiReader(bytes.NewReader(make([]byte, 300))))
		req.ContentLength = -1
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("chunked PUT of 300 = %v %v, want 201", resp, err)
		}
		body := &countingReader{r: bytes.NewReader(make([]byte, 600))}
		req = httptest.NewRequest(http.MethodPut, "/b", body)
		req.ContentLength = 600
		rec := httptest.NewRecorder()
		b.Wrap(http.NotFoundHandler()).ServeHTTP(rec, req)
		if rec.Code != http.StatusInsufficientStorage || body.n.Load() != 0 {
			t.Fatalf("PUT 600 more = %d after reading %d bytes, want 507 before reading", rec.Code, body.n.Load())
		}
		// Unknown length: streams, outgrows, fails clean.
		req, _ = http.NewRequest(http.MethodPut, srv.URL+"/c", io.MultiReader(bytes.NewReader(make([]byte, 20<<20))))
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusInsufficientStorage {
				t.Fatalf("chunked PUT over the limit = %d, want 507", resp.StatusCode)
			}
		}
		st := b.Status()
		if st.HeldFiles != 2 || st.UsedBytes != 900 {
			t.Fatalf("after refusals: %+v, want two files of 900 bytes", st)
		}
		if n := dirNames(t, filepath.Join(b.cfg.Dir, "tmp")); len(n) != 0 {
			t.Fatalf("tmp holds %v after the failed upload", n)
		}
		if n := dirNames(t, filepath.Join(b.cfg.Dir, "data")); len(n) != 2 {
			t.Fatalf("data holds %v, want two files", n)
		}
		if resp, _ := get(t, srv.URL+"/c"); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET of the refused file = %d, want 404", resp.StatusCode)
		}
	})
	t.Run("direct", func(t *testing.T) {
		site, siteEp, _ := storageTarget(t, "site")
		_, srv := start(t, Config{MaxBytes: 1000, WhenFull: WhenFullDirect,
			Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{siteEp}}}}, nil, Options{})
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/big", bytes.NewReader(make([]byte, 2000)))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != site.URL+"big" {
			t.Fatalf("PUT over the limit = %d Location %q, want 307 to %sbig", resp.StatusCode, resp.Header.Get("Location"), site.URL)
		}
		// The redirect works: the client's own PUT lands on the target.
		if resp := put(t, srv.URL+"/big", make([]byte, 2000)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT following the redirect = %d", resp.StatusCode)
		}
		if fi, err := os.Stat(filepath.Join(site.Dir, "big")); err != nil || fi.Size() != 2000 {
			t.Fatalf("target after the redirected PUT: %v %v", fi, err)
		}
	})
	t.Run("direct without a redirect URL", func(t *testing.T) {
		disk, _ := newPosix(t, "disk")
		_, srv := start(t, Config{MaxBytes: 10, WhenFull: WhenFullDirect,
			Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{disk}}}}, nil, Options{})
		if resp := put(t, srv.URL+"/big", make([]byte, 20)); resp.StatusCode != http.StatusInsufficientStorage {
			t.Fatalf("PUT = %d, want 507 (a posix target has no URL)", resp.StatusCode)
		}
	})
	t.Run("retire early for room", func(t *testing.T) {
		disk, dir := newPosix(t, "disk")
		b, srv := start(t, Config{MaxBytes: 1000, KeepAfterMigration: time.Hour,
			Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{disk}}}}, nil, Options{})
		put(t, srv.URL+"/a", bytes.Repeat([]byte("a"), 600))
		testenv.Eventually(t, 10*time.Second, "not migrated", func() bool { return b.Status().PendingFiles == 0 })
		if st := b.Status(); st.HeldFiles != 1 {
			t.Fatalf("the migrated file is not kept: %+v", st)
		}
		if resp := put(t, srv.URL+"/b", bytes.Repeat([]byte("b"), 600)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT needing the kept file's room = %d, want 201", resp.StatusCode)
		}
		if st := b.Status(); st.HeldFiles != 1 || st.UsedBytes != 600 {
			t.Fatalf("after early retirement: %+v", st)
		}
		if got := readFile(t, dir, "/a"); len(got) != 600 {
			t.Fatalf("retired file not on the target: %d bytes", len(got))
		}
	})
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestRefusedPuts: what the storage role refuses, the buffer refuses,
// keeping nothing.
func TestRefusedPuts(t *testing.T) {
	disk, _ := newPosix(t, "disk")
	b, srv := start(t, Config{Prefixes: []Prefix{{Prefix: "/in", Targets: []endpoint.Endpoint{disk}}}}, nil, Options{})
	data := []byte("hello buffer")
	sum := md5.Sum(data)
	for _, tc := range []struct {
		name string
		hdr  []string
		code int
	}{
		{"adler32 mismatch", []string{"Digest", "adler32=00000001"}, 400},
		{"md5 mismatch", []string{"Content-MD5", base64.StdEncoding.EncodeToString(make([]byte, 16))}, 400},
		{"malformed digest", []string{"Digest", "adler32=xyz"}, 400},
		{"Content-Range", []string{"Content-Range", "bytes 0-11/12"}, 400},
		{"md5 matches", []string{"Content-MD5", base64.StdEncoding.EncodeToString(sum[:]), "Want-Digest", "md5"}, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := put(t, srv.URL+"/in/"+strings.ReplaceAll(tc.name, " ", "-"), data, tc.hdr...)
			if resp.StatusCode != tc.code {
				t.Fatalf("PUT = %d, want %d", resp.StatusCode, tc.code)
			}
			if tc.code == 201 && !strings.Contains(resp.Header.Get("Digest"), "md5="+base64.StdEncoding.EncodeToString(sum[:])) {
				t.Fatalf("Digest = %q, want the md5 too", resp.Header.Get("Digest"))
			}
		})
	}
	// A body shorter than its Content-Length.
	req := httptest.NewRequest(http.MethodPut, "/in/short", bytes.NewReader(data[:5]))
	req.ContentLength = int64(len(data))
	rec := httptest.NewRecorder()
	b.Wrap(http.NotFoundHandler()).ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("short body = %d, want 400", rec.Code)
	}
	// A file in the way of a directory, and a directory in the way of a file.
	if resp := put(t, srv.URL+"/in/md5-matches/child", data); resp.StatusCode != http.StatusConflict {
		t.Fatalf("PUT under a buffered file = %d, want 409", resp.StatusCode)
	}
	put(t, srv.URL+"/in/dir/f", data)
	if resp := put(t, srv.URL+"/in/dir", data); resp.StatusCode != http.StatusConflict {
		t.Fatalf("PUT onto a buffered directory = %d, want 409", resp.StatusCode)
	}
	// Outside the prefixes: next's, untouched.
	if resp := put(t, srv.URL+"/elsewhere", data); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("PUT outside the prefixes = %d, want next's 404", resp.StatusCode)
	}
	if resp := put(t, srv.URL+"/inside", data); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("PUT to /inside (not under /in) = %d, want next's 404", resp.StatusCode)
	}
	testenv.Eventually(t, 10*time.Second, "not migrated", func() bool { return b.Status().PendingFiles == 0 })
	if n := b.Status().Migrated; n != 2 {
		t.Fatalf("%d files migrated, want the 2 accepted", n)
	}
	if n := dirNames(t, filepath.Join(b.cfg.Dir, "tmp")); len(n) != 0 {
		t.Fatalf("tmp holds %v", n)
	}
}

// TestRecover: files acknowledged by a buffer that stopped before
// migrating them are there after New, with the leftovers of uploads in
// progress removed, and migrate once it runs.
func TestRecover(t *testing.T) {
	dir := t.TempDir()
	disk, target := newPosix(t, "disk")
	cfg := Config{Dir: dir, Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{disk}}}}
	b1, err := New(context.Background(), cfg, Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), cfg, Options{Log: quiet}); !errors.Is(err, ErrInUse) {
		t.Fatalf("a second New on the same dir = %v, want ErrInUse", err)
	}
	srv := httptest.NewServer(b1.Wrap(http.NotFoundHandler()))
	files := map[string][]byte{"/a": []byte("one"), "/b/c": []byte("two"), "/b/d": {}}
	for p, data := range files {
		if resp := put(t, srv.URL+p, data); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %s = %d", p, resp.StatusCode)
		}
	}
	srv.Close()
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	// What a crash mid-upload and between rename and commit leave.
	os.WriteFile(filepath.Join(dir, "tmp", "put-123"), []byte("half"), 0o644)
	os.WriteFile(filepath.Join(dir, "data", "0123456789abcdef01234567"), []byte("never journaled"), 0o644)

	b2, _ := start(t, cfg, nil, Options{})
	testenv.Eventually(t, 10*time.Second, "recovered files not migrated", func() bool { return b2.Status().Migrated == 3 })
	for p, data := range files {
		if got := readFile(t, target, p); !bytes.Equal(got, data) {
			t.Fatalf("%s on the target = %q, want %q", p, got, data)
		}
	}
	if n := dirNames(t, filepath.Join(dir, "tmp")); len(n) != 0 {
		t.Fatalf("tmp holds %v after recovery", n)
	}
	testenv.Eventually(t, 5*time.Second, "spool not emptied", func() bool { return len(dirNames(t, filepath.Join(dir, "data"))) == 0 })
}

// TestFailingAfterRestart: a file whose migration was failing when the
// process stopped is failing again when it starts, and its age counts
// from its first failure, not from the restart: an alert on a file that
// has been failing for an hour must not fall silent because the process
// restarted.
func TestFailingAfterRestart(t *testing.T) {
	dir := t.TempDir()
	disk, _ := newPosix(t, "disk")
	f := &fake{Endpoint: disk}
	f.down.Store(true)
	cfg := fastRetry(Config{Dir: dir, Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{f}}}})
	b1, err := New(context.Background(), cfg, Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b1.Run(ctx) }()
	srv := httptest.NewServer(b1.Wrap(http.NotFoundHandler()))
	put(t, srv.URL+"/a", []byte("one"))
	// The journal records the 1st and the 2nd failure; seeing the 3rd
	// means the 2nd was written.
	testenv.Eventually(t, 10*time.Second, "three failed attempts", func() bool {
		st := b1.Status()
		return len(st.Failures) == 1 && st.Failures[0].Attempts >= 3
	})
	srv.Close()
	cancel()
	<-done
	// How long it had failed, and when that was said: after the restart
	// it has failed at least that long plus the time since.
	before, at := b1.Status().OldestFailingSeconds, time.Now()
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := New(context.Background(), cfg, Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	atLeast := before + time.Since(at).Seconds()
	st := b2.Status()
	if st.FailingFiles != 1 || st.OldestFailingSeconds < atLeast {
		t.Fatalf("after a restart: failing_files %d, oldest_failing_seconds %v; want 1, at least %v (counted from the first failure)",
			st.FailingFiles, st.OldestFailingSeconds, atLeast)
	}
}

// TestJournalWithoutFailingSince: a journal written before it kept the
// time of failures opens, and its failing files count from the start.
func TestJournalWithoutFailingSince(t *testing.T) {
	file := filepath.Join(t.TempDir(), "journal.db")
	j, err := openJournal(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	// The table as it was: every column but failing_since.
	for _, q := range []string{
		"DROP TABLE targets", "DROP TABLE files",
		`CREATE TABLE files (seq INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL, spool TEXT NOT NULL UNIQUE,
			size INTEGER NOT NULL, adler32 TEXT NOT NULL, md5 TEXT NOT NULL DEFAULT '', mtime INTEGER NOT NULL,
			state INTEGER NOT NULL, migrated_at INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,
			last_error TEXT NOT NULL DEFAULT '')`,
		"INSERT INTO files (path, spool, size, adler32, mtime, state, attempts, last_error) VALUES ('/a', 's1', 3, '0', 0, 0, 2, 'down')",
	} {
		if _, err := j.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	j.close()
	if j, err = openJournal(context.Background(), file); err != nil {
		t.Fatal(err)
	}
	defer j.close()
	rows, err := j.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].lastErr != "down" || !rows[0].failingSince.IsZero() {
		t.Fatalf("rows %+v, want one failing row with no time", rows)
	}
	since := time.Now().Truncate(time.Microsecond)
	if err := j.failed(context.Background(), rows[0].seq, 3, "down", since); err != nil {
		t.Fatal(err)
	}
	if rows, err = j.load(context.Background()); err != nil || !rows[0].failingSince.Equal(since) {
		t.Fatalf("failing since %v (%v), want %v", rows[0].failingSince, err, since)
	}
}

// TestStatusHandler: /api/buffer gives the figures and the history.
func TestStatusHandler(t *testing.T) {
	disk, _ := newPosix(t, "disk")
	f := &fake{Endpoint: disk}
	f.down.Store(true)
	b, srv := start(t, fastRetry(Config{Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{f}}}}), nil, Options{})
	put(t, srv.URL+"/a", make([]byte, 1234))
	testenv.Eventually(t, 10*time.Second, "no failure", func() bool { return len(b.Status().Failures) > 0 })
	rec := httptest.NewRecorder()
	b.StatusHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/buffer", nil))
	var got struct {
		Status
		History []Sample `json:"history"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if got.PendingFiles != 1 || got.PendingBytes != 1234 || got.OldestPendingSeconds <= 0 || len(got.Failures) != 1 ||
		len(got.Targets) != 1 || got.Targets[0].Name != "disk" || len(got.History) == 0 {
		t.Fatalf("/api/buffer = %s", rec.Body)
	}
	rec = httptest.NewRecorder()
	b.StatusHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/buffer", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /api/buffer = %d", rec.Code)
	}
}

// TestDelete: a DELETE of a pending file drops it (it never migrates)
// and answers 204 though no target has it.
func TestDelete(t *testing.T) {
	disk, dir := newPosix(t, "disk")
	gated := &fake{Endpoint: disk, gate: make(chan struct{})}
	b, srv := start(t, Config{Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{gated}}}}, nil, Options{})
	put(t, srv.URL+"/f", []byte("soon deleted"))
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/f", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %d, want 204", resp.StatusCode)
	}
	close(gated.gate)
	if resp, _ := get(t, srv.URL+"/f"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET after DELETE = %d", resp.StatusCode)
	}
	testenv.Eventually(t, 5*time.Second, "every copy to the target returned", func() bool { return gated.returned.Load() == gated.puts.Load() })
	if _, err := os.Stat(filepath.Join(dir, "f")); !os.IsNotExist(err) {
		t.Fatalf("the deleted file reached the target: %v", err)
	}
	if st := b.Status(); st.HeldFiles != 0 {
		t.Fatalf("Status after DELETE: %+v", st)
	}
}

// TestConfig: every problem at once.
func TestConfig(t *testing.T) {
	disk, _ := newPosix(t, "disk")
	_, err := New(context.Background(), Config{WhenFull: "drop", MaxBytes: -1,
		Prefixes: []Prefix{{Prefix: "rel"}, {Prefix: "/x", Targets: []endpoint.Endpoint{disk}}}}, Options{Log: quiet})
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("New = %v, want ErrConfig", err)
	}
	for _, want := range []string{"dir is empty", "max_bytes", "when_full", `prefix "rel" is not`, `prefix "rel" has no targets`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestConditionalPut: If-None-Match: * and If-Match are evaluated against
// the buffered version, else against what the first target holds.
func TestConditionalPut(t *testing.T) {
	disk, dir := newPosix(t, "disk")
	gated := &fake{Endpoint: disk, gate: make(chan struct{})}
	defer close(gated.gate)
	_, srv := start(t, Config{Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{gated}}}}, nil, Options{})
	os.WriteFile(filepath.Join(dir, "remote"), []byte("on the target"), 0o644)
	resp := put(t, srv.URL+"/new", []byte("1"), "If-None-Match", "*")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create-only PUT of a new path = %d, want 201", resp.StatusCode)
	}
	etag := resp.Header.Get("Etag")
	for _, tc := range []struct {
		path, hdr, val string
		want           int
	}{
		{"/new", "If-None-Match", "*", http.StatusPreconditionFailed},
		{"/remote", "If-None-Match", "*", http.StatusPreconditionFailed},
		{"/new", "If-Match", `"other"`, http.StatusPreconditionFailed},
		{"/new", "If-Match", etag, http.StatusNoContent},
	} {
		if resp := put(t, srv.URL+tc.path, []byte("2"), tc.hdr, tc.val); resp.StatusCode != tc.want {
			t.Errorf("PUT %s %s: %s = %d, want %d", tc.path, tc.hdr, tc.val, resp.StatusCode, tc.want)
		}
	}
}

// TestConditionalPutRace: of concurrent PUTs with If-None-Match: * of
// one new path exactly one is stored, and of concurrent PUTs with the
// same If-Match exactly one wins.
func TestConditionalPutRace(t *testing.T) {
	disk, _ := newPosix(t, "disk")
	gated := &fake{Endpoint: disk, gate: make(chan struct{})}
	defer close(gated.gate)
	_, srv := start(t, Config{Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{gated}}}}, nil, Options{})
	race := func(path, hdr, val string) (codes map[int]int) {
		codes = map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				resp := put(t, srv.URL+path, bytes.Repeat([]byte{byte('a' + i)}, 200000), hdr, val)
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			})
		}
		wg.Wait()
		return codes
	}
	if c := race("/inm", "If-None-Match", "*"); c[http.StatusCreated] != 1 || c[http.StatusPreconditionFailed] != 7 {
		t.Errorf("8 racing If-None-Match: * PUTs = %v, want one 201 and seven 412", c)
	}
	etag := put(t, srv.URL+"/im", []byte("base"), "X-Nothing", "").Header.Get("Etag")
	if c := race("/im", "If-Match", etag); c[http.StatusNoContent] != 1 || c[http.StatusPreconditionFailed] != 7 {
		t.Errorf("8 racing If-Match PUTs = %v, want one 204 and seven 412", c)
	}
}

// TestOverlayPut: a Put through the Overlay under a buffered prefix is a
// buffered write (readable at once, migrated later); elsewhere, and when
// full with when_full: direct, it goes to origin; full otherwise is
// ErrUnavailable with nothing kept.
func TestOverlayPut(t *testing.T) {
	ctx := context.Background()
	origin, originDir := newPosix(t, "origin")
	gated := &fake{Endpoint: origin, gate: make(chan struct{})}
	b, srv := start(t, Config{MaxBytes: 100, Prefixes: []Prefix{{Prefix: "/buf", Targets: []endpoint.Endpoint{gated}}}}, nil, Options{})
	ov := b.Overlay(origin)
	if err := ov.Put(ctx, "/buf/f", strings.NewReader("via the door"), 12); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(originDir, "buf", "f")); !os.IsNotExist(err) {
		t.Fatalf("buffered Put reached origin before migration: %v", err)
	}
	if resp, body := get(t, srv.URL+"/buf/f"); resp.StatusCode != 200 || string(body) != "via the door" {
		t.Fatalf("GET of the door's write = %d %q", resp.StatusCode, body)
	}
	if err := ov.Put(ctx, "/buf/big", bytes.NewReader(make([]byte, 200)), 200); !errors.Is(err, endpoint.ErrUnavailable) {
		t.Fatalf("Put over the limit = %v, want ErrUnavailable", err)
	}
	if err := ov.Put(ctx, "/other", strings.NewReader("direct"), 6); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, originDir, "/other"); string(got) != "direct" {
		t.Fatalf("Put outside the prefixes: origin holds %q", got)
	}
	close(gated.gate)
	testenv.Eventually(t, 10*time.Second, "not migrated", func() bool { return b.Status().PendingFiles == 0 })
	if got := readFile(t, originDir, "/buf/f"); string(got) != "via the door" {
		t.Fatalf("after migration origin holds %q", got)
	}
	if st := b.Status(); st.Migrated != 1 {
		t.Fatalf("Status = %+v, want one migrated (the refused Put kept nothing)", st)
	}
}

// A name lakefed's servers keep for themselves is refused up front, not
// acknowledged and then refused by the target forever.
func TestReservedNameRefused(t *testing.T) {
	disk, _ := newPosix(t, "disk")
	_, srv := start(t, Config{Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{disk}}}}, nil, Options{})
	if resp := put(t, srv.URL+"/a/.lakefed-upload-x", []byte("x")); resp.StatusCode != http.StatusForbidden {
		t.Errorf("PUT of a reserved name = %d, want 403", resp.StatusCode)
	}
}

// TestNameTargetsRefuse: a name that is not UTF-8 is refused at once by
// the storage role's own rule (httpx.CleanPath), not acknowledged and
// then refused by the target forever; a UTF-8 name that is not ASCII is
// taken and migrates.
func TestNameTargetsRefuse(t *testing.T) {
	site, siteEp, next := storageTarget(t, "site")
	b, srv := start(t, fastRetry(Config{Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{siteEp}}}}), next, Options{})
	if resp := put(t, srv.URL+"/d/%FF.root", []byte("latin-1 name")); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("PUT of a name that is not UTF-8 = %d, want 400", resp.StatusCode)
	}
	if st := b.Status(); st.HeldFiles != 0 {
		t.Errorf("after the refused PUT the buffer holds %d files, want 0", st.HeldFiles)
	}
	if resp := put(t, srv.URL+"/d/%C3%A9t%C3%A9.root", []byte("utf-8 name")); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT of a UTF-8 name = %d, want 201", resp.StatusCode)
	}
	testenv.Eventually(t, 10*time.Second, "the UTF-8 name did not migrate", func() bool { return b.Status().PendingFiles == 0 })
	if got := readFile(t, site.Dir, "/d/été.root"); string(got) != "utf-8 name" {
		t.Errorf("target holds %q", got)
	}
}

// A MOVE from or to a buffered prefix, or of a directory above one, is
// refused (403) before next sees it: a file there may be only in the
// buffer, and the move would act on an older copy on a target, or put
// the file on an endpoint the buffer never migrates to. Elsewhere a
// MOVE is next's.
func TestMoveRefusedUnderPrefix(t *testing.T) {
	_, siteEp, next := storageTarget(t, "site")
	_, srv := start(t, fastRetry(Config{Prefixes: []Prefix{{Prefix: "/out", Targets: []endpoint.Endpoint{siteEp}}}}), next, Options{})
	move := func(from, to string) int {
		t.Helper()
		req, _ := http.NewRequest("MOVE", srv.URL+from, nil)
		req.Header.Set("Destination", srv.URL+to)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range [][2]string{{"/elsewhere/f", "/out/f"}, {"/out/f", "/elsewhere/f"}, {"/", "/x"}, {"/elsewhere", "/out/d"}} {
		if code := move(c[0], c[1]); code != http.StatusForbidden {
			t.Errorf("MOVE %s to %s = %d, want 403", c[0], c[1], code)
		}
	}
	if code := move("/elsewhere/f", "/outside/f"); code == http.StatusForbidden {
		t.Errorf("MOVE outside the buffered prefix = %d: the buffer refused it", code)
	}
}
