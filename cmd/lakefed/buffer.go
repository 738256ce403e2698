package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/lakefed/lakefed/internal/buffer"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx/transport"
	"github.com/lakefed/lakefed/internal/server"
)

// bufferUsage is what "lakefed buffer" takes.
const bufferUsage = "lakefed buffer --dir DIR --target URL [--target URL ...] [--listen 127.0.0.1:8080] [--prefix /]\n       lakefed buffer status [--json] [--url FEDERATOR_URL]"

// defaultFederatorURL is where "buffer status" looks without --url: the
// federator's default listener.
const defaultFederatorURL = "http://127.0.0.1:8080"

// runBuffer is "lakefed buffer": a write buffer of its own in front of
// its targets, or, with "status", a running buffer's /api/buffer.
func runBuffer(ctx context.Context, args []string) error {
	return bufferMain(ctx, os.Stdout, args)
}

// bufferMain is runBuffer with its output made explicit for tests.
func bufferMain(ctx context.Context, stdout io.Writer, args []string) error {
	if len(args) > 0 && args[0] == "status" {
		return bufferStatus(ctx, stdout, args[1:])
	}
	if len(args) > 0 && strings.HasPrefix(args[0], "-") && !slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" }) {
		return bufferServe(ctx, stdout, args)
	}
	// "-h" anywhere shows the usage, as it does for every command.
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" || a == "help" }) {
		fmt.Fprintf(os.Stderr, "Usage: %s\n\nRuns a write buffer: writes acknowledged from its spool directory (fsynced,\n"+
			"journaled), migrated to every target and verified there. 'lakefed buffer status'\n"+
			"shows a running buffer's state: what is pending, since when, the disk, each\n"+
			"target's throughput and the failures ('lakefed buffer status -h').\n\n", bufferUsage)
		return bufferServe(ctx, stdout, []string{"-h"})
	}
	return usageErrorf("buffer: want a subcommand: %s", bufferUsage)
}

// bufferStatusJSON is the body of /api/buffer.
type bufferStatusJSON struct {
	buffer.Status
	History []buffer.Sample `json:"history"`
}

// bufferStatus is "lakefed buffer status": GET /api/buffer on the
// federator's listener, shown one figure a line with its unit, or as the
// API's JSON (--json).
func bufferStatus(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("buffer status", "\n\nShows the write buffer of the lakefed serving FEDERATOR_URL (its /api/buffer).\n\nFlags:")
	jsonOut := fs.Bool("json", false, "print the API's JSON as it is")
	base := fs.String("url", defaultFederatorURL, "base URL of the federator's listener the buffer runs on")
	var cf clientFlags
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("buffer status: unexpected arguments %q", fs.Args())
	}
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErrorf("buffer status: --url %q: want http(s)://HOST:PORT", *base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/buffer"
	body, err := fetchBufferStatus(ctx, u.String(), &cf)
	if err != nil {
		return err
	}
	if *jsonOut {
		_, err := stdout.Write(body)
		return err
	}
	var st bufferStatusJSON
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("buffer status: %s: not a buffer's status: %w", u, err)
	}
	return printBufferStatus(stdout, st.Status, time.Now())
}

// fetchBufferStatus GETs the status at u and returns its body. A server
// that does not answer is ErrUnavailable (exit 4), one without a buffer
// ErrNotFound (exit 3), a refusal ErrRefused (exit 5).
func fetchBufferStatus(ctx context.Context, u string, cf *clientFlags) ([]byte, error) {
	timeout := cf.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	tr, err := transport.New(endpoint.Config{CAFile: cf.caFile, InsecureSkipVerify: cf.insecure, Timeout: timeout},
		transport.Options{})
	if err != nil {
		return nil, fmt.Errorf("buffer status: %w", err)
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, usageErrorf("buffer status: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	if tok := os.Getenv("BEARER_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("buffer status: %w: %w", endpoint.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	// The status lists at most 100 failures and an hour of samples: a
	// few hundred KiB at most.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("buffer status: %s: %w: %w", u, endpoint.ErrUnavailable, err)
	}
	switch c := resp.StatusCode; {
	case c == http.StatusOK:
		return body, nil
	case c == http.StatusNotFound || c == http.StatusMethodNotAllowed:
		return nil, fmt.Errorf("buffer status: %s: %s: %w (does this lakefed run a buffer: section?)", u, resp.Status,
			endpoint.ErrNotFound)
	case c == http.StatusUnauthorized || c == http.StatusForbidden:
		return nil, fmt.Errorf("buffer status: %s: %s: %w", u, resp.Status, endpoint.ErrRefused)
	default:
		msg := strings.TrimSpace(string(bytes.ToValidUTF8(body[:min(len(body), 200)], nil)))
		return nil, fmt.Errorf("buffer status: %s: %s %s: %w", u, resp.Status, msg, endpoint.ErrUnavailable)
	}
}

// printBufferStatus writes st one figure a line, every number with its
// unit, then a line per target and per failure.
func printBufferStatus(w io.Writer, st buffer.Status, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(f, a...)) }
	line("pending", "%s, %s (acknowledged, not yet verified on every target)", count(st.PendingFiles, "file"),
		byteSize(float64(st.PendingBytes)))
	if st.PendingFiles > 0 {
		line("oldest pending", "%s", roundDur(time.Duration(st.OldestPendingSeconds*float64(time.Second))))
	} else {
		line("oldest pending", "none pending")
	}
	line("held on disk", "%s, %s (pending, and migrated files kept to be read locally)", count(st.HeldFiles, "file"),
		byteSize(float64(st.HeldBytes)))
	if st.PendingDeletes > 0 {
		line("pending deletes", "%s (acknowledged, not yet carried out on every target)", count(st.PendingDeletes, "file"))
	}
	if st.MaxBytes > 0 {
		line("disk used", "%s of %s (%.1f %%)", byteSize(float64(st.UsedBytes)), byteSize(float64(st.MaxBytes)),
			100*float64(st.UsedBytes)/float64(st.MaxBytes))
	} else {
		line("disk used", "%s (no max_bytes: the file system bounds it)", byteSize(float64(st.UsedBytes)))
	}
	line("migrated", "%s since start (verified on every target)", count(st.Migrated, "file"))
	line("failing", "%s", count(len(st.Failures), "file"))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Targets) > 0 {
		fmt.Fprintln(w, "\ntargets:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range st.Targets {
			rate := "no copy yet"
			if t.Seconds > 0 {
				rate = fmt.Sprintf("%.1f MB/s", t.BytesPerSecond/1e6)
			}
			state := ""
			if !t.DownUntil.IsZero() && t.DownUntil.After(now) {
				state = fmt.Sprintf("\theld off as unavailable for %s", roundDur(t.DownUntil.Sub(now)))
			}
			fmt.Fprintf(tw, "  %s\t%s, %s in %s\t%s\t%s failed%s\n", t.Name, count(t.Files, "file"),
				byteSize(float64(t.Bytes)), roundDur(time.Duration(t.Seconds*float64(time.Second))), rate,
				count(t.Failures, "copy"), state)
			if t.LastError != "" {
				fmt.Fprintf(tw, "  \tlast error: %s\n", t.LastError)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(st.Failures) > 0 {
		fmt.Fprintln(w, "\nfailures (oldest first):")
		for _, f := range st.Failures {
			next := "retry due now"
			if d := f.NextTry.Sub(now); d > 0 {
				next = "retry in " + roundDur(d)
			}
			fmt.Fprintf(w, "  %s -> %s: %s, %s, %s: %s\n", f.Path, f.Target, f.Reason, count(f.Attempts, "attempt"),
				next, f.Error)
		}
	}
	return nil
}

// count shows n with its noun, plural unless n is 1 ("1 file", "3 copies").
func count[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	if strings.HasSuffix(noun, "y") {
		noun = strings.TrimSuffix(noun, "y") + "ie"
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// roundDur shows a duration as a person reads it: "850ms", "12.3s",
// "6m0s".
func roundDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// bufferServe runs a write buffer on its own: PUTs under --prefix land in
// --dir, are acknowledged once fsynced and journaled, and migrate to every
// --target with their adler32 checked there. It is the buffer section of
// lakefed serve in front of a federation of the targets (so GET, HEAD and
// PROPFIND see pending files, then the targets' copies).
func bufferServe(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("buffer", "")
	var b config.Buffer
	var targets multiFlag
	fs.StringVar(&b.Dir, "dir", "", "spool directory for the journal and the buffered files (required)")
	fs.Var(&targets, "target", "URL the files migrate to (required; repeat for more replicas)")
	listen := fs.String("listen", config.DefaultListen, "host:port to listen on")
	prefix := fs.String("prefix", "/", "buffered namespace prefix")
	maxBytes := fs.String("max-bytes", "", "bound on buffered bytes, e.g. 500GiB (default: the disk's free space)")
	keep := fs.Duration("keep-after-migration", time.Hour, "how long a migrated file is still read locally")
	fs.IntVar(&b.Parallel, "parallel", 0, "concurrent uploads (default 4)")
	fs.StringVar(&b.WhenFull, "when-full", "reject", "reject (507) or direct (307 to the first target)")
	accessLog := fs.Bool("access-log", false, "log one line per request")
	logFormat := logFormatFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("buffer: unexpected arguments %q", fs.Args())
	}
	if b.Dir == "" || len(targets) == 0 {
		return usageErrorf("buffer: --dir and --target are required")
	}
	if *maxBytes != "" {
		n, err := config.ParseSize(*maxBytes)
		if err != nil {
			return usageErrorf("buffer: --max-bytes: %v", err)
		}
		b.MaxBytes = config.Size(n)
	}
	b.KeepAfterMigration = config.Duration(*keep)
	fed := &config.Federation{}
	var names []string
	for i, t := range targets {
		name := fmt.Sprintf("target-%d", i+1)
		names = append(names, name)
		fed.Endpoints = append(fed.Endpoints, config.Endpoint{Config: endpoint.Config{Name: name, URL: t}, Writable: true, Priority: i + 1})
	}
	b.Prefixes = []config.BufferPrefix{{Prefix: *prefix, Targets: names}}
	log, err := newLogger("buffer", *logFormat, slog.LevelInfo)
	if err != nil {
		return err
	}
	cfg := &config.Config{Listen: *listen, Federation: fed, Buffer: &b, AccessLog: *accessLog, LogFormat: *logFormat}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return usageErrorf("buffer: %v", err)
	}
	srv, err := server.Start(ctx, cfg, server.Options{Log: log, Out: stdout})
	if err != nil {
		return err
	}
	defer srv.Close()
	notify(log, daemon.SdNotifyReady)
	defer notify(log, daemon.SdNotifyStopping)
	select {
	case <-ctx.Done():
		return nil
	case err := <-srv.Err():
		return err
	}
}

// multiFlag is a flag that may be given more than once.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
