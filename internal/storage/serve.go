package storage

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/keptsum"
	"github.com/lakefed/lakefed/internal/storage/davlock"
)

// Header values shared by every response. net/http only reads header
// slices, so sharing them saves an allocation per header per request.
var (
	hdrBytes       = []string{"bytes"}
	hdrOctetStream = []string{"application/octet-stream"}
	hdrHTML        = []string{"text/html; charset=utf-8"}
	hdrDAV         = []string{"1, 2"}
	hdrAllow       = []string{"OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, PROPFIND, PROPPATCH, COPY, MOVE, LOCK, UNLOCK"}
	hdrZero        = []string{"0"}
	hdrMSAuthor    = []string{"DAV"}
	hdrAtomic      = []string{"atomic"}
	hdrServer      = []string{httpx.StorageServer}
)

// respWriter is how the storage role's handlers see their answer: it
// notes the status and body size for metrics and the access log.
type respWriter = httpx.Meter

var rwPool = sync.Pool{New: func() any { return new(respWriter) }}

// httpError writes a one-line text/plain reason (httpx.WriteError, the
// shape of every error answer lakefed writes itself), adding what only
// the storage role says: every 503 it writes is transient (RFC 9110
// §15.6.4), so it tells when to retry.
func httpError(w http.ResponseWriter, code int, reason string) {
	if h := w.Header(); code == http.StatusServiceUnavailable && h["Retry-After"] == nil {
		h["Retry-After"] = hdrRetryAfter
	}
	httpx.WriteError(w, code, reason)
}

// serveHTTP is the server's whole handler: checks, dispatch, metrics,
// access log and panic recovery.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r, _ = httpx.TagRequest(w, r) // tagged already when served by Serve
	rw := rwPool.Get().(*respWriter)
	rw.Reset(w)
	// Every answer names the server: the http kind believes its ETags
	// strong because it is a lakefed storage role (appendETag).
	w.Header()["Server"] = hdrServer
	var in int64
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v) // net/http's own way to drop a connection quietly
			}
			s.log.ErrorContext(r.Context(), "panic in handler", "method", r.Method, "path", r.URL.Path,
				"err", v, "stack", string(debug.Stack()))
			if rw.Status == 0 {
				httpError(rw, http.StatusInternalServerError, "internal error")
			}
		}
		s.record(rw, r, start, in)
		rw.ResponseWriter = nil
		rwPool.Put(rw)
	}()
	in = s.dispatch(rw, r)
}

// record updates the metrics and writes the access log line.
func (s *Server) record(rw *respWriter, r *http.Request, start time.Time, in int64) {
	d := time.Since(start)
	status := rw.Status
	if status == 0 {
		status = http.StatusOK
	}
	mi := methodIndex(r.Method)
	class := status / 100
	if class > 5 {
		class = 0
	}
	s.m.requests[mi][class].Inc()
	s.m.latency[mi].Observe(d.Seconds())
	if rw.Bytes > 0 {
		s.m.sent.Add(float64(rw.Bytes))
	}
	if in > 0 {
		s.m.received.Add(float64(in))
	}
	if s.cfg.AccessLog {
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", status), slog.Int64("bytes", rw.Bytes+in),
			slog.Duration("duration", d), slog.String("remote", r.RemoteAddr))
	}
}

// dispatch checks the path and hands the request to its method. It
// returns the number of request body bytes taken (PUT).
func (s *Server) dispatch(w *respWriter, r *http.Request) int64 {
	if r.Method == http.MethodOptions && r.URL.Path == "*" {
		s.serveOptions(w)
		return 0
	}
	if s.metricsPath != "" && r.URL.Path == s.metricsPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		s.metricsH.ServeHTTP(w, r)
		return 0
	}
	p, err := httpx.CleanPath(r.URL.Path)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return 0
	}
	if reserved(p) {
		httpError(w, http.StatusForbidden, "reserved name")
		return 0
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.serveGetHead(w, r, p)
		return 0
	case http.MethodPut:
		return s.servePut(w, r, p)
	case "COPY":
		// Third-party copy (tpc.go) before the WebDAV checks: its target
		// may not exist yet, and its preconditions are its PUT's.
		if remote, pull, ok := tpcRemote(r); ok {
			if !s.cfg.TPC {
				httpError(w, http.StatusForbidden, "third-party copy is not enabled")
				return 0
			}
			s.serveTPC(w, r, p, remote, pull)
			return 0
		}
	}
	// The WebDAV layer would see an escaping symlink as missing, and some
	// of its methods answer that with 500 or create files; refuse up front.
	if code, reason := s.precheck(r, p); code != 0 {
		httpError(w, code, reason)
		return 0
	}
	switch r.Method {
	case "DELETE", "MKCOL", "PROPPATCH":
		// The path's lock for the whole method, and RFC 9110 §13.2's
		// If-Match and friends evaluated under it (precond.go; PUT, COPY
		// and MOVE do their own).
		defer s.paths.lock(p)()
		if !s.checkPreconditions(w, r, p) {
			return 0
		}
	}
	switch r.Method {
	case http.MethodOptions:
		s.serveOptions(w)
	case "PROPFIND":
		switch r.Header.Get("Depth") {
		case "0", "1":
			if code, reason := checkXMLBody(r); code != 0 {
				httpError(w, code, reason)
				return 0
			}
			s.servePropfind(w, r, p)
		default:
			// RFC 4918 §9.1: a server may refuse Depth: infinity (the
			// default when the header is missing) with 403.
			httpError(w, http.StatusForbidden, "propfind-finite-depth: use Depth 0 or 1")
		}
	case "COPY", "MOVE":
		s.serveCopyMove(w, r, p)
	case "DELETE":
		if p == "/" {
			httpError(w, http.StatusForbidden, "the root cannot be deleted")
			return 0
		}
		if r.Header.Get(httpx.EmptyDeleteHeader) == "empty" && s.deleteEmptyDir(w, r, p) {
			return 0
		}
		s.serveDAVWrite(w, r, davlock.Target{Path: p, Deep: true})
	case "PROPPATCH":
		if code, reason := checkXMLBody(r); code != 0 {
			httpError(w, code, reason)
			return 0
		}
		s.serveDAVWrite(w, r, davlock.Target{Path: p})
	case "LOCK":
		if code, reason := checkXMLBody(r); code != 0 {
			httpError(w, code, reason)
			return 0
		}
		s.locks.ServeLock(w, r, p)
	case "UNLOCK":
		s.locks.ServeUnlock(w, r, p)
	case "MKCOL":
		s.serveDAVWrite(w, r, davlock.Target{Path: p})
	default:
		w.Header()["Allow"] = hdrAllow
		httpError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
	return 0
}

// checkDestination applies the request-path rules to a COPY or MOVE
// Destination header (RFC 4918 §10.3) and returns its clean path, or a
// status and reason when the header is refused.
func (s *Server) checkDestination(r *http.Request, src string) (string, int, string) {
	hdr := r.Header.Get("Destination")
	if hdr == "" {
		return "", http.StatusBadRequest, "missing Destination header"
	}
	u, err := url.Parse(hdr)
	if err != nil {
		return "", http.StatusBadRequest, "bad Destination header"
	}
	if u.Host != "" && u.Host != r.Host {
		// Third-party copy is not offered; RFC 4918 would allow 502, but a
		// refusal is what it is.
		return "", http.StatusForbidden, "destination is on another server"
	}
	dst, err := httpx.CleanPath(u.Path)
	if err != nil {
		return "", http.StatusBadRequest, "destination: " + err.Error()
	}
	switch {
	case reserved(dst):
		return "", http.StatusForbidden, "destination: reserved name"
	case dst == "/" || src == "/":
		return "", http.StatusForbidden, "the root cannot be copied, moved or overwritten"
	}
	if code, reason := s.precheck(r, dst); code != 0 {
		return "", code, "destination: " + reason
	}
	return dst, 0, ""
}

// precheck resolves the clean path p (symlinks followed, never out of
// Root) before the WebDAV layer sees it. A missing path is fine (the
// method decides); a path that leaves Root, loops or runs through a file
// is refused here. LOCK on a missing path also needs its parent, since
// x/net/webdav answers a missing parent with 500.
func (s *Server) precheck(r *http.Request, p string) (int, string) {
	var st unix.Stat_t
	err := s.statRel(rel(p), &st)
	if err == nil {
		return 0, ""
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return s.fsStatus(r, err)
	}
	if r.Method == "LOCK" && p != "/" {
		dir := p[:strings.LastIndexByte(p, '/')]
		if dir == "" {
			return 0, ""
		}
		if err := s.statRel(rel(dir), &st); err != nil || !isDir(&st) {
			return http.StatusConflict, "parent collection does not exist"
		}
	}
	return 0, ""
}

// serveOptions answers OPTIONS (RFC 4918 §10.1: DAV compliance classes).
func (s *Server) serveOptions(w http.ResponseWriter) {
	h := w.Header()
	h["Dav"] = hdrDAV
	h["Allow"] = hdrAllow
	h["Ms-Author-Via"] = hdrMSAuthor
	h["Accept-Ranges"] = hdrBytes
	h[httpx.ConditionalPutHeader] = hdrAtomic // commit checks them under the path lock (put.go)
	h["Content-Length"] = hdrZero
	w.WriteHeader(http.StatusOK)
}

// reserved reports whether a clean path has a segment the server keeps
// for itself (temp uploads).
func reserved(p string) bool { return httpx.Reserved(p) }

// isEscape reports whether err says a path tried to leave Root: EXDEV
// from openat2(RESOLVE_BENEATH), or os.Root's "path escapes from parent".
func isEscape(err error) bool {
	if errors.Is(err, syscall.EXDEV) {
		return true
	}
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Err != nil && strings.Contains(pe.Err.Error(), "escapes") {
		return true
	}
	var le *os.LinkError
	return errors.As(err, &le) && le.Err != nil && strings.Contains(le.Err.Error(), "escapes")
}

// fsStatus maps a file-system error to a status and a one-line reason:
// errnoStatus for the server's own state (descriptors, space), then the
// request's. Unknown errors are logged here (once) and become 500.
func (s *Server) fsStatus(r *http.Request, err error) (int, string) {
	if code, reason, ok := errnoStatus(err); ok {
		if isFDExhausted(err) {
			s.m.fdExhausted.Inc()
		}
		return code, reason
	}
	switch {
	case errors.Is(err, keptsum.ErrChanged):
		return http.StatusServiceUnavailable, "file changed while reading it, retry"
	case isEscape(err):
		return http.StatusForbidden, "path leads outside the root"
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound, "not found"
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden, "permission denied"
	case errors.Is(err, syscall.ENOTDIR):
		return http.StatusConflict, "a parent is not a directory"
	case errors.Is(err, syscall.EISDIR):
		return http.StatusConflict, "is a directory"
	case errors.Is(err, syscall.ENAMETOOLONG):
		return http.StatusBadRequest, "name too long"
	case errors.Is(err, syscall.ELOOP):
		return http.StatusForbidden, "too many symbolic links"
	}
	s.log.ErrorContext(r.Context(), "file system error", "method", r.Method, "path", r.URL.Path, "err", err)
	return http.StatusInternalServerError, "internal error"
}

// maxXMLBody bounds PROPFIND, PROPPATCH and LOCK bodies.
const maxXMLBody = 1 << 20

// checkXMLBody reads a WebDAV XML request body (up to maxXMLBody) and
// refuses what encoding/xml would accept but XML Namespaces 1.0 forbids:
// an empty prefixed namespace declaration (xmlns:p=""), litmus's
// propfind_invalid2. The body is put back for the WebDAV handler.
func checkXMLBody(r *http.Request) (int, string) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return 0, ""
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxXMLBody+1))
	if err != nil {
		return http.StatusBadRequest, "cannot read request body"
	}
	if len(b) > maxXMLBody {
		return http.StatusRequestEntityTooLarge, "XML body larger than 1 MiB"
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := d.RawToken()
		if err != nil {
			return 0, "" // EOF, or a syntax error the WebDAV handler reports
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Space == "xmlns" && a.Value == "" {
					return http.StatusBadRequest, "empty namespace prefix declaration in XML body"
				}
			}
		}
	}
}
