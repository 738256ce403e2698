package storage

// PROPFIND Depth 1 on a collection, streamed.
//
// Why: x/net/webdav's walkFS reads the whole directory (Readdir(0): one
// lstat'ed os.FileInfo per entry, about 400 bytes each with our wrapper)
// before it writes the first response, and keeps that slice until the
// end; with 100,000 entries and four requests at once the process grew
// from 31 MB to 260 MB. Here the directory is read in batches of
// propfindBatch names and each member is answered as it is read, so the
// memory of one request does not grow with the directory.
//
// How: each resource (the collection, then every member) is answered by
// x/net/webdav itself as a PROPFIND Depth 0 sub-request into a small
// buffer; its <D:response> element is copied into one multistatus
// document (RFC 4918 §9.1, §13). Properties, dead properties, lock
// discovery and the XML they are written in are therefore exactly what
// x/net/webdav answers for Depth 0. Members that vanish meanwhile, or
// that x/net/webdav skips (a symlink leading outside Root, no
// permission), are left out, as walkFS leaves them out. Once the 207 is
// sent no other status can be: when a member fails for the server's own
// reasons (out of descriptors, I/O error), the connection is aborted so
// that the client sees a truncated response rather than a well-formed
// but incomplete listing.

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/lakefed/lakefed/internal/httpx"
	"golang.org/x/net/webdav"
)

// propfindBatch is how many directory entries are read at a time.
const propfindBatch = 256

// The envelope x/net/webdav writes around its responses.
const (
	msHead = `<?xml version="1.0" encoding="UTF-8"?><D:multistatus xmlns:D="DAV:">`
	msTail = `</D:multistatus>`
)

// errPropfindAbort ends a streamed PROPFIND whose 207 is already sent.
var errPropfindAbort = errors.New("storage: propfind: member failed after the multistatus began")

// servePropfind answers PROPFIND with Depth 0 or 1 (checked by dispatch).
// Depth 1 on a collection is streamed and counts as an expensive request
// (Config.MaxListings): written straight from the directory when it asks
// only for live properties a stat gives (livelist.go), else member by
// member through x/net/webdav; the rest goes to x/net/webdav as it is.
func (s *Server) servePropfind(w *respWriter, r *http.Request, p string) {
	if r.Header.Get("Depth") == "0" && r.Body != nil && r.Body != http.NoBody {
		// At most maxXMLBody: checkXMLBody read it already.
		if body, err := io.ReadAll(r.Body); err == nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			if s.serveQuota(w, r, p, body) {
				return
			}
		}
	}
	if r.Header.Get("Depth") != "1" {
		s.dav.ServeHTTP(w, r)
		return
	}
	fi, err := s.root.Stat(rel(p))
	if serverFault(err) {
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
		return
	}
	if err != nil || !fi.IsDir() {
		s.dav.ServeHTTP(w, r) // a file, or an error x/net/webdav answers as before
		return
	}
	release, ok := s.acquireListing(w)
	if !ok {
		return
	}
	defer release()
	body, err := io.ReadAll(r.Body) // at most maxXMLBody: checkXMLBody read it already
	if err != nil {
		httpError(w, http.StatusBadRequest, "cannot read request body")
		return
	}
	if props, ok := askedLive(body); ok && s.serveLiveListing(w, r, p, props) {
		return
	}
	s.serveDAVListing(w, r, p, body)
}

// serveDAVListing answers PROPFIND Depth 1 of the collection p, asked
// with body, member by member through x/net/webdav.
func (s *Server) serveDAVListing(w *respWriter, r *http.Request, p string, body []byte) {
	sub := newPropfinder(s, r, body)
	if !sub.run(p) || sub.rec.Code != http.StatusMultiStatus {
		if serverFault(sub.err) {
			code, reason := s.fsStatus(r, sub.err)
			httpError(w, code, reason)
			return
		}
		sub.rec.Flush(w) // x/net/webdav's own answer (400 bad XML, 404, ...)
		return
	}
	if err := s.streamMembers(w, p, sub); err != nil {
		s.log.WarnContext(r.Context(), "propfind aborted", "path", p, "err", err)
		panic(http.ErrAbortHandler) // net/http drops the connection: the client sees the truncation
	}
}

// streamMembers writes the 207 with the collection's own response (in
// sub.rec), then one response per member, then the closing tag.
func (s *Server) streamMembers(w *respWriter, p string, sub *propfinder) error {
	first, ok := fragment(sub.rec)
	if !ok {
		return errPropfindAbort
	}
	w.Header()["Content-Type"] = []string{"text/xml; charset=utf-8"}
	w.WriteHeader(http.StatusMultiStatus)
	io.WriteString(w, msHead)
	if _, err := w.Write(first); err != nil {
		return err
	}
	d, err := s.root.Open(rel(p))
	if err != nil {
		return err
	}
	defer d.Close()
	err = eachMember(d, func(name string) error { return s.streamMember(w, sub, path.Join(p, name)) })
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, msTail)
	return err
}

// eachMember calls fn with the name of each member of the open directory
// d, propfindBatch names read at a time, the server's reserved names left
// out; it stops at fn's first error.
func eachMember(d *os.File, fn func(name string) error) error {
	for {
		ents, rerr := d.ReadDir(propfindBatch)
		for _, e := range ents {
			if name := e.Name(); !strings.HasPrefix(name, reservedPrefix) {
				if err := fn(name); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// streamMember answers one member and copies its response to w; a member
// x/net/webdav does not answer 207 for is skipped unless the cause is the
// server's own state.
func (s *Server) streamMember(w io.Writer, sub *propfinder, p string) error {
	if !sub.run(p) {
		return errors.Join(errPropfindAbort, sub.err)
	}
	if sub.rec.Code != http.StatusMultiStatus {
		if sub.rec.Code >= 500 {
			return errors.Join(errPropfindAbort, sub.err)
		}
		return nil // gone meanwhile, or not a resource walkFS would list
	}
	frag, ok := fragment(sub.rec)
	if !ok {
		return errPropfindAbort
	}
	_, err := w.Write(frag)
	return err
}

// propfinder runs Depth 0 PROPFIND sub-requests through x/net/webdav and
// keeps the last answer and the error x/net/webdav logged for it. Not safe
// for concurrent use.
type propfinder struct {
	h    webdav.Handler
	req  *http.Request // the client's request: context, headers
	hdr  http.Header   // req's headers with Depth: 0
	body []byte
	rec  *httpx.Recorder
	err  error // what x/net/webdav reported for the last sub-request
}

func newPropfinder(s *Server, r *http.Request, body []byte) *propfinder {
	pf := &propfinder{req: r, hdr: r.Header.Clone(), body: body, rec: httpx.NewRecorder(0, false)}
	pf.hdr.Set("Depth", "0")
	pf.h = webdav.Handler{FileSystem: s.dav.FileSystem, LockSystem: s.dav.LockSystem,
		Logger: func(_ *http.Request, err error) { pf.err = err }}
	return pf
}

// run answers PROPFIND Depth 0 for the clean path p into pf.rec. It
// reports false when p failed for a reason that is the server's state
// (descriptors), which a listing must not silently leave out.
func (pf *propfinder) run(p string) bool {
	pf.rec.Reset()
	pf.err = nil
	r := pf.req.WithContext(pf.req.Context())
	r.URL = &url.URL{Path: p}
	r.Header = pf.hdr
	r.Body = io.NopCloser(bytes.NewReader(pf.body))
	r.ContentLength = int64(len(pf.body))
	pf.h.ServeHTTP(pf.rec, r)
	return !serverFault(pf.err)
}

// serverFault reports whether a file-system error says something about
// the server (out of descriptors or memory, I/O error) rather than about
// the resource; x/net/webdav answers both kinds alike (405, or a skipped
// member).
func serverFault(err error) bool {
	if err == nil {
		return false
	}
	_, _, transient := errnoStatus(err)
	return transient || errors.Is(err, syscall.EIO)
}

// fragment returns the <D:response> elements of a recorded multistatus,
// without the envelope; ok is false when the envelope is not the one
// x/net/webdav writes.
func fragment(rec *httpx.Recorder) ([]byte, bool) {
	b := rec.Body.Bytes()
	if !bytes.HasPrefix(b, []byte(msHead)) || !bytes.HasSuffix(b, []byte(msTail)) {
		return nil, false
	}
	return b[len(msHead) : len(b)-len(msTail)], true
}
