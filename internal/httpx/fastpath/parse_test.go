package fastpath

import (
	"strings"
	"testing"
)

// TestParseHead checks the plain-request classifier directly.
func TestParseHead(t *testing.T) {
	tests := []struct {
		head          string
		ok            bool
		isHead, close bool
	}{
		{"HEAD /a HTTP/1.1\r\nHost: h\r\n\r\n", true, true, false},
		{"GET /a/b.root HTTP/1.1\r\nhost: h\r\nUser-Agent: x\r\nACCEPT: */*\r\nConnection: Close\r\n\r\n", true, false, true},
		{"GET /a HTTP/1.0\r\n\r\n", true, false, false},
		{"GET /a HTTP/1.1\r\n\r\n", false, false, false},
		{"POST /a HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET  /a HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a  HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a%20b HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a?b HTTP/1.1\r\nHost: h\r\n\r\n", true, false, false},
		{"GET /a?b=c&d=e HTTP/1.1\r\nHost: h\r\n\r\n", true, false, false},
		{"GET /a? HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a?b%20 HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a?b;c HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a?b?c HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a?b#c HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a%3Fb?c HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET //a?b HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET //a HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET * HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET http://h/a HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, upgrade\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", true, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h h\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nWant-Digest: adler32\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nRange: bytes=0-1\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nIf-None-Match: *\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer x\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nX: \x7f\r\n\r\n", false, false, false},
		// Absurd heads: never offered to a Responder.
		{"GET /a HTTP/1.1\r\nHost: h\r\nAccept: a\x00b\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\n: no-name\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nno-colon\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nAccept : x\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nAccept: a\r\n b\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nAccept: a\r\nAccept: b\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\nX-Request-ID: a\r\nX-Request-ID: b\r\n\r\n", false, false, false},
		{"GET /a HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("User-Agent: x\r\n", 200) + "\r\n", true, false, false},
		{"GET /" + strings.Repeat("a", 3000) + " HTTP/1.1\r\nHost: h\r\n\r\n", true, false, false},
		{"GET /a HTTP/1.1\r\n\r\n\r\n", false, false, false},
		{"\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"get /a HTTP/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a http/1.1\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a HTTP/2.0\r\nHost: h\r\n\r\n", false, false, false},
		{"GET /a\r\nHost: h\r\n\r\n", false, false, false},
	}
	for _, tc := range tests {
		var req Request
		ok := parseHead([]byte(tc.head), &req)
		if ok != tc.ok || ok && (req.Head != tc.isHead || req.close != tc.close) {
			t.Errorf("parseHead(%.80q) = %v, %+v; want ok=%v head=%v close=%v", tc.head, ok, req, tc.ok, tc.isHead, tc.close)
		}
	}
}

// TestParseHeadKeeps: the values a Responder sees.
func TestParseHeadKeeps(t *testing.T) {
	var req Request
	if !parseHead([]byte("GET /a/b?lakefed.site=s-1 HTTP/1.1\r\nHost:  h:80 \r\nAccept:\tapplication/metalink4+xml\r\nX-Request-ID: abc\r\n\r\n"), &req) {
		t.Fatal("not plain")
	}
	if string(req.Target) != "/a/b" || string(req.Query) != "lakefed.site=s-1" || string(req.Host) != "h:80" || string(req.Accept) != "application/metalink4+xml" ||
		string(req.sentID) != "abc" || req.http10 {
		t.Errorf("parsed %+v", req)
	}
}

// TestScanHead: a head must end every line in CRLF; a CR may be the last
// byte read so far.
func TestScanHead(t *testing.T) {
	for _, tc := range []struct {
		buf             string
		end             int
		complete, plain bool
	}{
		{"GET / HTTP/1.1\r\n\r\n", 18, true, true},
		{"GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n", 18, true, true},
		{"GET / HTTP/1.1\r\nHost: x\r", 0, false, true},
		{"GET / HTTP/1.1\r\nHo", 0, false, true},
		{"", 0, false, true},
		{"GET / HTTP/1.1\nHost: x\n\n", 0, false, false},
		{"GET / HTTP/1.1\r\nHost: x\n\r\n", 0, false, false},
		{"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", 0, false, false},
		{"GET / HTTP/1.1\r\nA: b\rc", 0, false, false},
		{"\n", 0, false, false},
	} {
		end, complete, plain := scanHead([]byte(tc.buf))
		if end != tc.end || complete != tc.complete || plain != tc.plain {
			t.Errorf("scanHead(%q) = %d complete %v plain %v, want %d %v %v", tc.buf, end, complete, plain, tc.end, tc.complete, tc.plain)
		}
	}
}

// TestAppendField: header values leave as net/http's Header.Write writes
// them, never splitting the head.
func TestAppendField(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"plain", "N: plain\r\n"},
		{"  padded\t", "N: padded\r\n"},
		{"a\r\nInjected: yes", "N: a  Injected: yes\r\n"},
		{"", "N: \r\n"},
	} {
		if got := string(appendField(nil, "N", tc.value)); got != tc.want {
			t.Errorf("appendField(%q) = %q, want %q", tc.value, got, tc.want)
		}
	}
}

func TestASCIIEqualFold(t *testing.T) {
	for _, tc := range []struct {
		b, s string
		want bool
	}{
		{"Host", "host", true}, {"HOST", "host", true}, {"hosts", "host", false}, {"hos", "host", false},
		{"h\xc3st", "host", false}, {"X-REQUEST-ID", "x-request-id", true},
	} {
		if got := asciiEqualFold([]byte(tc.b), tc.s); got != tc.want {
			t.Errorf("asciiEqualFold(%q, %q) = %v", tc.b, tc.s, got)
		}
	}
}
