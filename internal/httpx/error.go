package httpx

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Error is an error that knows the status it answers, as Caddy's
// HandlerError does: code deep in a handler returns one, and the
// handler's edge writes it (StatusOf, WriteError) without each layer
// choosing a status again.
type Error struct {
	// Code is the HTTP status.
	Code int
	// Msg is the one-line reason the client sees.
	Msg string
	// Err is the cause, for logs and errors.Is; nil when Msg says all.
	Err error
}

// NewError returns an *Error: status code, reason msg, cause err (may be nil).
func NewError(code int, msg string, err error) *Error { return &Error{Code: code, Msg: msg, Err: err} }

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// StatusOf returns the status and reason of err: those of the *Error in
// its chain, else 500 and "internal error" with ok false, so the caller
// logs the cause (which the client must not see).
func StatusOf(err error) (code int, msg string, ok bool) {
	var he *Error
	if errors.As(err, &he) {
		return he.Code, he.Msg, true
	}
	return http.StatusInternalServerError, "internal error", false
}

// Header values of every error answer; net/http only reads header
// slices, so sharing them saves an allocation per header.
var (
	hdrTextPlain = []string{"text/plain; charset=utf-8"}
	hdrNosniff   = []string{"nosniff"}
)

// WriteError writes the one answer every lakefed server gives for an
// error it writes itself: status code and msg as one line of text/plain,
// not to be sniffed as HTML (msg may hold a client's path). The headers a
// handler may have set for the success it expected go: Etag and
// Last-Modified (they would describe a representation not sent), Link
// (replica and Metalink links) and Content-Length, which is set to the
// message's. Headers that belong to the error stay (Retry-After,
// Content-Range of a 416, Allow of a 405); a role adds its own before
// calling.
func WriteError(w http.ResponseWriter, code int, msg string) {
	nl := !strings.HasSuffix(msg, "\n")
	n := len(msg)
	if nl {
		n++
	}
	h := w.Header()
	delete(h, "Etag")
	delete(h, "Last-Modified")
	delete(h, "Link")
	h["Content-Type"] = hdrTextPlain
	h["X-Content-Type-Options"] = hdrNosniff
	h["Content-Length"] = []string{strconv.Itoa(n)}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
	if nl {
		_, _ = io.WriteString(w, "\n")
	}
}
