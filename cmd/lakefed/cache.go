package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server"
)

// runCache runs a cache on its own, in front of one origin, until ctx is
// cancelled (the same role a cache section runs inside lakefed serve):
//
//	lakefed cache --dir DIR --origin URL [--listen 127.0.0.1:9100] [--max-bytes 100GiB] [--group URL,URL --self URL] [--access-log] [--log-format json]
func runCache(ctx context.Context, args []string) error {
	fs := newFlagSet("cache", "")
	var c config.Cache
	fs.StringVar(&c.Dir, "dir", "", "directory for the cached blocks (required)")
	fs.StringVar(&c.Origin, "origin", "", "URL the cache reads from: http(s)://, dav(s)://, s3://, root://, lakefed:// or file:// (required)")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:9100", "host:port to listen on")
	maxBytes := fs.String("max-bytes", "", "bound on cached bytes, e.g. 100GiB (default: 90% of the file system)")
	fs.Int64Var(&c.MaxInodes, "max-inodes", 0, "bound on files on disk, two per cached file (default: 90% of the file system's inodes)")
	blockSize := fs.String("block-size", "", "unit of fill and of checking (default 1MiB)")
	ram := fs.String("ram", "", "memory for recently read small blocks (default 256MiB)")
	fs.IntVar(&c.PrefetchBlocks, "prefetch-blocks", 0, "blocks read ahead of a sequential reader (default 8; -1: none)")
	revalidate := fs.Duration("revalidate-after", 0, "how long the origin's description of a file is trusted (default 5m)")
	group := fs.String("group", "", "comma-separated base URLs of every node of a cache group, this one included")
	fs.StringVar(&c.Self, "self", "", "this node's URL in --group (default http://LISTEN)")
	accessLog := fs.Bool("access-log", false, "log one line per request")
	logFormat := logFormatFlag(fs)
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this host:port (off by default; for profiling only)")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v", err)
	}
	if fs.NArg() > 0 {
		return usageErrorf("cache: unexpected arguments %q", fs.Args())
	}
	for _, sz := range []struct {
		flag string
		val  string
		dst  *config.Size
	}{{"max-bytes", *maxBytes, &c.MaxBytes}, {"block-size", *blockSize, &c.BlockSize}, {"ram", *ram, &c.RAM}} {
		if sz.val == "" {
			continue
		}
		n, err := config.ParseSize(sz.val)
		if err != nil {
			return usageErrorf("cache: --%s: %v", sz.flag, err)
		}
		*sz.dst = config.Size(n)
	}
	c.RevalidateAfter = config.Duration(*revalidate)
	if *group != "" {
		c.Group = strings.Split(*group, ",")
	}
	log, err := newLogger("cache", *logFormat, slog.LevelInfo)
	if err != nil {
		return err
	}
	cfg := &config.Config{Cache: &c, AccessLog: *accessLog, LogFormat: *logFormat}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return usageErrorf("cache: %v", strings.ReplaceAll(err.Error(), "cache.", "--"))
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := startPprof(ctx, &wg, *pprofAddr, "cache", log); err != nil {
		return err
	}
	srv, err := server.Start(ctx, cfg, server.Options{Log: log, Out: os.Stdout})
	if err != nil {
		return err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
	}()
	notify(log, daemon.SdNotifyReady)
	defer notify(log, daemon.SdNotifyStopping)
	select {
	case <-ctx.Done():
		return nil
	case err := <-srv.Err():
		return err
	}
}
