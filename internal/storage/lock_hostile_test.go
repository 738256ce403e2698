package storage

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/storage/davlock"
	"golang.org/x/net/webdav"
)

// lockFile takes a lock on p and returns its token in angle brackets, the
// form both the Lock-Token and the If header use.
func lockFile(t *testing.T, ts *testServer, p, scope string, hdr ...string) string {
	t.Helper()
	resp, body := ts.do(t, "LOCK", p, strings.NewReader(lockXML(scope)), hdr...)
	if resp.StatusCode != 200 && resp.StatusCode != 201 {
		t.Fatalf("LOCK %s = %d (%q), want 200 or 201", p, resp.StatusCode, body)
	}
	tok := resp.Header.Get("Lock-Token")
	if !strings.HasPrefix(tok, "<opaquelocktoken:") {
		t.Fatalf("LOCK %s: Lock-Token %q", p, tok)
	}
	return tok
}

// readFile returns the bytes at name under the server's root, or "<gone>".
func readFile(t *testing.T, ts *testServer, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ts.root, name))
	if os.IsNotExist(err) {
		return "<gone>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const proppatchBody = `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:c xmlns:Z="urn:z">v</Z:c></D:prop></D:set></D:propertyupdate>`

// TestLockIfHeaderForOtherResource: a lock token is submitted only for the
// resource its If list names (RFC 4918 §10.4, §7). Client A holds TX on
// /X.txt, client B holds TV on /V.txt; A's If header naming /X.txt must not
// open /V.txt. x/net/webdav's own confirmLocks matches the tagged list
// against the resource it names and lets the request through, so the
// storage role checks locks itself. nginx's dav_ext module checks the
// token against the target's own lock; XrdHttp has no LOCK at all.
func TestLockIfHeaderForOtherResource(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "X.txt", "x", time.Time{})
	tx := lockFile(t, ts, "/X.txt", "exclusive", "Depth", "0")
	cases := []struct {
		name   string
		method string
		body   string
		ifHdr  func(tv string) string
		want   int
		kept   bool // V.txt still holds "v" afterwards
	}{
		{"put tagged absolute", "PUT", "evil", func(string) string { return "<" + ts.url + "/X.txt> (" + tx + ")" }, webdav.StatusLocked, true},
		{"put tagged path", "PUT", "evil", func(string) string { return "</X.txt> (" + tx + ")" }, webdav.StatusLocked, true},
		{"delete tagged", "DELETE", "", func(string) string { return "<" + ts.url + "/X.txt> (" + tx + ")" }, webdav.StatusLocked, true},
		{"proppatch tagged", "PROPPATCH", proppatchBody, func(string) string { return "<" + ts.url + "/X.txt> (" + tx + ")" }, webdav.StatusLocked, true},
		{"put other token untagged", "PUT", "evil", func(string) string { return "(" + tx + ")" }, http412, true},
		{"put false etag", "PUT", "new", func(tv string) string { return "(" + tv + ` ["nope"])` }, http412, true},
		{"put true but no token", "PUT", "new", func(string) string { return "(Not <DAV:no-lock>)" }, webdav.StatusLocked, true},
		{"put owner untagged", "PUT", "new", func(tv string) string { return "(" + tv + ")" }, 204, false},
		{"put owner tagged", "PUT", "new", func(tv string) string { return "<" + ts.url + "/V.txt> (" + tv + ")" }, 204, false},
		{"put owner among others", "PUT", "new", func(tv string) string { return "</X.txt> (" + tx + ") </V.txt> (" + tv + ")" }, 204, false},
		{"proppatch owner", "PROPPATCH", proppatchBody, func(tv string) string { return "(" + tv + ")" }, 207, true},
		{"delete owner", "DELETE", "", func(tv string) string { return "(" + tv + ")" }, 204, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts.write(t, "V.txt", "v", time.Time{})
			tv := lockFile(t, ts, "/V.txt", "exclusive", "Depth", "0")
			t.Cleanup(func() { ts.do(t, "UNLOCK", "/V.txt", nil, "Lock-Token", tv) })
			resp, body := ts.do(t, tc.method, "/V.txt", strings.NewReader(tc.body), "If", tc.ifHdr(tv))
			wantStatus(t, resp, body, tc.want)
			if got := readFile(t, ts, "V.txt"); (got == "v") != tc.kept {
				t.Errorf("V.txt holds %q after %s, want kept=%v", got, tc.method, tc.kept)
			}
		})
	}
}

const http412 = 412

// TestLockOnMember: DELETE, MOVE, COPY of a collection must honour locks
// on its members (RFC 4918 §9.6.1, §9.9.2, §7.5), and the destination of
// COPY and MOVE is checked like the target of a PUT. The refusal is 423
// with the lock-token-submitted precondition (§16) naming the lock root.
// Locks of resources a request removes go with them (§7: a lock belongs
// to a URL; a MOVE does not move it). nginx's dav_ext module checks the
// lock of every member on DELETE and MOVE of a collection too.
func TestLockOnMember(t *testing.T) {
	cases := []struct {
		name    string
		method  string
		target  string
		dest    string
		withTok bool   // submit the member's token, tagged with its URL
		want    int    // status
		gone    bool   // p/deep/f.txt is gone afterwards
		lockOld bool   // a PUT at the old path still needs the token
		check   string // a path that must hold "locked" afterwards (""=none)
	}{
		{"delete parent", "DELETE", "/p/deep/", "", false, webdav.StatusLocked, false, true, "p/deep/f.txt"},
		{"delete grandparent", "DELETE", "/p/", "", false, webdav.StatusLocked, false, true, "p/deep/f.txt"},
		{"move parent", "MOVE", "/p/", "/q/", false, webdav.StatusLocked, false, true, "p/deep/f.txt"},
		{"move onto locked", "MOVE", "/other.txt", "/p/deep/f.txt", false, webdav.StatusLocked, false, true, "p/deep/f.txt"},
		{"copy onto locked", "COPY", "/other.txt", "/p/deep/f.txt", false, webdav.StatusLocked, false, true, "p/deep/f.txt"},
		{"copy onto parent", "COPY", "/src/", "/p/", false, webdav.StatusLocked, false, true, "p/deep/f.txt"},
		{"delete parent with token", "DELETE", "/p/deep/", "", true, 204, true, false, ""},
		{"move parent with token", "MOVE", "/p/", "/q/", true, 201, true, false, "q/deep/f.txt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Config{})
			ts.write(t, "p/deep/f.txt", "locked", time.Time{})
			ts.write(t, "other.txt", "other", time.Time{})
			ts.write(t, "src/deep/f.txt", "src", time.Time{})
			tok := lockFile(t, ts, "/p/deep/f.txt", "exclusive", "Depth", "0")
			hdr := []string{}
			if tc.dest != "" {
				hdr = append(hdr, "Destination", ts.url+tc.dest, "Overwrite", "T")
			}
			if tc.withTok {
				hdr = append(hdr, "If", "<"+ts.url+"/p/deep/f.txt> ("+tok+")")
			}
			resp, body := ts.do(t, tc.method, tc.target, nil, hdr...)
			wantStatus(t, resp, body, tc.want)
			if tc.want == webdav.StatusLocked && (!strings.Contains(body, "lock-token-submitted") || !strings.Contains(body, "<D:href>/p/deep/f.txt</D:href>")) {
				t.Errorf("423 body lacks lock-token-submitted for /p/deep/f.txt: %s", body)
			}
			if got := readFile(t, ts, "p/deep/f.txt"); (got == "<gone>") != tc.gone {
				t.Errorf("p/deep/f.txt holds %q, want gone=%v", got, tc.gone)
			}
			if tc.check != "" {
				if got := readFile(t, ts, tc.check); got != "locked" {
					t.Errorf("%s holds %q, want %q", tc.check, got, "locked")
				}
			}
			// A lock left behind for a resource that is gone would block
			// its old path for the lock's whole lifetime.
			resp, body = ts.do(t, "PUT", "/p/deep/f.txt", strings.NewReader("new"))
			if want := map[bool]int{true: webdav.StatusLocked, false: 201}[tc.lockOld]; resp.StatusCode != want {
				t.Errorf("PUT old path = %d (%q), want %d", resp.StatusCode, body, want)
			}
		})
	}
}

// TestLockCaps: one client must not be able to stop every write on the
// server. RFC 4918 §10.7 lets the server choose the timeout, so Infinite
// (and no Timeout) becomes davlock.MaxTimeout; locks per resource and per
// server are capped, and a LOCK past a cap is 503 with Retry-After, never
// a 500 for other requests. nginx's dav_ext keeps one exclusive lock per
// resource with a configured timeout (1 min by default) in a fixed-size
// zone; XrdHttp has no LOCK.
func TestLockCaps(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "f.txt", "f", time.Time{})

	resp, body := ts.do(t, "LOCK", "/f.txt", strings.NewReader(lockXML("shared")), "Depth", "0", "Timeout", "Infinite")
	wantStatus(t, resp, body, 200)
	wantTimeout := "Second-" + strconv.Itoa(int(davlock.MaxTimeout/time.Second))
	if !strings.Contains(body, "<D:timeout>"+wantTimeout+"</D:timeout>") {
		t.Errorf("LOCK Timeout: Infinite answered %s, want timeout %s", body, wantTimeout)
	}
	for i := 1; i < davlock.MaxLocksPerResource; i++ {
		lockFile(t, ts, "/f.txt", "shared", "Depth", "0", "Timeout", "Infinite")
	}
	resp, body = ts.do(t, "LOCK", "/f.txt", strings.NewReader(lockXML("shared")), "Depth", "0")
	wantStatus(t, resp, body, 503)
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("503 Retry-After = %q, want seconds >= 1", resp.Header.Get("Retry-After"))
	}
	resp, body = ts.do(t, "PROPFIND", "/f.txt", strings.NewReader(`<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>`), "Depth", "0")
	wantStatus(t, resp, body, 207)
	if n := strings.Count(body, "<D:activelock>"); n != davlock.MaxLocksPerResource {
		t.Errorf("lockdiscovery lists %d locks, want %d", n, davlock.MaxLocksPerResource)
	}

	// Fill the server-wide table; every other write still works.
	now := time.Now()
	for i := ts.s.locks.Count(); i < davlock.MaxLocksTotal; i++ {
		if _, err := ts.s.locks.Create(now, webdav.LockDetails{Root: "/fill/" + strconv.Itoa(i), Duration: time.Hour, ZeroDepth: true}, false); err != nil {
			t.Fatalf("create lock %d: %v", i, err)
		}
	}
	resp, body = ts.do(t, "LOCK", "/g.txt", strings.NewReader(lockXML("exclusive")))
	wantStatus(t, resp, body, 503)
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	for _, step := range []struct{ method, path string }{{"PUT", "/g.txt"}, {"MKCOL", "/d"}, {"PUT", "/d/h.txt"}, {"DELETE", "/d"}} {
		var in io.Reader
		if step.method == "PUT" {
			in = strings.NewReader("g")
		}
		resp, body = ts.do(t, step.method, step.path, in)
		if resp.StatusCode >= 300 {
			t.Errorf("%s %s with a full lock table = %d (%q)", step.method, step.path, resp.StatusCode, body)
		}
	}
}

// TestLockDuringWrite: a LOCK on a file a write is changing is not
// granted while no other lock exists (the write registered with the lock
// table all the same), so no locked file is then overwritten without its
// token. Before, with the table empty, a PUT skipped the table: the LOCK
// got 201 and the PUT then overwrote the locked file.
func TestLockDuringWrite(t *testing.T) {
	ts := startServer(t, Config{})
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("PUT", ts.url+"/f.txt", pr)
		req.ContentLength = 10
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	if _, err := pw.Write([]byte("12345")); err != nil { // the PUT is in its body
		t.Fatal(err)
	}
	resp, body := ts.do(t, "LOCK", "/f.txt", strings.NewReader(lockXML("exclusive")), "Depth", "0")
	if resp.StatusCode == 200 || resp.StatusCode == 201 {
		t.Errorf("LOCK during a PUT of the same file = %d (%q), want it refused", resp.StatusCode, body)
	}
	pw.Write([]byte("67890"))
	pw.Close()
	if code := <-done; code != 201 && code != 204 {
		t.Errorf("PUT = %d", code)
	}
}
