package upstream_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/upstream"
	"github.com/lakefed/lakefed/internal/server/servertest"
)

// TestAgainstFederator runs the upstream kind against a real federator in
// front of a real storage server (a federation in a box, servertest).
func TestAgainstFederator(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	fed := servertest.Start(t, servertest.Options{Configure: func(c *config.Config) {
		c.Federation.Endpoints[0].Name = "site"
		c.Federation.Health.Interval = config.Duration(time.Hour)
	}})
	dir := fed.Sites[0].Dir
	if err := os.MkdirAll(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d", "f"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	ep, err := upstream.New(ctx, endpoint.Config{Name: "up", URL: strings.Replace(fed.URL, "http://", "lakefed://", 1) + "/"}, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.Probe(ctx); err != nil {
		t.Errorf("Probe: %v", err)
	}
	info, err := ep.Stat(ctx, "/d/f")
	if err != nil || info.Size != 10 || info.IsDir || info.Name != "f" {
		t.Errorf("Stat(/d/f) = %+v, %v", info, err)
	}
	if info, err := ep.Stat(ctx, "/d"); err != nil || !info.IsDir {
		t.Errorf("Stat(/d) = %+v, %v; want a directory", info, err)
	}
	if _, err := ep.Stat(ctx, "/nope"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Stat(/nope) = %v, want ErrNotFound", err)
	}
	list, err := ep.List(ctx, "/d")
	if err != nil || len(list) != 1 || list[0].Name != "f" || list[0].Size != 10 {
		t.Errorf("List(/d) = %+v, %v", list, err)
	}
	rc, err := ep.Open(ctx, "/d/f", 3, 4)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "3456" {
		t.Errorf("Open(3, 4) read %q, %v", b, err)
	}
	if sum, err := ep.Checksum(ctx, "/d/f", "adler32"); err != nil || len(sum) != 8 {
		t.Errorf("Checksum = %q, %v", sum, err)
	}
	// Put goes through the federator's 307 to the storage server.
	if err := ep.Put(ctx, "/d/new", strings.NewReader("hello"), 5); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "d", "new")); err != nil || string(got) != "hello" {
		t.Errorf("after Put the site has %q, %v", got, err)
	}
	if err := ep.Mkdir(ctx, "/e/f"); err != nil {
		t.Errorf("Mkdir: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "e", "f")); err != nil || !fi.IsDir() {
		t.Errorf("after Mkdir: %v", err)
	}
	if err := ep.Delete(ctx, "/d/new"); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "d", "new")); !os.IsNotExist(err) {
		t.Errorf("after Delete: %v", err)
	}
	if u, _ := ep.RedirectURL(ctx, "/d/f", endpoint.OpRead); u.String() != fed.URL+"/d/f" {
		t.Errorf("RedirectURL = %s", u)
	}
	if err := fed.Server.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ep.Probe(ctx); !errors.Is(err, endpoint.ErrUnavailable) {
		t.Errorf("Probe of a closed federator = %v, want ErrUnavailable", err)
	}
}

func TestNewRejects(t *testing.T) {
	for _, u := range []string{"file:///x", "lakefed:///nohost", "s3://b/"} {
		if _, err := upstream.New(context.Background(), endpoint.Config{Name: "x", URL: u}, nil); err == nil {
			t.Errorf("New(%q) succeeded", u)
		}
	}
}
