package fastpath

import (
	"bufio"
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseHead: whatever head the fast path takes as plain, net/http
// reads as the same request: a GET or HEAD of the same path, the same
// protocol, Host and Accept, no body. A head the fast path answers that
// net/http would refuse or read otherwise would be a second, divergent
// parser of one request (RFC 9112 §3, §5), which is how request
// smuggling starts.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"GET /f HTTP/1.1\r\nHost: h\r\n\r\n",
		"HEAD /a/b.root HTTP/1.1\r\nHost: fed:8080\r\nAccept: */*\r\nUser-Agent: curl\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"GET /x HTTP/1.1\r\nhost: h\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\nX-Request-ID: abc\r\nConnection: keep-alive\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n",
		"GET //x HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\n Folded: v\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
		"GET /x HTTP/1.1\nHost: h\n\n",
		"GET /f?lakefed.site=a-1 HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /f?a=b&c&d== HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /f? HTTP/1.1\r\nHost: h\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		end, complete, plain := scanHead(in)
		if !complete || !plain {
			return
		}
		var req Request
		if !parseHead(in[:end], &req) {
			return
		}
		hr, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(in[:end])))
		if err != nil {
			t.Fatalf("the fast path takes %q as plain; net/http refuses it: %v", in[:end], err)
		}
		if hr.Method != req.Method() {
			t.Errorf("method: fast path %s, net/http %s", req.Method(), hr.Method)
		}
		if hr.URL.Path != string(req.Target) || hr.URL.RawQuery != string(req.Query) || hr.URL.ForceQuery {
			t.Errorf("target %q, query %q: net/http reads path %q, query %q (forced %v)", req.Target, req.Query, hr.URL.Path, hr.URL.RawQuery, hr.URL.ForceQuery)
		}
		if req.Query != nil {
			if _, err := url.ParseQuery(string(req.Query)); err != nil {
				t.Errorf("query %q: url.ParseQuery refuses it: %v", req.Query, err)
			}
		}
		if want := map[bool]int{true: 0, false: 1}[req.http10]; hr.ProtoMinor != want || hr.ProtoMajor != 1 {
			t.Errorf("protocol: fast path HTTP/1.%d, net/http %s", want, hr.Proto)
		}
		if req.Host != nil && hr.Host != string(req.Host) {
			t.Errorf("Host: fast path %q, net/http %q", req.Host, hr.Host)
		}
		if got := strings.Join(hr.Header.Values("Accept"), ","); req.Accept != nil && got != string(req.Accept) {
			t.Errorf("Accept: fast path %q, net/http %q", req.Accept, got)
		}
		if hr.ContentLength > 0 || len(hr.TransferEncoding) > 0 {
			t.Errorf("net/http reads a body (length %d, %v) the fast path does not", hr.ContentLength, hr.TransferEncoding)
		}
		if req.close != hr.Close && !req.http10 {
			t.Errorf("Connection: close: fast path %v, net/http %v", req.close, hr.Close)
		}
	})
}
