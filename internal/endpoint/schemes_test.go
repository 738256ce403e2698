package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
)

func TestOpError(t *testing.T) {
	err := error(&OpError{Kind: KindS3, Op: "stat", Path: "/x", Err: fmt.Errorf("%w: 404", ErrNotFound)})
	if got, want := err.Error(), `s3: stat "/x": not found: 404`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrNotFound) || Class(err) != ErrNotFound {
		t.Errorf("%v: the class is lost through OpError", err)
	}
	probe := &OpError{Kind: KindXRoot, Op: "probe", Err: ErrPathUnavailable}
	if got, want := probe.Error(), "xroot: probe: unavailable behind the endpoint"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", probe), ErrUnavailable) {
		t.Errorf("%v: not ErrUnavailable", probe)
	}
}

func TestSchemeTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Schemes() {
		if s.Name != strings.ToLower(s.Name) || seen[s.Name] {
			t.Errorf("scheme %q: want lower case, once", s.Name)
		}
		seen[s.Name] = true
		if got, ok := LookupScheme(strings.ToUpper(s.Name)); !ok || got.Name != s.Name {
			t.Errorf("LookupScheme(%q) = %v, %v", strings.ToUpper(s.Name), got, ok)
		}
		if s.Can&CapPresign != 0 && s.Can&CapRedirect == 0 {
			t.Errorf("scheme %s pre-signs but cannot redirect", s.Name)
		}
		if w := s.WireScheme(); s.Kind == KindHTTP || s.Kind == KindUpstream {
			if w != "http" && w != "https" {
				t.Errorf("scheme %s of kind %s speaks %q on the wire, want http(s)", s.Name, s.Kind, w)
			}
		}
	}
	if _, ok := LookupScheme("roots"); ok {
		t.Errorf("roots:// is in the table, but no kind serves it")
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		url, kind string
		want      string // the kind, or the field of the error
	}{
		{"davs://h/x", "", KindHTTP},
		{"xroot://h//x", "", KindXRoot},
		{"https://h/", KindUpstream, KindUpstream},
		{"lakefeds://h/", "", KindUpstream},
		{"file:///x", "", KindPosix},
		{"roots://h//x", "", "url"},
		{"/x", "", "url"},
		{"http:///x", "", "url"},
		{"file:///x", KindUpstream, "url"},
		{"http://h/", "cache", "kind"},
	}
	for _, tt := range tests {
		_, kind, err := Resolve(Config{URL: tt.url, Kind: tt.kind})
		var fe *FieldError
		if errors.As(err, &fe) {
			kind = fe.Field
		}
		if kind != tt.want {
			t.Errorf("Resolve(%q, kind %q) = %q, %v; want %q", tt.url, tt.kind, kind, err, tt.want)
		}
	}
}

// gated is a Redirecter that says whether it can redirect, as a root://
// endpoint does by its http_url.
type gated struct {
	Endpoint
	ok bool
}

func (g gated) RedirectURL(context.Context, string, Op) (*url.URL, error) { return &url.URL{}, nil }
func (g gated) CanRedirect() bool                                         { return g.ok }

type plain struct{ Endpoint }

func (plain) RedirectURL(context.Context, string, Op) (*url.URL, error) { return &url.URL{}, nil }

type local struct{ Endpoint }

func (local) Open(context.Context, string, int64, int64) (io.ReadCloser, error) { return nil, nil }

func TestCanRedirect(t *testing.T) {
	for _, tt := range []struct {
		ep   Endpoint
		want bool
	}{{plain{}, true}, {local{}, false}, {gated{ok: true}, true}, {gated{ok: false}, false}} {
		if got := CanRedirect(tt.ep); got != tt.want {
			t.Errorf("CanRedirect(%T %v) = %v, want %v", tt.ep, tt.ep, got, tt.want)
		}
	}
}
