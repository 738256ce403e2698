package storage

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/webdav"
)

func lockXML(scope string) string {
	return `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:` + scope +
		`/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner><D:href>me</D:href></D:owner></D:lockinfo>`
}

// TestSharedLocks checks what x/net/webdav alone could not do: several
// shared locks on one resource, conflicts with exclusive locks, depth
// infinity on collections, lockdiscovery, refresh and UNLOCK errors.
func TestSharedLocks(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "f.txt", content, time.Time{})

	resp, body := ts.do(t, "LOCK", "/f.txt", strings.NewReader(lockXML("shared")), "Timeout", "Second-60", "Depth", "0")
	wantStatus(t, resp, body, 200)
	tok1 := resp.Header.Get("Lock-Token")
	if !strings.HasPrefix(tok1, "<opaquelocktoken:") || !strings.Contains(body, "<D:shared/>") || !strings.Contains(body, "<D:href>me</D:href>") {
		t.Fatalf("shared LOCK: token %q body %s", tok1, body)
	}
	resp, body = ts.do(t, "LOCK", "/f.txt", strings.NewReader(lockXML("shared")), "Depth", "0")
	wantStatus(t, resp, body, 200)
	tok2 := resp.Header.Get("Lock-Token")
	if tok2 == tok1 {
		t.Fatalf("second shared lock got the same token %s", tok2)
	}
	resp, body = ts.do(t, "LOCK", "/f.txt", strings.NewReader(lockXML("exclusive")), "Depth", "0")
	wantStatus(t, resp, body, webdav.StatusLocked)

	// Either holder may write; nobody else.
	resp, body = ts.do(t, "PUT", "/f.txt", strings.NewReader("x"))
	wantStatus(t, resp, body, webdav.StatusLocked)
	resp, body = ts.do(t, "DELETE", "/f.txt", nil)
	wantStatus(t, resp, body, webdav.StatusLocked)
	resp, body = ts.do(t, "PUT", "/f.txt", strings.NewReader("x"), "If", "("+tok2+")")
	wantStatus(t, resp, body, 204)
	resp, body = ts.do(t, "PROPPATCH", "/f.txt", strings.NewReader(`<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:c xmlns:Z="urn:z">v</Z:c></D:prop></D:set></D:propertyupdate>`), "If", "("+tok1+")")
	wantStatus(t, resp, body, 207)

	// PROPFIND lists both locks.
	find := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>`
	resp, body = ts.do(t, "PROPFIND", "/f.txt", strings.NewReader(find), "Depth", "0")
	wantStatus(t, resp, body, 207)
	for _, tok := range []string{tok1, tok2} {
		if !strings.Contains(body, strings.Trim(tok, "<>")) {
			t.Errorf("lockdiscovery lacks %s: %s", tok, body)
		}
	}

	// Refresh needs a token that applies; UNLOCK a token on another resource is 409.
	resp, body = ts.do(t, "LOCK", "/f.txt", nil, "If", "("+tok1+")", "Timeout", "Second-120")
	wantStatus(t, resp, body, 200)
	if !strings.Contains(body, "Second-120") {
		t.Errorf("refresh body lacks the new timeout: %s", body)
	}
	resp, body = ts.do(t, "LOCK", "/f.txt", nil, "If", "(<opaquelocktoken:nope>)")
	wantStatus(t, resp, body, 412)
	resp, body = ts.do(t, "UNLOCK", "/", nil, "Lock-Token", tok1)
	wantStatus(t, resp, body, 409)
	resp, body = ts.do(t, "UNLOCK", "/f.txt", nil, "Lock-Token", "<opaquelocktoken:nope>")
	wantStatus(t, resp, body, 409)
	for _, tok := range []string{tok1, tok2} {
		resp, body = ts.do(t, "UNLOCK", "/f.txt", nil, "Lock-Token", tok)
		wantStatus(t, resp, body, 204)
	}
	resp, body = ts.do(t, "PUT", "/f.txt", strings.NewReader("y"))
	wantStatus(t, resp, body, 204)

	// A depth-infinity lock on a collection covers its members, also new
	// ones; a lock on an unmapped URL creates the resource (201).
	resp, body = ts.do(t, "MKCOL", "/c", nil)
	wantStatus(t, resp, body, 201)
	resp, body = ts.do(t, "LOCK", "/c", strings.NewReader(lockXML("exclusive")))
	wantStatus(t, resp, body, 200)
	ctok := resp.Header.Get("Lock-Token")
	resp, body = ts.do(t, "PUT", "/c/new", strings.NewReader("z"))
	wantStatus(t, resp, body, webdav.StatusLocked)
	resp, body = ts.do(t, "LOCK", "/c/m", strings.NewReader(lockXML("shared")))
	wantStatus(t, resp, body, webdav.StatusLocked)
	resp, body = ts.do(t, "PUT", "/c/new", strings.NewReader("z"), "If", "("+ctok+")")
	wantStatus(t, resp, body, 201)
	resp, body = ts.do(t, "UNLOCK", "/c/new", nil, "Lock-Token", ctok)
	wantStatus(t, resp, body, 204)
	resp, body = ts.do(t, "LOCK", "/c/unmapped", strings.NewReader(lockXML("exclusive")))
	wantStatus(t, resp, body, 201)

	// Bad requests.
	resp, body = ts.do(t, "LOCK", "/f.txt", strings.NewReader(lockXML("exclusive")), "Depth", "1")
	wantStatus(t, resp, body, 400)
	resp, body = ts.do(t, "LOCK", "/f.txt", strings.NewReader(`<D:lockinfo xmlns:D="DAV:"><D:locktype><D:write/></D:locktype></D:lockinfo>`))
	wantStatus(t, resp, body, 400)
	resp, body = ts.do(t, "UNLOCK", "/f.txt", nil)
	wantStatus(t, resp, body, 400)
}

// TestLockSystemExpiry checks that a lock past its timeout stops blocking
// and goes from the table without anyone asking for it, while one a
// request relies on (admit) cannot be unlocked.
func TestLockSystemExpiry(t *testing.T) {
	ls := newLockSystem()
	now := time.Unix(1000, 0)
	l, err := ls.create(now, webdav.LockDetails{Root: "/a", Duration: time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls.create(now, webdav.LockDetails{Root: "/a/b"}, false); err != webdav.ErrLocked {
		t.Fatalf("exclusive under a depth-infinity shared lock: %v, want ErrLocked", err)
	}
	release, refused := ls.admit(now, []lockTarget{{path: "/a/b"}}, func(o *davLock) bool { return o.token == l.token })
	if refused != nil {
		t.Fatalf("admit with the token refused %v", refused)
	}
	if err := ls.unlock(now, l.token, "/a"); err != webdav.ErrLocked {
		t.Errorf("unlock of a held lock: %v, want ErrLocked", err)
	}
	if _, err := ls.create(now, webdav.LockDetails{Root: "/a/b", ZeroDepth: true}, true); err != webdav.ErrLocked {
		t.Errorf("LOCK of a resource a request is changing: %v, want ErrLocked", err)
	}
	release()
	later := now.Add(2 * time.Second)
	if n := ls.count(); n != 1 {
		t.Errorf("count before expiry = %d, want 1", n)
	}
	if _, err := ls.create(later, webdav.LockDetails{Root: "/a/b"}, false); err != nil {
		t.Errorf("create after expiry: %v", err)
	}
	if err := ls.unlock(later, l.token, "/a"); err != webdav.ErrNoSuchLock {
		t.Errorf("unlock of an expired lock: %v, want ErrNoSuchLock", err)
	}
	if n := ls.count(); n != 1 {
		t.Errorf("count after expiry = %d, want 1 (the expired lock dropped)", n)
	}
}

// fillLocks puts n exclusive depth-0 locks on distinct files into ls.
func fillLocks(tb testing.TB, ls *lockSystem, now time.Time, n int) {
	tb.Helper()
	for i := range n {
		p := "/fill/" + strconv.Itoa(i%100) + "/" + strconv.Itoa(i)
		if _, err := ls.create(now, webdav.LockDetails{Root: p, Duration: time.Hour, ZeroDepth: true}, false); err != nil {
			tb.Fatalf("create %s: %v", p, err)
		}
	}
}

// TestLockCostFlat shows that LOCK, the check of a write and the
// lockdiscovery of a resource look at the same number of lock entries
// whether the table holds one other lock or maxLocksTotal-2: they walk the
// path's parents instead of scanning the table (it once scanned, and LOCK
// slowed to a few hundred a second with 65,000 locks held).
func TestLockCostFlat(t *testing.T) {
	now := time.Unix(1000, 0)
	cost := func(others int) [3]int {
		ls := newLockSystem()
		fillLocks(t, ls, now, others)
		var c [3]int
		v := ls.visited
		l, err := ls.create(now, webdav.LockDetails{Root: "/fill/7/x", ZeroDepth: true}, true)
		if err != nil {
			t.Fatal(err)
		}
		c[0], v = ls.visited-v, ls.visited
		release, _ := ls.admit(now, []lockTarget{{path: "/fill/7/x"}}, func(o *davLock) bool { return o.token == l.token })
		release()
		c[1], v = ls.visited-v, ls.visited
		ls.locksOn(now, "/fill/7/x")
		c[2] = ls.visited - v
		return c
	}
	small, full := cost(1), cost(maxLocksTotal-2)
	if small != full {
		t.Errorf("lock entries visited by create, admit, locksOn = %v with 1 other lock, %v with %d: want equal",
			small, full, maxLocksTotal-2)
	}
}

// BenchmarkLockWithFullTable measures LOCK plus UNLOCK of one file while
// the table holds maxLocksTotal-1 other locks.
func BenchmarkLockWithFullTable(b *testing.B) {
	now := time.Now()
	ls := newLockSystem()
	fillLocks(b, ls, now, maxLocksTotal-1)
	b.ResetTimer()
	for b.Loop() {
		l, err := ls.create(now, webdav.LockDetails{Root: "/fill/7/x", ZeroDepth: true}, false)
		if err != nil {
			b.Fatal(err)
		}
		if err := ls.unlock(now, l.token, "/fill/7/x"); err != nil {
			b.Fatal(err)
		}
	}
}
