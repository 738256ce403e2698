package httpx

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRecorder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limit    int
		truncate bool
		writes   []string
		wantBody string
		wantErr  error
	}{
		{"unbounded", 0, false, []string{"ab", "cd"}, "abcd", nil},
		{"bounded, refused past it", 3, false, []string{"ab", "cd"}, "ab", ErrTooBig},
		{"bounded, truncated", 3, true, []string{"ab", "cd"}, "abc", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder(tc.limit, tc.truncate)
			r.Header().Set("X-A", "1")
			var err error
			for _, w := range tc.writes {
				if _, e := r.Write([]byte(w)); e != nil {
					err = e
				}
			}
			if r.Code != http.StatusOK || r.Body.String() != tc.wantBody || !errors.Is(err, tc.wantErr) {
				t.Errorf("Code %d, Body %q, err %v; want 200, %q, %v", r.Code, r.Body.String(), err, tc.wantBody, tc.wantErr)
			}
			w := httptest.NewRecorder()
			r.Flush(w)
			if w.Code != http.StatusOK || w.Body.String() != tc.wantBody || w.Header().Get("X-A") != "1" {
				t.Errorf("Flush wrote %d %q %v", w.Code, w.Body.String(), w.Header())
			}
			r.Reset()
			if r.Code != 0 || r.Body.Len() != 0 || len(r.Header()) != 0 {
				t.Errorf("after Reset: %d %q %v", r.Code, r.Body.String(), r.Header())
			}
		})
	}
	r := NewRecorder(0, false)
	r.WriteHeader(http.StatusNotFound)
	r.WriteHeader(http.StatusOK)
	if r.Code != http.StatusNotFound {
		t.Errorf("Code = %d after two WriteHeader, want the first (404)", r.Code)
	}
}
