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
		{"gopher://127.0.0.1/", "unsupported scheme", true},
		{"s3x://bucket/", "unsupported scheme", true},
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
