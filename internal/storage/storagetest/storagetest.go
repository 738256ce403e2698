// Package storagetest runs lakefed's storage role for other packages'
// tests: on 127.0.0.1, a fresh directory unless told otherwise, stopped
// and waited for when the test ends.
//
//	site := storagetest.Start(t, storage.Config{})
//	os.WriteFile(filepath.Join(site.Dir, "f"), data, 0o644)
//	resp, _ := http.Get(site.URL + "f")
package storagetest

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/storage"
)

// Site is a running storage role.
type Site struct {
	// URL is the base URL, ending in "/": http://127.0.0.1:PORT/, or
	// https:// when the config has a certificate.
	URL string
	// Dir is the directory it serves.
	Dir string
	// Server is the storage role itself.
	Server *storage.Server
}

// Start serves cfg.Root (a fresh t.TempDir when empty) on a loopback port
// until the test ends; cfg.Listen is ignored. A server that fails or does
// not stop within 15 s fails the test.
func Start(t testing.TB, cfg storage.Config) *Site {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	srv, err := storage.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("storage.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("storage server: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("storage server did not stop within 15s")
		}
		srv.Close()
	})
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	return &Site{URL: scheme + "://" + ln.Addr().String() + "/", Dir: cfg.Root, Server: srv}
}
