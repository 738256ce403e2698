package storage

// RFC 4331 quota properties: a PROPFIND Depth 0 on a collection that asks
// for quota-available-bytes and quota-used-bytes, and nothing else (what
// lakefed's http endpoint kind sends to learn a site's capacity), is
// answered here from statfs(2) of Root: available is what an
// unprivileged writer may still use (f_bavail), used is what the file
// system holds. x/net/webdav knows neither property; any other PROPFIND,
// including one asking for them among others, goes to it as before (and
// gets them as 404 propstats, as RFC 4331 §2 allows of a server that
// does not report quota for a resource).

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// quotaOnly reports whether the PROPFIND body b asks for the RFC 4331
// quota properties and nothing else.
func quotaOnly(b []byte) bool {
	d := xml.NewDecoder(bytes.NewReader(b))
	depth, inProp, asked := 0, false, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return asked > 0
		}
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch {
			case depth == 1 && (t.Name.Space != "DAV:" || t.Name.Local != "propfind"):
				return false
			case depth == 2 && t.Name.Space == "DAV:" && t.Name.Local == "prop":
				inProp = true
			case depth == 2:
				return false // allprop, propname, include
			case depth == 3 && inProp:
				if t.Name.Space != "DAV:" || (t.Name.Local != "quota-available-bytes" && t.Name.Local != "quota-used-bytes") {
					return false
				}
				asked++
			}
		case xml.EndElement:
			depth--
		}
	}
}

// serveQuota answers a quota-only PROPFIND of the collection p and
// reports true, or reports false and answers nothing (p is not a
// collection, the body asks for more).
func (s *Server) serveQuota(w http.ResponseWriter, r *http.Request, p string, body []byte) bool {
	if r.Header.Get("Depth") != "0" || !quotaOnly(body) {
		return false
	}
	if fi, err := s.root.Stat(rel(p)); err != nil || !fi.IsDir() {
		return false
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.cfg.Root, &st); err != nil {
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
		return true
	}
	bs := uint64(st.Bsize)
	avail, used := st.Bavail*bs, (st.Blocks-st.Bfree)*bs
	href := r.URL.EscapedPath()
	if !strings.HasSuffix(href, "/") {
		href += "/"
	}
	var b strings.Builder
	b.WriteString(msHead + "<D:response><D:href>")
	_ = xml.EscapeText(&b, []byte(href))
	b.WriteString("</D:href><D:propstat><D:prop><D:quota-available-bytes>")
	b.WriteString(strconv.FormatUint(avail, 10))
	b.WriteString("</D:quota-available-bytes><D:quota-used-bytes>")
	b.WriteString(strconv.FormatUint(used, 10))
	b.WriteString("</D:quota-used-bytes></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>" + msTail)
	w.Header().Set("Content-Type", `application/xml; charset="utf-8"`)
	w.WriteHeader(http.StatusMultiStatus)
	_, _ = io.WriteString(w, b.String())
	return true
}
