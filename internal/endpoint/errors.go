package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// The errors every kind wraps, so callers can tell apart the three things
// that can go wrong. The federator treats them differently: ErrNotFound
// counts towards a 404, ErrUnavailable towards a 503 and a health mark,
// ErrRefused is passed on to the client.
var (
	// ErrNotFound: the endpoint answered, and the path is not there.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the endpoint could not answer (down, timeout, 5xx,
	// a broken connection). Worth trying another replica or later.
	ErrUnavailable = errors.New("unavailable")
	// ErrRefused: the endpoint answered and refused (permission, bad
	// request, path is a directory, range past the end).
	ErrRefused = errors.New("refused")
	// ErrExist: something is already there (MKCOL on a file). It is a
	// kind of refusal: errors.Is(err, ErrRefused) holds too.
	ErrExist = &classed{msg: "already exists", class: ErrRefused}
	// ErrUnsupported: the kind cannot do this at all (a redirect URL for
	// a local directory). It is a refusal too.
	ErrUnsupported = &classed{msg: "not supported", class: ErrRefused}
	// ErrPathUnavailable: the endpoint answered, and said that the path
	// cannot be had through it now (an upstream federator whose own
	// endpoints for that path are down). For the path it is a kind of
	// ErrUnavailable (503, not 404); for the endpoint's health it is an
	// answer, like ErrNotFound: one client asking for such a path again
	// and again must not get the whole endpoint marked down.
	ErrPathUnavailable = &classed{msg: "unavailable behind the endpoint", class: ErrUnavailable}
	// ErrPrecondition: a conditional write (ConditionalPutter) found,
	// when it was about to commit, that the path no longer is what the
	// caller saw (RFC 9110 §13.1: 412), and changed nothing. It is a
	// refusal: errors.Is(err, ErrRefused) holds too.
	ErrPrecondition = &classed{msg: "precondition failed", class: ErrRefused}
	// ErrBeyondEnd: a read asked for an offset past the end of the file
	// (BeyondEnd). It is a refusal (RFC 9110 §15.5.17: 416), and to a
	// caller that read the file's size before, a sign that the file it
	// reads now is another, shorter version.
	ErrBeyondEnd = &classed{msg: "offset beyond the end of the file", class: ErrRefused}
	// ErrTooLarge: the answer is over the bound the caller set (a
	// listing of more entries than StatList's limit). It is a refusal.
	ErrTooLarge = &classed{msg: "over the caller's bound", class: ErrRefused}
)

// BeyondEnd is the error of a read at off of a file of size bytes (size
// < 0: not known), off > size: every kind says it this way (ErrBeyondEnd).
func BeyondEnd(off, size int64) error {
	if size < 0 {
		return fmt.Errorf("%w: offset %d", ErrBeyondEnd, off)
	}
	return fmt.Errorf("%w: offset %d, size %d", ErrBeyondEnd, off, size)
}

// OpError is the error of an endpoint's method: which kind failed doing
// what on which path, and why, as fs.PathError is for files. Err wraps the
// class (ErrNotFound, ErrUnavailable, ErrRefused...), so errors.Is sees it
// through the OpError. Callers that already say the operation and the path
// (the CLI) print Err alone.
type OpError struct {
	// Kind is the kind's name (KindS3...).
	Kind string
	// Op is the operation: "stat", "list", "open", "read", "put",
	// "delete", "mkdir", "probe", "checksum", "redirect".
	Op string
	// Path is the endpoint path, or "" when the operation has none (probe).
	Path string
	Err  error
}

// Error is `kind: op "path": err`, or `kind: op: err` without a path.
func (e *OpError) Error() string {
	if e.Path == "" {
		return e.Kind + ": " + e.Op + ": " + e.Err.Error()
	}
	return e.Kind + ": " + e.Op + " " + strconv.Quote(e.Path) + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }

// classed is a sentinel that also matches the broader class it belongs to.
type classed struct {
	msg   string
	class error
}

func (e *classed) Error() string        { return e.msg }
func (e *classed) Is(target error) bool { return target == e.class }

// Class returns which of ErrNotFound, ErrUnavailable or ErrRefused err is,
// or nil for nil. An error of no known class counts as ErrUnavailable: when
// unsure whether a file exists, never say it does not.
func Class(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return ErrNotFound
	case errors.Is(err, ErrRefused):
		return ErrRefused
	default:
		return ErrUnavailable
	}
}

// IsNetwork reports whether err comes from the network or a deadline rather
// than from an answer: kinds use it to wrap ErrUnavailable.
func IsNetwork(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}
