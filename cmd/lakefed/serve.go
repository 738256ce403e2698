package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/sitetest"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/web"
)

// runServe runs every role the config file names: its storage servers and
// its federator. SIGHUP (or POST /api/reload) re-reads the file and
// reloads the federator's endpoint list without dropping requests in
// flight. What is read only here, at start (listen, the storage servers,
// the tests section: config.RestartChanges), keeps its old value until a
// restart, and the reload says so in the log and in its answer.
//
//	lakefed serve --config FILE [-v] [--pprof 127.0.0.1:6060]
func runServe(ctx context.Context, args []string) error {
	fs := newFlagSet("serve", "")
	cfgPath := fs.String("config", "", "the YAML config file (required)")
	verbose := fs.Bool("v", false, "log at debug level")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this host:port (off by default; for profiling only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cfgPath == "" || fs.NArg() != 0 {
		return usageErrorf("serve: give --config FILE and no arguments")
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	// Deferred calls run last-in first-out: cancel (stopping every
	// server) must run before the wait for their goroutines.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(cfg.Storage)+1)

	if *pprofAddr != "" {
		// Its own listener: profiles are for operators, never on a port
		// clients use.
		pln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return fmt.Errorf("serve: pprof: %w", err)
		}
		fmt.Printf("pprof http://%s/debug/pprof/\n", pln.Addr())
		wg.Go(func() { servePprof(ctx, pln, log) })
	}

	for _, sc := range cfg.Storage {
		srv, err := storage.New(sc, log)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", sc.Listen)
		if err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		scheme := "http"
		if sc.TLSCert != "" {
			scheme = "https"
		}
		fmt.Printf("storage %s://%s/ serving %s\n", scheme, ln.Addr(), sc.Root)
		wg.Go(func() {
			if err := srv.Serve(ctx, ln); err != nil {
				errc <- err
			}
		})
	}

	if cfg.Federation != nil {
		reload := func(context.Context) (*config.Federation, error) {
			c, err := config.Load(*cfgPath)
			if err != nil {
				return nil, err
			}
			if c.Federation == nil {
				return nil, errors.New("config: the federation section is gone; a federator cannot reload into none")
			}
			// Settings read only at start below keep the values cfg had;
			// the answer says which of them changed.
			c.Federation.RestartNeeded = config.RestartChanges(cfg, c)
			return c.Federation, nil
		}
		fed, err := federation.New(ctx, *cfg.Federation, federation.Options{Log: log, Reload: reload})
		if err != nil {
			return err
		}
		defer fed.Close()
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("federation: %w", err)
		}
		var ui http.Handler // the dashboard, when the results store opens
		if st := openResults(ctx, cfg, log); st != nil {
			// The tester and the latency sampler stop, and are waited for,
			// before the store closes and before the federator does.
			uiCtx, uiStop := context.WithCancel(ctx)
			var uiWG sync.WaitGroup
			defer func() {
				uiStop()
				uiWG.Wait()
				st.Close()
			}()
			var tests web.TestStatus
			if cfg.Tests != nil {
				sched, err := sitetest.New(sitetest.Options{Config: *cfg.Tests, Targets: sitetest.FederatorTargets(fed),
					Store: st, Excluder: fed, Registerer: fed.Registry(), Log: log})
				if err != nil {
					return err
				}
				tests = sched
				uiWG.Go(func() { _ = sched.Run(uiCtx) })
			}
			dash := web.New(web.Options{Store: st, Federator: fed, Tests: tests, Log: log})
			uiWG.Go(func() { dash.Run(uiCtx) })
			ui = dash
		}
		hs := &http.Server{
			Handler:           web.Front(fed.Handler(), ui),
			ReadHeaderTimeout: 30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		}
		fmt.Printf("federator http://%s/ over %d endpoints, dashboard http://%s/ui/\n", ln.Addr(),
			len(cfg.Federation.Endpoints), ln.Addr())
		wg.Go(func() {
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("federation: serve: %w", err)
			}
		})
		defer func() {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			if err := hs.Shutdown(sctx); err != nil {
				hs.Close()
			}
		}()
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					c, err := reload(ctx)
					if err == nil {
						err = fed.Reload(*c)
					}
					switch {
					case err != nil:
						log.Error("reload failed; the old endpoint list stays", "err", err)
					case len(c.RestartNeeded) > 0:
						log.Warn("reloaded; settings read only at start changed", "signal", "SIGHUP", "status", config.ReloadStatus(c.RestartNeeded))
					default:
						log.Info("reloaded", "signal", "SIGHUP")
					}
				}
			}
		})
	}

	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

// openResults opens the bench results store the dashboard shows and the
// scheduled tests write: tests.db, else the bench default. A store that
// cannot be opened costs the dashboard and the tests, not the federator:
// it is logged and nil returned.
func openResults(ctx context.Context, cfg *config.Config, log *slog.Logger) *results.Store {
	path := results.DefaultPath()
	if cfg.Tests != nil && cfg.Tests.DB != "" {
		path = cfg.Tests.DB
	}
	st, err := results.Open(ctx, path)
	if err != nil {
		log.Error("no dashboard and no scheduled tests: cannot open the results store", "path", path, "err", err)
		return nil
	}
	return st
}

// runCheckConfig loads and validates a config file and says what it runs.
func runCheckConfig(ctx context.Context, args []string) error {
	fs := newFlagSet("check-config", "FILE")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("check-config: give one FILE")
	}
	cfg, err := config.Load(fs.Arg(0))
	if err != nil {
		return usageErrorf("%v", err)
	}
	eps := 0
	if cfg.Federation != nil {
		eps = len(cfg.Federation.Endpoints)
	}
	fmt.Printf("%s: ok (%d storage servers, federation: %v, %d endpoints)\n", fs.Arg(0), len(cfg.Storage), cfg.Federation != nil, eps)
	return nil
}
