package davxml

import (
	"strings"
	"testing"
	"time"
)

// An XrdHttp-style answer: DAV: under another prefix, the lcgdm
// iscollection, a failed propstat beside a good one.
const answer = `<?xml version="1.0" encoding="utf-8"?>
<d:multistatus xmlns:d="DAV:" xmlns:lp1="DAV:" xmlns:lp3="LCGDM:">
<d:response><d:href>/data/</d:href><d:propstat><d:prop>
<lp1:getcontentlength>4096</lp1:getcontentlength><lp3:iscollection>1</lp3:iscollection>
</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>
<d:response><d:href>http://h:1094/data/a%20b.root</d:href><d:propstat><d:prop>
<lp1:getcontentlength>42</lp1:getcontentlength>
<lp1:getlastmodified>Tue, 02 Jan 2024 03:04:05 GMT</lp1:getlastmodified>
<lp1:getetag>W/"abc"</lp1:getetag><lp1:resourcetype/>
</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat>
<d:propstat><d:prop><lp1:getcontentlength>7</lp1:getcontentlength></d:prop>
<d:status>HTTP/1.1 404 Not Found</d:status></d:propstat></d:response>
<d:response><d:href>/data/gone</d:href><d:status>HTTP/1.1 404 Not Found</d:status></d:response>
</d:multistatus>`

func TestDecode(t *testing.T) {
	ms, err := Decode(strings.NewReader(answer), MaxBody)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms.Responses) != 3 {
		t.Fatalf("%d responses, want 3", len(ms.Responses))
	}
	dir := ms.Responses[0].Info()
	if !dir.IsDir || dir.Size != 0 {
		t.Errorf("directory = %+v, want IsDir and size 0", dir)
	}
	f := ms.Responses[1].Info()
	want := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	if f.IsDir || f.Size != 42 || f.ETag != "abc" || !f.ModTime.Equal(want) {
		t.Errorf("file = %+v, want 42 bytes, ETag abc, %v (the 404 propstat ignored)", f, want)
	}
	if p := HrefPath(ms.Responses[1].Href, false); p != "/data/a b.root" {
		t.Errorf("HrefPath = %q", p)
	}
	gone := ms.Responses[2].Status
	if StatusOK(gone) || StatusCode(gone) != 404 {
		t.Errorf("status %q: ok %v, code %d", gone, StatusOK(gone), StatusCode(gone))
	}
	if _, err := Decode(strings.NewReader(answer), 100); err == nil {
		t.Error("an answer past the limit decoded")
	}
}

func TestHrefPath(t *testing.T) {
	for _, c := range []struct {
		href string
		raw  bool
		want string
	}{
		{"/a/b%25c", false, "/a/b%c"},
		{"/a/b%c", true, "/a/b%c"},    // XrdHttp sends names unescaped
		{"/a/b%zz", false, "/a/b%zz"}, // undecodable: as it is
		{"https://h/x?y=1", false, "/x"},
		{"https://h", false, "/"},
	} {
		if got := HrefPath(c.href, c.raw); got != c.want {
			t.Errorf("HrefPath(%q, %v) = %q, want %q", c.href, c.raw, got, c.want)
		}
	}
	for s, ok := range map[string]bool{"": true, "HTTP/1.1 200 OK": true, "HTTP/1.1 207 Multi-Status": true, "HTTP/1.1 403 Forbidden": false, "junk": false} {
		if StatusOK(s) != ok {
			t.Errorf("StatusOK(%q) = %v", s, !ok)
		}
	}
}
