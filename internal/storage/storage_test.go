package storage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/keptsum"
	"github.com/lakefed/lakefed/internal/testenv"
)

// testServer is a storage server on a real 127.0.0.1:0 listener.
type testServer struct {
	s    *Server
	url  string // "http://127.0.0.1:PORT" without trailing slash
	host string // 127.0.0.1:PORT
	root string
}

func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	return startHooked(t, cfg, nil)
}

// startHooked is startServer with hooks set before the server serves.
func startHooked(t testing.TB, cfg Config, h *testHooks) *testServer {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	s, err := newServer(cfg, slog.New(slog.DiscardHandler), h)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after cancel, want nil", err)
		}
		s.Close()
	})
	return &testServer{s: s, url: strings.TrimSuffix(s.URL(ln.Addr()), "/"), host: ln.Addr().String(), root: cfg.Root}
}

// do sends one request and returns the response with its body read.
func (ts *testServer) do(t testing.TB, method, path string, body io.Reader, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, string(b)
}

func (ts *testServer) write(t testing.TB, name, content string, mtime time.Time) {
	t.Helper()
	p := filepath.Join(ts.root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

func wantStatus(t testing.TB, resp *http.Response, body string, code int) {
	t.Helper()
	if resp.StatusCode != code {
		t.Fatalf("%s %s = %d (%q), want %d", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, body, code)
	}
}

// noTemps fails if an upload temp file is left anywhere under root.
func noTemps(t testing.TB, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == keptsum.Dir && filepath.Dir(p) == filepath.Clean(root) {
			return filepath.SkipDir // kept checksums (checksum.go), not temp files
		}
		if err == nil && strings.HasPrefix(d.Name(), reservedPrefix) {
			t.Errorf("temp file left behind: %s", p)
		}
		return nil
	})
}

const content = "0123456789abcdefghijklmnopqrstuvwxyz"

func TestGetHeadRanges(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "dir/f.dat", content, time.Time{})

	resp, body := ts.do(t, "GET", "/dir/f.dat", nil)
	wantStatus(t, resp, body, 200)
	if body != content {
		t.Errorf("GET body = %q, want %q", body, content)
	}
	for _, h := range []string{"Etag", "Last-Modified"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("GET: no %s header", h)
		}
	}
	if got := resp.Header.Get("Accept-Ranges"); got != "bytes" {
		t.Errorf("Accept-Ranges = %q, want bytes", got)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/octet-stream" {
		t.Errorf("Content-Type = %q, want application/octet-stream", got)
	}

	resp, body = ts.do(t, "HEAD", "/dir/f.dat", nil)
	wantStatus(t, resp, body, 200)
	if resp.ContentLength != int64(len(content)) || body != "" {
		t.Errorf("HEAD: Content-Length %d body %q, want %d and empty", resp.ContentLength, body, len(content))
	}

	resp, body = ts.do(t, "GET", "/dir/f.dat", nil, "Range", "bytes=2-5")
	wantStatus(t, resp, body, 206)
	if body != "2345" || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 2-5/%d", len(content)) {
		t.Errorf("Range 2-5: %q %q", body, resp.Header.Get("Content-Range"))
	}
	resp, body = ts.do(t, "GET", "/dir/f.dat", nil, "Range", "bytes=-3")
	wantStatus(t, resp, body, 206)
	if body != "xyz" {
		t.Errorf("Range -3 = %q, want xyz", body)
	}

	resp, body = ts.do(t, "GET", "/dir/f.dat", nil, "Range", "bytes=0-1,10-11")
	wantStatus(t, resp, body, 206)
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" {
		t.Fatalf("multi-range Content-Type = %q, want multipart/byteranges", resp.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(strings.NewReader(body), params["boundary"])
	var parts []string
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(p)
		parts = append(parts, p.Header.Get("Content-Range")+"="+string(b))
	}
	want := fmt.Sprintf("bytes 0-1/%d=01,bytes 10-11/%d=ab", len(content), len(content))
	if strings.Join(parts, ",") != want {
		t.Errorf("multi-range parts = %v, want %s", parts, want)
	}

	// "items=0-1" (a unit the server does not know) is ignored, not
	// refused: TestGetRangeEdges.
	for _, rg := range []string{"bytes=100-200", "bytes=abc", "bytes=5-1"} {
		resp, body = ts.do(t, "GET", "/dir/f.dat", nil, "Range", rg)
		wantStatus(t, resp, body, 416)
		if got := resp.Header.Get("Content-Range"); got != fmt.Sprintf("bytes */%d", len(content)) {
			t.Errorf("Range %q: Content-Range = %q, want bytes */%d", rg, got, len(content))
		}
	}

	resp, body = ts.do(t, "GET", "/nope", nil)
	wantStatus(t, resp, body, 404)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || strings.Count(body, "\n") != 1 {
		t.Errorf("404: Content-Type %q body %q, want a one-line text/plain reason", resp.Header.Get("Content-Type"), body)
	}
}

func TestConditionals(t *testing.T) {
	ts := startServer(t, Config{})
	mtime := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	ts.write(t, "f", content, mtime)
	resp, _ := ts.do(t, "HEAD", "/f", nil)
	tag := resp.Header.Get("Etag")
	before := mtime.Add(-time.Hour).Format(http.TimeFormat)
	after := mtime.Add(time.Hour).Format(http.TimeFormat)

	cases := []struct {
		name   string
		method string
		hdr    []string
		want   int
	}{
		{"if-none-match hit", "GET", []string{"If-None-Match", tag}, 304},
		{"if-none-match weak hit", "HEAD", []string{"If-None-Match", "W/" + tag}, 304},
		{"if-none-match list", "GET", []string{"If-None-Match", `"x", ` + tag}, 304},
		{"if-none-match star", "GET", []string{"If-None-Match", "*"}, 304},
		{"if-none-match miss", "GET", []string{"If-None-Match", `"other"`}, 200},
		{"if-match hit", "GET", []string{"If-Match", tag}, 200},
		{"if-match weak is no match", "GET", []string{"If-Match", "W/" + tag}, 412},
		{"if-match miss", "HEAD", []string{"If-Match", `"other"`}, 412},
		{"if-modified-since later", "GET", []string{"If-Modified-Since", after}, 304},
		{"if-modified-since earlier", "GET", []string{"If-Modified-Since", before}, 200},
		{"if-unmodified-since earlier", "GET", []string{"If-Unmodified-Since", before}, 412},
		{"if-unmodified-since later", "GET", []string{"If-Unmodified-Since", after}, 200},
		{"if-range etag hit", "GET", []string{"Range", "bytes=0-1", "If-Range", tag}, 206},
		{"if-range etag miss", "GET", []string{"Range", "bytes=0-1", "If-Range", `"other"`}, 200},
		{"if-range date", "GET", []string{"Range", "bytes=0-1", "If-Range", mtime.Format(http.TimeFormat)}, 206},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := ts.do(t, c.method, "/f", nil, c.hdr...)
			if resp.StatusCode != c.want {
				t.Errorf("%s with %v = %d (%q), want %d", c.method, c.hdr, resp.StatusCode, body, c.want)
			}
			if c.want == 304 && resp.Header.Get("Etag") != tag {
				t.Errorf("304 Etag = %q, want %q", resp.Header.Get("Etag"), tag)
			}
		})
	}
}

func TestDigestCached(t *testing.T) {
	ts := startServer(t, Config{})
	old := time.Now().Add(-time.Hour)
	ts.write(t, "w", "Wikipedia", old)
	computed := func() float64 { return counterValue(ts.s.m.computed) }

	resp, body := ts.do(t, "GET", "/w", nil, "Want-Digest", "adler32")
	wantStatus(t, resp, body, 200)
	if got := resp.Header.Get("Digest"); got != "adler32=11e60398" {
		t.Fatalf("GET Digest = %q, want adler32=11e60398", got)
	}
	if computed() != 1 {
		t.Fatalf("checksums computed = %v after the first request, want 1", computed())
	}
	resp, _ = ts.do(t, "HEAD", "/w", nil, "Want-Digest", "adler32")
	if got := resp.Header.Get("Digest"); got != "adler32=11e60398" {
		t.Errorf("HEAD Digest = %q, want adler32=11e60398", got)
	}
	if computed() != 1 {
		t.Errorf("checksums computed = %v after a repeat request, want 1 (cached)", computed())
	}

	md5sum := md5.Sum([]byte("Wikipedia"))
	resp, _ = ts.do(t, "HEAD", "/w", nil, "Want-Digest", "md5;q=0.5, crc32c")
	want := "crc32c=" + crc32cHex("Wikipedia") + ",md5=" + base64.StdEncoding.EncodeToString(md5sum[:])
	if got := resp.Header.Get("Digest"); got != want {
		t.Errorf("Digest = %q, want %q", got, want)
	}

	// Same size, new content and mtime: the cached value must not be used.
	ts.write(t, "w", "Wikipedie", old.Add(time.Minute))
	resp, _ = ts.do(t, "GET", "/w", nil, "Want-Digest", "adler32")
	if got, want := resp.Header.Get("Digest"), "adler32="+adlerHex("Wikipedie"); got != want {
		t.Errorf("Digest after change = %q, want %q", got, want)
	}

	// A file just written is read once its ctime has settled
	// (checksum.go), then its sum is kept like any other.
	ts.write(t, "fresh", "Wikipedia", time.Time{})
	n := computed()
	for range 2 {
		resp, _ = ts.do(t, "HEAD", "/fresh", nil, "Want-Digest", "adler32")
		if got := resp.Header.Get("Digest"); got != "adler32=11e60398" {
			t.Errorf("fresh Digest = %q", got)
		}
	}
	if computed() != n+1 {
		t.Errorf("fresh file computed %v times, want 1 (kept once settled)", computed()-n)
	}
}

func TestPut(t *testing.T) {
	ts := startServer(t, Config{MaxUpload: 1 << 20})
	computed := func() float64 { return counterValue(ts.s.m.computed) }

	resp, body := ts.do(t, "PUT", "/a/b/c.dat", strings.NewReader(content))
	wantStatus(t, resp, body, 201)
	if b, _ := os.ReadFile(filepath.Join(ts.root, "a/b/c.dat")); string(b) != content {
		t.Errorf("stored %q, want %q", b, content)
	}
	resp, body = ts.do(t, "PUT", "/a/b/c.dat", strings.NewReader("Wikipedia"))
	wantStatus(t, resp, body, 204)
	resp, _ = ts.do(t, "GET", "/a/b/c.dat", nil, "Want-Digest", "adler32")
	if got := resp.Header.Get("Digest"); got != "adler32=11e60398" {
		t.Errorf("Digest after PUT = %q, want adler32=11e60398", got)
	}
	if computed() != 0 {
		t.Errorf("GET after PUT computed a checksum (%v): PUT should have stored it", computed())
	}

	// Digest or Content-MD5 that does not match: 400, old content stays.
	bad := [][]string{
		{"Digest", "adler32=00000001"},
		{"Digest", "md5=" + base64.StdEncoding.EncodeToString(make([]byte, 16))},
		{"Content-MD5", base64.StdEncoding.EncodeToString(make([]byte, 16))},
	}
	for _, h := range bad {
		resp, body = ts.do(t, "PUT", "/a/b/c.dat", strings.NewReader("other content"), h...)
		wantStatus(t, resp, body, 400)
		if !strings.Contains(body, "digest mismatch") {
			t.Errorf("PUT with %v: body %q, want 'digest mismatch'", h, body)
		}
	}
	good := md5.Sum([]byte("new"))
	resp, body = ts.do(t, "PUT", "/a/b/d.dat", strings.NewReader("new"),
		"Digest", "adler32="+adlerHex("new"), "Content-MD5", base64.StdEncoding.EncodeToString(good[:]))
	wantStatus(t, resp, body, 201)
	if b, _ := os.ReadFile(filepath.Join(ts.root, "a/b/c.dat")); string(b) != "Wikipedia" {
		t.Errorf("after refused PUTs content = %q, want Wikipedia", b)
	}

	resp, body = ts.do(t, "PUT", "/a/b", strings.NewReader("x"))
	wantStatus(t, resp, body, 409)
	resp, body = ts.do(t, "PUT", "/a/b/c.dat/under", strings.NewReader("x"))
	wantStatus(t, resp, body, 409)
	resp, body = ts.do(t, "PUT", "/big", bytes.NewReader(make([]byte, 2<<20)))
	wantStatus(t, resp, body, 413)
	if _, err := os.Stat(filepath.Join(ts.root, "big")); err == nil {
		t.Error("refused oversized upload left a file")
	}
	noTemps(t, ts.root)
}

func TestPutDiskFull(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "f", "old", time.Time{})
	ts.s.writeChunk = func(f *os.File, p []byte) (int, error) {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	resp, body := ts.do(t, "PUT", "/f", strings.NewReader("new content"))
	wantStatus(t, resp, body, 507)
	if b, _ := os.ReadFile(filepath.Join(ts.root, "f")); string(b) != "old" {
		t.Errorf("content after 507 = %q, want old", b)
	}
	noTemps(t, ts.root)
}

func TestPutPanicIs500(t *testing.T) {
	ts := startServer(t, Config{})
	ts.s.writeChunk = func(f *os.File, p []byte) (int, error) { panic("boom") }
	resp, body := ts.do(t, "PUT", "/f", strings.NewReader("x"))
	wantStatus(t, resp, body, 500)
	ts.s.writeChunk = (*os.File).Write
	resp, body = ts.do(t, "PUT", "/f", strings.NewReader("x"))
	wantStatus(t, resp, body, 201)
}

func TestPutTruncated(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "f", "old", time.Time{})
	for _, name := range []string{"f", "new"} {
		c, err := net.Dial("tcp", ts.host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "PUT /%s HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n%s", name, ts.host, strings.Repeat("x", 100))
		c.Close()
	}
	// The server notices the short body asynchronously: poll until its
	// request counter shows both PUTs answered.
	testenv.Eventually(t, 10*time.Second, "both truncated PUTs finished", func() bool {
		return counterValue(ts.s.m.requests[methodIndex("PUT")][4]) >= 2
	})
	if b, _ := os.ReadFile(filepath.Join(ts.root, "f")); string(b) != "old" {
		t.Errorf("content after truncated PUT = %q, want old", b)
	}
	if _, err := os.Stat(filepath.Join(ts.root, "new")); err == nil {
		t.Error("truncated PUT of a new file left it visible")
	}
	noTemps(t, ts.root)
}

func TestListingHidesTemps(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "d/visible.txt", "x", time.Time{})
	ts.write(t, "d/"+uploadPrefix+"123", "x", time.Time{})
	resp, body := ts.do(t, "GET", "/d", nil)
	wantStatus(t, resp, body, 200)
	if !strings.Contains(body, `href="/d/visible.txt"`) || strings.Contains(body, reservedPrefix) {
		t.Errorf("listing = %q, want visible.txt and no %s names", body, reservedPrefix)
	}
	resp, body = ts.do(t, "PROPFIND", "/d", nil, "Depth", "1")
	wantStatus(t, resp, body, 207)
	if !strings.Contains(body, "visible.txt") || strings.Contains(body, reservedPrefix) {
		t.Errorf("PROPFIND = %q, want visible.txt and no %s names", body, reservedPrefix)
	}
	resp, body = ts.do(t, "GET", "/d/"+uploadPrefix+"123", nil)
	wantStatus(t, resp, body, 403)
}

func TestWebDAV(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "f.txt", content, time.Time{})

	resp, body := ts.do(t, "OPTIONS", "/", nil)
	wantStatus(t, resp, body, 200)
	if resp.Header.Get("Dav") != "1, 2" || !strings.Contains(resp.Header.Get("Allow"), "PROPFIND") {
		t.Errorf("OPTIONS: DAV %q Allow %q", resp.Header.Get("Dav"), resp.Header.Get("Allow"))
	}

	head, _ := ts.do(t, "HEAD", "/f.txt", nil)
	resp, body = ts.do(t, "PROPFIND", "/f.txt", nil, "Depth", "0")
	wantStatus(t, resp, body, 207)
	for _, want := range []string{
		fmt.Sprintf("<D:getcontentlength>%d</D:getcontentlength>", len(content)),
		"<D:getetag>" + head.Header.Get("Etag") + "</D:getetag>",
		"<D:getlastmodified>", "<D:resourcetype></D:resourcetype>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("PROPFIND depth 0 lacks %q:\n%s", want, body)
		}
	}
	resp, body = ts.do(t, "PROPFIND", "/", nil, "Depth", "1")
	wantStatus(t, resp, body, 207)
	if !strings.Contains(body, "<D:href>/f.txt</D:href>") || !strings.Contains(body, "<D:collection") {
		t.Errorf("PROPFIND depth 1 of / = %s", body)
	}
	for _, depth := range []string{"infinity", ""} {
		resp, body = ts.do(t, "PROPFIND", "/", nil, "Depth", depth)
		wantStatus(t, resp, body, 403)
	}

	// PROPPATCH persists in xattrs: visible to a new server on the same root.
	patch := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x"><D:set><D:prop><Z:color>blue</Z:color></D:prop></D:set></D:propertyupdate>`
	resp, body = ts.do(t, "PROPPATCH", "/f.txt", strings.NewReader(patch))
	wantStatus(t, resp, body, 207)
	if !strings.Contains(body, "200 OK") {
		t.Errorf("PROPPATCH = %s", body)
	}
	ts2 := startServer(t, Config{Root: ts.root})
	find := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><Z:color xmlns:Z="urn:x"/></D:prop></D:propfind>`
	resp, body = ts2.do(t, "PROPFIND", "/f.txt", strings.NewReader(find), "Depth", "0")
	wantStatus(t, resp, body, 207)
	if !strings.Contains(body, ">blue<") {
		t.Errorf("dead property lost across servers: %s", body)
	}

	resp, body = ts.do(t, "MKCOL", "/col", nil)
	wantStatus(t, resp, body, 201)
	resp, body = ts.do(t, "MKCOL", "/col", nil)
	wantStatus(t, resp, body, 405)
	resp, body = ts.do(t, "MKCOL", "/missing/col", nil)
	wantStatus(t, resp, body, 409)

	resp, body = ts.do(t, "COPY", "/f.txt", nil, "Destination", ts.url+"/col/g.txt")
	wantStatus(t, resp, body, 201)
	resp, body = ts.do(t, "COPY", "/f.txt", nil, "Destination", ts.url+"/col/g.txt", "Overwrite", "F")
	wantStatus(t, resp, body, 412)
	resp, body = ts.do(t, "MOVE", "/col/g.txt", nil, "Destination", "/col/h.txt")
	wantStatus(t, resp, body, 201)
	if b, _ := os.ReadFile(filepath.Join(ts.root, "col/h.txt")); string(b) != content {
		t.Errorf("after COPY+MOVE content = %q", b)
	}
	resp, body = ts2.do(t, "PROPFIND", "/col/h.txt", strings.NewReader(find), "Depth", "0")
	wantStatus(t, resp, body, 207)
	if !strings.Contains(body, ">blue<") {
		t.Errorf("dead property not carried by COPY/MOVE: %s", body)
	}
	resp, body = ts.do(t, "DELETE", "/col", nil)
	wantStatus(t, resp, body, 204)
	resp, body = ts.do(t, "DELETE", "/col", nil)
	wantStatus(t, resp, body, 404)

	// LOCK: a PUT without the token is refused, with it accepted.
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>t</D:owner></D:lockinfo>`
	resp, body = ts.do(t, "LOCK", "/f.txt", strings.NewReader(lockBody), "Timeout", "Second-60")
	wantStatus(t, resp, body, 200)
	token := resp.Header.Get("Lock-Token")
	if token == "" {
		t.Fatal("LOCK: no Lock-Token")
	}
	resp, body = ts.do(t, "PUT", "/f.txt", strings.NewReader("x"))
	wantStatus(t, resp, body, 423)
	resp, body = ts.do(t, "PUT", "/f.txt", strings.NewReader("x"), "If", "("+token+")")
	wantStatus(t, resp, body, 204)
	resp, body = ts.do(t, "PUT", "/f.txt", strings.NewReader("x"), "If", "(<opaquelocktoken:bogus>)")
	wantStatus(t, resp, body, 412)
	resp, body = ts.do(t, "UNLOCK", "/f.txt", nil, "Lock-Token", token)
	wantStatus(t, resp, body, 204)
	resp, body = ts.do(t, "PUT", "/f.txt", strings.NewReader("y"))
	wantStatus(t, resp, body, 204)
}

func TestHTTPS(t *testing.T) {
	tl := testenv.NewTLS(t)
	ts := startServer(t, Config{TLSCert: tl.CertFile, TLSKey: tl.KeyFile})
	if !strings.HasPrefix(ts.url, "https://") {
		t.Fatalf("URL %q, want https", ts.url)
	}
	ts.write(t, "f", content, time.Time{})
	resp, err := tl.Client().Get(ts.url + "/f")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != content {
		t.Errorf("HTTPS GET = %d %q", resp.StatusCode, b)
	}
}

func TestMetricsAndNew(t *testing.T) {
	ts := startServer(t, Config{})
	ts.do(t, "HEAD", "/missing", nil)
	resp, body := ts.do(t, "GET", "/metrics", nil)
	wantStatus(t, resp, body, 200)
	for _, want := range []string{
		`lakefed_storage_requests_total{code="4xx",method="HEAD"} 1`,
		"lakefed_storage_request_duration_seconds_bucket",
		"lakefed_storage_sent_bytes_total",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	off := startServer(t, Config{MetricsPath: "-"})
	resp, body = off.do(t, "GET", "/metrics", nil)
	wantStatus(t, resp, body, 404)

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, cfg := range []Config{
		{},
		{Root: "/does/not/exist"},
		{Root: file},
		{Root: t.TempDir(), TLSCert: "x"},
		{Root: t.TempDir(), Listen: "no-port"},
		{Root: t.TempDir(), MaxUpload: -1},
		{Root: t.TempDir(), MetricsPath: "metrics"},
	} {
		if s, err := New(cfg, nil); err == nil {
			s.Close()
			t.Errorf("New(%+v) = nil error, want one", cfg)
		}
	}
}

func TestOversizedHeader(t *testing.T) {
	ts := startServer(t, Config{})
	c, err := net.Dial("tcp", ts.host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 100<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 431 {
		t.Errorf("oversized header = %d, want 431", resp.StatusCode)
	}
}

func adlerHex(s string) string {
	h := httpx.NewHash("adler32")
	h.Write([]byte(s))
	return fmt.Sprintf("%x", h.Sum(nil))
}

func crc32cHex(s string) string {
	h := httpx.NewHash("crc32c")
	h.Write([]byte(s))
	return fmt.Sprintf("%x", h.Sum(nil))
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
