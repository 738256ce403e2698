package endpoint

import (
	"errors"
	"net/http"
)

// ClassOfStatus is the error class of an HTTP answer that is not a
// success, the one map every HTTP kind and the benchmark use:
//
//   - 404 and 410: ErrNotFound.
//   - 408 (the server gave up waiting) and 429 (too many requests):
//     ErrUnavailable, worth trying another replica or later.
//   - 412: ErrPrecondition (a refusal).
//   - any other 4xx: ErrRefused.
//   - 5xx, and anything not expected here (1xx, a 3xx that was not
//     followed, a 2xx where another was due): ErrUnavailable. When unsure
//     whether a file exists, never say it does not.
//
// A kind with a status of its own to tell apart (the upstream kind's
// per-path 503) checks it before asking here.
func ClassOfStatus(code int) error {
	switch {
	case code == http.StatusNotFound || code == http.StatusGone:
		return ErrNotFound
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests:
		return ErrUnavailable
	case code == http.StatusPreconditionFailed:
		return ErrPrecondition
	case code >= 400 && code < 500:
		return ErrRefused
	default:
		return ErrUnavailable
	}
}

// HTTPStatus is the other direction: the status a server answers for an
// endpoint error, by its class. ErrNotFound is 404; ErrExist 409 (a file
// is in the way); ErrPrecondition 412; ErrBeyondEnd 416; any other
// refusal 403;
// ErrUnavailable, and an error of no known class, 503: worth retrying,
// never "not there".
func HTTPStatus(err error) int {
	switch Class(err) {
	case ErrNotFound:
		return http.StatusNotFound
	case ErrRefused:
		if errors.Is(err, ErrExist) {
			return http.StatusConflict
		}
		if errors.Is(err, ErrPrecondition) {
			return http.StatusPreconditionFailed
		}
		if errors.Is(err, ErrBeyondEnd) {
			return http.StatusRequestedRangeNotSatisfiable
		}
		return http.StatusForbidden
	}
	return http.StatusServiceUnavailable
}
