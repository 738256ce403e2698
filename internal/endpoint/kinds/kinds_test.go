package kinds

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
	httpep "github.com/lakefed/lakefed/internal/endpoint/http"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
	"github.com/lakefed/lakefed/internal/endpoint/s3"
	"github.com/lakefed/lakefed/internal/endpoint/upstream"
	"github.com/lakefed/lakefed/internal/endpoint/xroot"
)

func TestNew(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		url     string
		want    string // "posix", "http", or an error substring
		wantErr bool
	}{
		{"file://" + dir, "posix", false},
		{"http://127.0.0.1:1/base/", "http", false},
		{"https://127.0.0.1:1/", "http", false},
		{"dav://127.0.0.1:1/x", "http", false},
		{"davs://127.0.0.1:1/x", "http", false},
		{"DAVS://127.0.0.1:1/x", "http", false},
		{"gopher://127.0.0.1/", `scheme "gopher" is not one of`, true},
		{"s3x://bucket/", `scheme "s3x" is not one of`, true},
		{"/just/a/path", "no scheme", true},
		{"file://" + dir + "/missing", "no such file", true},
		{"http:///nohost", "no host", true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			ep, err := New(context.Background(), endpoint.Config{Name: "e", URL: tt.url}, log)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("New(%q) = %v, %v; want error containing %q", tt.url, ep, err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tt.url, err)
			}
			var got string
			switch ep.(type) {
			case *posix.Endpoint:
				got = "posix"
			case *httpep.Endpoint:
				got = "http"
			}
			if got != tt.want {
				t.Errorf("New(%q) is %T, want %s", tt.url, ep, tt.want)
			}
		})
	}
}

// TestEveryScheme builds an endpoint for every row of the table of schemes
// (the config package checks that it accepts every row too), and of the
// kind the row says; schemes not in the table are refused. Before the table,
// kinds.New could not build "kind: upstream", and config and kinds.New
// disagreed about roots:// and xroot://.
func TestEveryScheme(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	kindOf := func(ep endpoint.Endpoint) string {
		switch ep.(type) {
		case *posix.Endpoint:
			return endpoint.KindPosix
		case *httpep.Endpoint:
			return endpoint.KindHTTP
		case *s3.Endpoint:
			return endpoint.KindS3
		case *xroot.Endpoint:
			return endpoint.KindXRoot
		case *upstream.Endpoint:
			return endpoint.KindUpstream
		}
		return "?"
	}
	build := func(t *testing.T, cfg endpoint.Config, want string) {
		t.Helper()
		ep, err := New(context.Background(), cfg, log)
		if err != nil {
			t.Fatalf("New(%q, kind %q): %v", cfg.URL, cfg.Kind, err)
		}
		if c, ok := ep.(io.Closer); ok {
			defer c.Close()
		}
		if got := kindOf(ep); got != want {
			t.Errorf("New(%q, kind %q) is %T (%s), want kind %s", cfg.URL, cfg.Kind, ep, got, want)
		}
	}
	for _, s := range endpoint.Schemes() {
		t.Run(s.Name, func(t *testing.T) {
			cfg := endpoint.Config{Name: "e", URL: s.Name + "://127.0.0.1:1/x/"}
			switch {
			case s.NoHost:
				cfg.URL = s.Name + "://" + dir
			case s.Kind == endpoint.KindS3:
				cfg.URL = s.Name + "://bucket/x"
				cfg.S3 = &endpoint.S3Config{Endpoint: "http://127.0.0.1:1"}
			}
			build(t, cfg, s.Kind)
			if s.Alt != "" {
				cfg.Kind = s.Alt
				build(t, cfg, s.Alt)
			}
		})
	}
	for _, u := range []string{"roots://127.0.0.1:1//x", "xroots://127.0.0.1:1//x", "gopher://127.0.0.1/", "s3s://b/"} {
		if ep, err := New(context.Background(), endpoint.Config{Name: "e", URL: u}, log); err == nil {
			t.Errorf("New(%q) = %T, want an error: the scheme is not in the table", u, ep)
		}
	}
	if _, err := New(context.Background(), endpoint.Config{Name: "e", URL: "file://" + dir, Kind: endpoint.KindUpstream}, log); err == nil {
		t.Errorf("New(file://, kind upstream) succeeded, want an error")
	}
}
