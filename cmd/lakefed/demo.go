package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/lakefed/lakefed/internal/demo"
	"github.com/lakefed/lakefed/internal/logging"
)

// runDemo runs a whole federation on loopback with sample data until
// Ctrl-C: three storage sites, a federator in front, a short benchmark.
func runDemo(ctx context.Context, args []string) error {
	fs := newFlagSet("demo", "\n\nRuns three storage sites on loopback with sample data (replicated files, a\nROOT file with a jagged jet_pt branch), a federator in front of them, and a\nshort open and read benchmark stored in DIR/bench.db. Ctrl-C stops it all.\n\nFlags:")
	dir := fs.String("dir", "", "keep the sites' data, config and results store in `DIR` (default: a temporary directory removed on exit)")
	listen := fs.String("listen", demo.DefaultListen, "the federator's `host:port` (port 0: any free port)")
	noBench := fs.Bool("no-bench", false, "skip the start-up benchmark")
	verbose := fs.Bool("v", false, "log at debug level")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this `host:port` (off by default; for profiling only)")
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
	log, err := newLogger("demo", logging.Text, level)
	if err != nil {
		return err
	}
	// cancel (stopping pprof) runs before the wait for its goroutine.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One listener for the whole demo: its sites and federator run in
	// this process.
	if err := startPprof(ctx, &wg, *pprofAddr, "demo", log); err != nil {
		return err
	}
	d, err := demo.Start(ctx, demo.Options{Dir: *dir, Listen: *listen, Bench: !*noBench, Log: log, Out: os.Stdout, Command: selfCommand()})
	if err != nil {
		return err
	}
	err = d.Wait()
	fmt.Println("demo: stopped")
	return err
}

// selfCommand is how the commands the demo prints run this binary, so that
// they work as printed: "lakefed" when PATH finds this very binary, "go
// run ./cmd/lakefed" under go run from the repository root (go run's
// binary is removed when it exits), else this binary's absolute path.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "lakefed"
	}
	onPath, _ := exec.LookPath("lakefed")
	_, err = os.Stat(filepath.Join("cmd", "lakefed", "main.go"))
	return demoCommand(exe, onPath, err == nil)
}

// demoCommand is selfCommand's choice: exe is the running binary, onPath
// what PATH finds as "lakefed" ("" for nothing), inRepo whether the
// working directory is the repository root.
func demoCommand(exe, onPath string, inRepo bool) string {
	if onPath != "" && sameBinary(onPath, exe) {
		return "lakefed"
	}
	// go run builds into $GOTMPDIR or $TMPDIR/go-build*/.../exe/.
	if inRepo && strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/lakefed"
	}
	return demo.ShellQuote(exe)
}

// sameBinary reports whether a and b name the same file.
func sameBinary(a, b string) bool {
	ia, err := os.Stat(a)
	if err != nil {
		return false
	}
	ib, err := os.Stat(b)
	return err == nil && os.SameFile(ia, ib)
}
