package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestFront(t *testing.T) {
	var got string
	mark := func(name string) http.Handler {
		return http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got = name })
	}
	h := Front(mark("fed"), mark("ui"))
	for _, tt := range []struct{ path, want string }{
		{"/", "fed"},
		{"/data/d000/f00001", "fed"},
		{"/data/dir/", "fed"},
		{"/uix", "fed"},
		{"/data/../f", "fed"}, // the federator refuses it itself, not a mux redirect
		{"//data//f", "fed"},
		{"/ui", "ui"},
		{"/ui/", "ui"},
		{"/ui/run/3", "ui"},
	} {
		got = ""
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "http://fed"+tt.path, nil))
		if got != tt.want {
			t.Errorf("GET %s went to %q, want %q", tt.path, got, tt.want)
		}
	}
	got = ""
	Front(mark("fed"), nil).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "http://fed/ui/", nil))
	if got != "fed" {
		t.Errorf("without a dashboard GET /ui/ went to %q, want fed", got)
	}
}
