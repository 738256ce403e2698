package storage

import (
	"encoding/xml"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/davxml"
)

// liveBodies are PROPFIND bodies the live listing answers.
var liveBodies = map[string]string{
	"federator": davxml.PropfindBody,
	"all six": `<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:prop>` +
		`<D:getetag/><D:displayname/><D:getcontenttype/><D:resourcetype/><D:getlastmodified/><D:getcontentlength/></D:prop></D:propfind>`,
	"files only": `<propfind xmlns="DAV:"><prop><getcontentlength/><getetag/></prop></propfind>`,
	"dirs only":  `<D:propfind xmlns:D="DAV:"><D:prop><D:displayname/></D:prop></D:propfind>`,
}

// newLiveServer is a storage server on a fresh root holding files whose
// names need escaping, a directory and an upload in progress; it is
// asked through its handler, without a listener.
func newLiveServer(t *testing.T) *Server {
	t.Helper()
	root := t.TempDir()
	for _, name := range []string{"d/plain.root", "d/a b%.txt", "d/x&y<z>'\".json", "d/é.dat", "d/tab\tname", "d/sub/inner", "d/" + uploadPrefix + "1"} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := newServer(Config{Root: root}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// propfind1 sends PROPFIND Depth 1 of p with body through the handler.
func propfind1(s *Server, p, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("PROPFIND", p, strings.NewReader(body))
	req.Header.Set("Depth", "1")
	s.Handler().ServeHTTP(rec, req)
	return rec
}

// TestLiveListingAsWebDAV: for the properties it answers, the live
// listing writes the very bytes x/net/webdav writes member by member.
func TestLiveListingAsWebDAV(t *testing.T) {
	s := newLiveServer(t)
	for name, body := range liveBodies {
		for _, p := range []struct{ url, clean string }{{"/d/", "/d"}, {"/", "/"}} {
			t.Run(name+p.url, func(t *testing.T) {
				if _, ok := askedLive([]byte(body)); !ok {
					t.Fatalf("askedLive(%q) = false, want true", body)
				}
				got := propfind1(s, p.url, body)
				want := httptest.NewRecorder()
				req := httptest.NewRequest("PROPFIND", p.url, strings.NewReader(body))
				req.Header.Set("Depth", "1")
				s.serveDAVListing(&respWriter{ResponseWriter: want}, req, p.clean, []byte(body))
				if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
					t.Errorf("live listing: %d %q, want %d %q", got.Code, got.Header().Get("Content-Type"), want.Code, want.Header().Get("Content-Type"))
				}
				if got.Body.String() != want.Body.String() {
					t.Errorf("live listing body:\n%s\nwant (x/net/webdav):\n%s", got.Body, want.Body)
				}
			})
		}
	}
}

// TestAskedLive: only a prop list of live properties, each once, is
// answered by the live listing.
func TestAskedLive(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []liveProp
	}{
		{"federator", davxml.PropfindBody, []liveProp{propResourceType, propContentLength, propLastModified, propETag}},
		{"empty is allprop", "", nil},
		{"allprop", `<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`, nil},
		{"propname", `<D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>`, nil},
		{"dead property", `<D:propfind xmlns:D="DAV:" xmlns:E="urn:e"><D:prop><D:getetag/><E:color/></D:prop></D:propfind>`, nil},
		{"lockdiscovery", `<D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>`, nil},
		{"quota", `<D:propfind xmlns:D="DAV:"><D:prop><D:quota-used-bytes/></D:prop></D:propfind>`, nil},
		{"twice", `<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/><D:getetag/></D:prop></D:propfind>`, nil},
		{"two props", `<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/></D:prop><D:prop><D:displayname/></D:prop></D:propfind>`, nil},
		{"empty prop", `<D:propfind xmlns:D="DAV:"><D:prop/></D:propfind>`, nil},
		{"prop and include", `<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/></D:prop><D:include/></D:propfind>`, nil},
		{"value inside", `<D:propfind xmlns:D="DAV:"><D:prop><D:getetag>x</D:getetag></D:prop></D:propfind>`, nil},
		{"not propfind", `<D:propertyupdate xmlns:D="DAV:"><D:prop><D:getetag/></D:prop></D:propertyupdate>`, nil},
		{"truncated", `<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/>`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := askedLive([]byte(tc.body))
			if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
				t.Errorf("askedLive(%q) = %v, %v; want %v", tc.body, got, ok, tc.want)
			}
		})
	}
}

// member is what a listing says of one href: the response's own status
// ("" when it has propstats) and its DAV:getetag.
type member struct{ status, etag string }

// members parses a multistatus into href -> member.
func members(t *testing.T, body string) map[string]member {
	t.Helper()
	var ms struct {
		Responses []struct {
			Href   string `xml:"DAV: href"`
			Status string `xml:"DAV: status"`
			ETag   string `xml:"DAV: propstat>prop>getetag"`
		} `xml:"DAV: response"`
	}
	if err := xml.Unmarshal([]byte(body), &ms); err != nil {
		t.Fatalf("multistatus: %v\n%s", err, body)
	}
	out := map[string]member{}
	for _, r := range ms.Responses {
		out[r.Href] = member{r.Status, r.ETag}
	}
	return out
}

// head sends HEAD p through the handler.
func head(s *Server, p string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodHead, p, nil))
	return rec
}

// TestLiveListingAsHead: a member a HEAD would refuse (a symlink leading
// outside Root, a socket, a path the read rule denies the caller) is
// listed with the status HEAD sends, never described nor left out; a
// symlink inside Root is described as its target, as HEAD describes it.
func TestLiveListingAsHead(t *testing.T) {
	s := newLiveServer(t)
	root := s.cfg.Root
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "d", "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("plain.root", filepath.Join(root, "d", "in")); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(root, "d", "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s.GuardReads(func(_ *http.Request, p string) bool { return p != "/d/plain.root" })

	rec := propfind1(s, "/d/", davxml.PropfindBody)
	if rec.Code != http.StatusMultiStatus {
		t.Fatalf("PROPFIND /d/ = %d, want 207:\n%s", rec.Code, rec.Body)
	}
	if h := rec.Header().Get(httpx.ListedAsHeadHeader); h != "1" {
		t.Errorf("PROPFIND /d/ %s = %q, want 1", httpx.ListedAsHeadHeader, h)
	}
	got := members(t, rec.Body.String())
	for href, want := range map[string]string{
		"/d/out":        "HTTP/1.1 403 Forbidden",
		"/d/sock":       "HTTP/1.1 403 Forbidden",
		"/d/plain.root": "HTTP/1.1 403 Forbidden",
		"/d/in":         "",
		"/d/sub/":       "",
	} {
		if m, ok := got[href]; !ok || m.status != want {
			t.Errorf("PROPFIND /d/ member %s: listed %v, status %q; want listed, status %q", href, ok, m.status, want)
		}
	}
	for _, href := range []string{"/d/out", "/d/sock"} {
		if rec := head(s, href); rec.Code != http.StatusForbidden {
			t.Errorf("HEAD %s = %d, want 403 as its listing says", href, rec.Code)
		}
	}
	if h := head(s, "/d/in"); h.Code != http.StatusOK || h.Header().Get("ETag") != got["/d/in"].etag {
		t.Errorf("HEAD /d/in = %d ETag %q, want 200 and the listing's %q", h.Code, h.Header().Get("ETag"), got["/d/in"].etag)
	}
}

// TestLiveListingGuardedWithoutReadRule: behind rules whose read rule the
// listing was not given, it does not claim to say what HEAD says.
func TestLiveListingGuardedWithoutReadRule(t *testing.T) {
	s := newLiveServer(t)
	s.Guard(func(h http.Handler) http.Handler { return h })
	rec := propfind1(s, "/d/", davxml.PropfindBody)
	if rec.Code != http.StatusMultiStatus || rec.Header().Get(httpx.ListedAsHeadHeader) != "" {
		t.Errorf("PROPFIND /d/ = %d, %s %q; want 207 without it", rec.Code, httpx.ListedAsHeadHeader, rec.Header().Get(httpx.ListedAsHeadHeader))
	}
}
