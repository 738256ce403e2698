package storage

import (
	"html"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

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
		st.Mode, st.Size, st.Mtim = sys.Mode, sys.Size, unix.Timespec(sys.Mtim)
		st.Ino, st.Dev = sys.Ino, sys.Dev
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

// etag is the entity tag of a file: hex mtime in ns then hex size, the
// formula x/net/webdav uses for getetag, so PROPFIND and GET agree.
func etag(st *unix.Stat_t) string {
	var b [48]byte
	out := append(b[:0], '"')
	out = strconv.AppendInt(out, st.Mtim.Nano(), 16)
	out = strconv.AppendInt(out, st.Size, 16)
	out = append(out, '"')
	return string(out)
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
	switch checkPreconditions(r, tag, mtime) {
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
	// Preconditions passed above; ServeContent handles Range, multi-range
	// (multipart/byteranges), If-Range and 416 with "bytes */size", and
	// sends the bytes with sendfile (it copies from the *os.File).
	if _, ok := r.Header["Range"]; ok {
		// ServeContent sets "Content-Range: bytes */size" on 416 only when
		// the range does not overlap; add it for malformed ranges too.
		http.ServeContent(&rangeWriter{respWriter: w, size: st.Size}, r, "", mtime, f)
		return
	}
	http.ServeContent(w, r, "", mtime, f)
}

// rangeWriter adds "Content-Range: bytes */size" to every 416 response.
type rangeWriter struct {
	*respWriter
	size int64
}

func (w *rangeWriter) WriteHeader(code int) {
	if code == http.StatusRequestedRangeNotSatisfiable {
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(w.size, 10))
	}
	w.respWriter.WriteHeader(code)
}

// checkPreconditions evaluates RFC 9110 §13.2.2 in order: If-Match, else
// If-Unmodified-Since; then If-None-Match, else If-Modified-Since. It
// returns 0 when the request should proceed, or 304 or 412.
func checkPreconditions(r *http.Request, tag string, mtime time.Time) int {
	h := r.Header
	if im := h["If-Match"]; len(im) > 0 {
		if !etagMatch(strings.Join(im, ","), tag, false) {
			return http.StatusPreconditionFailed
		}
	} else if ius := h.Get("If-Unmodified-Since"); ius != "" {
		if t, err := http.ParseTime(ius); err == nil && mtime.Truncate(time.Second).After(t) {
			return http.StatusPreconditionFailed
		}
	}
	if inm := h["If-None-Match"]; len(inm) > 0 {
		if etagMatch(strings.Join(inm, ","), tag, true) {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				return http.StatusNotModified
			}
			return http.StatusPreconditionFailed
		}
	} else if ims := h.Get("If-Modified-Since"); ims != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		if t, err := http.ParseTime(ims); err == nil && !mtime.Truncate(time.Second).After(t) {
			return http.StatusNotModified
		}
	}
	return 0
}

// etagMatch reports whether a comma-separated list of entity tags (or
// "*") matches tag, with weak comparison when weak is set (If-None-Match)
// and strong comparison otherwise (If-Match), RFC 9110 §8.8.3.2.
func etagMatch(list, tag string, weak bool) bool {
	for {
		list = strings.TrimLeft(list, " \t,")
		if list == "" {
			return false
		}
		if list[0] == '*' {
			return true
		}
		isWeak := strings.HasPrefix(list, "W/")
		if isWeak {
			list = list[2:]
		}
		if list == "" || list[0] != '"' {
			return false // malformed: match nothing
		}
		end := strings.IndexByte(list[1:], '"')
		if end < 0 {
			return false
		}
		t := list[:end+2]
		list = list[end+2:]
		if t == tag && (weak || !isWeak) {
			return true
		}
	}
}

// serveListing writes a small HTML index of a directory (hidden server
// files left out) for GET, and only the headers for HEAD.
func (s *Server) serveListing(w *respWriter, r *http.Request, p string, f *os.File) {
	w.Header()["Content-Type"] = hdrHTML
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
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
