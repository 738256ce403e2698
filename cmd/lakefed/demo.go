package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/lakefed/lakefed/internal/demo"
)

// runDemo runs a whole federation on loopback with sample data until
// Ctrl-C: three storage sites, a federator in front, a short benchmark.
func runDemo(ctx context.Context, args []string) error {
	fs := newFlagSet("demo", "\n\nRuns three storage sites on loopback with sample data (replicated files, a\nROOT file with a jagged jet_pt branch), a federator in front of them, and a\nshort open and read benchmark stored in DIR/bench.db. Ctrl-C stops it all.\n\nFlags:")
	dir := fs.String("dir", "", "keep the sites' data, config and results store in `DIR` (default: a temporary directory removed on exit)")
	listen := fs.String("listen", demo.DefaultListen, "the federator's `host:port` (port 0: any free port)")
	noBench := fs.Bool("no-bench", false, "skip the start-up benchmark")
	verbose := fs.Bool("v", false, "log at debug level")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("demo: takes no arguments")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	d, err := demo.Start(ctx, demo.Options{Dir: *dir, Listen: *listen, Bench: !*noBench, Log: log, Out: os.Stdout})
	if err != nil {
		return err
	}
	err = d.Wait()
	fmt.Println("demo: stopped")
	return err
}
