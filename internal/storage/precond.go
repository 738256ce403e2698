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
// Race: a check is only as good as its distance from the write. Every
// method that changes a path holds that path's lock (pathLocks) while it
// checks and writes: PUT for its commit (re-check, rename); DELETE, MKCOL
// and PROPPATCH for the whole method; COPY and MOVE for the whole method
// on the destination, and on the source too for a MOVE (which removes
// it) or a COPY with preconditions. So two PUTs with If-Match of the same
// ETag cannot both win, a conditional DELETE cannot remove what a PUT
// just installed, and a PUT or DELETE of a COPY's destination waits for
// the COPY instead of landing between its steps. A local process can
// still slip in between; the lock is per path, so another name for the
// same file (a symlink) is another lock, and a lock on a collection does
// not cover its members.
//
// Lock order: a request that takes two path locks (COPY, MOVE) takes
// them together, in byte order of the clean paths (pathLocks.lock);
// every other request holds at most one, and nobody takes a path lock
// while holding another. No two requests can then wait for each other.

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

// guardPreconditions evaluates the preconditions of a request that reads
// the clean path p for a while (an HTTP third-party push) before it
// starts. It returns false after answering 412 (or an error); else a
// release the caller runs when it is done: with preconditions, p's lock
// is held until then, so p is not replaced between the check and the
// read.
func (s *Server) guardPreconditions(w http.ResponseWriter, r *http.Request, p string) (func(), bool) {
	if !hasPreconditions(r.Header) {
		return func() {}, true
	}
	unlock := s.paths.lock(p)
	if !s.checkPreconditions(w, r, p) {
		unlock()
		return nil, false
	}
	return unlock, true
}

// checkPreconditions evaluates the preconditions of a DELETE, MKCOL,
// PROPPATCH, COPY, MOVE or push against the clean path p, whose lock the
// caller holds. It returns false after answering 412 (or an error).
//
// RFC 9110 §13.2.1: preconditions are ignored when the request would fail
// without them; on a missing resource only MKCOL (which creates it)
// evaluates them, the others answer 404 as they would anyway.
func (s *Server) checkPreconditions(w http.ResponseWriter, r *http.Request, p string) bool {
	if !hasPreconditions(r.Header) {
		return true
	}
	var c current
	err := s.statRel(rel(p), &c.st)
	switch {
	case err == nil:
		c.exists = true
	case errors.Is(err, fs.ErrNotExist):
		if r.Method != "MKCOL" {
			return true
		}
	default:
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
		return false
	}
	if c.check(r) != 0 {
		httpError(w, http.StatusPreconditionFailed, "precondition failed")
		return false
	}
	return true
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

// lock locks the paths ps, in byte order (the lock order above; a path
// given twice is locked once), and returns their unlock.
func (l *pathLocks) lock(ps ...string) func() {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	ps = slices.Compact(ps)
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
