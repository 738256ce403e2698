package storage

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/webdav"
)

// LOCK and UNLOCK are answered here rather than by x/net/webdav, which
// refuses shared locks with 501 (RFC 4918 §9.10, §9.11). The locks live in
// s.locks, which the x/net/webdav handler also consults for every other
// method, so a locked resource stays protected whichever code serves it.

// lockInfo is the body of a LOCK request that creates a lock (RFC 4918
// §14.11).
type lockInfo struct {
	XMLName   xml.Name  `xml:"DAV: lockinfo"`
	Exclusive *struct{} `xml:"DAV: lockscope>exclusive"`
	Shared    *struct{} `xml:"DAV: lockscope>shared"`
	Write     *struct{} `xml:"DAV: locktype>write"`
	Owner     *struct {
		InnerXML string `xml:",innerxml"`
	} `xml:"DAV: owner"`
}

// maxLockTimeout caps the seconds a client may ask for in a Timeout
// header; "Infinite" (or no header) means no expiry, as before.
const maxLockTimeout = 1 << 31

// parseLockTimeout reads the Timeout header (RFC 4918 §10.7): the first
// entry the server understands wins; no header means no expiry (-1).
func parseLockTimeout(h string) (time.Duration, bool) {
	if strings.TrimSpace(h) == "" {
		return -1, true
	}
	for _, t := range strings.Split(h, ",") {
		t = strings.TrimSpace(t)
		if strings.EqualFold(t, "Infinite") {
			return -1, true
		}
		if n, ok := strings.CutPrefix(t, "Second-"); ok {
			v, err := strconv.ParseUint(n, 10, 64)
			if err != nil {
				continue
			}
			if v > maxLockTimeout {
				v = maxLockTimeout
			}
			return time.Duration(v) * time.Second, true
		}
	}
	return 0, false
}

// serveLock answers LOCK on the clean path p: a new lock when there is a
// body, a refresh of the lock named in the If header when there is none.
func (s *Server) serveLock(w http.ResponseWriter, r *http.Request, p string) {
	dur, ok := parseLockTimeout(r.Header.Get("Timeout"))
	if !ok {
		httpError(w, http.StatusBadRequest, "bad Timeout header")
		return
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxXMLBody+1))
		if err != nil {
			httpError(w, http.StatusBadRequest, "cannot read request body")
			return
		}
		if len(b) > maxXMLBody {
			httpError(w, http.StatusRequestEntityTooLarge, "XML body larger than 1 MiB")
			return
		}
		body = b
	}
	now := time.Now()
	if len(strings.TrimSpace(string(body))) == 0 {
		s.refreshLock(w, r, p, now, dur)
		return
	}
	var li lockInfo
	if err := xml.Unmarshal(body, &li); err != nil {
		httpError(w, http.StatusBadRequest, "bad lockinfo body")
		return
	}
	if (li.Exclusive == nil) == (li.Shared == nil) || li.Write == nil {
		httpError(w, http.StatusBadRequest, "lockinfo: need one lockscope (exclusive or shared) and locktype write")
		return
	}
	zero := false
	switch strings.ToLower(strings.TrimSpace(r.Header.Get("Depth"))) {
	case "", "infinity":
	case "0":
		zero = true
	default:
		// RFC 4918 §9.10.3: only 0 and infinity.
		httpError(w, http.StatusBadRequest, "LOCK Depth must be 0 or infinity")
		return
	}
	owner := ""
	if li.Owner != nil {
		owner = li.Owner.InnerXML
	}
	l, err := s.locks.create(now, webdav.LockDetails{Root: p, Duration: dur, OwnerXML: owner, ZeroDepth: zero}, li.Shared != nil)
	switch {
	case errors.Is(err, webdav.ErrLocked):
		httpError(w, webdav.StatusLocked, "locked")
		return
	case errors.Is(err, errTooManyLocks):
		httpError(w, http.StatusServiceUnavailable, "too many locks")
		return
	case err != nil:
		s.log.ErrorContext(r.Context(), "lock", "path", p, "err", err)
		httpError(w, http.StatusInternalServerError, "internal error")
		return
	}
	// A LOCK on an unmapped URL creates an empty resource (RFC 4918 §7.3).
	created := false
	if _, err := (davFS{s}).Stat(r.Context(), p); errors.Is(err, os.ErrNotExist) {
		f, err := (davFS{s}).OpenFile(r.Context(), p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			err = f.Close()
		}
		if err != nil && !errors.Is(err, os.ErrExist) {
			s.locks.unlock(now, l.token, "")
			code, reason := s.fsStatus(r, err)
			httpError(w, code, reason)
			return
		}
		created = err == nil
	} else if err != nil {
		s.locks.unlock(now, l.token, "")
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
		return
	}
	w.Header().Set("Lock-Token", "<"+l.token+">")
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeLockDiscovery(w, code, []davLock{l})
}

// refreshLock restarts the timeout of the lock named in the If header
// (RFC 4918 §9.10.2); it must cover p.
func (s *Server) refreshLock(w http.ResponseWriter, r *http.Request, p string, now time.Time, dur time.Duration) {
	ih, ok := parseIfHeader(r.Header.Get("If"))
	if !ok {
		httpError(w, http.StatusBadRequest, "lock refresh needs an If header with the lock token")
		return
	}
	for _, list := range ih.lists {
		for _, c := range list.conditions {
			if c.Not || c.Token == "" {
				continue
			}
			if l, err := s.locks.refresh(now, c.Token, p, dur); err == nil {
				writeLockDiscovery(w, http.StatusOK, []davLock{l})
				return
			}
		}
	}
	httpError(w, http.StatusPreconditionFailed, "no lock in the If header applies to this resource")
}

// serveUnlock answers UNLOCK (RFC 4918 §9.11): 204, or 409 when the token
// names no lock on p, 423 while a request relies on the lock.
func (s *Server) serveUnlock(w http.ResponseWriter, r *http.Request, p string) {
	t := strings.TrimSpace(r.Header.Get("Lock-Token"))
	if len(t) < 3 || t[0] != '<' || t[len(t)-1] != '>' {
		httpError(w, http.StatusBadRequest, "UNLOCK needs a Lock-Token header")
		return
	}
	switch err := s.locks.unlock(time.Now(), t[1:len(t)-1], p); {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, webdav.ErrLocked):
		httpError(w, webdav.StatusLocked, "lock in use")
	default:
		httpError(w, http.StatusConflict, "lock-token-matches-request-uri: no such lock on this resource")
	}
}

// writeLockDiscovery writes a prop element with the lockdiscovery of the
// given locks, the body of a LOCK answer (RFC 4918 §9.10.1).
func writeLockDiscovery(w http.ResponseWriter, code int, locks []davLock) {
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:prop xmlns:D=\"DAV:\">")
	b.WriteString(activeLocksXML(locks))
	b.WriteString("</D:prop>\n")
	h := w.Header()
	h.Set("Content-Type", "application/xml; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(code)
	io.WriteString(w, b.String())
}

// activeLocksXML renders a lockdiscovery element (RFC 4918 §15.8).
func activeLocksXML(locks []davLock) string {
	var b strings.Builder
	b.WriteString("<D:lockdiscovery>")
	for _, l := range locks {
		scope, depth, timeout := "exclusive", "infinity", "Infinite"
		if l.shared {
			scope = "shared"
		}
		if l.details.ZeroDepth {
			depth = "0"
		}
		if l.details.Duration >= 0 {
			timeout = "Second-" + strconv.FormatInt(int64(math.Ceil(l.details.Duration.Seconds())), 10)
		}
		fmt.Fprintf(&b, "<D:activelock><D:locktype><D:write/></D:locktype><D:lockscope><D:%s/></D:lockscope>"+
			"<D:depth>%s</D:depth>", scope, depth)
		if l.details.OwnerXML != "" {
			fmt.Fprintf(&b, "<D:owner>%s</D:owner>", l.details.OwnerXML)
		}
		fmt.Fprintf(&b, "<D:timeout>%s</D:timeout><D:locktoken><D:href>%s</D:href></D:locktoken>"+
			"<D:lockroot><D:href>%s</D:href></D:lockroot></D:activelock>",
			timeout, xmlEscape(l.token), xmlEscape((&url.URL{Path: l.details.Root}).EscapedPath()))
	}
	b.WriteString("</D:lockdiscovery>")
	return b.String()
}

// xmlEscape escapes s for XML character data.
func xmlEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
