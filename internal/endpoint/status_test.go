package endpoint

import (
	"fmt"
	"net/http"
	"testing"
)

func TestClassOfStatus(t *testing.T) {
	for code, want := range map[int]error{
		404: ErrNotFound, 410: ErrNotFound,
		400: ErrRefused, 401: ErrRefused, 403: ErrRefused, 405: ErrRefused, 416: ErrRefused,
		408: ErrUnavailable, 429: ErrUnavailable, 412: ErrPrecondition,
		500: ErrUnavailable, 502: ErrUnavailable, 503: ErrUnavailable,
		100: ErrUnavailable, 200: ErrUnavailable, 302: ErrUnavailable, 0: ErrUnavailable,
	} {
		if got := ClassOfStatus(code); got != want {
			t.Errorf("ClassOfStatus(%d) = %v, want %v", code, got, want)
		}
	}
}

func TestHTTPStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("x: %w", ErrNotFound), http.StatusNotFound},
		{fmt.Errorf("x: %w", ErrExist), http.StatusConflict},
		{fmt.Errorf("x: %w", ErrUnsupported), http.StatusForbidden},
		{ErrRefused, http.StatusForbidden},
		{fmt.Errorf("x: %w", ErrPrecondition), http.StatusPreconditionFailed},
		{ErrPathUnavailable, http.StatusServiceUnavailable},
		{fmt.Errorf("unclassed"), http.StatusServiceUnavailable},
	} {
		if got := HTTPStatus(c.err); got != c.want {
			t.Errorf("HTTPStatus(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	// A failed precondition is a refusal, and comes back as itself.
	if got := ClassOfStatus(HTTPStatus(ErrPrecondition)); got != ErrPrecondition || Class(got) != ErrRefused {
		t.Errorf("ErrPrecondition → %d → %v (class %v)", HTTPStatus(ErrPrecondition), got, Class(got))
	}
	// Each class comes back as itself.
	for _, class := range []error{ErrNotFound, ErrRefused, ErrUnavailable} {
		if got := Class(ClassOfStatus(HTTPStatus(class))); got != class {
			t.Errorf("%v → %d → %v", class, HTTPStatus(class), got)
		}
	}
}
