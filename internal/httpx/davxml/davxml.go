// Package davxml reads WebDAV multistatus answers (RFC 4918 §14.16), the
// 207 a PROPFIND gets: one parser for every client of lakefed that lists
// or describes over WebDAV (the http and upstream endpoint kinds).
//
//	ms, err := davxml.Decode(resp.Body, davxml.MaxBody)
//	for i := range ms.Responses {
//		info := ms.Responses[i].Info()                     // Name left to the caller
//		p := davxml.HrefPath(ms.Responses[i].Href, false)  // decoded server path
//	}
package davxml

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// MaxBody bounds a PROPFIND answer: a directory of ~1M entries.
const MaxBody = 512 << 20

// PropfindBody asks for the properties Info reads (RFC 4918 §9.1).
const PropfindBody = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop>
<D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/>
</D:prop></D:propfind>`

// Multistatus is the part of an RFC 4918 §14.16 answer lakefed reads. The
// property elements match in any namespace: XrdHttp puts them in "DAV:"
// under its own prefixes, and adds the lcgdm "iscollection".
type Multistatus struct {
	Responses []Response `xml:"DAV: response"`
}

// Response is one DAV:response: a resource and its properties.
type Response struct {
	Href      string     `xml:"DAV: href"`
	Status    string     `xml:"DAV: status"`
	Propstats []Propstat `xml:"DAV: propstat"`
}

// Propstat is one DAV:propstat: properties and the status they share.
type Propstat struct {
	Status string `xml:"DAV: status"`
	Prop   struct {
		ResourceType *struct {
			Collection *struct{} `xml:"collection"`
		} `xml:"resourcetype"`
		ContentLength string `xml:"getcontentlength"`
		LastModified  string `xml:"getlastmodified"`
		ETag          string `xml:"getetag"`
		IsCollection  string `xml:"iscollection"`
		// RFC 4331 §3 and §4: the bytes a collection may still take and
		// those it holds.
		QuotaAvailable string `xml:"quota-available-bytes"`
		QuotaUsed      string `xml:"quota-used-bytes"`
	} `xml:"prop"`
}

// StatusOK reports whether a DAV:status line ("HTTP/1.1 200 OK") is 2xx;
// an absent status counts as OK.
func StatusOK(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" {
		return true
	}
	_, rest, ok := strings.Cut(s, " ")
	return ok && strings.HasPrefix(rest, "2")
}

// StatusCode returns the code of a DAV:status line, or 0.
func StatusCode(s string) int {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0
	}
	code, _ := strconv.Atoi(f[1])
	return code
}

// Info turns the properties of r's 2xx propstats into an Info (Name is
// left to the caller). A directory's size is 0: what servers report for
// one is the file system's block, not data.
func (r *Response) Info() endpoint.Info {
	var in endpoint.Info
	for _, ps := range r.Propstats {
		if !StatusOK(ps.Status) {
			continue
		}
		pr := ps.Prop
		if pr.ResourceType != nil && pr.ResourceType.Collection != nil {
			in.IsDir = true
		}
		if v := strings.TrimSpace(pr.IsCollection); v == "1" || strings.EqualFold(v, "true") {
			in.IsDir = true
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(pr.ContentLength), 10, 64); err == nil && n >= 0 {
			in.Size = n
		}
		if t, err := http.ParseTime(strings.TrimSpace(pr.LastModified)); err == nil {
			in.ModTime = t
		}
		if et := strings.TrimSpace(pr.ETag); et != "" {
			in.ETag = httpx.TrimETag(et)
		}
	}
	if in.IsDir {
		in.Size = 0
	}
	return in
}

// QuotaBody asks for the RFC 4331 quota properties of a collection.
const QuotaBody = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop>
<D:quota-available-bytes/><D:quota-used-bytes/>
</D:prop></D:propfind>`

// Quota returns the RFC 4331 quota properties of r's 2xx propstats:
// ok false unless both are there as numbers.
func (r *Response) Quota() (avail, used int64, ok bool) {
	var okA, okU bool
	for _, ps := range r.Propstats {
		if !StatusOK(ps.Status) {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(ps.Prop.QuotaAvailable), 10, 64); err == nil && n >= 0 {
			avail, okA = n, true
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(ps.Prop.QuotaUsed), 10, 64); err == nil && n >= 0 {
			used, okU = n, true
		}
	}
	return avail, used, okA && okU
}

// HrefPath returns the decoded server path of a DAV:href, which may be an
// absolute URL or a path. XrdHttp (up to at least 5.5.3) sends names
// unescaped ("/sp ace/a b%c"): raw tells that the server is one of those
// (RawHrefs). An href that cannot be percent-decoded is taken as it is.
func HrefPath(h string, raw bool) string {
	h = strings.TrimSpace(h)
	if i := strings.Index(h, "://"); i >= 0 && i < 10 {
		rest := h[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			h = rest[j:]
		} else {
			h = "/"
		}
	}
	if raw {
		return h
	}
	if i := strings.IndexByte(h, '?'); i >= 0 {
		h = h[:i]
	}
	if d, err := url.PathUnescape(h); err == nil {
		return d
	}
	return h
}

// RawHrefs reports whether resp comes from a server known to send
// unescaped hrefs.
func RawHrefs(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Server"), "XrootD")
}
