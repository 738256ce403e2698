// Command lakefed is a data-lake federation for scientific storage: one
// binary that serves storage, federates many endpoints into one namespace,
// caches reads, buffers writes, opens a root:// door and benchmarks sites.
// "lakefed help" lists the subcommands. This file is wiring only: each
// subcommand lives in its own file and its logic in internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/logging"
)

// command is one subcommand: its one-line summary and what runs it. run
// gets the arguments after the subcommand's name and a context cancelled on
// SIGINT or SIGTERM.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands is the one table of subcommands, in the order "help" lists them.
var commands = []struct {
	name string
	command
}{
	{"storage", command{"serve a directory over HTTP/WebDAV", runStorage}},
	{"cache", command{"run a read-through block cache in front of one origin (an XCache)", runCache}},
	{"buffer", command{"run a write buffer in front of its targets; 'lakefed buffer status' shows one's state", runBuffer}},
	{"serve", command{"run the roles a config file names (FILE or --config FILE)", runServe}},
	{"check-config", command{"validate a config file", runCheckConfig}},
	{"cp", command{"copy a file: local path or URL on either side", runCp}},
	{"ls", command{"list a directory (-l: size and mtime)", runLs}},
	{"stat", command{"describe a file or directory", runStat}},
	{"rm", command{"remove a file", runRm}},
	{"mkdir", command{"make a directory and its parents", runMkdir}},
	{"demo", command{"run three storage sites, a federator, a cache, a write buffer and a root:// door on loopback with sample data", runDemo}},
	{"bench", command{"site and scale tests, their results store (see 'lakefed bench -h')", runBench}},
	{"version", command{"print the version", runVersion}},
}

// Exit codes. Scripts tell the three failure classes apart by them.
const (
	exitOK          = 0
	exitError       = 1 // anything not classified below
	exitUsage       = 2 // bad flags or arguments
	exitNotFound    = 3 // the path is not there
	exitUnavailable = 4 // the endpoint could not answer: worth retrying
	exitRefused     = 5 // the endpoint refused (permission, bad request)
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err := c.run(ctx, args[1:])
		if err == nil || errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		if ue := (*usageError)(nil); !errors.As(err, &ue) || !ue.printed {
			fmt.Fprintf(stderr, "lakefed: %v\n", err)
		}
		return exitCode(err)
	}
	fmt.Fprintf(stderr, "lakefed: unknown command %q (see 'lakefed help')\n", args[0])
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "lakefed: a data-lake federation for scientific storage")
	fmt.Fprintln(w, "\nUsage: lakefed COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\n'lakefed COMMAND -h' shows a command's flags.")
}

// usageError marks an error as the caller's mistake (exit code 2).
// printed says the flag package has already printed it, with the usage.
type usageError struct {
	msg     string
	printed bool
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

func exitCode(err error) int {
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, endpoint.ErrNotFound):
		return exitNotFound
	case errors.Is(err, endpoint.ErrUnavailable):
		return exitUnavailable
	case errors.Is(err, endpoint.ErrRefused):
		return exitRefused
	}
	return exitError
}

// logFormatFlag registers --log-format on fs, for the subcommands that
// run a role without a config file (where log_format says it).
func logFormatFlag(fs *flag.FlagSet) *string {
	return fs.String("log-format", logging.Text, "the log's `format` on stderr: text or json (one object per line)")
}

// newLogger is the log of a subcommand that runs a role: logging.New on
// stderr, its format given by --log-format or log_format.
func newLogger(cmd, format string, level slog.Level) (*slog.Logger, error) {
	log, err := logging.New(os.Stderr, format, level)
	if err != nil {
		return nil, usageErrorf("%s: %v", cmd, err)
	}
	return log, nil
}

// newFlagSet returns a flag set for a subcommand that returns errors
// instead of exiting, so main decides the exit code.
func newFlagSet(name, argsUsage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: lakefed %s [flags] %s\n", name, argsUsage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args with fs taking flags anywhere, before, between
// or after the positional arguments ("cp SRC DST -f", "bench export 3
// --format csv"), as gfal-copy, xrdcp and curl users expect: the flag
// package alone stops at the first argument that is not a flag. "--" ends
// the flags; what follows is positional even when it starts with "-".
// Afterwards fs.Args() holds the positional arguments in their order.
// Every subcommand parses with it. A bad flag is a usage error (exit 2),
// which the flag package has printed already with the usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return &usageError{msg: err.Error(), printed: true}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...) // "--" ended the flags
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	// Parse again for fs.Args(): "--" keeps a positional "-x" from being
	// read as a flag.
	return fs.Parse(append([]string{"--"}, pos...))
}
