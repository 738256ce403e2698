// Package demo runs a whole lakefed federation on loopback, with sample
// data, so that a newcomer sees what lakefed does in one command (`lakefed
// demo`) and so that tests of real clients have a federation to talk to:
// three storage sites, each serving its own directory, and a federator in
// front of them (redirect mode, one site proxied), sample files replicated
// across sites including a ROOT file with a jagged jet_pt branch, and a
// short open and read benchmark stored in a results store of its own.
//
//	d, err := demo.Start(ctx, demo.Options{Listen: "127.0.0.1:0", Out: os.Stdout})
//	if err != nil { return err }
//	d.WriteHelp(os.Stdout)             // URLs, sample files, example commands
//	resp, _ := http.Get(d.FederatorURL + "/demo/README.txt") // 302 to site-a, then the bytes
//	return d.Wait()                    // until ctx is cancelled; then everything stops
//
// The federator is built from the config file the demo writes into its
// directory (lakefed.yaml), through config.Load, so the file is exactly
// what runs: `lakefed serve --config DIR/lakefed.yaml` runs the same
// federation, and POST /api/reload re-reads it.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/server"
)

// DefaultListen is the federator's address unless Options.Listen says
// otherwise.
const DefaultListen = "127.0.0.1:8080"

// Options say how to run the demo. The zero value is the interactive
// demo without its benchmark: a temporary directory and 127.0.0.1:8080.
type Options struct {
	// Dir holds the sites' directories (DIR/site-a, ...), the config
	// file and the results store. It is created if missing and kept on
	// exit. Empty: a temporary directory, removed by Stop.
	Dir string
	// Listen is the federator's host:port. Empty: DefaultListen; port 0
	// picks a free port (FederatorURL says which).
	Listen string
	// Bench runs a short open test and read test (about 10 s in all)
	// against the federator in the background at start, stored in
	// DIR/bench.db, so the dashboard has results to show.
	Bench bool
	// Events is the number of events in the sample ROOT file. Zero:
	// DefaultEvents.
	Events int
	// ProbeInterval is the federator's health probe interval. Zero: 1s,
	// so a stopped site is marked down within about 2 s. Tests that need
	// a dead site to stay listed (a client's own failover) set it long.
	ProbeInterval time.Duration
	// MetadataTTL is how long the federator trusts a found path. Zero:
	// 10s, so files written straight onto a site show up soon.
	MetadataTTL time.Duration
	// Log receives the servers' logs. Nil: slog.Default().
	Log *slog.Logger
	// Command is how the commands the help prints run lakefed: the
	// binary actually running, so that they work as printed when no
	// lakefed is on PATH (cmd/lakefed gives its own path, or "go run
	// ./cmd/lakefed"). Empty: "lakefed".
	Command string
	// Out receives the help (WriteHelp) when the demo is up, then the
	// benchmark's report lines, written from a goroutine of the demo.
	// Nil: discarded.
	Out io.Writer
}

// Site is one storage site of the demo.
type Site struct {
	// Name is the site's endpoint name in the federation ("site-a").
	Name string
	// URL is the site's own base URL, ending in "/".
	URL string
	// Dir is the directory it serves.
	Dir string
	// Priority ranks it in the federation: lower is preferred.
	Priority int
	// Mode is "redirect" (clients are sent to URL) or "proxy" (the
	// federator streams the bytes).
	Mode string
	// Writable says whether PUT and DELETE through the federator may
	// reach it.
	Writable bool

	site *server.Site // the running storage server
}

// siteSpecs are the three sites: two the federator redirects to, one it
// proxies (as it must for sites clients cannot reach).
var siteSpecs = []Site{
	{Name: "site-a", Priority: 1, Mode: "redirect", Writable: true},
	{Name: "site-b", Priority: 2, Mode: "redirect", Writable: true},
	{Name: "site-c", Priority: 3, Mode: "proxy"},
}

// Demo is a running demo. Its fields are set by Start and not changed
// after; its methods may be called from any goroutine.
type Demo struct {
	// FederatorURL is the federator's base URL without a trailing slash
	// ("http://127.0.0.1:8080"), so FederatorURL+"/demo/README.txt" is a
	// file's URL.
	FederatorURL string
	// CacheURL is the cache's base URL without a trailing slash: a
	// read-through block cache in front of the federation.
	CacheURL string
	// XrootURL is the root:// door to the federation ("root://host:port").
	XrootURL string
	// Sites are the storage sites, in priority order.
	Sites []*Site
	// Dir is the directory holding everything (see Options.Dir).
	Dir string
	// ConfigPath is the config file the federator was built from.
	ConfigPath string
	// DBPath is the benchmark results store.
	DBPath string
	// Temporary says Dir is removed by Stop.
	Temporary bool
	// Federator is the running federator.
	Federator *federation.Federator
	// Store is the results store at DBPath, open until Stop.
	Store *results.Store

	opts        Options
	parent      context.Context
	srv         *server.Server     // every role: the sites, the federator, the store, the dashboard
	cancelBench context.CancelFunc // stops the benchmark
	benchWG     sync.WaitGroup     // the benchmark's goroutine
	benchDone   chan struct{}      // closed when the benchmark finished or never ran
	stopWatch   func() bool        // unregisters the watch on the parent ctx
	once        sync.Once          // guards shutdown
	stopErr     error              // what shutdown found; read after once
}

// Start builds the demo and starts every server; the benchmark (when
// Options.Bench) runs in the background. The demo stops when ctx is
// cancelled or Stop is called; Wait blocks until then. On error nothing is
// left running and a temporary directory is removed.
func Start(ctx context.Context, opts Options) (_ *Demo, err error) {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.Events <= 0 {
		opts.Events = DefaultEvents
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = time.Second
	}
	if opts.MetadataTTL <= 0 {
		opts.MetadataTTL = 10 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Command == "" {
		opts.Command = "lakefed"
	}
	benchCtx, cancelBench := context.WithCancel(context.WithoutCancel(ctx))
	d := &Demo{
		opts:        opts,
		parent:      ctx,
		cancelBench: cancelBench,
		benchDone:   make(chan struct{}),
	}
	// Listeners not yet handed to server.Start are the demo's to close.
	lns := map[string]net.Listener{}
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
		if err != nil {
			d.shutdown()
		}
	}()

	if opts.Dir == "" {
		if d.Dir, err = os.MkdirTemp("", "lakefed-demo-"); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		d.Temporary = true
	} else {
		if d.Dir, err = filepath.Abs(opts.Dir); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		if err := os.MkdirAll(d.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
	}

	// The federator's address first: a busy port is the likeliest
	// failure, and it should come before any work.
	fedLn, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("demo: %s is already in use (another lakefed demo?): stop it, or pass --listen with another address (127.0.0.1:0 picks a free port): %w", opts.Listen, err)
		}
		return nil, fmt.Errorf("demo: federator: %w", err)
	}
	lns[fedLn.Addr().String()] = fedLn
	d.FederatorURL = "http://" + fedLn.Addr().String()
	cacheLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: cache: %w", err)
	}
	lns[cacheLn.Addr().String()] = cacheLn
	d.CacheURL = "http://" + cacheLn.Addr().String()
	doorLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: root:// door: %w", err)
	}
	lns[doorLn.Addr().String()] = doorLn
	d.XrootURL = "root://" + doorLn.Addr().String()

	// Each site's port next, so that the config can name it; the server
	// then serves on these very listeners.
	dirs := map[string]string{}
	for _, spec := range siteSpecs {
		s := spec
		s.Dir = filepath.Join(d.Dir, s.Name)
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		dirs[s.Name] = s.Dir
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("demo: %s: %w", s.Name, err)
		}
		lns[ln.Addr().String()] = ln
		s.URL = "http://" + ln.Addr().String() + "/"
		d.Sites = append(d.Sites, &s)
	}
	if err := writeSamples(dirs, opts.Events); err != nil {
		return nil, err
	}

	d.ConfigPath = filepath.Join(d.Dir, "lakefed.yaml")
	if err := os.WriteFile(d.ConfigPath, []byte(d.configYAML(fedLn.Addr().String(), cacheLn.Addr().String(), doorLn.Addr().String())), 0o644); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	cfg, err := config.Load(d.ConfigPath)
	if err != nil {
		return nil, fmt.Errorf("demo: the generated config does not load: %w", err)
	}
	d.DBPath = filepath.Join(d.Dir, "bench.db")
	handed := lns
	lns = nil // server.Start owns them from here on, whatever it returns
	d.srv, err = server.Start(ctx, cfg, server.Options{ConfigPath: d.ConfigPath, Listeners: handed,
		ResultsPath: d.DBPath, Log: opts.Log})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	d.Federator, d.Store = d.srv.Federator(), d.srv.Store()
	for i, s := range d.Sites {
		s.site = d.srv.Sites()[i]
	}

	d.WriteHelp(opts.Out)
	if opts.Bench {
		d.benchWG.Go(func() {
			defer close(d.benchDone)
			d.runBench(benchCtx)
		})
	} else {
		close(d.benchDone)
	}
	d.stopWatch = context.AfterFunc(ctx, d.shutdown)
	return d, nil
}

// Site returns the named site, or nil.
func (d *Demo) Site(name string) *Site {
	for _, s := range d.Sites {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// StopSite stops one site's server, as if the site went down: its port
// refuses connections from then on. The federator notices through its
// probes (within about two probe intervals). Stopping a stopped site does
// nothing.
func (d *Demo) StopSite(name string) error {
	s := d.Site(name)
	if s == nil {
		return fmt.Errorf("demo: no site %q", name)
	}
	return s.site.Stop()
}

// BenchDone is closed when the start-up benchmark has finished (at once
// when Options.Bench is false).
func (d *Demo) BenchDone() <-chan struct{} { return d.benchDone }

// Wait blocks until the demo's context is cancelled or one of its servers
// fails, then stops everything (as Stop) and returns the failure, if any.
func (d *Demo) Wait() error {
	var err error
	select {
	case <-d.parent.Done():
	case err = <-d.srv.Err():
		err = fmt.Errorf("demo: %w", err)
	}
	return errors.Join(err, d.Stop())
}

// Stop stops the benchmark, then the servers (requests in flight get a
// few seconds), closes the results store and removes a temporary
// directory. It may be called more than once; every call returns after
// everything has stopped.
func (d *Demo) Stop() error {
	if d.stopWatch != nil {
		d.stopWatch()
	}
	d.shutdown()
	return d.stopErr
}

// shutdown is Stop's work, done once. The benchmark stops first, so that
// it can still remove its test files through the servers; then the
// server stops its roles in order (server.Shutdown).
func (d *Demo) shutdown() {
	d.once.Do(func() {
		var errs []error
		d.cancelBench()
		d.benchWG.Wait()
		if d.srv != nil {
			errs = append(errs, d.srv.Close())
		}
		if d.Temporary {
			errs = append(errs, os.RemoveAll(d.Dir))
		}
		d.stopErr = errors.Join(errs...)
	})
}

// configYAML is the config file of the running demo: its storage servers,
// its federation, and a cache in front of the federation.
func (d *Demo) configYAML(listen, cacheListen, doorListen string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The federation `lakefed demo` runs; the demo's federator is built from this\n")
	fmt.Fprintf(&b, "# file. `lakefed serve --config %s` runs the same thing (stop the demo\n", d.ConfigPath)
	fmt.Fprintf(&b, "# first: the ports are its). POST /api/reload re-reads the federation section.\n")
	fmt.Fprintf(&b, "listen: %q\n", listen)
	fmt.Fprintf(&b, "listen_xroot: %q\n", doorListen)
	fmt.Fprintf(&b, "storage:\n")
	for _, s := range d.Sites {
		addr := strings.TrimSuffix(strings.TrimPrefix(s.URL, "http://"), "/")
		fmt.Fprintf(&b, "  - listen: %q\n    root: %q\n", addr, s.Dir)
	}
	fmt.Fprintf(&b, "federation:\n  mode: redirect\n")
	fmt.Fprintf(&b, "  metadata_cache:\n    ttl: %q\n    negative_ttl: %q\n", d.opts.MetadataTTL.String(), "2s")
	fmt.Fprintf(&b, "  health:\n    interval: %q\n    timeout: %q\n", d.opts.ProbeInterval.String(), "1s")
	fmt.Fprintf(&b, "  endpoints:\n")
	for _, s := range d.Sites {
		fmt.Fprintf(&b, "    - name: %s\n      url: %q\n      priority: %d\n", s.Name, s.URL, s.Priority)
		if s.Mode == "proxy" {
			fmt.Fprintf(&b, "      mode: proxy\n")
		}
		if s.Writable {
			fmt.Fprintf(&b, "      writable: true\n")
		}
	}
	fmt.Fprintf(&b, "cache:\n  listen: %q\n  dir: %q\n  origin: federation\n  max_bytes: 1GiB\n", cacheListen, filepath.Join(d.Dir, "cache"))
	fmt.Fprintf(&b, "buffer:\n  dir: %q\n  keep_after_migration: 1m\n  prefixes:\n    - prefix: %s\n      targets: [site-a, site-b]\n",
		filepath.Join(d.Dir, "buffer"), BufferPrefix)
	return b.String()
}

// SiteURLs maps each site's name to its base URL.
func (d *Demo) SiteURLs() map[string]string {
	m := make(map[string]string, len(d.Sites))
	for _, s := range d.Sites {
		m[s.Name] = s.URL
	}
	return m
}
