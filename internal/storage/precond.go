package storage

import (
	"errors"
	"io/fs"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// Preconditions of the methods that change state (RFC 9110 §13.1,
// §13.2.2): PUT, DELETE, MKCOL, PROPPATCH, COPY and MOVE evaluate
// If-Match, If-None-Match and If-Unmodified-Since against the target's
// current representation with httpx.CheckPreconditions, the same function
// GET and HEAD use, and answer 412 without changing anything when one
// fails. For COPY and MOVE the target is the source: the Destination's
// state is governed by Overwrite (RFC 4918 §10.6), not by these headers.
//
// Race: a check is only as good as its distance from the write. The check
// and the write of one path run under that path's lock (pathLocks): PUT
// takes it for its commit (re-check, rename); DELETE, COPY and MOVE hold
// it from their check to their end, always (they remove or replace files:
// COPY and MOVE hold their Destination's too, and MOVE its source), and
// MKCOL and PROPPATCH when the request carries a precondition. So two
// PUTs with If-Match of the same ETag cannot both win, a conditional
// DELETE cannot remove what a PUT just installed, and no DELETE can fall
// between a conditional PUT's check and its rename: a PUT with If-Match
// of the file a DELETE removes is refused with 412, never committed
// after it (the write buffer's mover relies on that). Local processes
// writing the directory ignore the lock; it is per path, so another name
// for the same file (a symlink) is another lock, and a DELETE of a
// directory does not take the locks of the files below it.

// hasPreconditions reports whether h carries a header that a
// state-changing method evaluates.
func hasPreconditions(h http.Header) bool {
	return len(h["If-Match"]) > 0 || len(h["If-None-Match"]) > 0 || len(h["If-Unmodified-Since"]) > 0
}

// current describes the representation at a path for a precondition: its
// ETag and mtime, or exists false when there is none.
type current struct {
	exists bool
	st     unix.Stat_t
}

// check evaluates the request's preconditions against c: 0 to proceed,
// else 304 or 412.
func (c *current) check(r *http.Request) int {
	if !c.exists {
		return httpx.CheckPreconditions(r.Header, r.Method, "", time.Time{}, false)
	}
	return httpx.CheckPreconditions(r.Header, r.Method, etag(&c.st), mtimeOf(&c.st), true)
}

// mtimeOf is st's modification time.
func mtimeOf(st *unix.Stat_t) time.Time { return time.Unix(st.Mtim.Sec, st.Mtim.Nsec) }

// guardPreconditions evaluates the preconditions of a DELETE, MKCOL,
// PROPPATCH, COPY or MOVE on the clean path p before the method runs. It
// returns false after answering 412 (or an error); else a release the
// caller runs when the method is done. Until then the locks of p and of
// also (a COPY's or MOVE's Destination) are held: always for DELETE,
// COPY and MOVE, and for the others when the request carries a
// precondition.
//
// RFC 9110 §13.2.1: preconditions are ignored when the request would fail
// without them; on a missing resource only MKCOL (which creates it)
// evaluates them, the others answer 404 as they would anyway.
func (s *Server) guardPreconditions(w http.ResponseWriter, r *http.Request, p string, also ...string) (func(), bool) {
	replaces := r.Method == "DELETE" || r.Method == "COPY" || r.Method == "MOVE"
	if !replaces && !hasPreconditions(r.Header) {
		return func() {}, true
	}
	unlock := s.paths.lock(append([]string{p}, also...)...)
	if !hasPreconditions(r.Header) {
		return unlock, true
	}
	var c current
	err := s.statRel(rel(p), &c.st)
	switch {
	case err == nil:
		c.exists = true
	case errors.Is(err, fs.ErrNotExist):
		if r.Method != "MKCOL" {
			return unlock, true
		}
	default:
		unlock()
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
		return nil, false
	}
	if c.check(r) != 0 {
		unlock()
		httpError(w, http.StatusPreconditionFailed, "precondition failed")
		return nil, false
	}
	return unlock, true
}

// pathLocks serializes the check-then-write of one clean request path.
// The zero value is ready to use. Entries live while held or waited for.
type pathLocks struct {
	mu sync.Mutex // guards m
	m  map[string]*pathLock
}

// pathLock is one path's mutex and how many requests hold or wait for it.
type pathLock struct {
	mu   sync.Mutex
	refs int // guarded by pathLocks.mu
}

// lock locks the paths ps and returns their unlock. Several are taken
// in sorted order (duplicates once), so two requests locking the same
// pair never wait for each other crosswise.
func (l *pathLocks) lock(ps ...string) func() {
	if len(ps) == 1 {
		return l.lockOne(ps[0])
	}
	ps = slices.Compact(slices.Sorted(slices.Values(ps)))
	unlocks := make([]func(), len(ps))
	for i, p := range ps {
		unlocks[i] = l.lockOne(p)
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
}

// lockOne locks p and returns its unlock.
func (l *pathLocks) lockOne(p string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*pathLock{}
	}
	e := l.m[p]
	if e == nil {
		e = &pathLock{}
		l.m[p] = e
	}
	e.refs++
	l.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.m, p)
		}
		l.mu.Unlock()
	}
}
