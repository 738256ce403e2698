package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server"
)

// runServe runs every role the config file names through package server:
// its storage servers and its federator, with the results store, the
// site tests and the dashboard. SIGHUP (or POST /api/reload) re-reads the
// file and reloads the federator's endpoint list without dropping
// requests in flight. What is read only at start (listen, the storage
// servers, the tests section: config.RestartChanges) keeps its old value
// until a restart, and the reload says so in the log and in its answer.
//
//	lakefed serve [--config] FILE [-v] [--pprof 127.0.0.1:6060 [--pprof-contention]]
func runServe(ctx context.Context, args []string) error {
	fs := newFlagSet("serve", "FILE")
	cfgFlag := fs.String("config", "", "the YAML config `FILE` (or give it as the argument)")
	verbose := fs.Bool("v", false, "log at debug level")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this host:port (off by default; for profiling only)")
	contention := fs.Bool("pprof-contention", false, "with --pprof, record the block and mutex profiles (costs CPU on every contended lock and channel)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *contention && *pprofAddr == "" {
		return usageErrorf("serve: --pprof-contention needs --pprof")
	}
	cfgPath, err := configArg(fs, *cfgFlag, "serve")
	if err != nil {
		return err
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log, err := newLogger("serve", cfg.LogFormat, level)
	if err != nil {
		return err
	}

	// Deferred calls run last-in first-out: cancel (stopping pprof and
	// the SIGHUP loop) must run before the wait for their goroutines.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if err := startPprof(ctx, &wg, *pprofAddr, "serve", log); err != nil {
		return err
	}
	if *pprofAddr != "" && *contention {
		// One blocking event sampled per 10 µs spent blocked (every
		// longer one), and one contended mutex in 10: enough to find a
		// stall without slowing what is measured much.
		runtime.SetBlockProfileRate(int((10 * time.Microsecond).Nanoseconds()))
		runtime.SetMutexProfileFraction(10)
	}

	// SIGHUP is caught before the roles start, so that one sent as soon
	// as systemd sees the process (ExecReload) cannot kill it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	srv, err := server.Start(ctx, cfg, server.Options{ConfigPath: cfgPath, Log: log, Out: os.Stdout})
	if err != nil {
		return err
	}
	defer srv.Close()
	// Start returns once every listener is bound and served.
	notify(log, daemon.SdNotifyReady)
	defer notify(log, daemon.SdNotifyStopping) // runs before srv.Close
	// SIGHUP reads the certificates again, and the federation section.
	wg.Go(func() { reloadOnHUP(ctx, srv, hup, log) })

	select {
	case <-ctx.Done():
		return nil
	case err := <-srv.Err():
		return err
	}
}

// reloadOnHUP reloads srv on every signal from hup until ctx is done, and
// logs the outcome.
func reloadOnHUP(ctx context.Context, srv *server.Server, hup <-chan os.Signal, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			notifyReloading(log)
			restart, err := srv.Reload(ctx)
			// Ready again whatever the outcome: a failed reload keeps
			// the old settings serving.
			notify(log, daemon.SdNotifyReady)
			switch {
			case errors.Is(err, server.ErrNoFederator):
				log.Info("reloaded the certificates", "signal", "SIGHUP")
			case err != nil:
				log.Error("reload failed; the old endpoint list stays", "err", err)
			case len(restart) > 0:
				log.Warn("reloaded; settings read only at start changed", "signal", "SIGHUP", "status", config.ReloadStatus(restart))
			default:
				log.Info("reloaded", "signal", "SIGHUP")
			}
		}
	}
}

// configArg returns the config file a command names, as its one argument
// or as --config FILE (named is that flag's value): one convention for
// serve and check-config.
func configArg(fs *flag.FlagSet, named, cmd string) (string, error) {
	switch {
	case named != "" && fs.NArg() == 0:
		return named, nil
	case named == "" && fs.NArg() == 1:
		return fs.Arg(0), nil
	}
	return "", usageErrorf("%s: give one config FILE, as the argument or as --config FILE", cmd)
}

// runCheckConfig loads and validates a config file and says what it runs.
func runCheckConfig(ctx context.Context, args []string) error {
	fs := newFlagSet("check-config", "FILE")
	cfgFlag := fs.String("config", "", "the YAML config `FILE` (or give it as the argument)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	file, err := configArg(fs, *cfgFlag, "check-config")
	if err != nil {
		return err
	}
	cfg, err := config.Load(file)
	if err != nil {
		return usageErrorf("%v", err)
	}
	eps := 0
	if cfg.Federation != nil {
		eps = len(cfg.Federation.Endpoints)
	}
	fmt.Printf("%s: ok (%d storage servers, federation: %v, %d endpoints)\n", file, len(cfg.Storage), cfg.Federation != nil, eps)
	return nil
}
