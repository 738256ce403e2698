package federation

import (
	"net/http"
	"testing"
)

// A third-party COPY is sent to the storage endpoint that runs it: a pull
// to where a PUT would be placed, a push to the best replica; a COPY
// within the namespace or to a proxied endpoint is refused.
func TestThirdPartyCopyRedirects(t *testing.T) {
	a, b, c := newFake("site-a", true), newFake("site-b", true), newFake("site-c", false)
	b.put("/has", []byte("data"))
	a.put("/mine", []byte("data"))
	c.put("/proxied-only", []byte("data"))
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a", "priority: 1", "writable: true"), ep("site-b", "priority: 2"),
		ep("site-c", "priority: 3")), a, b, c)
	for _, tc := range []struct {
		name, path string
		hdr        http.Header
		code       int
		loc        string
	}{
		{"pull", "/new", http.Header{"Source": {"https://remote.example/x"}}, 307, "http://site-a.example/new"},
		{"pull over a file elsewhere", "/has", http.Header{"Source": {"https://remote.example/x"}}, 409, ""},
		{"pull over a file where it would land", "/mine", http.Header{"Source": {"https://remote.example/x"}}, 409, ""},
		{"push", "/has", http.Header{"Destination": {"https://remote.example/x"}}, 307, "http://site-b.example/has"},
		{"push of a missing file", "/missing", http.Header{"Destination": {"https://remote.example/x"}}, 404, ""},
		{"push from a proxied endpoint", "/proxied-only", http.Header{"Destination": {"https://remote.example/x"}}, 501, ""},
		{"within the namespace", "/has", http.Header{"Destination": {tf.srv.URL + "/copy"}}, 501, ""},
		{"neither header", "/has", nil, 400, ""},
	} {
		resp, body := tf.do(t, "COPY", tc.path, tc.hdr, nil)
		if resp.StatusCode != tc.code || resp.Header.Get("Location") != tc.loc {
			t.Errorf("%s: COPY = %d %q (%s), want %d %q", tc.name, resp.StatusCode, resp.Header.Get("Location"), body, tc.code, tc.loc)
		}
	}
}
