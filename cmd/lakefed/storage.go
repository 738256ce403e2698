package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/lakefed/lakefed/internal/storage"
)

// runStorage serves a directory over HTTP/WebDAV until ctx is cancelled:
//
//	lakefed storage --root DIR [--listen 127.0.0.1:9001] [--tls-cert F --tls-key F] [--access-log] [--log-format json] [--stale-upload-age 1h] [--pprof 127.0.0.1:6060]
func runStorage(ctx context.Context, args []string) error {
	fs := newFlagSet("storage", "")
	var cfg storage.Config
	fs.StringVar(&cfg.Root, "root", "", "directory to serve (required)")
	fs.StringVar(&cfg.Listen, "listen", storage.DefaultListen, "host:port to listen on")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate; with --tls-key serves HTTPS")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key for --tls-cert")
	fs.BoolVar(&cfg.AccessLog, "access-log", false, "log one line per request")
	fs.Int64Var(&cfg.MaxUpload, "max-upload", 0, "largest PUT body in bytes (0: no limit)")
	fs.DurationVar(&cfg.StaleUploadAge, "stale-upload-age", 0, "remove the temp files and directories a crash left once this old (0: 1h)")
	logFormat := logFormatFlag(fs)
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this host:port (off by default; for profiling only)")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v", err)
	}
	if fs.NArg() > 0 {
		return usageErrorf("storage: unexpected arguments %q", fs.Args())
	}
	if cfg.Root == "" {
		return usageErrorf("storage: --root is required")
	}
	log, err := newLogger("storage", *logFormat, slog.LevelInfo)
	if err != nil {
		return err
	}
	srv, err := storage.New(cfg, log)
	if err != nil {
		return usageErrorf("%v", err)
	}
	defer srv.Close()
	// cancel (stopping pprof) runs before the wait for its goroutine.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if err := startPprof(ctx, &wg, *pprofAddr, "storage", log); err != nil {
		ln.Close()
		return err
	}
	fmt.Printf("lakefed storage: serving %s at %s\n", cfg.Root, srv.URL(ln.Addr()))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln) }()
	// The listener is bound: connections queue until Serve accepts them.
	notify(log, daemon.SdNotifyReady)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	notify(log, daemon.SdNotifyStopping)
	return <-errc
}

// startPprof serves the runtime profiles on addr until ctx is cancelled,
// when addr is set (--pprof), and prints their URL; wg waits for it.
func startPprof(ctx context.Context, wg *sync.WaitGroup, addr, cmd string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	pln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: pprof: %w", cmd, err)
	}
	fmt.Printf("pprof http://%s/debug/pprof/\n", pln.Addr())
	wg.Go(func() { servePprof(ctx, pln, log) })
	return nil
}

// servePprof serves the runtime profiles on their own listener (never on
// the storage port: profiles are for operators, not clients) until ctx is
// cancelled.
func servePprof(ctx context.Context, ln net.Listener, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("pprof listener stopped", "err", err)
	}
}
