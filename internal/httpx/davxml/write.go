package davxml

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// MultistatusOpen begins a 207 body; WriteMultistatus ends and sends it.
const MultistatusOpen = xml.Header + `<D:multistatus xmlns:D="DAV:">` + "\n"

// WriteMultistatus closes the multistatus begun in b with MultistatusOpen
// and sends it as a 207 with its length.
func WriteMultistatus(w http.ResponseWriter, b *strings.Builder) {
	b.WriteString("</D:multistatus>\n")
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusMultiStatus)
	_, _ = w.Write([]byte(b.String()))
}

// WriteFiniteDepth refuses a PROPFIND of Depth infinity with 403 and the
// propfind-finite-depth precondition, as RFC 4918 §9.1 allows.
func WriteFiniteDepth(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write([]byte(xml.Header + `<D:error xmlns:D="DAV:"><D:propfind-finite-depth/></D:error>` + "\n"))
}

// JoinName is the path of the entry name in the directory dir.
func JoinName(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// AppendResponse appends one <D:response> for the path p (RFC 4918
// §14.24) with the live properties clients use: displayname,
// resourcetype, getcontentlength and getcontenttype for files,
// getlastmodified and getetag when known.
func AppendResponse(b *strings.Builder, p string, it endpoint.Info) {
	href := (&url.URL{Path: p}).EscapedPath()
	if it.IsDir && !strings.HasSuffix(href, "/") {
		href += "/"
	}
	b.WriteString("<D:response><D:href>")
	_ = xml.EscapeText(b, []byte(href))
	b.WriteString("</D:href><D:propstat><D:prop>")
	name := it.Name
	if name == "" {
		name = path.Base(p)
	}
	b.WriteString("<D:displayname>")
	_ = xml.EscapeText(b, []byte(name))
	b.WriteString("</D:displayname>")
	if it.IsDir {
		b.WriteString("<D:resourcetype><D:collection/></D:resourcetype>")
	} else {
		b.WriteString("<D:resourcetype/><D:getcontentlength>")
		b.WriteString(strconv.FormatInt(it.Size, 10))
		b.WriteString("</D:getcontentlength><D:getcontenttype>application/octet-stream</D:getcontenttype>")
	}
	if !it.ModTime.IsZero() {
		b.WriteString("<D:getlastmodified>")
		b.WriteString(it.ModTime.UTC().Format(http.TimeFormat))
		b.WriteString("</D:getlastmodified>")
	}
	if it.ETag != "" {
		b.WriteString("<D:getetag>")
		_ = xml.EscapeText(b, []byte(`"`+it.ETag+`"`))
		b.WriteString("</D:getetag>")
	}
	b.WriteString("</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>\n")
}
