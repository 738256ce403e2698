package storage

import (
	"bufio"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/webdav"
	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
)

// recorder wraps a handler and keeps the method and Authorization of
// every request it sees.
type recorder struct {
	h    http.Handler
	mu   sync.Mutex
	seen []string // "METHOD auth"
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.seen = append(rc.seen, r.Method+" "+r.Header.Get("Authorization"))
	rc.mu.Unlock()
	rc.h.ServeHTTP(w, r)
}

func (rc *recorder) requests() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.seen...)
}

// remote starts an httptest server (127.0.0.1) in front of h.
func remote(t *testing.T, h http.Handler) (*httptest.Server, *recorder) {
	t.Helper()
	rc := &recorder{h: h}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return srv, rc
}

// tpcOutcome is a parsed 202 body.
type tpcOutcome struct {
	markers []int64 // Stripe Bytes Transferred of each marker
	last    string  // the success: or failure: line
}

// copyTPC sends a third-party COPY to ts and parses the streamed answer.
func copyTPC(t *testing.T, ts *testServer, p string, hdr ...string) (*http.Response, tpcOutcome) {
	t.Helper()
	req, err := http.NewRequest("COPY", ts.url+p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("COPY %s: %v", p, err)
	}
	defer resp.Body.Close()
	var out tpcOutcome
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		out.last = string(b)
		return resp, out
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain" {
		t.Errorf("Content-Type = %q, want text/plain", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	inMarker, fields := false, 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "Perf Marker":
			inMarker, fields = true, 0
		case line == "End":
			if !inMarker || fields != 4 {
				t.Errorf("marker ended with %d fields, want 4", fields)
			}
			inMarker = false
		case inMarker:
			k, v, ok := strings.Cut(strings.TrimPrefix(line, "\t"), ": ")
			if !ok || !strings.HasPrefix(line, "\t") {
				t.Errorf("marker line %q", line)
			}
			fields++
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Errorf("marker %s = %q: not a number", k, v)
			}
			switch k {
			case "Stripe Bytes Transferred":
				out.markers = append(out.markers, n)
			case "Timestamp":
				if d := time.Since(time.Unix(n, 0)); d < -time.Minute || d > time.Minute {
					t.Errorf("marker Timestamp %d is not now", n)
				}
			case "Stripe Index":
				if n != 0 {
					t.Errorf("Stripe Index %d", n)
				}
			case "Total Stripe Count":
				if n != 1 {
					t.Errorf("Total Stripe Count %d", n)
				}
			}
		case strings.HasPrefix(line, "success:"), strings.HasPrefix(line, "failure:"):
			if out.last != "" {
				t.Errorf("second outcome line %q after %q", line, out.last)
			}
			out.last = line
		default:
			t.Errorf("unexpected line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the COPY answer: %v", err)
	}
	return resp, out
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// wantFile checks that the file at name under root holds data.
func wantFile(t *testing.T, root, name string, data []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	if string(got) != string(data) {
		t.Fatalf("%s holds %d bytes, not the %d sent (or other bytes)", name, len(got), len(data))
	}
}

// noFile checks that nothing is at name under root.
func noFile(t *testing.T, root, name string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(root, name)); err == nil {
		t.Errorf("%s exists after a failed copy", name)
	}
}

// TestTPCPull pulls a file from one storage role into another: the bytes
// arrive whole, the TransferHeaderAuthorization reaches the source as
// Authorization (and nothing else of the client's does), and the
// adler32 is kept at the destination as a PUT keeps it.
func TestTPCPull(t *testing.T) {
	src := startServer(t, Config{TPC: true})
	dst := startServer(t, Config{TPC: true})
	data := randomBytes(t, 3<<20+17)
	src.write(t, "in/f.bin", string(data), time.Time{})
	front, rec := remote(t, src.s.Handler())

	resp, out := copyTPC(t, dst, "/new/dir/f.bin", "Source", front.URL+"/in/f.bin",
		"TransferHeaderAuthorization", "Bearer sekrit", "Authorization", "Bearer for-dst-only", "Credential", "none")
	wantStatus(t, resp, out.last, http.StatusAccepted)
	if out.last != "success: Created" {
		t.Fatalf("outcome %q, want success: Created", out.last)
	}
	if len(out.markers) == 0 {
		t.Error("no performance marker")
	}
	wantFile(t, dst.root, "new/dir/f.bin", data)
	noTemps(t, dst.root)
	for _, r := range rec.requests() {
		if r != "GET Bearer sekrit" && r != "HEAD Bearer sekrit" {
			t.Errorf("source saw %q, want GET/HEAD with the TransferHeader's token", r)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dst.root, "new/dir/f.bin"), &st); err != nil {
		t.Fatal(err)
	}
	if v, ok := dst.s.cachedSum(httpx.Adler32, &st); !ok || v != adlerHex(string(data)) {
		t.Errorf("kept adler32 = %q, %v, want %s (kept as PUT keeps it)", v, ok, adlerHex(string(data)))
	}
}

// TestTPCPush pushes a file to another storage role: the remote gets the
// bytes with the forwarded Authorization, then is asked for its adler32.
func TestTPCPush(t *testing.T) {
	src := startServer(t, Config{TPC: true})
	dst := startServer(t, Config{TPC: true})
	data := randomBytes(t, 2<<20+5)
	src.write(t, "f.bin", string(data), time.Time{})
	front, rec := remote(t, dst.s.Handler())

	resp, out := copyTPC(t, src, "/f.bin", "Destination", front.URL+"/out/f.bin",
		"TransferHeaderAuthorization", "Bearer tok")
	wantStatus(t, resp, out.last, http.StatusAccepted)
	if out.last != "success: Created" {
		t.Fatalf("outcome %q, want success: Created", out.last)
	}
	wantFile(t, dst.root, "out/f.bin", data)
	got := strings.Join(rec.requests(), ",")
	if got != "PUT Bearer tok,HEAD Bearer tok" {
		t.Errorf("destination saw %q, want the PUT then the checksum HEAD, both with the token", got)
	}
}

// TestTPCPullCorrupt: a source whose bytes do not match the adler32 it
// announces (in the GET's Digest, or only when asked with HEAD) fails
// the copy, and nothing is left at the destination.
func TestTPCPullCorrupt(t *testing.T) {
	data := randomBytes(t, 1<<20)
	bad := append([]byte(nil), data...)
	bad[4711] ^= 1
	for _, tc := range []struct {
		name     string
		inGet    bool // the Digest comes with the GET, else only with HEAD
		wantFail bool
		body     []byte
	}{
		{"digest on GET", true, true, bad},
		{"digest on HEAD", false, true, bad},
		{"good, digest on HEAD", false, false, data},
	} {
		t.Run(tc.name, func(t *testing.T) {
			front, _ := remote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Want-Digest") == "" {
					t.Errorf("%s without Want-Digest", r.Method)
				}
				if r.Method == http.MethodHead || tc.inGet {
					w.Header().Set("Digest", "adler32="+adlerHex(string(data)))
				}
				w.Header().Set("Content-Length", strconv.Itoa(len(tc.body)))
				if r.Method == http.MethodGet {
					w.Write(tc.body)
				}
			}))
			dst := startServer(t, Config{TPC: true})
			_, out := copyTPC(t, dst, "/f", "Source", front.URL+"/f")
			if !tc.wantFail {
				if out.last != "success: Created" {
					t.Fatalf("outcome %q, want success", out.last)
				}
				wantFile(t, dst.root, "f", data)
				return
			}
			if !strings.HasPrefix(out.last, "failure: ") || !strings.Contains(out.last, "adler32 mismatch") {
				t.Errorf("outcome %q, want a failure for the adler32 mismatch", out.last)
			}
			noFile(t, dst.root, "f")
			noTemps(t, dst.root)
		})
	}
}

// TestTPCPushCorrupt: a destination that reports another adler32 after
// the PUT fails the push, and the bad copy is deleted there.
func TestTPCPushCorrupt(t *testing.T) {
	src := startServer(t, Config{TPC: true})
	src.write(t, "f", content, time.Time{})
	front, rec := remote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusCreated)
		case http.MethodHead:
			w.Header().Set("Digest", "adler32=00000001")
			w.Header().Set("Content-Length", strconv.Itoa(len(content)))
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	_, out := copyTPC(t, src, "/f", "Destination", front.URL+"/g")
	if !strings.HasPrefix(out.last, "failure: ") || !strings.Contains(out.last, "adler32 mismatch") {
		t.Errorf("outcome %q, want a failure for the adler32 mismatch", out.last)
	}
	if got := strings.Join(rec.requests(), ","); got != "PUT ,HEAD ,DELETE " {
		t.Errorf("destination saw %q, want PUT, HEAD, DELETE", got)
	}
}

// TestTPCRemoteFailures: a missing source, a refusing destination and a
// redirect loop are failure lines, and leave nothing behind.
func TestTPCRemoteFailures(t *testing.T) {
	var loop *httptest.Server
	loop, _ = remote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, loop.URL+r.URL.Path, http.StatusFound)
	}))
	empty := startServer(t, Config{TPC: true})
	nowhere, _ := remote(t, empty.s.Handler())
	refusing, _ := remote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	ts := startServer(t, Config{TPC: true})
	ts.write(t, "have", content, time.Time{})
	for _, tc := range []struct {
		name, path, hdr, url, want string
	}{
		{"source 404", "/f", "Source", nowhere.URL + "/missing", "failure: source answered 404 Not Found"},
		{"redirect loop", "/f", "Source", loop.URL + "/x", "more than 10 redirects"},
		{"destination 403", "/have", "Destination", refusing.URL + "/x", "failure: destination answered 403 Forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := copyTPC(t, ts, tc.path, tc.hdr, tc.url)
			wantStatus(t, resp, out.last, http.StatusAccepted)
			if !strings.HasPrefix(out.last, "failure: ") || !strings.Contains(out.last, tc.want) {
				t.Errorf("outcome %q, want a failure with %q", out.last, tc.want)
			}
			noFile(t, ts.root, "f")
			noTemps(t, ts.root)
		})
	}
}

// TestTPCMarkers: with a short marker interval, a slow source gives
// several markers whose byte counts grow, before the outcome.
func TestTPCMarkers(t *testing.T) {
	const chunks, size = 8, 64 << 10
	front, _ := remote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(chunks*size))
		if r.Method != http.MethodGet {
			return
		}
		rc := http.NewResponseController(w)
		buf := make([]byte, size)
		for range chunks {
			w.Write(buf)
			rc.Flush()
			time.Sleep(40 * time.Millisecond) // a slow source: the copy must last several marker intervals
		}
	}))
	ts := startServer(t, Config{TPC: true, TPCMarkerInterval: 10 * time.Millisecond})
	_, out := copyTPC(t, ts, "/slow", "Source", front.URL+"/slow")
	if out.last != "success: Created" {
		t.Fatalf("outcome %q, want success", out.last)
	}
	if len(out.markers) < 5 {
		t.Fatalf("%d markers over ~300 ms at a 10 ms interval, want several", len(out.markers))
	}
	for i := 1; i < len(out.markers); i++ {
		if out.markers[i] < out.markers[i-1] {
			t.Errorf("marker bytes went down: %v", out.markers)
		}
	}
	if first, last := out.markers[0], out.markers[len(out.markers)-1]; first != 0 || last == 0 || last > chunks*size {
		t.Errorf("markers %v: want from 0 up to at most %d", out.markers, chunks*size)
	}
}

// stallingSource sends half its announced body, then nothing until the
// request ends; it reports when its handler has returned.
func stallingSource(t *testing.T) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	gone := make(chan struct{}, 1)
	front, _ := remote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2000")
		if r.Method != http.MethodGet {
			return
		}
		w.Write(make([]byte, 1000))
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		gone <- struct{}{}
	}))
	return front, gone
}

// TestTPCIdle: a source that stops sending fails the copy after the idle
// timeout, and the partial file is removed.
func TestTPCIdle(t *testing.T) {
	front, gone := stallingSource(t)
	ts := startServer(t, Config{TPC: true, TPCIdleTimeout: 150 * time.Millisecond, TPCMarkerInterval: time.Hour})
	start := time.Now()
	_, out := copyTPC(t, ts, "/f", "Source", front.URL+"/f")
	if !strings.HasPrefix(out.last, "failure: ") || !strings.Contains(out.last, "no progress") {
		t.Errorf("outcome %q, want a failure for no progress", out.last)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the stalled copy took %v to fail", d)
	}
	<-gone
	noFile(t, ts.root, "f")
	noTemps(t, ts.root)
}

// TestTPCClientGone: a client that goes away cancels the pull: the
// source's request ends and no temp file stays.
func TestTPCClientGone(t *testing.T) {
	front, gone := stallingSource(t)
	ts := startServer(t, Config{TPC: true, TPCMarkerInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "COPY", ts.url+"/f", nil)
	req.Header.Set("Source", front.URL+"/f")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for a marker saying the bytes are flowing, then leave.
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("answer ended before any progress: %v", err)
		}
		if strings.Contains(line, "Stripe Bytes Transferred: 1000") {
			break
		}
	}
	cancel()
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the source request was not cancelled after the client left")
	}
	left := 0
	if !testenv.Within(5*time.Second, func() bool {
		entries, _ := os.ReadDir(ts.root)
		left = 0
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), uploadPrefix) || e.Name() == "f" {
				left++
			}
		}
		return left == 0
	}) {
		t.Fatalf("%d entries left after the client went away", left)
	}
}

// TestTPCRefusals: what is known wrong before the copy starts gets a
// status, and no remote request is made.
func TestTPCRefusals(t *testing.T) {
	front, rec := remote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ts := startServer(t, Config{TPC: true})
	ts.write(t, "exists", content, time.Time{})
	ts.write(t, "locked", content, time.Time{})
	if err := os.Mkdir(filepath.Join(ts.root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.s.locks.Create(time.Now(), webdav.LockDetails{Root: "/locked", Duration: time.Minute, ZeroDepth: true}, false); err != nil {
		t.Fatal(err)
	}
	src := front.URL + "/f"
	for _, tc := range []struct {
		name string
		path string
		hdr  []string
		code int
	}{
		{"ftp source", "/f", []string{"Source", "ftp://127.0.0.1/f"}, http.StatusBadRequest},
		{"no host", "/f", []string{"Source", "http:///f"}, http.StatusBadRequest},
		{"userinfo", "/f", []string{"Source", "http://u:p@" + strings.TrimPrefix(front.URL, "http://") + "/f"}, http.StatusBadRequest},
		{"delegation", "/f", []string{"Source", src, "Credential", "gridsite"}, http.StatusBadRequest},
		{"forward Host", "/f", []string{"Source", src, "TransferHeaderHost", "evil"}, http.StatusBadRequest},
		{"both", "/f", []string{"Source", src, "Destination", front.URL + "/g"}, http.StatusBadRequest},
		{"locked destination", "/locked", []string{"Source", src}, http.StatusLocked},
		{"onto a collection", "/dir", []string{"Source", src}, http.StatusConflict},
		{"Overwrite F", "/exists", []string{"Source", src, "Overwrite", "F"}, http.StatusPreconditionFailed},
		{"If-Match", "/exists", []string{"Source", src, "If-Match", `"nope"`}, http.StatusPreconditionFailed},
		{"push of a missing file", "/missing", []string{"Destination", front.URL + "/g"}, http.StatusNotFound},
		{"push of a collection", "/dir", []string{"Destination", front.URL + "/g"}, http.StatusForbidden},
		{"the root", "/", []string{"Source", src}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := ts.do(t, "COPY", tc.path, nil, tc.hdr...)
			wantStatus(t, resp, body, tc.code)
		})
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("%d remote requests for refused copies", n)
	}
	wantFile(t, ts.root, "locked", []byte(content))
	wantFile(t, ts.root, "exists", []byte(content))
}

// TestTPCLocalCopyStillWebDAV: a COPY whose Destination is this server
// stays the WebDAV COPY of copy.go.
func TestTPCLocalCopyStillWebDAV(t *testing.T) {
	ts := startServer(t, Config{TPC: true})
	ts.write(t, "a", content, time.Time{})
	resp, body := ts.do(t, "COPY", "/a", nil, "Destination", ts.url+"/b")
	wantStatus(t, resp, body, http.StatusCreated)
	wantFile(t, ts.root, "b", []byte(content))
}

// TestTPCOff: without Config.TPC a third-party COPY is refused with 403
// and the server asks no remote anything.
func TestTPCOff(t *testing.T) {
	front, rec := remote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ts := startServer(t, Config{})
	ts.write(t, "a", content, time.Time{})
	for _, hdr := range [][]string{{"Source", front.URL + "/a"}, {"Destination", front.URL + "/a"}} {
		resp, body := ts.do(t, "COPY", "/a", nil, hdr...)
		wantStatus(t, resp, body, http.StatusForbidden)
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("%d remote requests with TPC off", n)
	}
}

// TestTPCLockToken: a pull into a locked file goes ahead when the request
// submits the lock's token, as any write would.
func TestTPCLockToken(t *testing.T) {
	src := startServer(t, Config{TPC: true})
	src.write(t, "f", content, time.Time{})
	dst := startServer(t, Config{TPC: true})
	dst.write(t, "locked", "old", time.Time{})
	tok, err := dst.s.locks.Create(time.Now(), webdav.LockDetails{Root: "/locked", Duration: time.Minute, ZeroDepth: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	resp, out := copyTPC(t, dst, "/locked", "Source", src.url+"/f")
	wantStatus(t, resp, out.last, http.StatusLocked)
	_, out = copyTPC(t, dst, "/locked", "Source", src.url+"/f", "If", "(<"+tok+">)")
	if out.last != "success: Created" {
		t.Fatalf("outcome %q with the lock token, want success", out.last)
	}
	wantFile(t, dst.root, "locked", []byte(content))
}

// TestTPCPushRedirect: a push follows a 307 to where the data goes (the
// PUT is sent again from the start), but not a 302, which would turn the
// PUT into a GET.
func TestTPCPushRedirect(t *testing.T) {
	src := startServer(t, Config{TPC: true})
	data := randomBytes(t, 1<<20+3)
	src.write(t, "f", string(data), time.Time{})
	pool := startServer(t, Config{})
	for _, tc := range []struct {
		code int
		ok   bool
	}{{http.StatusTemporaryRedirect, true}, {http.StatusFound, false}} {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			door, _ := remote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, pool.url+r.URL.Path, tc.code)
			}))
			name := "/r" + strconv.Itoa(tc.code)
			_, out := copyTPC(t, src, "/f", "Destination", door.URL+name)
			if !tc.ok {
				if !strings.HasPrefix(out.last, "failure: ") || !strings.Contains(out.last, "turns PUT into GET") {
					t.Errorf("outcome %q, want a failure for the method change", out.last)
				}
				noFile(t, pool.root, name)
				return
			}
			if out.last != "success: Created" {
				t.Fatalf("outcome %q, want success", out.last)
			}
			wantFile(t, pool.root, name, data)
		})
	}
}

// TestTPCPullHTTPS: an https source is trusted through TPCCAFile, and
// refused (a failure line, nothing stored) without it.
func TestTPCPullHTTPS(t *testing.T) {
	tl := testenv.NewTLS(t)
	src := startServer(t, Config{TLSCert: tl.CertFile, TLSKey: tl.KeyFile})
	src.write(t, "f", content, time.Time{})
	for _, tc := range []struct {
		name, ca string
		ok       bool
	}{{"with the CA", tl.CAFile, true}, {"without", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dst := startServer(t, Config{TPC: true, TPCCAFile: tc.ca})
			_, out := copyTPC(t, dst, "/f", "Source", src.url+"/f")
			if !tc.ok {
				if !strings.HasPrefix(out.last, "failure: ") || !strings.Contains(out.last, "certificate") {
					t.Errorf("outcome %q, want a certificate failure", out.last)
				}
				noFile(t, dst.root, "f")
				return
			}
			if out.last != "success: Created" {
				t.Fatalf("outcome %q, want success", out.last)
			}
			wantFile(t, dst.root, "f", []byte(content))
		})
	}
}
