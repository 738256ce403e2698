package storage

import (
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
