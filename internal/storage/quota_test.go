package storage

import "testing"

// Only a PROPFIND that asks for the RFC 4331 quota properties and
// nothing else is answered from statfs; every other body goes to
// x/net/webdav as before.
func TestQuotaOnly(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       bool
	}{
		{"both", `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:quota-available-bytes/><D:quota-used-bytes/></D:prop></D:propfind>`, true},
		{"one", `<propfind xmlns="DAV:"><prop><quota-used-bytes/></prop></propfind>`, true},
		{"mixed", `<D:propfind xmlns:D="DAV:"><D:prop><D:quota-used-bytes/><D:getetag/></D:prop></D:propfind>`, false},
		{"allprop", `<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`, false},
		{"other namespace", `<propfind xmlns="DAV:"><prop><quota-used-bytes xmlns="urn:x"/></prop></propfind>`, false},
		{"empty prop", `<D:propfind xmlns:D="DAV:"><D:prop/></D:propfind>`, false},
		{"not xml", `quota-used-bytes`, false},
	} {
		if got := quotaOnly([]byte(c.body)); got != c.want {
			t.Errorf("quotaOnly(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}
