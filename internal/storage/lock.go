package storage

import (
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"golang.org/x/net/webdav"
	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// countingLS is a webdav.LockSystem that counts the locks it handed out
// and not yet released, so the PUT fast path can skip lock checks entirely
// while nobody holds a lock. Expired locks keep the count up until they are
// unlocked; that only sends PUTs down the (correct) slow path.
type countingLS struct {
	webdav.LockSystem
	held atomic.Int64
}

func (l *countingLS) Create(now time.Time, details webdav.LockDetails) (string, error) {
	token, err := l.LockSystem.Create(now, details)
	if err == nil {
		l.held.Add(1)
	}
	return token, err
}

func (l *countingLS) Unlock(now time.Time, token string) error {
	err := l.LockSystem.Unlock(now, token)
	if err == nil {
		l.held.Add(-1)
	}
	return err
}

// confirmLocks checks that a PUT to name may proceed under the WebDAV locks
// held, exactly as x/net/webdav does for its own methods (RFC 4918 §10.4,
// §7): without an If header the target must not be locked by anyone; with
// one, some state list must confirm. It returns a release func, or a status
// and reason for the refusal.
func (s *Server) confirmLocks(r *http.Request, name string) (release func(), status int, reason string) {
	hdr := r.Header.Get("If")
	if hdr == "" {
		if s.locks.held.Load() == 0 {
			return func() {}, 0, ""
		}
		now := time.Now()
		token, err := s.locks.Create(now, webdav.LockDetails{Root: name, Duration: -1, ZeroDepth: true})
		if err == webdav.ErrLocked {
			return nil, webdav.StatusLocked, "locked"
		}
		if err != nil {
			return nil, http.StatusInternalServerError, "lock check failed"
		}
		return func() { s.locks.Unlock(now, token) }, 0, ""
	}
	ih, ok := parseIfHeader(hdr)
	if !ok {
		return nil, http.StatusBadRequest, "bad If header"
	}
	// ih is a disjunction of lists; each list is a conjunction of
	// conditions. x/net/webdav's memory lock system ignores ETag and Not
	// conditions, so they are evaluated here (RFC 4918 §10.4.2, §10.4.8).
	now := time.Now()
	for _, l := range ih.lists {
		lsrc := l.resourceTag
		if lsrc == "" {
			lsrc = name
		} else {
			u, err := url.Parse(lsrc)
			if err != nil || u.Host != r.Host {
				continue
			}
			lsrc = u.Path
		}
		if rel, ok := s.confirmList(now, l, lsrc); ok {
			return rel, 0, ""
		}
	}
	// RFC 4918 §10.4.1: when every state list fails, 412.
	return nil, http.StatusPreconditionFailed, "If header: no state list matched"
}

// confirmList evaluates one If-header list against the resource at p and,
// when it holds, returns the release func of the locks it confirmed.
func (s *Server) confirmList(now time.Time, l ifList, p string) (func(), bool) {
	var positive []webdav.Condition
	curTag, tagDone := "", false
	for _, c := range l.conditions {
		switch {
		case c.ETag != "":
			if !tagDone {
				curTag, tagDone = s.etagOf(p), true
			}
			if (c.ETag == curTag) == c.Not {
				return nil, false
			}
		case c.Not:
			// "Not <token>" holds unless the token is a live lock on p.
			if rel, err := s.locks.Confirm(now, p, "", webdav.Condition{Token: c.Token}); err == nil {
				rel()
				return nil, false
			}
		default:
			positive = append(positive, webdav.Condition{Token: c.Token})
		}
	}
	if len(positive) > 0 {
		rel, err := s.locks.Confirm(now, p, "", positive...)
		if err != nil {
			return nil, false
		}
		return rel, true
	}
	// No lock token submitted: p must not be locked by anyone.
	token, err := s.locks.Create(now, webdav.LockDetails{Root: p, Duration: -1, ZeroDepth: true})
	if err != nil {
		return nil, false
	}
	return func() { s.locks.Unlock(now, token) }, true
}

// etagOf returns the current entity tag of the file at clean path p, or ""
// when there is none.
func (s *Server) etagOf(p string) string {
	cp, err := httpx.CleanPath(p)
	if err != nil {
		return ""
	}
	var st unix.Stat_t
	if s.statRel(rel(cp), &st) != nil || !isReg(&st) {
		return ""
	}
	return etag(&st)
}
