package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/storage"
)

// Site is one storage server of the config's storage list. Stop and
// Restart take it down and up again on the same address, as a site that
// goes away and comes back; the demo and the test harness use them.
type Site struct {
	// URL is the site's base URL, ending in "/": http://HOST:PORT/, or
	// https:// when it has a certificate. It does not change on Restart.
	URL string
	// Dir is the directory it serves.
	Dir string

	cfg config.Storage
	s   *Server
	// authMetrics: this site's /metrics shows the process's auth
	// refusals (it is the process's first listener that has a /metrics).
	authMetrics bool

	mu     sync.Mutex
	addr   string          // the address bound at start, reused by Restart
	srv    *storage.Server // nil while stopped
	cancel context.CancelFunc
	done   chan struct{} // closed when srv's Serve returned
}

// storageConfig is the storage role's Config for the YAML shape c.
func storageConfig(c config.Storage) storage.Config {
	return storage.Config{
		Listen:         c.Listen,
		Root:           c.Root,
		TLSCert:        c.TLSCert,
		TLSKey:         c.TLSKey,
		AccessLog:      c.AccessLog,
		MaxUpload:      c.MaxUpload,
		MetricsPath:    c.MetricsPath,
		StaleUploadAge: c.StaleUploadAge.D(),
		MaxListings:    c.MaxListings,

		TPC:               c.TPC,
		TPCMarkerInterval: c.TPCMarkerInterval.D(),
		TPCIdleTimeout:    c.TPCIdleTimeout.D(),
		TPCCAFile:         c.TPCCAFile,
		StallTimeout:      c.StallTimeout.D(),
	}
}

// start builds the storage server and serves it: on the configured
// address the first time (a handed-over listener when there is one), on
// the address it got then after a Restart. t.mu is held or t is not yet
// shared.
func (t *Site) start(first bool) error {
	if t.cfg.CreateRoot {
		if err := os.MkdirAll(t.cfg.Root, 0o755); err != nil {
			return fmt.Errorf("storage: create_root: %w", err)
		}
	}
	srv, err := storage.New(storageConfig(t.cfg), t.s.log)
	if err != nil {
		return err
	}
	if t.authMetrics {
		if err := t.s.exportAuth(srv.Registry()); err != nil {
			srv.Close()
			return err
		}
	}
	if t.s.auth != nil {
		if t.cfg.TLSCert != "" {
			// The pair again, in a config that asks for client
			// certificates and reloads on SIGHUP.
			tlsCfg, err := t.s.serverTLS(t.cfg.TLSCert, t.cfg.TLSKey)
			if err != nil {
				srv.Close()
				return err
			}
			srv.UseTLS(tlsCfg)
		}
		srv.Guard(func(h http.Handler) http.Handler { return t.s.guardSite(h, t.cfg.Root, srv.MetricsPath()) })
		srv.GuardReads(t.s.auth.MayRead)
	}
	var ln net.Listener
	if first {
		ln, err = t.s.listen(t.cfg.Listen)
	} else {
		ln, err = net.Listen("tcp", t.addr)
	}
	if err != nil {
		srv.Close()
		return fmt.Errorf("storage: %w", err)
	}
	if first {
		t.addr, t.URL, t.Dir = ln.Addr().String(), srv.URL(ln.Addr()), t.cfg.Root
	}
	ctx, cancel := context.WithCancel(t.s.runCtx)
	done := make(chan struct{})
	t.srv, t.cancel, t.done = srv, cancel, done
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			t.s.fail(err)
		}
	}()
	return nil
}

// Stop stops the site as if it went down: it stops accepting, lets
// requests in flight finish (up to 10 s), and its port refuses
// connections from then on. Stopping a stopped site does nothing.
func (t *Site) Stop() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srv == nil {
		return nil
	}
	t.cancel()
	<-t.done
	err := t.srv.Close()
	t.srv = nil
	return err
}

// Restart serves the site again on the address it had, with a fresh
// storage server over the same directory. It fails when the site is
// running, when the server is closing, or when the port was taken
// meanwhile.
func (t *Site) Restart() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.s.closed:
		return errors.New("server: closed")
	default:
	}
	if t.srv != nil {
		return fmt.Errorf("server: storage %s is running", t.URL)
	}
	return t.start(false)
}
