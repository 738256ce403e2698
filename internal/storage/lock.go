package storage

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/webdav"
	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// lockSystem is the storage role's webdav.LockSystem. x/net/webdav's own
// memory lock system only knows exclusive locks, and litmus (and RFC 4918
// §6.1, §7) expects shared ones too, so this one keeps every lock with its
// scope: several shared locks may cover a resource at once, an exclusive
// lock conflicts with any other, and a depth-infinity lock on a collection
// covers all its members. The x/net/webdav handler uses it through the
// LockSystem interface (its temporary per-request locks are exclusive and
// depth 0), our LOCK and UNLOCK handlers through create, refresh, unlock.
// Locks are few, so they are kept in one map and scanned.
type lockSystem struct {
	mu      sync.Mutex
	byToken map[string]*davLock
	// held counts the locks in byToken, so the PUT fast path can skip lock
	// checks entirely while nobody holds a lock. Expired locks keep the
	// count up until they are swept; that only sends PUTs down the
	// (correct) slow path.
	held atomic.Int64
}

// davLock is one WebDAV write lock.
type davLock struct {
	token   string
	details webdav.LockDetails // Root is clean; Duration < 0: no expiry
	shared  bool
	expiry  time.Time // meaningful when details.Duration >= 0
	holds   int       // requests currently relying on the lock (Confirm)
}

// maxLocks bounds the lock table, so a client cannot grow it without end.
const maxLocks = 1 << 16

// errTooManyLocks refuses a lock while the table is full.
var errTooManyLocks = errors.New("storage: too many locks")

var _ webdav.LockSystem = (*lockSystem)(nil)

func newLockSystem() *lockSystem {
	return &lockSystem{byToken: make(map[string]*davLock)}
}

// lockClean cleans a WebDAV name the way x/net/webdav does.
func lockClean(name string) string {
	if name == "" || name[0] != '/' {
		name = "/" + name
	}
	return path.Clean(name)
}

// covers reports whether lock l applies to the clean path name.
func (l *davLock) covers(name string) bool {
	root := l.details.Root
	if name == root {
		return true
	}
	return !l.details.ZeroDepth && (root == "/" || strings.HasPrefix(name, root+"/"))
}

// sweep drops expired locks nobody is relying on. Callers hold l.mu.
func (ls *lockSystem) sweep(now time.Time) {
	for t, l := range ls.byToken {
		if l.details.Duration >= 0 && l.holds == 0 && !now.Before(l.expiry) {
			delete(ls.byToken, t)
		}
	}
	ls.held.Store(int64(len(ls.byToken)))
}

// Confirm implements webdav.LockSystem: each non-empty name must be covered
// by a lock whose token is among the conditions. The locks found are held
// (cannot be unlocked or expire) until release is called.
func (ls *lockSystem) Confirm(now time.Time, name0, name1 string, conditions ...webdav.Condition) (func(), error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.sweep(now)
	var found []*davLock
	for _, name := range [2]string{name0, name1} {
		if name == "" {
			continue
		}
		l := ls.lookup(lockClean(name), conditions)
		if l == nil {
			return nil, webdav.ErrConfirmationFailed
		}
		found = append(found, l)
	}
	for _, l := range found {
		l.holds++
	}
	return func() {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		for _, l := range found {
			l.holds--
		}
	}, nil
}

// lookup returns a lock named by one of the conditions that covers name.
// Callers hold ls.mu.
func (ls *lockSystem) lookup(name string, conditions []webdav.Condition) *davLock {
	for _, c := range conditions {
		if c.Not || c.Token == "" {
			continue
		}
		if l := ls.byToken[c.Token]; l != nil && l.covers(name) {
			return l
		}
	}
	return nil
}

// Create implements webdav.LockSystem with an exclusive lock.
func (ls *lockSystem) Create(now time.Time, details webdav.LockDetails) (string, error) {
	l, err := ls.create(now, details, false)
	if err != nil {
		return "", err
	}
	return l.token, nil
}

// create adds a lock unless it conflicts (webdav.ErrLocked): two locks
// conflict when one covers the other's root and not both are shared.
func (ls *lockSystem) create(now time.Time, details webdav.LockDetails, shared bool) (davLock, error) {
	details.Root = lockClean(details.Root)
	nl := &davLock{details: details, shared: shared}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.sweep(now)
	for _, l := range ls.byToken {
		if (l.covers(details.Root) || nl.covers(l.details.Root)) && !(shared && l.shared) {
			return davLock{}, webdav.ErrLocked
		}
	}
	if len(ls.byToken) >= maxLocks {
		return davLock{}, errTooManyLocks
	}
	tok, err := newLockToken()
	if err != nil {
		return davLock{}, err
	}
	nl.token = tok
	if details.Duration >= 0 {
		nl.expiry = now.Add(details.Duration)
	}
	ls.byToken[tok] = nl
	ls.held.Store(int64(len(ls.byToken)))
	return *nl, nil
}

// newLockToken returns a fresh opaquelocktoken URI (RFC 4918 appendix C)
// with a random (version 4) UUID.
func newLockToken() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("storage: lock token: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("opaquelocktoken:%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// Refresh implements webdav.LockSystem.
func (ls *lockSystem) Refresh(now time.Time, token string, duration time.Duration) (webdav.LockDetails, error) {
	l, err := ls.refresh(now, token, "", duration)
	return l.details, err
}

// refresh restarts the timeout of the lock token; when name is not empty
// the lock must cover it (RFC 4918 §9.10.2).
func (ls *lockSystem) refresh(now time.Time, token, name string, duration time.Duration) (davLock, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.sweep(now)
	l := ls.byToken[token]
	if l == nil || (name != "" && !l.covers(lockClean(name))) {
		return davLock{}, webdav.ErrNoSuchLock
	}
	l.details.Duration = duration
	if duration >= 0 {
		l.expiry = now.Add(duration)
	}
	return *l, nil
}

// Unlock implements webdav.LockSystem.
func (ls *lockSystem) Unlock(now time.Time, token string) error {
	return ls.unlock(now, token, "")
}

// unlock removes the lock token; when name is not empty the lock must
// cover it (RFC 4918 §9.11). A lock a request is relying on right now
// cannot go (webdav.ErrLocked).
func (ls *lockSystem) unlock(now time.Time, token, name string) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.sweep(now)
	l := ls.byToken[token]
	if l == nil || (name != "" && !l.covers(lockClean(name))) {
		return webdav.ErrNoSuchLock
	}
	if l.holds > 0 {
		return webdav.ErrLocked
	}
	delete(ls.byToken, token)
	ls.held.Store(int64(len(ls.byToken)))
	return nil
}

// locksOn returns the locks that cover the clean path name, for the
// lockdiscovery property.
func (ls *lockSystem) locksOn(now time.Time, name string) []davLock {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.sweep(now)
	var out []davLock
	for _, l := range ls.byToken {
		if l.covers(name) {
			out = append(out, *l)
		}
	}
	return out
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
