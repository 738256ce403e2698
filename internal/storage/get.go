package storage

import (
	"context"
	"html"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/webdav"
	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// rel turns a clean absolute request path into a path relative to Root.
func rel(p string) string {
	if p == "/" {
		return "."
	}
	return p[1:]
}

// openRel opens a path below Root without following symlinks out of it:
// one openat2(RESOLVE_BENEATH) call when the kernel has it, os.Root
// otherwise.
func (s *Server) openRel(name string, flags int) (*os.File, error) {
	if s.rootDir == nil {
		return s.root.OpenFile(name, flags, 0)
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(s.rootFD, name, &how)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "openat2", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// statRel fills st for a path below Root with the same symlink rules as
// openRel, without building an os.FileInfo (the HEAD hot path).
func (s *Server) statRel(name string, st *unix.Stat_t) error {
	if s.rootDir == nil {
		fi, err := s.root.Stat(name)
		if err != nil {
			return err
		}
		sys, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return &os.PathError{Op: "stat", Path: name, Err: syscall.ENOTSUP}
		}
		statFromSys(sys, st)
		return nil
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(s.rootFD, name, &how)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "openat2", Path: name, Err: err}
		}
		err = unix.Fstat(fd, st)
		unix.Close(fd)
		if err != nil {
			return &os.PathError{Op: "fstat", Path: name, Err: err}
		}
		return nil
	}
}

// etag is the entity tag of a file (RFC 9110 §8.8.3), see appendETag.
func etag(st *unix.Stat_t) string {
	var b [80]byte
	return string(appendETag(b[:0], st))
}

// appendETag appends the entity tag of a file to b: hex mtime (ns) and
// size, as x/net/webdav and Apache write them, then "-", hex inode and
// ctime (ns). A user can set the mtime back (touch -d) after rewriting a
// file in place with the same size; nobody can set the ctime, and a file
// replaced by another has another inode (or, reused, a newer ctime), so
// the tag changes with the content. It also changes on a metadata-only
// change (chmod, PROPPATCH): a spurious change costs a client a re-read,
// a missed one serves it stale data. Checksums are kept outside the file
// (checksum.go) so that storing one does not change the tag. GET, HEAD,
// PUT, PROPFIND (fileInfo.ETag) and the fast path all use this.
func appendETag(b []byte, st *unix.Stat_t) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, st.Mtim.Nano(), 16)
	b = strconv.AppendInt(b, st.Size, 16)
	b = append(b, '-')
	b = strconv.AppendUint(b, st.Ino, 16)
	b = append(b, '-')
	b = strconv.AppendInt(b, st.Ctim.Nano(), 16)
	return append(b, '"')
}

// statFromSys copies what etag, the checksum fingerprint and the handlers
// read from a syscall.Stat_t.
func statFromSys(sys *syscall.Stat_t, st *unix.Stat_t) {
	st.Mode, st.Size, st.Nlink = sys.Mode, sys.Size, sys.Nlink
	st.Mtim, st.Ctim = unix.Timespec(sys.Mtim), unix.Timespec(sys.Ctim)
	st.Ino, st.Dev = sys.Ino, sys.Dev
}

// ETag gives PROPFIND's DAV:getetag the tag GET and HEAD send
// (webdav.ETager); without it x/net/webdav would use mtime and size only.
func (fi fileInfo) ETag(ctx context.Context) (string, error) {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", webdav.ErrNotImplemented
	}
	var st unix.Stat_t
	statFromSys(sys, &st)
	return etag(&st), nil
}

func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }
func isReg(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }

// contentType is the type a file is served with: by extension, else
// application/octet-stream (no sniffing: it would cost a read per request,
// and most scientific files are binary).
func contentType(name string) []string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 && strings.IndexByte(name[i:], '/') < 0 {
		if t := mime.TypeByExtension(name[i:]); t != "" {
			return []string{t}
		}
	}
	return hdrOctetStream
}

// serveGetHead serves a file (or a directory listing) for GET and HEAD.
func (s *Server) serveGetHead(w *respWriter, r *http.Request, p string) {
	name := rel(p)
	head := r.Method == http.MethodHead
	var wantDigest []string
	if wd := r.Header["Want-Digest"]; len(wd) > 0 {
		wantDigest = httpx.ParseWantDigest(strings.Join(wd, ","))
	}
	var st unix.Stat_t
	var f *os.File
	if head && len(wantDigest) == 0 {
		if err := s.statRel(name, &st); err != nil {
			code, reason := s.fsStatus(r, err)
			httpError(w, code, reason)
			return
		}
	} else {
		var err error
		f, err = s.openRel(name, unix.O_RDONLY)
		if err != nil {
			code, reason := s.fsStatus(r, err)
			httpError(w, code, reason)
			return
		}
		defer f.Close()
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			code, reason := s.fsStatus(r, err)
			httpError(w, code, reason)
			return
		}
	}
	if isDir(&st) {
		s.serveListing(w, r, p, f)
		return
	}
	if !isReg(&st) {
		httpError(w, http.StatusForbidden, "not a regular file")
		return
	}

	h := w.Header()
	tag := etag(&st)
	mtime := time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
	var lm [len(http.TimeFormat) + 4]byte
	h["Etag"] = []string{tag}
	h["Last-Modified"] = []string{string(mtime.UTC().AppendFormat(lm[:0], http.TimeFormat))}
	h["Accept-Ranges"] = hdrBytes
	switch httpx.CheckPreconditions(r.Header, r.Method, tag, mtime, true) {
	case http.StatusNotModified:
		w.WriteHeader(http.StatusNotModified)
		return
	case http.StatusPreconditionFailed:
		httpError(w, http.StatusPreconditionFailed, "precondition failed")
		return
	}
	h["Content-Type"] = contentType(name)
	if len(wantDigest) > 0 {
		sums, err := s.checksums(r.Context(), f, name, &st, wantDigest)
		if err != nil {
			code, reason := s.fsStatus(r, err)
			httpError(w, code, reason)
			return
		}
		if d := httpx.FormatDigest(sums, wantDigest...); d != "" {
			h["Digest"] = []string{d}
		}
	}
	if head {
		// RFC 9110 §14.2: Range is defined for GET only; HEAD ignores it.
		h["Content-Length"] = []string{strconv.FormatInt(st.Size, 10)}
		w.WriteHeader(http.StatusOK)
		return
	}
	var ranges []httpx.Range
	if rh, ok := byteRanges(r.Header.Get("Range")); ok && ifRange(r.Header.Get("If-Range"), tag, mtime) {
		var err error
		ranges, err = httpx.ParseRange(rh, st.Size)
		if err != nil {
			// Unsatisfiable (RFC 9110 §14.1.2: no range overlaps, a
			// suffix of 0, any range of an empty file), malformed, or
			// refused as amplifying (overlapping, more bytes than the
			// file, over httpx.MaxRanges; §15.5.17 names these as 416
			// reasons).
			h["Content-Range"] = []string{"bytes */" + strconv.FormatInt(st.Size, 10)}
			httpError(w, http.StatusRequestedRangeNotSatisfiable, "range not satisfiable")
			return
		}
	}
	switch len(ranges) {
	case 0:
		h["Content-Length"] = []string{strconv.FormatInt(st.Size, 10)}
		w.WriteHeader(http.StatusOK)
		sendRange(w, f, httpx.Range{Start: 0, Length: st.Size})
	case 1:
		h["Content-Range"] = []string{ranges[0].ContentRange(st.Size)}
		h["Content-Length"] = []string{strconv.FormatInt(ranges[0].Length, 10)}
		w.WriteHeader(http.StatusPartialContent)
		sendRange(w, f, ranges[0])
	default:
		sendMultipart(w, f, h["Content-Type"][0], st.Size, ranges)
	}
}

// byteRanges returns the Range header value h for httpx.ParseRange, or ok
// false when the answer must ignore it: without one, and with a unit
// other than bytes (RFC 9110 §14.2: "An origin server MUST ignore a Range
// header field that contains a range unit it does not understand"). Units
// are case-insensitive (§14.1). A value with no unit at all is not of
// another unit but malformed, and ParseRange refuses it (416).
func byteRanges(h string) (string, bool) {
	unit, set, ok := strings.Cut(h, "=")
	switch {
	case h == "":
		return "", false
	case !ok || unit == "" || unit == "bytes":
		return h, true
	case strings.EqualFold(unit, "bytes"):
		return "bytes=" + set, true
	}
	return "", false
}

// ifRange reports whether a Range applies given the If-Range value v
// (RFC 9110 §13.1.5): always without one; with an entity tag, when it
// matches tag by strong comparison; with a date, when it is the file's
// Last-Modified.
func ifRange(v, tag string, mtime time.Time) bool {
	switch {
	case v == "":
		return true
	case strings.HasPrefix(v, `"`), strings.HasPrefix(v, "W/"):
		return v == tag
	}
	t, err := http.ParseTime(v)
	return err == nil && t.Equal(mtime.Truncate(time.Second))
}

// sendRange copies one range of f to w. The LimitedReader over the
// *os.File is what net/http's ReadFrom hands to sendfile. When the file
// shrank meanwhile the body falls short of the Content-Length sent, and
// net/http closes the connection, so the client sees a broken response,
// not a short one that looks complete.
func sendRange(w *respWriter, f *os.File, rg httpx.Range) {
	if rg.Length == 0 {
		return
	}
	if _, err := f.Seek(rg.Start, io.SeekStart); err != nil {
		return
	}
	io.Copy(w, &io.LimitedReader{R: f, N: rg.Length})
}

// sendMultipart answers several ranges with multipart/byteranges (RFC 9110
// §14.6), with a Content-Length computed beforehand.
func sendMultipart(w *respWriter, f *os.File, ctype string, size int64, ranges []httpx.Range) {
	var cw countWriter
	mw := multipart.NewWriter(&cw)
	for _, rg := range ranges {
		mw.CreatePart(partHeader(ctype, rg, size))
		cw += countWriter(rg.Length)
	}
	mw.Close()
	h := w.Header()
	pw := multipart.NewWriter(w)
	pw.SetBoundary(mw.Boundary())
	h["Content-Type"] = []string{"multipart/byteranges; boundary=" + mw.Boundary()}
	h["Content-Length"] = []string{strconv.FormatInt(int64(cw), 10)}
	w.WriteHeader(http.StatusPartialContent)
	for _, rg := range ranges {
		part, err := pw.CreatePart(partHeader(ctype, rg, size))
		if err != nil {
			return
		}
		if n, err := io.Copy(part, io.NewSectionReader(f, rg.Start, rg.Length)); err != nil || n != rg.Length {
			return // short of Content-Length: net/http closes the connection
		}
	}
	pw.Close()
}

// partHeader is the header of one multipart/byteranges part.
func partHeader(ctype string, rg httpx.Range, size int64) textproto.MIMEHeader {
	return textproto.MIMEHeader{"Content-Type": {ctype}, "Content-Range": {rg.ContentRange(size)}}
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// serveListing writes a small HTML index of a directory (hidden server
// files left out) for GET, and only the headers for HEAD.
func (s *Server) serveListing(w *respWriter, r *http.Request, p string, f *os.File) {
	w.Header()["Content-Type"] = hdrHTML
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	release, ok := s.acquireListing(w) // limits.go: bounded like PROPFIND Depth 1
	if !ok {
		return
	}
	defer release()
	entries, err := f.ReadDir(-1)
	if err != nil {
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
		return
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var b strings.Builder
	title := html.EscapeString(p)
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ")
	b.WriteString(title)
	b.WriteString("</title></head><body><h1>Index of ")
	b.WriteString(title)
	b.WriteString("</h1>\n<ul>\n")
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, reservedPrefix) {
			continue
		}
		if e.IsDir() {
			n += "/"
		}
		href := (&url.URL{Path: path.Join(p, e.Name())}).EscapedPath()
		if e.IsDir() {
			href += "/"
		}
		b.WriteString(`<li><a href="`)
		b.WriteString(html.EscapeString(href))
		b.WriteString(`">`)
		b.WriteString(html.EscapeString(n))
		b.WriteString("</a>")
		if info, err := e.Info(); err == nil && !e.IsDir() {
			b.WriteString(" ")
			b.WriteString(strconv.FormatInt(info.Size(), 10))
		}
		b.WriteString("</li>\n")
	}
	b.WriteString("</ul></body></html>\n")
	w.Header()["Content-Length"] = []string{strconv.Itoa(b.Len())}
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(b.String()))
}
