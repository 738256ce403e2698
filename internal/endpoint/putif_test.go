package endpoint_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
)

// plain hides every optional power of the endpoint it wraps.
type plain struct{ endpoint.Endpoint }

// unable is a ConditionalPutter whose server cannot: it refuses, unread.
type unable struct{ endpoint.Endpoint }

func (u unable) PutIf(context.Context, string, io.Reader, int64, endpoint.Cond) error {
	return endpoint.ErrUnsupported
}

// TestPutIfFallback: endpoint.PutIf on an endpoint that cannot evaluate
// conditions with its commit checks them with a Stat first.
func TestPutIfFallback(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ep, err := posix.New(ctx, endpoint.Config{Name: "d", URL: "file://" + dir}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]endpoint.Endpoint{"plain": plain{ep}, "unable": unable{ep}} {
		t.Run(name, func(t *testing.T) {
			p := "/" + name
			put := func(body string, c endpoint.Cond) error {
				return endpoint.PutIf(ctx, e, p, strings.NewReader(body), int64(len(body)), c)
			}
			if err := put("one", endpoint.Cond{IfNoneMatch: true}); err != nil {
				t.Fatalf("If-None-Match of a new path = %v", err)
			}
			if err := put("two", endpoint.Cond{IfNoneMatch: true}); !errors.Is(err, endpoint.ErrPrecondition) {
				t.Errorf("If-None-Match of an existing file = %v, want ErrPrecondition", err)
			}
			in, err := e.Stat(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := put("three", endpoint.Cond{IfMatch: "x" + in.ETag}); !errors.Is(err, endpoint.ErrPrecondition) {
				t.Errorf("If-Match of another ETag = %v, want ErrPrecondition", err)
			}
			if err := put("four", endpoint.Cond{IfMatch: in.ETag}); err != nil {
				t.Errorf("If-Match of the ETag = %v", err)
			}
			if err := put("five", endpoint.Cond{IfMatch: in.ETag, IfNoneMatch: true}); !errors.Is(err, endpoint.ErrPrecondition) {
				t.Errorf("both conditions = %v, want ErrPrecondition", err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, name)); string(got) != "four" {
				t.Errorf("file holds %q, want four", got)
			}
		})
	}
}
