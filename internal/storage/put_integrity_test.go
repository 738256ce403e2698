package storage

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// readFile returns the content of name under the test root, or "<absent>".
func (ts *testServer) readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ts.root, name))
	if os.IsNotExist(err) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPutContentRange: RFC 9110 §14.5, a server without partial PUT must
// answer a PUT carrying Content-Range with 400 and change nothing.
func TestPutContentRange(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "ten", "0123456789", time.Time{})
	cases := []struct {
		name, path, cr, want string
	}{
		{"partial onto existing", "/ten", "bytes 4-5/10", "0123456789"},
		{"whole range onto existing", "/ten", "bytes 0-1/2", "0123456789"},
		{"unknown total", "/ten", "bytes 4-5/*", "0123456789"},
		{"malformed", "/ten", "garbage", "0123456789"},
		{"onto missing", "/new", "bytes 0-1/2", "<absent>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := ts.do(t, "PUT", c.path, strings.NewReader("ab"), "Content-Range", c.cr)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("PUT %s with Content-Range %q = %d (%q), want 400", c.path, c.cr, resp.StatusCode, body)
			}
			if got := ts.readFile(t, strings.TrimPrefix(c.path, "/")); got != c.want {
				t.Errorf("after PUT %s content = %q, want %q", c.path, got, c.want)
			}
		})
	}
	noTemps(t, ts.root)
}

// TestWritePreconditions: every state-changing method evaluates
// If-Match, If-None-Match and If-Unmodified-Since (RFC 9110 §13.1,
// §13.2.2) and answers 412 without changing anything when one fails.
func TestWritePreconditions(t *testing.T) {
	ts := startServer(t, Config{})
	mtime := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	past := mtime.Add(-24 * time.Hour).Format(http.TimeFormat)
	later := mtime.Add(24 * time.Hour).Format(http.TimeFormat)
	patch := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x"><D:set><D:prop><Z:color>red</Z:color></D:prop></D:set></D:propertyupdate>`
	const tagHolder = "{etag}"
	cases := []struct {
		name   string
		method string
		hdr    []string
		body   string
		want   int
		// what the file (and the destination, for COPY/MOVE) hold afterwards
		wantSrc, wantDst string
	}{
		{"put if-none-match star on existing", "PUT", []string{"If-None-Match", "*"}, "new", 412, content, ""},
		{"put if-none-match tag", "PUT", []string{"If-None-Match", tagHolder}, "new", 412, content, ""},
		{"put if-match nope", "PUT", []string{"If-Match", `"nope"`}, "new", 412, content, ""},
		{"put if-match weak", "PUT", []string{"If-Match", "W/" + tagHolder}, "new", 412, content, ""},
		{"put if-unmodified-since past", "PUT", []string{"If-Unmodified-Since", past}, "new", 412, content, ""},
		{"put if-match current", "PUT", []string{"If-Match", tagHolder}, "new", 204, "new", ""},
		{"put if-match star", "PUT", []string{"If-Match", "*"}, "new", 204, "new", ""},
		{"put if-unmodified-since later", "PUT", []string{"If-Unmodified-Since", later}, "new", 204, "new", ""},
		{"put if-none-match other", "PUT", []string{"If-None-Match", `"other"`}, "new", 204, "new", ""},
		{"delete if-match nope", "DELETE", []string{"If-Match", `"nope"`}, "", 412, content, ""},
		{"delete if-none-match star", "DELETE", []string{"If-None-Match", "*"}, "", 412, content, ""},
		{"delete if-unmodified-since past", "DELETE", []string{"If-Unmodified-Since", past}, "", 412, content, ""},
		{"delete if-match current", "DELETE", []string{"If-Match", tagHolder}, "", 204, "<absent>", ""},
		{"proppatch if-match nope", "PROPPATCH", []string{"If-Match", `"nope"`}, patch, 412, content, ""},
		{"copy if-match nope", "COPY", []string{"If-Match", `"nope"`, "Destination", "/DST"}, "", 412, content, "<absent>"},
		{"copy if-none-match star", "COPY", []string{"If-None-Match", "*", "Destination", "/DST"}, "", 412, content, "<absent>"},
		{"copy if-match current", "COPY", []string{"If-Match", tagHolder, "Destination", "/DST"}, "", 201, content, content},
		{"move if-match nope", "MOVE", []string{"If-Match", `"nope"`, "Destination", "/DST"}, "", 412, content, "<absent>"},
		{"move if-unmodified-since past", "MOVE", []string{"If-Unmodified-Since", past, "Destination", "/DST"}, "", 412, content, "<absent>"},
		{"move if-match current", "MOVE", []string{"If-Match", tagHolder, "Destination", "/DST"}, "", 201, "<absent>", content},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("f%d", i)
			dst := fmt.Sprintf("d%d", i)
			ts.write(t, name, content, mtime)
			head, _ := ts.do(t, "HEAD", "/"+name, nil)
			tag := head.Header.Get("Etag")
			hdr := make([]string, len(c.hdr))
			for j, v := range c.hdr {
				v = strings.ReplaceAll(v, tagHolder, tag)
				hdr[j] = strings.ReplaceAll(v, "/DST", "/"+dst)
			}
			var body *strings.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
			}
			var resp *http.Response
			var rb string
			if body != nil {
				resp, rb = ts.do(t, c.method, "/"+name, body, hdr...)
			} else {
				resp, rb = ts.do(t, c.method, "/"+name, nil, hdr...)
			}
			if resp.StatusCode != c.want {
				t.Errorf("%s with %v = %d (%q), want %d", c.method, hdr, resp.StatusCode, rb, c.want)
			}
			if got := ts.readFile(t, name); got != c.wantSrc {
				t.Errorf("%s afterwards holds %q, want %q", name, got, c.wantSrc)
			}
			if c.wantDst != "" {
				if got := ts.readFile(t, dst); got != c.wantDst {
					t.Errorf("%s afterwards holds %q, want %q", dst, got, c.wantDst)
				}
			}
			if c.method == "PROPPATCH" && c.want == 412 {
				find := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><Z:color xmlns:Z="urn:x"/></D:prop></D:propfind>`
				_, pb := ts.do(t, "PROPFIND", "/"+name, strings.NewReader(find), "Depth", "0")
				if strings.Contains(pb, ">red<") {
					t.Errorf("refused PROPPATCH set the property: %s", pb)
				}
			}
		})
	}

	// On a missing target: If-Match (even "*") fails for the methods that
	// would create it (PUT, MKCOL); If-None-Match: * is the create-only
	// idiom and passes.
	missing := []struct {
		name, method string
		hdr          []string
		want         int
		wantExists   bool
	}{
		{"put if-match star", "PUT", []string{"If-Match", "*"}, 412, false},
		{"put if-match tag", "PUT", []string{"If-Match", `"x"`}, 412, false},
		{"put if-none-match star", "PUT", []string{"If-None-Match", "*"}, 201, true},
		{"put if-unmodified-since past", "PUT", []string{"If-Unmodified-Since", past}, 201, true},
		{"mkcol if-match star", "MKCOL", []string{"If-Match", "*"}, 412, false},
		{"mkcol if-none-match star", "MKCOL", []string{"If-None-Match", "*"}, 201, true},
	}
	for i, c := range missing {
		t.Run("missing "+c.name, func(t *testing.T) {
			p := fmt.Sprintf("/missing%d", i)
			var resp *http.Response
			var rb string
			if c.method == "PUT" {
				resp, rb = ts.do(t, c.method, p, strings.NewReader("x"), c.hdr...)
			} else {
				resp, rb = ts.do(t, c.method, p, nil, c.hdr...)
			}
			if resp.StatusCode != c.want {
				t.Errorf("%s %s with %v = %d (%q), want %d", c.method, p, c.hdr, resp.StatusCode, rb, c.want)
			}
			_, err := os.Lstat(filepath.Join(ts.root, p))
			if exists := err == nil; exists != c.wantExists {
				t.Errorf("%s exists = %v after %s, want %v", p, exists, c.method, c.wantExists)
			}
		})
	}
	noTemps(t, ts.root)
}

// TestPutIfMatchRace: conditional PUTs that all carry If-Match of the
// same ETag and reach the commit together: exactly one may win, the
// others get 412, and the file holds the winner's body. writeChunk holds
// every upload until all have passed the early check, so a check made
// only before the upload would let all of them through.
func TestPutIfMatchRace(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "f", content, time.Time{})
	head, _ := ts.do(t, "HEAD", "/f", nil)
	tag := head.Header.Get("Etag")

	const n = 6
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	var once sync.Map
	ts.s.writeChunk = func(f *os.File, p []byte) (int, error) {
		if _, loaded := once.LoadOrStore(f, true); !loaded {
			arrived.Done()
			<-all
		}
		return f.Write(p)
	}
	type result struct {
		code int
		body string
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			b := fmt.Sprintf("body-%d", i)
			req, _ := http.NewRequest("PUT", ts.url+"/f", strings.NewReader(b))
			req.Header.Set("If-Match", tag)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				results <- result{0, err.Error()}
				return
			}
			resp.Body.Close()
			results <- result{resp.StatusCode, b}
		}()
	}
	wins, refused := 0, 0
	var winner string
	for range n {
		r := <-results
		switch r.code {
		case http.StatusNoContent:
			wins++
			winner = r.body
		case http.StatusPreconditionFailed:
			refused++
		default:
			t.Errorf("conditional PUT = %d (%s), want 204 or 412", r.code, r.body)
		}
	}
	if wins != 1 || refused != n-1 {
		t.Errorf("%d PUTs with If-Match %s: %d won, %d refused; want 1 and %d", n, tag, wins, refused, n-1)
	}
	if got := ts.readFile(t, "f"); wins == 1 && got != winner {
		t.Errorf("file holds %q, want the winner's %q", got, winner)
	}
	noTemps(t, ts.root)
}

// TestPutIfMatchDeleteRace: an unconditional DELETE arriving while a PUT
// with If-Match of the file it removes is between its check and its
// rename waits for the rename (the path's lock): the PUT commits, then
// the DELETE removes what it committed. Never the other order, where the
// DELETE answers first and the PUT then commits over nothing although its
// condition was false by then, undoing the DELETE.
func TestPutIfMatchDeleteRace(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "f", "old", time.Time{})
	head, _ := ts.do(t, "HEAD", "/f", nil)
	tag := head.Header.Get("Etag")
	atRename, goOn := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ts.s.commitRename = func(oldname, newname string) error {
		once.Do(func() { close(atRename); <-goOn })
		return ts.s.root.Rename(oldname, newname)
	}
	answer := func(method string, body string, hdr ...string) chan int {
		c := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest(method, ts.url+"/f", strings.NewReader(body))
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("%s: %v", method, err)
				c <- 0
				return
			}
			resp.Body.Close()
			c <- resp.StatusCode
		}()
		return c
	}
	putDone := answer(http.MethodPut, "new", "If-Match", tag)
	<-atRename
	delDone := answer(http.MethodDelete, "")
	// The DELETE must queue for the path's lock; if it answers instead,
	// it did not wait.
	early := 0
	testenv.Eventually(t, 10*time.Second, "the DELETE answered or waited for the path's lock", func() bool {
		select {
		case early = <-delDone:
			t.Errorf("DELETE answered %d while a PUT with If-Match of the file was between its check and its rename", early)
		default:
		}
		return early != 0 || ts.s.paths.holders("/f") >= 2
	})
	close(goOn)
	putCode := <-putDone
	delCode := early
	if delCode == 0 {
		delCode = <-delDone
	}
	if putCode != http.StatusNoContent || delCode != http.StatusNoContent {
		t.Errorf("PUT with If-Match = %d, DELETE = %d; want 204 and 204", putCode, delCode)
	}
	if got := ts.readFile(t, "f"); got != "<absent>" {
		t.Errorf("after the PUT and the DELETE that waited for it, f holds %q: the DELETE was undone", got)
	}
	noTemps(t, ts.root)
}

// TestChecksumInPlaceRewrite: a same-size rewrite in place with the mtime
// put back (touch -d) must not keep serving the old checksum or ETag: the
// fingerprint includes what users cannot set (ctime, inode).
func TestChecksumInPlaceRewrite(t *testing.T) {
	ts := startServer(t, Config{})
	mtime := time.Now().Add(-time.Hour).Truncate(time.Second)
	ts.write(t, "w", "Wikipedia", mtime)
	resp, _ := ts.do(t, "HEAD", "/w", nil, "Want-Digest", "adler32")
	sumA, tagA := resp.Header.Get("Digest"), resp.Header.Get("Etag")
	if sumA != "adler32="+adlerHex("Wikipedia") {
		t.Fatalf("first Digest = %q, want adler32=%s", sumA, adlerHex("Wikipedia"))
	}
	// Second request: the sum is kept (not computed again).
	n := counterValue(ts.s.m.computed)
	resp, _ = ts.do(t, "HEAD", "/w", nil, "Want-Digest", "adler32")
	if resp.Header.Get("Digest") != sumA || counterValue(ts.s.m.computed) != n {
		t.Fatalf("repeat HEAD: Digest %q, computed %v→%v; want the kept %q", resp.Header.Get("Digest"), n, counterValue(ts.s.m.computed), sumA)
	}

	p := filepath.Join(ts.root, "w")
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("Wikipedie"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	resp, _ = ts.do(t, "HEAD", "/w", nil, "Want-Digest", "adler32")
	if got, want := resp.Header.Get("Digest"), "adler32="+adlerHex("Wikipedie"); got != want {
		t.Errorf("Digest after in-place rewrite = %q, want %q", got, want)
	}
	if got := resp.Header.Get("Etag"); got == tagA {
		t.Errorf("ETag after in-place rewrite = %q, unchanged", got)
	}
	// The GET path (and the fast path) agree on the new ETag.
	resp, _ = ts.do(t, "GET", "/w", nil)
	if got := resp.Header.Get("Etag"); got == tagA {
		t.Errorf("GET ETag after in-place rewrite = %q, unchanged", got)
	}
}

// TestPutKeepsSum: the adler32 PUT computes while receiving is kept, and
// the first HEAD Want-Digest after the PUT answers from it.
func TestPutKeepsSum(t *testing.T) {
	ts := startServer(t, Config{})
	for i, status := range []int{201, 204} {
		body := fmt.Sprintf("payload %d", i)
		resp, rb := ts.do(t, "PUT", "/p", strings.NewReader(body))
		wantStatus(t, resp, rb, status)
		putTag := resp.Header.Get("Etag")
		computed, hits := counterValue(ts.s.m.computed), counterValue(ts.s.m.cacheHits)
		resp, _ = ts.do(t, "HEAD", "/p", nil, "Want-Digest", "adler32")
		if got, want := resp.Header.Get("Digest"), "adler32="+adlerHex(body); got != want {
			t.Errorf("Digest after PUT = %q, want %q", got, want)
		}
		if counterValue(ts.s.m.computed) != computed || counterValue(ts.s.m.cacheHits) != hits+1 {
			t.Errorf("HEAD after PUT computed the sum (computed %v→%v, hits %v→%v), want it kept",
				computed, counterValue(ts.s.m.computed), hits, counterValue(ts.s.m.cacheHits))
		}
		if got := resp.Header.Get("Etag"); got != putTag {
			t.Errorf("HEAD ETag %q != PUT's ETag %q", got, putTag)
		}
	}
}

// TestPutKeepsDeadProps: RFC 4918 §9.7.1, a PUT replacing a resource
// keeps its dead properties.
func TestPutKeepsDeadProps(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "f", content, time.Time{})
	patch := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x"><D:set><D:prop><Z:color>blue</Z:color></D:prop></D:set></D:propertyupdate>`
	resp, body := ts.do(t, "PROPPATCH", "/f", strings.NewReader(patch))
	wantStatus(t, resp, body, 207)
	resp, body = ts.do(t, "PUT", "/f", strings.NewReader("new content"))
	wantStatus(t, resp, body, 204)
	find := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><Z:color xmlns:Z="urn:x"/></D:prop></D:propfind>`
	resp, body = ts.do(t, "PROPFIND", "/f", strings.NewReader(find), "Depth", "0")
	wantStatus(t, resp, body, 207)
	if !strings.Contains(body, ">blue<") {
		t.Errorf("dead property lost by PUT: %s", body)
	}
	if got := ts.readFile(t, "f"); got != "new content" {
		t.Errorf("content = %q, want new content", got)
	}
}

// TestGetRangeEdges: RFC 9110 §14.1.2 unsatisfiable ranges get 416 with
// "bytes */size"; a Range that would amplify the answer is refused; a
// Range of another unit is ignored.
func TestGetRangeEdges(t *testing.T) {
	ts := startServer(t, Config{})
	hundred := strings.Repeat("0123456789", 10)
	ts.write(t, "h", hundred, time.Time{})
	ts.write(t, "empty", "", time.Time{})
	many := "bytes=" + strings.TrimSuffix(strings.Repeat("0-0,", 101), ",")
	cases := []struct {
		name, path, rg string
		want           int
		wantCR         string
		wantBody       string
	}{
		{"suffix zero", "/h", "bytes=-0", 416, "bytes */100", ""},
		{"suffix on empty", "/empty", "bytes=-5", 416, "bytes */0", ""},
		{"from zero on empty", "/empty", "bytes=0-", 416, "bytes */0", ""},
		{"suffix zero and past end", "/h", "bytes=-0,200-", 416, "bytes */100", ""},
		{"overlapping", "/h", "bytes=0-,0-,0-", 416, "bytes */100", ""},
		{"sum over size", "/h", "bytes=0-59,40-99", 416, "bytes */100", ""},
		{"too many", "/h", many, 416, "bytes */100", ""},
		{"suffix", "/h", "bytes=-3", 206, "bytes 97-99/100", "789"},
		{"suffix longer than file", "/h", "bytes=-500", 206, "bytes 0-99/100", hundred},
		{"clipped", "/h", "bytes=95-200", 206, "bytes 95-99/100", "56789"},
		{"satisfiable among unsatisfiable", "/h", "bytes=200-300,0-0", 206, "bytes 0-0/100", "0"},
		// RFC 9110 §14.2: a Range with a unit the server does not
		// understand is ignored (200, the whole file), not refused.
		{"unknown unit", "/h", "items=0-1", 200, "", hundred},
		{"unknown unit, unsatisfiable as bytes", "/h", "items=500-600", 200, "", hundred},
		{"unknown unit on empty", "/empty", "items=0-", 200, "", ""},
		// Range units are case-insensitive (§14.1).
		{"bytes in upper case", "/h", "BYTES=95-200", 206, "bytes 95-99/100", "56789"},
		{"no unit", "/h", "=0-1", 416, "bytes */100", ""},
		{"no equals sign", "/h", "bytes", 416, "bytes */100", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := ts.do(t, "GET", c.path, nil, "Range", c.rg)
			if resp.StatusCode != c.want || resp.Header.Get("Content-Range") != c.wantCR {
				t.Errorf("GET %s Range %.40q = %d Content-Range %q, want %d %q", c.path, c.rg, resp.StatusCode, resp.Header.Get("Content-Range"), c.want, c.wantCR)
			}
			if c.want != 416 && body != c.wantBody {
				t.Errorf("GET %s Range %q body = %q, want %q", c.path, c.rg, body, c.wantBody)
			}
		})
	}
}
