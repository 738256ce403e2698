package storage

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/webdav"
	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
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

// maxLockOwner bounds the owner XML a lock keeps: it is repeated in every
// lockdiscovery of the resources the lock covers.
const maxLockOwner = 4 << 10

// parseLockTimeout reads the Timeout header (RFC 4918 §10.7): the first
// entry the server understands wins. No header and Infinite ask for the
// longest lock, which create clamps to maxLockTimeout, as it does any
// longer Second-n.
func parseLockTimeout(h string) (time.Duration, bool) {
	if strings.TrimSpace(h) == "" {
		return maxLockTimeout, true
	}
	for _, t := range strings.Split(h, ",") {
		t = strings.TrimSpace(t)
		if strings.EqualFold(t, "Infinite") {
			return maxLockTimeout, true
		}
		if n, ok := strings.CutPrefix(t, "Second-"); ok {
			v, err := strconv.ParseUint(n, 10, 64)
			if err != nil {
				continue
			}
			return time.Duration(min(v, uint64(maxLockTimeout/time.Second))) * time.Second, true
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
	if len(owner) > maxLockOwner {
		httpError(w, http.StatusBadRequest, "lockinfo: owner longer than 4 KiB")
		return
	}
	l, err := s.locks.create(now, webdav.LockDetails{Root: p, Duration: dur, OwnerXML: owner, ZeroDepth: zero}, li.Shared != nil)
	switch {
	case errors.Is(err, webdav.ErrLocked):
		httpError(w, webdav.StatusLocked, "locked")
		return
	case errors.Is(err, errTooManyLocks):
		// Never 500: a full table refuses new locks, not other writes.
		var ce *lockCapError
		retry := time.Second
		if errors.As(err, &ce) {
			retry = max(ce.retry, retry)
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
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
		scope, depth := "exclusive", "infinity"
		if l.shared {
			scope = "shared"
		}
		if l.details.ZeroDepth {
			depth = "0"
		}
		timeout := "Second-" + strconv.FormatInt(int64(math.Ceil(l.details.Duration.Seconds())), 10)
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

// guardLocks decides whether request r may change the targets under the
// WebDAV locks and its If header (RFC 4918 §10.4, §7.5), and answers it
// when not: 400 for an If header that does not parse, 412 when it
// evaluates false (§10.4.1), 423 with the lock-token-submitted
// precondition (§16) when a lock covering a target, or for a deep target
// a lock below it, was not submitted. A lock counts as submitted when its
// token appears (not negated) in a list whose resource the lock covers:
// an untagged list (the request URI), or a list tagged with the target, a
// member or the lock root. A token for another resource opens nothing.
// The caller defers the release returned; it also drops the locks of the
// resources a deep target lost (DELETE, MOVE, an overwritten destination).
func (s *Server) guardLocks(w http.ResponseWriter, r *http.Request, targets ...lockTarget) (release func(), ok bool) {
	hdr := r.Header.Get("If")
	if hdr == "" && s.locks.held.Load() == 0 {
		return func() {}, true
	}
	now := time.Now()
	var submitted map[string][]string
	if hdr != "" {
		var code int
		var reason string
		if submitted, code, reason = s.evalIf(r, now, hdr); code != 0 {
			httpError(w, code, reason)
			return nil, false
		}
	}
	rel, refused := s.locks.admit(now, targets, func(l *davLock) bool {
		for _, p := range submitted[l.token] {
			if l.covers(p) {
				return true
			}
		}
		return false
	})
	if refused != nil {
		writeLockRefusal(w, refused)
		return nil, false
	}
	return func() {
		s.dropGoneLocks(targets)
		rel()
	}, true
}

// evalIf evaluates the If header (RFC 4918 §10.4): it holds when one of
// its lists does, a list being a conjunction of conditions on its
// resource (the tagged one, else the request URI). It returns, for each
// lock token that appears not negated, the resources of the lists naming
// it; or 400 or 412 and a reason.
func (s *Server) evalIf(r *http.Request, now time.Time, hdr string) (map[string][]string, int, string) {
	ih, ok := parseIfHeader(hdr)
	if !ok {
		return nil, http.StatusBadRequest, "bad If header"
	}
	reqPath, err := httpx.CleanPath(r.URL.Path)
	if err != nil {
		return nil, http.StatusBadRequest, err.Error()
	}
	submitted := map[string][]string{}
	holds := false
	for _, l := range ih.lists {
		res, ok := ifResource(r, l.resourceTag, reqPath)
		if !ok {
			continue // a resource of another server, or no URL: false, submits nothing
		}
		for _, c := range l.conditions {
			if !c.Not && c.Token != "" {
				submitted[c.Token] = append(submitted[c.Token], res)
			}
		}
		holds = holds || s.listHolds(now, l, res)
	}
	if !holds {
		// §10.4.1: when every state list fails, 412. (A header that holds
		// but submits no token of the target's lock is 423 instead, as
		// litmus's cond_put_corrupt_token expects.)
		return nil, http.StatusPreconditionFailed, "If header: no state list matched"
	}
	return submitted, 0, ""
}

// ifResource returns the clean path an If list is about: its tag (an
// absolute URI on this server or an absolute path, RFC 4918 §10.4.2),
// else reqPath.
func ifResource(r *http.Request, tag, reqPath string) (string, bool) {
	if tag == "" {
		return reqPath, true
	}
	u, err := url.Parse(tag)
	if err != nil || (u.Host != "" && u.Host != r.Host) {
		return "", false
	}
	p, err := httpx.CleanPath(u.Path)
	return p, err == nil
}

// listHolds evaluates one If list on the resource at clean path res: an
// entity tag must equal res's, a lock token must name a live lock
// covering res (§10.4.4); Not inverts either.
func (s *Server) listHolds(now time.Time, l ifList, res string) bool {
	etag, haveTag := "", false
	for _, c := range l.conditions {
		var ok bool
		if c.ETag != "" {
			if !haveTag {
				etag, haveTag = s.etagOf(res), true
			}
			ok = c.ETag == etag
		} else {
			ok = s.locks.covering(now, c.Token, res)
		}
		if ok == c.Not {
			return false
		}
	}
	return true
}

// etagOf returns the current entity tag of the file at clean path p, or ""
// when there is none.
func (s *Server) etagOf(p string) string {
	var st unix.Stat_t
	if s.statRel(rel(p), &st) != nil || !isReg(&st) {
		return ""
	}
	return etag(&st)
}

// writeLockRefusal answers 423 with the lock-token-submitted precondition
// naming the roots of the locks whose tokens were missing (RFC 4918 §16).
func writeLockRefusal(w http.ResponseWriter, roots []string) {
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:error xmlns:D=\"DAV:\"><D:lock-token-submitted>")
	for _, root := range roots {
		fmt.Fprintf(&b, "<D:href>%s</D:href>", xmlEscape((&url.URL{Path: root}).EscapedPath()))
	}
	b.WriteString("</D:lock-token-submitted></D:error>\n")
	h := w.Header()
	h.Set("Content-Type", "application/xml; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(webdav.StatusLocked)
	io.WriteString(w, b.String())
}

// dropGoneLocks removes the locks rooted in a deep target whose resource
// no longer exists. It runs while the request's guards still stand, so no
// LOCK can slip in between the look and the removal.
func (s *Server) dropGoneLocks(targets []lockTarget) {
	var gone []*davLock
	for _, tg := range targets {
		if !tg.deep {
			continue
		}
		for _, l := range s.locks.locksBelow(tg.path) {
			var st unix.Stat_t
			err := s.statRel(rel(l.details.Root), &st)
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
				gone = append(gone, l)
			}
		}
	}
	if len(gone) > 0 {
		s.locks.drop(gone)
	}
}

// serveDAVWrite hands a request that changes tg (DELETE, MKCOL,
// PROPPATCH) to x/net/webdav once guardLocks lets it through.
func (s *Server) serveDAVWrite(w http.ResponseWriter, r *http.Request, tg lockTarget) {
	release, ok := s.guardLocks(w, r, tg)
	if !ok {
		return
	}
	defer release()
	s.dav.ServeHTTP(w, r)
}
