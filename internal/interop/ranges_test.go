package interop

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
)

// TestRangesOneAnswer sends the same ranged and conditional GETs to the
// three roles that serve bytes: the storage role (its plain requests
// answered by the fast path, the others by the handler), a cache in
// front of it, and a federator proxying it. Every role must give the same
// status and Content-Range, and the same bytes: a client's answer must
// not depend on whether it was redirected, proxied or cached.
func TestRangesOneAnswer(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	site := storagetest.Start(t, storage.Config{})
	hundred := strings.Repeat("0123456789", 10)
	writeUnder(t, site.Dir, "h", []byte(hundred))
	writeUnder(t, site.Dir, "empty", nil)

	ep, err := kinds.New(t.Context(), endpoint.Config{Name: "origin", URL: site.URL}, log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(t.Context(), cache.Config{Dir: t.TempDir(), BlockSize: 4 << 10}, ep, cache.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	csrv := httptest.NewServer(c.Handler())
	t.Cleanup(func() { csrv.CloseClientConnections(); csrv.Close(); c.Close() })
	fed := startKindFed(t, "mode: proxy\nhealth: {interval: 1h}", &kindSite{name: "site", yaml: "url: " + site.URL})

	roles := []struct{ name, url string }{
		{"storage", strings.TrimSuffix(site.URL, "/")},
		{"cache", csrv.URL},
		{"federator proxy", fed.url},
	}
	resp, err := http.Head(roles[0].url + "/h")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag, lm := resp.Header.Get("Etag"), resp.Header.Get("Last-Modified")
	if etag == "" || lm == "" {
		t.Fatalf("storage role HEAD: ETag %q, Last-Modified %q", etag, lm)
	}
	many := "bytes=" + strings.TrimSuffix(strings.Repeat("0-0,", 10001), ",")
	tests := []struct {
		name, path string
		hdr        []string
		code       int
		cr         string
	}{
		{"no range (fast path)", "/h", nil, 200, ""},
		{"one range", "/h", []string{"Range", "bytes=10-19"}, 206, "bytes 10-19/100"},
		{"suffix", "/h", []string{"Range", "bytes=-3"}, 206, "bytes 97-99/100"},
		{"clipped", "/h", []string{"Range", "bytes=95-200"}, 206, "bytes 95-99/100"},
		{"two ranges", "/h", []string{"Range", "bytes=0-0,50-59"}, 206, ""},
		{"satisfiable among unsatisfiable", "/h", []string{"Range", "bytes=200-300,0-0"}, 206, "bytes 0-0/100"},
		{"upper-case unit", "/h", []string{"Range", "BYTES=95-"}, 206, "bytes 95-99/100"},
		{"past the end", "/h", []string{"Range", "bytes=100-"}, 416, "bytes */100"},
		{"suffix zero", "/h", []string{"Range", "bytes=-0"}, 416, "bytes */100"},
		{"on an empty file", "/empty", []string{"Range", "bytes=0-"}, 416, "bytes */0"},
		{"malformed", "/h", []string{"Range", "bytes=abc"}, 416, "bytes */100"},
		{"reversed", "/h", []string{"Range", "bytes=5-1"}, 416, "bytes */100"},
		{"no unit", "/h", []string{"Range", "=0-1"}, 416, "bytes */100"},
		{"overlapping", "/h", []string{"Range", "bytes=0-,0-"}, 416, "bytes */100"},
		{"overlapping, three", "/h", []string{"Range", "bytes=0-10,5-20,7-8"}, 416, "bytes */100"},
		{"more bytes than the file", "/h", []string{"Range", "bytes=0-59,40-99"}, 416, "bytes */100"},
		{"too many ranges", "/h", []string{"Range", many}, 416, "bytes */100"},
		{"another unit", "/h", []string{"Range", "items=0-1"}, 200, ""},
		{"If-None-Match current", "/h", []string{"If-None-Match", etag}, 304, ""},
		{"If-None-Match current, bad range", "/h", []string{"If-None-Match", etag, "Range", "bytes=abc"}, 304, ""},
		{"If-Modified-Since", "/h", []string{"If-Modified-Since", lm}, 304, ""},
		{"If-Match other", "/h", []string{"If-Match", `"other"`}, 412, ""},
		{"If-Match current", "/h", []string{"If-Match", etag, "Range", "bytes=0-0"}, 206, "bytes 0-0/100"},
		{"If-Range current", "/h", []string{"If-Range", etag, "Range", "bytes=0-0"}, 206, "bytes 0-0/100"},
		{"If-Range date", "/h", []string{"If-Range", lm, "Range", "bytes=0-0"}, 206, "bytes 0-0/100"},
		{"If-Range other", "/h", []string{"If-Range", `"other"`, "Range", "bytes=0-0"}, 200, ""},
		{"If-Range other, malformed range", "/h", []string{"If-Range", `"other"`, "Range", "bytes=abc"}, 200, ""},
		{"If-Range weak", "/h", []string{"If-Range", "W/" + etag, "Range", "bytes=0-0"}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var answers []string
			for _, role := range roles {
				req, err := http.NewRequest("GET", role.url+tt.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i+1 < len(tt.hdr); i += 2 {
					req.Header.Set(tt.hdr[i], tt.hdr[i+1])
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", role.name, err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("%s: body: %v", role.name, err)
				}
				cr := resp.Header.Get("Content-Range")
				if resp.StatusCode != tt.code || cr != tt.cr {
					t.Errorf("%s: GET %s %q = %d, Content-Range %q; want %d, %q", role.name, tt.path, tt.hdr, resp.StatusCode, cr, tt.code, tt.cr)
				}
				if tt.code == 200 && string(body) != hundred {
					t.Errorf("%s: 200 with %q, want the whole file", role.name, body)
				}
				if resp.StatusCode/100 == 2 && resp.Header.Get("Etag") != etag {
					t.Errorf("%s: ETag %q, want the origin's %q", role.name, resp.Header.Get("Etag"), etag)
				}
				ans := fmt.Sprintf("%d %q", resp.StatusCode, cr)
				if !strings.HasPrefix(resp.Header.Get("Content-Type"), "multipart/") && resp.StatusCode/100 == 2 {
					ans += " " + string(body)
				}
				answers = append(answers, ans)
			}
			for i := 1; i < len(answers); i++ {
				if answers[i] != answers[0] {
					t.Errorf("%s answered %s, %s answered %s", roles[i].name, answers[i], roles[0].name, answers[0])
				}
			}
		})
	}
}
