package storage

// Resource limits: file descriptors and expensive requests.
//
// File descriptors. Every request needs at least one (the connection) and
// most need two or three (openat2 of the path, the file, a temp file). When
// the process (EMFILE) or the system (ENFILE) runs out, the condition is
// transient: other requests finish and give theirs back. Such failures are
// answered 503 with Retry-After (RFC 9110 §15.6.4, §10.2.3), never 500,
// so clients retry instead of reporting a server bug. The soft
// RLIMIT_NOFILE is not raised here: since Go 1.19 every Go program on
// Linux raises it at start, to the hard limit minus one (package syscall's
// init, go.dev/issue/46279), and gives child processes the original back;
// TestRlimitNofileRaised checks it. The accept loops back off on EMFILE
// (net/http's, and package fastpath's, which waits 5 ms doubling up to
// 1 s); the fast path hands a request whose open fails with EMFILE to
// net/http, which answers it 503 like any other.
//
// Expensive requests. A PROPFIND Depth 1 or a GET of a directory reads a
// whole directory; with 100,000 entries that is seconds of work and, done
// naively, tens of MB per request. At most Config.MaxListings of them run
// at once; the next gets 503 with Retry-After at once (queueing would only
// hold its connection and memory longer).

import (
	"errors"
	"net/http"
	"syscall"
)

// DefaultMaxListings is Config.MaxListings when it is zero.
const DefaultMaxListings = 8

// hdrRetryAfter is the Retry-After value (seconds) of every 503 this server
// writes: both causes (descriptors, listing slots) clear within a second
// or two.
var hdrRetryAfter = []string{"1"}

// errnoStatus maps the errors that are a property of the server's state
// rather than of the request: the transient ones get 503, which httpError
// sends with Retry-After. ok is false for every other error. Both fsStatus
// and putStatus (through fsStatus) use it, so every file-system error that
// becomes a status passes here.
func errnoStatus(err error) (code int, reason string, ok bool) {
	switch {
	case isFDExhausted(err):
		return http.StatusServiceUnavailable, "out of file descriptors, retry", true
	case errors.Is(err, syscall.ENOMEM):
		// The kernel could not allocate (e.g. for openat2): as transient.
		return http.StatusServiceUnavailable, "temporarily out of memory, retry", true
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusInsufficientStorage, "insufficient storage", true
	}
	return 0, "", false
}

// isFDExhausted reports whether err is the process (EMFILE) or the system
// (ENFILE) running out of file descriptors.
func isFDExhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// acquireListing takes one of the MaxListings slots for an expensive
// request. When none is free it answers 503 with Retry-After itself and
// reports false; otherwise the caller must call release when done.
func (s *Server) acquireListing(w http.ResponseWriter) (release func(), ok bool) {
	select {
	case s.listings <- struct{}{}:
		return s.releaseListing, true
	default:
		s.m.busy.Inc()
		httpError(w, http.StatusServiceUnavailable, "too many directory listings at once, retry")
		return nil, false
	}
}

func (s *Server) releaseListing() { <-s.listings }
