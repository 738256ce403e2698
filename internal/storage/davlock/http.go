// Package davlock is the storage role's WebDAV write locks (RFC 4918 §6,
// §7, §9.10, §9.11, §10.4): the table of locks, LOCK and UNLOCK, the If
// header, and the check every changing method makes before it starts.
// They are answered here rather than by x/net/webdav, which refuses shared
// locks with 501 and matches an If header's tagged list against the
// resource the list names, not the target. The storage role hands x/net/webdav
// Pass and asks Guard itself, so a locked resource stays protected
// whichever code serves it.
//
//	locks := davlock.New(files, log) // files: the Resources of one root
//	release, ok := locks.Guard(w, r, davlock.Target{Path: p})
//	if !ok { return } // answered: 400, 412 or 423
//	defer release()
package davlock

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/webdav"

	"github.com/lakefed/lakefed/internal/httpx"
)

// Resources is what the locks need of the file tree they guard. Paths
// are clean.
type Resources interface {
	// ETag returns the entity tag of the file at p, or "" when there is
	// none (an If header's entity-tag conditions, RFC 4918 §10.4.4).
	ETag(p string) string
	// Gone reports whether nothing is at p any more (a parent that is
	// not a directory counts): the locks of a removed resource go too.
	Gone(p string) bool
	// CreateEmpty makes an empty file at p unless something is there: a
	// LOCK on an unmapped URL creates one (RFC 4918 §7.3). It reports
	// whether it made one.
	CreateEmpty(ctx context.Context, p string) (created bool, err error)
	// WriteError answers a request whose CreateEmpty failed.
	WriteError(w http.ResponseWriter, r *http.Request, err error)
}

// Locks is the lock table of one file tree and its HTTP answers. Safe for
// concurrent use.
type Locks struct {
	res Resources
	log *slog.Logger
	t   *table
}

// New returns an empty lock table for res. log receives internal errors.
func New(res Resources, log *slog.Logger) *Locks {
	return &Locks{res: res, log: log, t: newTable()}
}

// Held reports whether any lock is held: while none is, the write paths
// skip lock checks and PROPFIND lists no lockdiscovery.
func (ls *Locks) Held() bool { return ls.t.held.Load() > 0 }

// Count returns the number of live locks.
func (ls *Locks) Count() int { return ls.t.count() }

// Create adds a lock as LOCK would, without a request: for tests that
// fill the table. It returns the lock's token.
func (ls *Locks) Create(now time.Time, details webdav.LockDetails, shared bool) (string, error) {
	l, err := ls.t.create(now, details, shared)
	return l.token, err
}

// Discovery returns the content of the lockdiscovery property of the
// clean path p (RFC 4918 §15.8): an activelock element for each lock
// covering it.
func (ls *Locks) Discovery(now time.Time, p string) string {
	x := activeLocksXML(ls.t.locksOn(now, p))
	return strings.TrimSuffix(strings.TrimPrefix(x, "<D:lockdiscovery>"), "</D:lockdiscovery>")
}

// maxXMLBody bounds a LOCK body, as the storage role bounds every WebDAV
// XML body.
const maxXMLBody = 1 << 20

// httpError writes a short text/plain error.
func httpError(w http.ResponseWriter, code int, msg string) { httpx.WriteError(w, code, msg) }

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
// longest lock, which create clamps to MaxTimeout, as it does any
// longer Second-n.
func parseLockTimeout(h string) (time.Duration, bool) {
	if strings.TrimSpace(h) == "" {
		return MaxTimeout, true
	}
	for _, t := range strings.Split(h, ",") {
		t = strings.TrimSpace(t)
		if strings.EqualFold(t, "Infinite") {
			return MaxTimeout, true
		}
		if n, ok := strings.CutPrefix(t, "Second-"); ok {
			v, err := strconv.ParseUint(n, 10, 64)
			if err != nil {
				continue
			}
			return time.Duration(min(v, uint64(MaxTimeout/time.Second))) * time.Second, true
		}
	}
	return 0, false
}

// ServeLock answers LOCK on the clean path p: a new lock when there is a
// body, a refresh of the lock named in the If header when there is none.
func (ls *Locks) ServeLock(w http.ResponseWriter, r *http.Request, p string) {
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
		ls.refreshLock(w, r, p, now, dur)
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
	l, err := ls.t.create(now, webdav.LockDetails{Root: p, Duration: dur, OwnerXML: owner, ZeroDepth: zero}, li.Shared != nil)
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
		ls.log.ErrorContext(r.Context(), "lock", "path", p, "err", err)
		httpError(w, http.StatusInternalServerError, "internal error")
		return
	}
	// A LOCK on an unmapped URL creates an empty resource (RFC 4918 §7.3).
	created, err := ls.res.CreateEmpty(r.Context(), p)
	if err != nil {
		_ = ls.t.unlock(now, l.token, "")
		ls.res.WriteError(w, r, err)
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
func (ls *Locks) refreshLock(w http.ResponseWriter, r *http.Request, p string, now time.Time, dur time.Duration) {
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
			if l, err := ls.t.refresh(now, c.Token, p, dur); err == nil {
				writeLockDiscovery(w, http.StatusOK, []davLock{l})
				return
			}
		}
	}
	httpError(w, http.StatusPreconditionFailed, "no lock in the If header applies to this resource")
}

// ServeUnlock answers UNLOCK (RFC 4918 §9.11): 204, or 409 when the token
// names no lock on p, 423 while a request relies on the lock.
func (ls *Locks) ServeUnlock(w http.ResponseWriter, r *http.Request, p string) {
	t := strings.TrimSpace(r.Header.Get("Lock-Token"))
	if len(t) < 3 || t[0] != '<' || t[len(t)-1] != '>' {
		httpError(w, http.StatusBadRequest, "UNLOCK needs a Lock-Token header")
		return
	}
	switch err := ls.t.unlock(time.Now(), t[1:len(t)-1], p); {
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

// Guard decides whether request r may change the targets under the
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
func (ls *Locks) Guard(w http.ResponseWriter, r *http.Request, targets ...Target) (release func(), ok bool) {
	// Every write registers with the table, even while no lock exists:
	// a LOCK arriving during the write must wait for it (or be refused),
	// not be granted and then overwritten by a write that never asked.
	hdr := r.Header.Get("If")
	now := time.Now()
	var submitted map[string][]string
	if hdr != "" {
		var code int
		var reason string
		if submitted, code, reason = ls.evalIf(r, now, hdr); code != 0 {
			httpError(w, code, reason)
			return nil, false
		}
	}
	rel, refused := ls.t.admit(now, targets, func(l *davLock) bool {
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
		ls.dropGone(targets)
		rel()
	}, true
}

// evalIf evaluates the If header (RFC 4918 §10.4): it holds when one of
// its lists does, a list being a conjunction of conditions on its
// resource (the tagged one, else the request URI). It returns, for each
// lock token that appears not negated, the resources of the lists naming
// it; or 400 or 412 and a reason.
func (ls *Locks) evalIf(r *http.Request, now time.Time, hdr string) (map[string][]string, int, string) {
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
		holds = holds || ls.listHolds(now, l, res)
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
func (ls *Locks) listHolds(now time.Time, l ifList, res string) bool {
	etag, haveTag := "", false
	for _, c := range l.conditions {
		var ok bool
		if c.ETag != "" {
			if !haveTag {
				etag, haveTag = ls.res.ETag(res), true
			}
			ok = c.ETag == etag
		} else {
			ok = ls.t.covering(now, c.Token, res)
		}
		if ok == c.Not {
			return false
		}
	}
	return true
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

// dropGone removes the locks rooted in a deep target whose resource no
// longer exists. It runs while the request's guards still stand, so no
// LOCK can slip in between the look and the removal.
func (ls *Locks) dropGone(targets []Target) {
	var gone []*davLock
	for _, tg := range targets {
		if !tg.Deep {
			continue
		}
		for _, l := range ls.t.locksBelow(tg.Path) {
			if ls.res.Gone(l.details.Root) {
				gone = append(gone, l)
			}
		}
	}
	if len(gone) > 0 {
		ls.t.drop(gone)
	}
}
