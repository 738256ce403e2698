package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/bench"
	"github.com/lakefed/lakefed/internal/results"
)

// benchLabel is the label of the demo's benchmark runs in the store.
const benchLabel = "lakefed demo"

// The start-up benchmark: the AAA open and read tests in miniature, sped
// up so that both take about 10 s, against the federator (so the opens
// are redirected and the test files are written through a 307).
var (
	demoOpen = bench.OpenOptions{
		Common: bench.Common{Speed: 40},
		Ramp:   bench.Ramp{Jobs: 20, Step: 4, Every: 30 * time.Second, Hold: 60 * time.Second},
		Period: 500 * time.Millisecond, Files: 200, FileSize: 4096,
	}
	demoRead = bench.ReadOptions{
		Common: bench.Common{Speed: 60},
		Ramp:   bench.Ramp{Jobs: 10, Step: 2, Every: 60 * time.Second, Hold: 120 * time.Second},
		Period: 10 * time.Second, Block: 64 << 10, Files: 10,
	}
)

// runBench runs the open and the read test against the federator and
// stores both in the demo's store, reporting to Options.Out.
func (d *Demo) runBench(ctx context.Context) {
	out := d.opts.Out
	fmt.Fprintf(out, "bench: running a short open test and read test against the federator (about 10 s); results go to %s\n", d.DBPath)
	t, err := bench.NewTarget(ctx, bench.TargetConfig{URL: d.FederatorURL + "/", Timeout: 10 * time.Second, MaxConns: 64})
	if err != nil {
		fmt.Fprintf(out, "bench: %v\n", err)
		return
	}
	defer t.Close()
	th := bench.DefaultThresholds()
	tests := []struct {
		kind string
		run  func() (*bench.Result, error)
	}{
		{"open", func() (*bench.Result, error) { return bench.Open(ctx, t, demoOpen) }},
		{"read", func() (*bench.Result, error) { return bench.Read(ctx, t, demoRead) }},
	}
	for _, tc := range tests {
		res, err := tc.run()
		if ctx.Err() != nil {
			return // stopping: a cut-short run is not worth a line
		}
		if err != nil {
			fmt.Fprintf(out, "bench %s: %v\n", tc.kind, err)
			continue
		}
		v := bench.Classify(res, th)
		id, err := bench.Save(context.WithoutCancel(ctx), d.Store, res, v, benchLabel)
		if err != nil {
			fmt.Fprintf(out, "bench %s: store: %v\n", tc.kind, err)
			continue
		}
		fmt.Fprintf(out, "bench %s: run %d, %s: %s\n", tc.kind, id, v.Class, headline(res))
	}
	fmt.Fprintf(out, "bench: done; to list the runs: %s bench list --db %s\n", d.opts.Command, ShellQuote(d.DBPath))
}

// headline is a run's main figures in a few words.
func headline(res *bench.Result) string {
	switch s := res.Summary.(type) {
	case *bench.OpenSummary:
		return fmt.Sprintf("%.0f opens/s observed of %.0f expected, p99 %.1f ms, %d/%d failed",
			s.ObservedRate, s.ExpectedRate, s.P99*1000, s.Failures, s.Opens)
	case *bench.ReadSummary:
		return fmt.Sprintf("%d/%d jobs sustained, %.1f MB/s, mean block read %.1f ms, %d/%d failed",
			s.SustainedLast, s.TargetJobs, s.ObservedRate/1e6, s.MeanBlockTime*1000, s.Failures, s.Reads)
	}
	return res.Kind
}

// BenchRuns returns the runs the demo's benchmark stored, newest first.
func (d *Demo) BenchRuns(ctx context.Context) ([]results.Run, error) {
	if d.Store == nil {
		return nil, errors.New("demo: no results store")
	}
	runs, err := d.Store.List(ctx, results.Filter{Limit: 100})
	if err != nil {
		return nil, err
	}
	var mine []results.Run
	for _, r := range runs {
		if r.Label == benchLabel {
			mine = append(mine, r)
		}
	}
	return mine, nil
}

// ShellQuote returns s as one word for a POSIX shell: as it is when it is
// made of characters no shell treats specially, else in single quotes.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=+@%,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// WriteHelp prints what the demo runs: the URLs, where each sample file
// is, and three commands to try.
func (d *Demo) WriteHelp(w io.Writer) {
	f := d.FederatorURL
	fmt.Fprintf(w, "lakefed demo: a federator in front of three storage sites on loopback\n\n")
	fmt.Fprintf(w, "  federator  %s/   (redirect mode; site-c is proxied)\n", f)
	fmt.Fprintf(w, "  dashboard  %s/ui/\n", f)
	fmt.Fprintf(w, "  endpoints  %s/api/endpoints   metrics %s/metrics\n", f, f)
	fmt.Fprintf(w, "  cache      %s/   (read-through block cache in front of the federation; how files are read: %s/api/cache/files)\n", d.CacheURL, d.CacheURL)
	fmt.Fprintf(w, "  buffer     PUTs under %s/ land on local disk, then migrate to site-a and site-b   %s/api/buffer\n", BufferPrefix, f)
	fmt.Fprintf(w, "  root://    %s/   (with xrootd-client installed: xrdcp -f %s/%s %s)\n", d.XrootURL, d.XrootURL, "/demo/README.txt", ShellQuote(filepath.Join(os.TempDir(), "README.txt")))
	for _, s := range d.Sites {
		role := "redirect"
		if s.Mode == "proxy" {
			role = "proxied "
		}
		wr := ""
		if s.Writable {
			wr = ", writable"
		}
		fmt.Fprintf(w, "  %-9s  %s   priority %d, %s%s\n", s.Name, s.URL, s.Priority, role, wr)
	}
	gone := ""
	if d.Temporary {
		gone = " (removed on exit; --dir DIR keeps it)"
	}
	fmt.Fprintf(w, "  data       %s%s\n", d.Dir, gone)
	fmt.Fprintf(w, "  config     %s\n", d.ConfigPath)
	fmt.Fprintf(w, "  bench db   %s\n", d.DBPath)
	fmt.Fprintf(w, "\nSample files:\n")
	for _, s := range Samples {
		fmt.Fprintf(w, "  %-32s %-15s %s\n", s.Path, strings.Join(s.Sites, ","), s.What)
	}
	fmt.Fprintf(w, "\nTry:\n")
	fmt.Fprintf(w, "  curl -L %s/demo/README.txt\n", f)
	// -f: the command works again when run twice. The copy goes to the
	// temporary directory ($TMPDIR), not to a fixed /tmp path.
	lf := d.opts.Command
	if lf == "" {
		lf = "lakefed"
	}
	fmt.Fprintf(w, "  %s cp -f %s%s %s\n", lf, f, ROOTPath, ShellQuote(filepath.Join(os.TempDir(), "events.root")))
	fmt.Fprintf(w, "  %s ls -l %s/demo/\n", lf, f)
	fmt.Fprintf(w, "  curl -sf -r 0-99,4096-4195 -o /dev/null -w '%%{http_code}: %%{size_download} bytes through the cache\\n' %s%s\n", d.CacheURL, ROOTPath)
	fmt.Fprintf(w, "  curl -sf %s/api/cache/files\n", d.CacheURL)
	fmt.Fprintf(w, "  echo 'written through the buffer' | curl -sf -T - -w '%%{http_code}\\n' %s%s/hello.txt\n", f, BufferPrefix)
	fmt.Fprintf(w, "  curl -sf %s%s/hello.txt\n", d.CacheURL, BufferPrefix)
	fmt.Fprintf(w, "\nCtrl-C stops everything.\n")
}
