package httpx

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	h := w.Header()
	h.Set("ETag", `"x"`)
	h.Set("Last-Modified", "Tue, 02 Jan 2024 03:04:05 GMT")
	h.Set("Link", "<http://a/f>; rel=duplicate")
	h.Set("Content-Length", "1234")
	h.Set("Retry-After", "1")
	WriteError(w, http.StatusServiceUnavailable, "<b>down</b>")
	if w.Code != http.StatusServiceUnavailable || w.Body.String() != "<b>down</b>\n" {
		t.Errorf("answer %d %q", w.Code, w.Body.String())
	}
	for k, want := range map[string]string{
		"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff",
		"Content-Length": "12", "Retry-After": "1", "Etag": "", "Last-Modified": "", "Link": "",
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	w = httptest.NewRecorder()
	WriteError(w, http.StatusNotFound, "not found\n")
	if w.Body.String() != "not found\n" || w.Header().Get("Content-Length") != "10" {
		t.Errorf("a message with its newline: %q, length %s", w.Body.String(), w.Header().Get("Content-Length"))
	}
}

func TestStatusOf(t *testing.T) {
	err := fmt.Errorf("load: %w", NewError(http.StatusBadRequest, "bad id", fs.ErrInvalid))
	if code, msg, ok := StatusOf(err); code != http.StatusBadRequest || msg != "bad id" || !ok {
		t.Errorf("StatusOf = %d %q %v", code, msg, ok)
	}
	if !errors.Is(err, fs.ErrInvalid) || err.Error() != "load: bad id: invalid argument" {
		t.Errorf("the cause is lost: %v", err)
	}
	if code, msg, ok := StatusOf(errors.New("secret detail")); code != http.StatusInternalServerError || msg != "internal error" || ok {
		t.Errorf("an untyped error = %d %q %v, want 500 without its text", code, msg, ok)
	}
}
