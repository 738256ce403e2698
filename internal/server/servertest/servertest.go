// Package servertest runs a federation in a box for tests, as Pelican's
// fed_test_utils does: N storage sites and a federator in front of them,
// on loopback ports the kernel picks, started through package server
// exactly as `lakefed serve` starts them, and stopped when the test ends.
//
//	fed := servertest.Start(t, servertest.Options{Sites: 2})
//	os.WriteFile(filepath.Join(fed.Sites[0].Dir, "f"), data, 0o644)
//	resp, _ := http.Get(fed.URL + "/f")   // 302 to site-a
//	fed.Sites[0].Stop()                   // site-a goes down ...
//	fed.Sites[0].Restart()                // ... and comes back on its port
package servertest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/server"
)

// Options say what to run. The zero value is one site and a federator
// with the default settings.
type Options struct {
	// Sites is the number of storage sites; each gets a fresh directory.
	// Zero: 1.
	Sites int
	// Configure, when set, edits the config before it is validated and
	// started: Storage and Federation.Endpoints already list the sites,
	// named site-a, site-b, ... (site-1, site-2, ... beyond 26), writable,
	// with priorities 1, 2, ....
	// Defaults are filled after it returns.
	Configure func(*config.Config)
	// Log receives the servers' logs. Nil: discarded.
	Log *slog.Logger
}

// Fed is a running federation.
type Fed struct {
	// URL is the federator's base URL without a trailing slash
	// ("http://127.0.0.1:PORT"); the dashboard is at URL+"/ui/".
	URL string
	// Sites are the storage sites, in the config's order.
	Sites []*Site
	// Config is the config the federation runs.
	Config *config.Config
	// Server runs every role; Close stops them all (the test's cleanup
	// does too).
	Server *server.Server
}

// Site is one storage site: its endpoint name in the federation, and the
// running storage server (URL, Dir, Stop, Restart).
type Site struct {
	Name string
	*server.Site
}

// Start runs the federation until the test ends. A failure to start, or
// to stop cleanly at the end, fails the test.
func Start(t testing.TB, opts Options) *Fed {
	t.Helper()
	n := max(opts.Sites, 1)
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	// Every port is open before the config is written, so the config
	// names the real addresses and no other process can take them.
	lns := map[string]net.Listener{}
	listen := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			t.Fatal(err)
		}
		lns[ln.Addr().String()] = ln
		return ln.Addr().String()
	}
	cfg := &config.Config{Listen: listen(), Federation: &config.Federation{}}
	names := make([]string, n)
	for i := range n {
		addr := listen()
		names[i] = fmt.Sprintf("site-%d", i+1)
		if n <= 26 {
			names[i] = "site-" + string(rune('a'+i))
		}
		cfg.Storage = append(cfg.Storage, config.Storage{Listen: addr, Root: t.TempDir()})
		cfg.Federation.Endpoints = append(cfg.Federation.Endpoints, config.Endpoint{
			Config: endpoint.Config{Name: names[i], URL: "http://" + addr + "/"}, Writable: true, Priority: i + 1})
	}
	if opts.Configure != nil {
		opts.Configure(cfg)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		for _, l := range lns {
			l.Close()
		}
		t.Fatalf("servertest: config: %v", err)
	}
	srv, err := server.Start(context.Background(), cfg, server.Options{Listeners: lns,
		ResultsPath: filepath.Join(t.TempDir(), "results.db"), Log: opts.Log})
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("servertest: close: %v", err)
		}
	})
	f := &Fed{URL: srv.FederatorURL(), Config: cfg, Server: srv}
	for i, s := range srv.Sites() {
		f.Sites = append(f.Sites, &Site{Name: names[i], Site: s})
	}
	return f
}

// Site returns the named site, or nil.
func (f *Fed) Site(name string) *Site {
	for _, s := range f.Sites {
		if s.Name == name {
			return s
		}
	}
	return nil
}
