package xrootd

import (
	"encoding/binary"
	"net/url"
	"testing"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestRedirectTarget(t *testing.T) {
	reps := []*url.URL{
		mustURL(t, "https://web.example/f"),
		mustURL(t, "root://door.example:1094//f"),
		mustURL(t, "root://a.example:1095//f"),
		mustURL(t, "roots://b.example//f"),
	}
	cases := []struct {
		name, tried, self, want string
	}{
		{"first root replica", "", "door.example:2000", "root://door.example:1094//f"},
		{"not the door itself", "", "door.example:1094", "root://a.example:1095//f"},
		{"tried host", "door.example", "", "root://a.example:1095//f"},
		{"tried host:port, case", "DOOR.example:1094,a.example", "", "roots://b.example//f"},
		{"all tried", "door.example,a.example,b.example", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, ok := redirectTarget(reps, c.tried, c.self)
			got := ""
			if ok {
				got = u.String()
			}
			if got != c.want {
				t.Errorf("redirectTarget(tried=%q, self=%q) = %q, want %q", c.tried, c.self, got, c.want)
			}
		})
	}
}

func TestRedirectBody(t *testing.T) {
	cases := []struct {
		url, path string
		port      uint32
		host      string
	}{
		{"root://a.example:1095//store/f", "/store/f", 1095, "a.example"},
		{"root://a.example//store/f", "/store/f", 1094, "a.example"},
		{"root://[::1]:1095//store/f?x=1", "/store/f", 1095, "[::1]?x=1"},
		{"root://a.example:1095//disk/store/f", "/store/f", 0, "root://a.example:1095//disk/store/f"},
		{"root://a.example:1095/disk/store/f", "/store/f", 0, "root://a.example:1095//disk/store/f"},
	}
	for _, c := range cases {
		b := redirectBody(mustURL(t, c.url), c.path)
		if port, host := binary.BigEndian.Uint32(b), string(b[4:]); port != c.port || host != c.host {
			t.Errorf("redirectBody(%s, %s) = %d %q, want %d %q", c.url, c.path, port, host, c.port, c.host)
		}
	}
}

func TestSplitPath(t *testing.T) {
	cases := []struct {
		in, path, tried string
		bad             bool
	}{
		{"/a//b/./c?tried=h1,h2&triedrc=enoent\x00", "/a/b/c", "h1,h2", false},
		{"/a/b?", "/a/b", "", false},
		{"/a/../b", "", "", true},
		{"a/b", "", "", true},
		{"?x=1", "", "", true},
		{"/a\x01b", "", "", true},
	}
	for _, c := range cases {
		p, cgi, err := splitPath([]byte(c.in))
		if (err != nil) != c.bad || p != c.path || (err == nil && cgi.Get("tried") != c.tried) {
			t.Errorf("splitPath(%q) = %q, %v, %v; want %q tried=%q bad=%v", c.in, p, cgi, err, c.path, c.tried, c.bad)
		}
	}
}
