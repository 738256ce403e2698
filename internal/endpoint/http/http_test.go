package http_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/webdav"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/endpointtest"
	httpep "github.com/lakefed/lakefed/internal/endpoint/http"
)

// TestXNetWebDAV runs the suite against golang.org/x/net/webdav over a
// memory file system: a server that does not create parents on PUT (409,
// so Put makes them with MKCOL), writes in place and reports no quota.
func TestXNetWebDAV(t *testing.T) {
	srv := httptest.NewServer(&webdav.Handler{FileSystem: webdav.NewMemFS(), LockSystem: webdav.NewMemLS()})
	t.Cleanup(srv.Close)
	endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
		return endpointtest.Target{
			Endpoint: newEP(t, endpoint.Config{URL: srv.URL + "/"}),
			Caps:     endpointtest.Caps{PutNotAtomic: true, NoConditionalPut: true, NoSpace: true},
		}
	})
}

func TestNewErrors(t *testing.T) {
	for _, u := range []string{"ftp://h/", "http:///x", "http://u:p@h/", "http://h/?q=1", "http://h/#f", "://"} {
		if _, err := httpep.New(context.Background(), endpoint.Config{Name: "x", URL: u}, quiet); err == nil {
			t.Errorf("New(%q) = nil error, want one", u)
		}
	}
	if _, err := httpep.New(context.Background(), endpoint.Config{Name: "x", URL: "https://h/", CAFile: "/nonexistent"}, quiet); err == nil {
		t.Errorf("New with a missing CA file = nil error")
	}
	if _, err := httpep.New(context.Background(), endpoint.Config{URL: "http://h/"}, quiet); err == nil {
		t.Errorf("New without a name = nil error")
	}
}

func TestRedirectURL(t *testing.T) {
	tests := []struct{ base, p, want string }{
		{"http://h:8/", "/a/b.root", "http://h:8/a/b.root"},
		{"dav://h/base", "/a b/c?d#e", "http://h/base/a%20b/c%3Fd%23e"},
		{"davs://h/base%20x/", "/f", "https://h/base%20x/f"},
		{"https://h/", "/", "https://h/"},
	}
	for _, tt := range tests {
		ep := newEP(t, endpoint.Config{URL: tt.base})
		u, err := endpoint.RedirectURL(context.Background(), ep, tt.p, endpoint.OpRead)
		if err != nil || u.String() != tt.want {
			t.Errorf("RedirectURL(%s, %q) = %v, %v; want %s", tt.base, tt.p, u, err, tt.want)
		}
	}
}

// TestRedirects checks that every method follows redirects with its
// method kept, that the bearer token stays with the endpoint's own host,
// and that a loop ends.
func TestRedirects(t *testing.T) {
	var gotAuth atomic.Value
	gotAuth.Store("")
	var putBody atomic.Value
	putBody.Store("")
	var methods sync.Map
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		methods.Store(r.Method, true)
		switch r.Method {
		case http.MethodPut:
			b, _ := io.ReadAll(r.Body)
			putBody.Store(string(b))
			w.WriteHeader(http.StatusCreated)
		case "PROPFIND":
			w.WriteHeader(http.StatusMultiStatus)
			fmt.Fprintf(w, `<?xml version="1.0"?><D:multistatus xmlns:D="DAV:"><D:response><D:href>%s</D:href><D:propstat><D:prop><D:getcontentlength>5</D:getcontentlength></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>`, r.URL.Path)
		default:
			http.ServeContent(w, r, "f", time.Unix(1e9, 0), strings.NewReader("hello"))
		}
	}))
	t.Cleanup(target.Close)
	var sawAuthAtDoor atomic.Bool
	var putBodyAtDoor atomic.Int64
	door := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer s3cret" {
			sawAuthAtDoor.Store(true)
		}
		if r.URL.Path == "/loop" {
			http.Redirect(w, r, "/loop", http.StatusFound)
			return
		}
		code := http.StatusFound
		if r.Method == http.MethodPut {
			code = http.StatusTemporaryRedirect // do not read the body first
		} else {
			n, _ := io.Copy(io.Discard, r.Body)
			putBodyAtDoor.Add(n)
		}
		http.Redirect(w, r, target.URL+r.URL.Path, code)
	}))
	t.Cleanup(door.Close)
	ep := newEP(t, endpoint.Config{URL: door.URL + "/", BearerToken: "s3cret"})
	ctx := context.Background()

	in, err := ep.Stat(ctx, "/f")
	if err != nil || in.Size != 5 {
		t.Errorf("Stat through a 302 = %+v, %v; want size 5", in, err)
	}
	if _, ok := methods.Load(http.MethodHead); !ok {
		t.Errorf("Stat through a 302 did not arrive as HEAD")
	}
	_, _ = ep.List(ctx, "/d") // its answer describes a file: only the method matters here
	if _, ok := methods.Load("PROPFIND"); !ok {
		t.Errorf("List through a 302 did not arrive as PROPFIND")
	}
	rc, err := ep.Open(ctx, "/f", 1, 3)
	if err != nil {
		t.Fatalf("Open through a 302 = %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "ell" {
		t.Errorf("Open(1, 3) through a 302 read %q, %v; want ell", b, err)
	}
	for _, size := range []int{5, 3 << 20} {
		body := strings.Repeat("x", size)
		// A non-seekable reader: the large body can be re-sent only
		// because the door answered before reading it (Expect: 100-continue).
		if err := ep.Put(ctx, "/up", io.MultiReader(strings.NewReader(body)), int64(size)); err != nil {
			t.Errorf("Put(%d bytes) through a 307 = %v", size, err)
		} else if got := putBody.Load().(string); got != body {
			t.Errorf("Put(%d bytes) through a 307 delivered %d bytes", size, len(got))
		}
	}
	if !sawAuthAtDoor.Load() {
		t.Errorf("the endpoint's own host did not get the bearer token")
	}
	if a := gotAuth.Load().(string); a != "" {
		t.Errorf("the redirect target (another host) got Authorization %q; want none", a)
	}
	_, err = ep.Stat(ctx, "/loop")
	if !errors.Is(err, endpoint.ErrUnavailable) || !strings.Contains(err.Error(), "redirects") {
		t.Errorf("Stat(redirect loop) = %v, want ErrUnavailable about redirects", err)
	}
}

// TestIgnoredRange checks a server that answers every GET with 200 and
// the whole file.
func TestIgnoredRange(t *testing.T) {
	data := []byte("0123456789abcdefghij")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	ep := newEP(t, endpoint.Config{URL: srv.URL})
	tests := []struct {
		off, n int64
		want   string
	}{{0, -1, string(data)}, {0, 4, "0123"}, {5, 5, "56789"}, {15, -1, "fghij"}, {18, 10, "ij"}, {20, -1, ""}}
	for _, tt := range tests {
		rc, err := ep.Open(context.Background(), "/f", tt.off, tt.n)
		if err != nil {
			t.Errorf("Open(%d, %d) = %v", tt.off, tt.n, err)
			continue
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != tt.want {
			t.Errorf("Open(%d, %d) read %q, %v; want %q", tt.off, tt.n, b, err, tt.want)
		}
	}
	if _, err := ep.Open(context.Background(), "/f", 21, -1); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("Open(21) on a 20-byte file = %v, want ErrRefused", err)
	}
}

// TestShortBody checks that a body that ends before its Content-Length
// (or Content-Range) is an error of the reader: io.ErrUnexpectedEOF in
// ErrUnavailable, never a short success.
func TestShortBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") != "" {
			w.Header().Set("Content-Range", "bytes 10-109/1000")
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusPartialContent)
		} else {
			w.Header().Set("Content-Length", "1000")
		}
		w.Write(make([]byte, 50))
		// The handler returns early; net/http closes the connection.
	}))
	t.Cleanup(srv.Close)
	ep := newEP(t, endpoint.Config{URL: srv.URL})
	for _, rng := range [][2]int64{{0, -1}, {10, 100}} {
		rc, err := ep.Open(context.Background(), "/f", rng[0], rng[1])
		if err != nil {
			t.Fatalf("Open(%v) = %v", rng, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if !errors.Is(err, endpoint.ErrUnavailable) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Open(%v) read %d bytes, %v; want ErrUnexpectedEOF in ErrUnavailable", rng, len(b), err)
		}
	}
}

// TestBodyNotBounded checks that the Timeout bounds only the wait for the
// answer: a body that takes longer than the Timeout still arrives.
func TestBodyNotBounded(t *testing.T) {
	const timeout = 100 * time.Millisecond
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		w.Write([]byte("01234"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Write([]byte("56789"))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	ep := newEP(t, endpoint.Config{URL: srv.URL, Timeout: timeout})
	rc, err := ep.Open(context.Background(), "/f", 0, -1)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer rc.Close()
	first := make([]byte, 5)
	if _, err := io.ReadFull(rc, first); err != nil {
		t.Fatalf("first half: %v", err)
	}
	<-time.After(4 * timeout) // longer than the Timeout, on purpose
	release <- struct{}{}
	rest, err := io.ReadAll(rc)
	if err != nil || string(first)+string(rest) != "0123456789" {
		t.Errorf("read %q+%q, %v; want the whole body after waiting past the Timeout", first, rest, err)
	}
}

// TestStatusErrors checks how statuses map to classes, that the status
// line stays in the message, and that Retry-After is kept.
func TestStatusErrors(t *testing.T) {
	tests := []struct {
		code  int
		class error
	}{
		{400, endpoint.ErrRefused}, {401, endpoint.ErrRefused}, {403, endpoint.ErrRefused},
		{404, endpoint.ErrNotFound}, {410, endpoint.ErrNotFound}, {412, endpoint.ErrRefused},
		{500, endpoint.ErrUnavailable}, {502, endpoint.ErrUnavailable}, {503, endpoint.ErrUnavailable},
		{507, endpoint.ErrUnavailable},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			http.Error(w, "reason for "+fmt.Sprint(tt.code), tt.code)
		}))
		ep := newEP(t, endpoint.Config{URL: srv.URL})
		_, err := ep.Stat(context.Background(), "/x")
		srv.Close()
		if !errors.Is(err, tt.class) {
			t.Errorf("Stat against %d = %v, want %v", tt.code, err, tt.class)
		}
		var se *httpep.StatusError
		if !errors.As(err, &se) || se.Code != tt.code || se.RetryAfter != 7*time.Second {
			t.Errorf("Stat against %d: StatusError = %+v, want code %d, Retry-After 7s", tt.code, se, tt.code)
		}
		// 404 and 410 are taken from Stat's HEAD, whose answer has no body
		// (RFC 9110 §9.3.2), so no reason; the rest come from PROPFIND.
		headOnly := tt.code == http.StatusNotFound || tt.code == http.StatusGone
		if msg := err.Error(); !strings.Contains(msg, http.StatusText(tt.code)) || (!headOnly && !strings.Contains(msg, "reason for")) || !strings.HasPrefix(msg, `http: stat "/x": `) {
			t.Errorf("Stat against %d: message %q lacks the status line or reason", tt.code, msg)
		}
	}
}

// TestHeadFallback checks Stat by HEAD on a server that refuses PROPFIND,
// with the Digest of a Want-Digest answer.
func TestHeadFallback(t *testing.T) {
	var propfinds atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "PROPFIND":
			propfinds.Add(1)
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.URL.Path == "/d":
			http.Redirect(w, r, "/d/", http.StatusMovedPermanently)
		case r.URL.Path == "/d/":
			w.WriteHeader(http.StatusOK)
		case r.URL.Path == "/f":
			if r.Header.Get("Want-Digest") != "" {
				w.Header().Set("Digest", "adler32=062c0215")
			}
			w.Header().Set("ETag", `"abc"`)
			http.ServeContent(w, r, "f", time.Unix(1e9, 0), strings.NewReader("hello"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	ep := newEP(t, endpoint.Config{URL: srv.URL})
	ctx := context.Background()
	// A directory's HEAD does not settle it: Stat asks PROPFIND, which is
	// refused, and falls back to HEAD alone from then on.
	for range 2 {
		if in, err := ep.Stat(ctx, "/d"); err != nil || !in.IsDir {
			t.Errorf("Stat(/d) by HEAD = %+v, %v; want a dir", in, err)
		}
	}
	for range 2 {
		in, err := ep.Stat(ctx, "/f")
		if err != nil || in.Size != 5 || in.IsDir || in.ETag != "abc" || !in.ModTime.Equal(time.Unix(1e9, 0)) {
			t.Errorf("Stat(/f) by HEAD = %+v, %v", in, err)
		}
	}
	if n := propfinds.Load(); n != 1 {
		t.Errorf("PROPFIND sent %d times, want once (then remembered)", n)
	}
	if _, err := ep.Stat(ctx, "/nope"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Stat(/nope) by HEAD = %v, want ErrNotFound", err)
	}
	if sum, err := ep.Checksum(ctx, "/f", "adler32"); err != nil || sum != "062c0215" {
		t.Errorf("Checksum(adler32) = %q, %v; want 062c0215", sum, err)
	}
	if _, err := ep.Checksum(ctx, "/f", "md5"); !errors.Is(err, endpoint.ErrUnsupported) {
		t.Errorf("Checksum(md5) with no md5 Digest = %v, want ErrUnsupported", err)
	}
	if _, err := ep.List(ctx, "/d"); !errors.Is(err, endpoint.ErrUnsupported) {
		t.Errorf("List without PROPFIND = %v, want ErrUnsupported", err)
	}
}

// TestListHrefs checks hrefs as absolute URLs, percent-encoded paths and
// XrdHttp's unescaped ones, and that deeper entries are skipped.
func TestListHrefs(t *testing.T) {
	const resp = `<?xml version="1.0"?><D:multistatus xmlns:D="DAV:">%s</D:multistatus>`
	entry := func(href string, dir bool, size int) string {
		rt := ""
		if dir {
			rt = "<D:resourcetype><D:collection/></D:resourcetype>"
		}
		return fmt.Sprintf(`<D:response><D:href>%s</D:href><D:propstat><D:prop>%s<D:getcontentlength>%d</D:getcontentlength><D:getetag>W/"e1"</D:getetag></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>`, href, rt, size)
	}
	var server atomic.Value
	server.Store("")
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := server.Load().(string); s != "" {
			w.Header().Set("Server", s)
		}
		w.WriteHeader(http.StatusMultiStatus)
		io.WriteString(w, body.Load().(string))
	}))
	t.Cleanup(srv.Close)
	ep := newEP(t, endpoint.Config{URL: srv.URL + "/base/"})
	body.Store(fmt.Sprintf(resp, entry(srv.URL+"/base/d%20x/", true, 0)+
		entry(srv.URL+"/base/d%20x/a%25b.txt", false, 3)+
		entry("/base/d%20x/sub/", true, 4096)+
		entry("/base/d%20x/sub/deeper", false, 1)))
	ents, err := ep.List(context.Background(), "/d x")
	if err != nil {
		t.Fatalf("List = %v", err)
	}
	got := map[string]endpoint.Info{}
	for _, e := range ents {
		got[e.Name] = e
	}
	if len(got) != 2 || got["a%b.txt"].Size != 3 || got["a%b.txt"].ETag != "e1" || !got["sub"].IsDir || got["sub"].Size != 0 {
		t.Errorf("List = %+v; want a%%b.txt (3 bytes, etag e1) and dir sub", ents)
	}
	server.Store("XrootD/v5.5.3")
	body.Store(fmt.Sprintf(resp, entry("/base/d x/", true, 0)+entry("/base/d x/a%41 b.txt", false, 7)))
	ents, err = ep.List(context.Background(), "/d x")
	if err != nil || len(ents) != 1 || ents[0].Name != "a%41 b.txt" {
		t.Errorf("List from XrdHttp = %+v, %v; want the raw name a%%41 b.txt", ents, err)
	}
}

// TestPutParentsByMKCOL checks the 409 → MKCOL chain → retry path with a
// large streamed body from a seekable reader.
func TestPutParentsByMKCOL(t *testing.T) {
	fs := webdav.NewMemFS()
	srv := httptest.NewServer(&webdav.Handler{FileSystem: fs, LockSystem: webdav.NewMemLS()})
	t.Cleanup(srv.Close)
	ep := newEP(t, endpoint.Config{URL: srv.URL})
	big := bytes.Repeat([]byte("0123456789"), 300_000)
	if err := ep.Put(context.Background(), "/a/b/c/f", bytes.NewReader(big), int64(len(big))); err != nil {
		t.Fatalf("Put with missing parents = %v", err)
	}
	f, err := fs.OpenFile(context.Background(), "/a/b/c/f", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, big) {
		t.Errorf("stored %d bytes, want %d equal", len(got), len(big))
	}
}

// TestStatHeadFirst checks which HEAD answers Stat believes (one round
// trip, no PROPFIND) and which it leaves to PROPFIND: a directory index,
// an HTML file, a redirect to the slash form, an answer without
// Last-Modified, and anything from XrdHttp.
func TestStatHeadFirst(t *testing.T) {
	mtime := time.Unix(1e9, 0)
	var propfinds atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PROPFIND" {
			propfinds.Add(1)
			w.WriteHeader(http.StatusMultiStatus)
			fmt.Fprintf(w, `<?xml version="1.0"?><D:multistatus xmlns:D="DAV:"><D:response><D:href>%s</D:href><D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype><D:getlastmodified>%s</D:getlastmodified></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>`,
				r.URL.Path, mtime.UTC().Format(http.TimeFormat))
			return
		}
		switch r.URL.Path {
		case "/f", "/xrd/f":
			if r.URL.Path == "/xrd/f" {
				w.Header().Set("Server", "XrootD/v5.5.3")
			}
			w.Header().Set("ETag", `"e1"`)
			w.Header().Set("Digest", "adler32=062c0215")
			http.ServeContent(w, r, "f.bin", mtime, strings.NewReader("hello"))
		case "/page.html":
			http.ServeContent(w, r, "page.html", mtime, strings.NewReader("<html></html>"))
		case "/index":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusOK)
		case "/nodate":
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusOK)
		case "/d":
			http.Redirect(w, r, "/d/", http.StatusMovedPermanently)
		case "/d/":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "0")
			w.Header().Set("Last-Modified", mtime.UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusOK)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	ep := newEP(t, endpoint.Config{URL: srv.URL})
	ctx := context.Background()
	tests := []struct {
		path     string
		propfind bool // Stat must have asked PROPFIND
		dir      bool
		err      error
	}{
		{"/f", false, false, nil},
		{"/nope", false, false, endpoint.ErrNotFound},
		{"/index", true, true, nil},
		{"/page.html", true, true, nil},
		{"/nodate", true, true, nil},
		{"/d", true, true, nil},
		{"/xrd/f", true, true, nil},
	}
	for _, tt := range tests {
		before := propfinds.Load()
		in, err := ep.Stat(ctx, tt.path)
		if asked := propfinds.Load() != before; asked != tt.propfind {
			t.Errorf("Stat(%q) asked PROPFIND: %v, want %v", tt.path, asked, tt.propfind)
		}
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Stat(%q) = %v, want %v", tt.path, err, tt.err)
			}
			continue
		}
		if err != nil || in.IsDir != tt.dir || !in.ModTime.Equal(mtime) {
			t.Errorf("Stat(%q) = %+v, %v; want dir %v, mtime %v", tt.path, in, err, tt.dir, mtime)
		}
	}
	in, err := ep.Stat(ctx, "/f")
	if err != nil || in.Size != 5 || in.ETag != "e1" || in.Checksums["adler32"] != "062c0215" || in.Name != "f" {
		t.Errorf("Stat(/f) by HEAD = %+v, %v; want size 5, etag e1, adler32 062c0215", in, err)
	}
}
