package storage

// PROPFIND Depth 1 of a collection for the live properties a stat gives,
// written straight from the directory.
//
// Why: propfind.go answers each member through x/net/webdav as a Depth 0
// sub-request, which opens the member, lists its extended attributes
// (dead properties) and builds its response through encoding/xml: about
// 40 µs a member, more than the HEAD per file a listing is meant to
// save the federator (docs/performance.md). A PROPFIND that asks only for
// properties a stat answers (liveProp) needs none of that: one getdents
// batch, one fstatat per member, and the bytes x/net/webdav would write
// for them (same elements, same order, same 404 propstat for what does
// not apply to a collection). Live properties cannot be shadowed by dead
// ones: x/net/webdav refuses a PROPPATCH of a live property (403
// cannot-modify-protected-property), so reading no extended attribute
// loses nothing. allprop, propname, dead properties and every other
// Depth stay on propfind.go.
//
// Each member is described as a HEAD of its path would describe it
// (serveGetHead without Want-Digest: a stat, no open), so that a
// federator may take the listing for a HEAD per member: the same stat
// (symlinks resolved beneath Root as statRel resolves them), the same
// entity tag (appendETag). A member that HEAD would refuse (a symlink
// leading outside Root, a device or FIFO: the status HEAD sends; a path
// the auth rules do not let the caller read: 403) is one <D:response>
// with its href and that status (RFC 4918 §14.24), never a description;
// one HEAD would find missing (gone meanwhile) is left out.

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
	"golang.org/x/sys/unix"
)

// liveProp is a property the fast listing writes.
type liveProp uint8

const (
	// propResourceType is DAV:resourcetype (RFC 4918 §15.9).
	propResourceType liveProp = iota
	// propDisplayName is DAV:displayname (§15.2).
	propDisplayName
	// propContentLength is DAV:getcontentlength (§15.4), files only.
	propContentLength
	// propLastModified is DAV:getlastmodified (§15.7).
	propLastModified
	// propContentType is DAV:getcontenttype (§15.5), files only.
	propContentType
	// propETag is DAV:getetag (§15.6), files only.
	propETag
	numLiveProps
)

// livePropNames are the local names, in the DAV: namespace, of the
// liveProp values.
var livePropNames = [numLiveProps]string{"resourcetype", "displayname", "getcontentlength", "getlastmodified", "getcontenttype", "getetag"}

// forDir reports whether x/net/webdav gives p for a collection (its
// liveProps table: getcontentlength, getcontenttype and getetag are for
// files only).
func (p liveProp) forDir() bool {
	return p == propResourceType || p == propDisplayName || p == propLastModified
}

// askedLive returns the properties a PROPFIND body asks for, in its
// order, when it is <D:propfind><D:prop> naming only liveProps, each
// once; ok is false for any other body (empty: allprop), which
// x/net/webdav answers.
func askedLive(body []byte) (props []liveProp, ok bool) {
	d := xml.NewDecoder(bytes.NewReader(body))
	depth, sawProp, seen := 0, false, [numLiveProps]bool{}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return props, depth == 0 && len(props) > 0
		}
		if err != nil {
			return nil, false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if t.Name.Space != "DAV:" {
				return nil, false
			}
			switch depth {
			case 1:
				if t.Name.Local != "propfind" {
					return nil, false
				}
			case 2:
				if t.Name.Local != "prop" || sawProp {
					return nil, false // allprop, propname, include, or a second prop
				}
				sawProp = true
			case 3:
				i := indexOf(livePropNames[:], t.Name.Local)
				if i < 0 || seen[i] {
					return nil, false
				}
				seen[i] = true
				props = append(props, liveProp(i))
			default:
				return nil, false
			}
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth > 2 && len(bytes.TrimSpace(t)) > 0 {
				return nil, false
			}
		}
	}
}

// indexOf is the index of s in list, or -1.
func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// liveFlush is how many bytes of responses are gathered before they are
// written: one write per batch of members, not one per member.
const liveFlush = 32 << 10

// serveLiveListing answers PROPFIND Depth 1 of the collection p for
// props, as x/net/webdav would, from one read of the directory and a
// stat per member. It reports false, having written nothing, when p
// cannot be opened as a directory: propfind.go answers that. Once the 207
// is sent, a failure that is the server's (serverFault) drops the
// connection, as streamMembers does.
func (s *Server) serveLiveListing(w *respWriter, r *http.Request, p string, props []liveProp) bool {
	d, err := s.openRel(rel(p), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	defer d.Close()
	var st unix.Stat_t
	if unix.Fstat(int(d.Fd()), &st) != nil || !isDir(&st) {
		return false
	}
	w.Header()["Content-Type"] = []string{"text/xml; charset=utf-8"}
	if !s.guarded || s.mayRead != nil {
		// Every member is what its HEAD says: the read rule, if any,
		// is known here (GuardReads).
		w.Header()[httpx.ListedAsHeadHeader] = []string{"1"} // its own: a header value is the answer's to change
	}
	w.WriteHeader(http.StatusMultiStatus)
	buf := append(make([]byte, 0, liveFlush+4096), msHead...)
	buf = appendLiveResponse(buf, p, &st, props)
	if err := s.liveMembers(w, r, d, p, props, buf); err != nil {
		s.log.WarnContext(r.Context(), "propfind aborted", "path", p, "err", err)
		panic(http.ErrAbortHandler) // net/http drops the connection: the client sees the truncation
	}
	return true
}

// liveMembers writes buf, then a response per member of the directory
// d (the collection p), then the closing tag.
func (s *Server) liveMembers(w io.Writer, r *http.Request, d *os.File, p string, props []liveProp, buf []byte) error {
	dfd := int(d.Fd())
	err := eachMember(d, func(name string) error {
		var err error
		if buf, err = s.appendMember(buf, r, dfd, p, name, props); err != nil || len(buf) < liveFlush {
			return err
		}
		_, err = w.Write(buf)
		buf = buf[:0]
		return err
	})
	if err != nil {
		return err
	}
	_, err = w.Write(append(buf, msTail...))
	return err
}

// appendMember appends the response for the member name of the
// directory p (open as dfd): what a HEAD of it would say.
func (s *Server) appendMember(buf []byte, r *http.Request, dfd int, p, name string, props []liveProp) ([]byte, error) {
	mp := path.Join(p, name)
	if s.mayRead != nil && !s.mayRead(r, mp) {
		return appendStatusResponse(buf, mp, http.StatusForbidden), nil
	}
	var st unix.Stat_t
	err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		// HEAD's own rule for where a symlink may lead.
		err = s.statRel(rel(mp), &st)
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return buf, nil // gone meanwhile
	case serverFault(err):
		return buf, err
	case err != nil:
		code, _ := s.fsStatus(r, err)
		return appendStatusResponse(buf, mp, code), nil
	case !isReg(&st) && !isDir(&st):
		return appendStatusResponse(buf, mp, http.StatusForbidden), nil // HEAD: "not a regular file"
	}
	return appendLiveResponse(buf, mp, &st, props), nil
}

// appendLiveResponse appends the <D:response> of the resource at p with
// stat st, as x/net/webdav writes it for props: the properties that
// apply in a 200 propstat, the others in a 404 one.
func appendLiveResponse(buf []byte, p string, st *unix.Stat_t, props []liveProp) []byte {
	dir := isDir(st)
	buf = appendHref(buf, p, dir)
	found, missing := 0, 0
	for _, pr := range props {
		if !dir || pr.forDir() {
			found++
		} else {
			missing++
		}
	}
	if found > 0 || missing == 0 {
		buf = append(buf, "<D:propstat><D:prop>"...)
		for _, pr := range props {
			if !dir || pr.forDir() {
				buf = appendLiveProp(buf, pr, p, st)
			}
		}
		buf = append(buf, "</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>"...)
	}
	if missing > 0 {
		buf = append(buf, "<D:propstat><D:prop>"...)
		for _, pr := range props {
			if dir && !pr.forDir() {
				buf = appendElement(buf, livePropNames[pr], nil)
			}
		}
		buf = append(buf, "</D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>"...)
	}
	return append(buf, "</D:response>"...)
}

// appendLiveProp appends the element of property pr of the resource at p
// with stat st, with the value x/net/webdav's prop.go gives it.
func appendLiveProp(buf []byte, pr liveProp, p string, st *unix.Stat_t) []byte {
	name := livePropNames[pr]
	buf = append(buf, "<D:"...)
	buf = append(buf, name...)
	buf = append(buf, '>')
	switch pr {
	case propResourceType:
		if isDir(st) {
			buf = append(buf, `<D:collection xmlns:D="DAV:"/>`...)
		}
	case propDisplayName:
		if p != "/" { // x/net/webdav hides the name of the root
			buf = appendEscaped(buf, path.Base(p))
		}
	case propContentLength:
		buf = strconv.AppendInt(buf, st.Size, 10)
	case propLastModified:
		buf = time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UTC().AppendFormat(buf, http.TimeFormat)
	case propContentType:
		buf = append(buf, contentType(path.Base(p))[0]...)
	case propETag:
		buf = appendETag(buf, st)
	}
	buf = append(buf, "</D:"...)
	buf = append(buf, name...)
	return append(buf, '>')
}

// appendElement appends <D:name>inner</D:name>.
func appendElement(buf []byte, name string, inner []byte) []byte {
	buf = append(buf, "<D:"...)
	buf = append(buf, name...)
	buf = append(buf, '>')
	buf = append(buf, inner...)
	buf = append(buf, "</D:"...)
	buf = append(buf, name...)
	return append(buf, '>')
}

// appendHref opens a <D:response> and writes its href: p escaped as
// x/net/webdav escapes it, with a slash after a collection's.
func appendHref(buf []byte, p string, dir bool) []byte {
	if dir && p != "/" {
		p += "/"
	}
	buf = append(buf, "<D:response><D:href>"...)
	buf = appendEscaped(buf, (&url.URL{Path: p}).EscapedPath())
	return append(buf, "</D:href>"...)
}

// appendStatusResponse appends a response that gives only the status a
// HEAD of p would get (RFC 4918 §14.24: href and status, no propstat).
func appendStatusResponse(buf []byte, p string, code int) []byte {
	buf = appendHref(buf, p, false)
	buf = append(buf, "<D:status>HTTP/1.1 "...)
	buf = strconv.AppendInt(buf, int64(code), 10)
	buf = append(buf, ' ')
	buf = append(buf, http.StatusText(code)...)
	return append(buf, "</D:status></D:response>"...)
}

// appendEscaped appends s as XML character data, as xml.EscapeText
// writes it; printable ASCII without markup needs no escape.
func appendEscaped(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || strings.IndexByte(`<>&'"`, c) >= 0 {
			var b bytes.Buffer
			_ = xml.EscapeText(&b, []byte(s))
			return append(buf, b.Bytes()...)
		}
	}
	return append(buf, s...)
}
