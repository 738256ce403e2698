package main

// The client commands (cp, ls, stat, rm, mkdir) in the manner of gfal-copy,
// gfal-ls, xrdcp and xrdfs, built on the endpoint layer: a URL becomes an
// endpoint (scheme://host:port/) and a clean path inside it, so every kind
// the federator speaks to is also one the command line speaks to.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	httpep "github.com/lakefed/lakefed/internal/endpoint/http"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/transfer"
)

// clientFlags are the connection flags every client command takes.
type clientFlags struct {
	caFile   string
	insecure bool
	timeout  time.Duration
}

func (cf *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&cf.caFile, "ca-file", "", "PEM `file` of extra CAs to trust for https/davs")
	fs.BoolVar(&cf.insecure, "insecure", false, "skip TLS certificate verification (tests only)")
	fs.DurationVar(&cf.timeout, "timeout", 0,
		"bound on each metadata operation and on the wait for the first byte (0: 10s)")
}

// target is one side of a client command: an endpoint and a clean path in
// it, plus how the user wrote it (for messages).
type target struct {
	ep    endpoint.Endpoint
	path  string // clean, absolute, relative to the endpoint root
	raw   string // as given on the command line
	local bool   // a local path or file:// URL
	// dirHint says the user wrote a trailing slash: "this is a directory".
	dirHint bool
	// op is the command the target is for.
	op string
}

// remote reports whether scheme names a remote endpoint the client
// commands take: every scheme of the table (endpoint.Schemes) but file.
// s3://bucket/key URLs take the server from $AWS_ENDPOINT_URL and the
// credentials from $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY, as the
// AWS CLI reads them.
func remote(scheme string) bool {
	s, ok := endpoint.LookupScheme(scheme)
	return ok && !s.NoHost
}

// parseTarget splits a command-line argument into an endpoint and a path.
// A URL of an endpoint kind with a host (http(s), dav(s), s3, root)
// gives the endpoint scheme://host:port/ and the URL's path; local paths and file:// URLs give a posix endpoint rooted at the
// directory localRoot picks. op is the command it is for.
func parseTarget(ctx context.Context, op, raw string, cf *clientFlags) (*target, error) {
	cfg := endpoint.Config{
		Timeout:            cf.timeout,
		CAFile:             cf.caFile,
		InsecureSkipVerify: cf.insecure,
		BearerToken:        os.Getenv("BEARER_TOKEN"),
	}
	t := &target{raw: raw, op: op}
	var p string
	scheme, _, hasScheme := strings.Cut(raw, "://")
	switch {
	case hasScheme && remote(scheme):
		u, err := url.Parse(raw)
		if err != nil {
			return nil, usageErrorf("bad URL %q: %v", raw, err)
		}
		if u.Host == "" {
			return nil, usageErrorf("bad URL %q: no host", raw)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, usageErrorf("bad URL %q: user info, query and fragment are not supported", raw)
		}
		cfg.Name = u.Host
		cfg.URL = strings.ToLower(u.Scheme) + "://" + u.Host + "/"
		p = u.Path
		if s, _ := endpoint.LookupScheme(u.Scheme); s.Kind == endpoint.KindS3 {
			cfg.S3 = s3FromEnv()
		}
	case hasScheme && strings.EqualFold(scheme, "file"):
		u, err := url.Parse(raw)
		if err != nil {
			return nil, usageErrorf("bad URL %q: %v", raw, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, usageErrorf("bad URL %q: file URLs name no host", raw)
		}
		t.local, p = true, u.Path
	case hasScheme:
		return nil, usageErrorf("unsupported URL scheme %q in %q (%s)", scheme, raw, endpoint.SchemeNames())
	default:
		abs, err := filepath.Abs(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", raw, err)
		}
		t.local, p = true, filepath.ToSlash(abs)
		if strings.HasSuffix(raw, string(filepath.Separator)) {
			p += "/"
		}
	}
	t.dirHint = strings.HasSuffix(p, "/")
	clean, err := httpx.CleanPath(p)
	if err != nil {
		return nil, usageErrorf("%s: %v", raw, err)
	}
	t.path = clean
	if t.local {
		cfg.Name, cfg.URL = "local", "file:///"
	}
	ep, err := kinds.New(ctx, cfg, discardLogger())
	if err != nil {
		return nil, usageErrorf("%s: %v", raw, err)
	}
	t.ep = ep
	return t, nil
}

// s3FromEnv is the S3 server of s3:// URLs given on the command line, read
// from the environment as the AWS CLI reads it (credentials too, by the s3
// kind: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
func s3FromEnv() *endpoint.S3Config {
	return &endpoint.S3Config{
		Endpoint:  os.Getenv("AWS_ENDPOINT_URL"),
		Region:    os.Getenv("AWS_DEFAULT_REGION"),
		PathStyle: true,
	}
}

// discardLogger is the kinds' logger: a command reports through its error.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// close releases the endpoint's resources (idle connections) when its
// kind holds any.
func (t *target) close() {
	if c, ok := t.ep.(io.Closer); ok {
		_ = c.Close()
	}
}

// display is how messages name the target: as the user wrote it.
func (t *target) display() string { return t.raw }

// opError is what a client command returns when an endpoint operation
// fails: "stat http://host/x: not found". It wraps the endpoint's error so
// exitCode finds the class (ErrNotFound, ErrUnavailable, ErrRefused).
type opError struct {
	op     string
	target string
	err    error
}

func (e *opError) Error() string { return e.op + " " + e.target + ": " + reason(e.err) }
func (e *opError) Unwrap() error { return e.err }

func opErr(op string, t *target, err error) error {
	if err == nil {
		return nil
	}
	return &opError{op: op, target: t.display(), err: err}
}

// reason is err's message without the kind, operation and path each
// endpoint.OpError in it puts in front: the command's own message already
// says which operation and which URL.
func reason(err error) string {
	// "not found" says it all; the 404 or ENOENT behind it adds nothing.
	if errors.Is(err, endpoint.ErrNotFound) {
		return endpoint.ErrNotFound.Error()
	}
	msg := err.Error()
	// One method's error may hold another's (Checksum's holds Open's).
	for e := err; ; {
		var oe *endpoint.OpError
		if !errors.As(e, &oe) {
			break
		}
		msg = strings.Replace(msg, oe.Error(), oe.Err.Error(), 1)
		e = oe.Err
	}
	// A body that only repeats the status line ("403 Forbidden: Forbidden").
	var se *httpep.StatusError
	if errors.As(err, &se) && se.Msg != "" && strings.HasSuffix(se.Status, " "+se.Msg) {
		msg = strings.Replace(msg, se.Status+": "+se.Msg, se.Status, 1)
	}
	// The OS error repeats the operation and the host path too, and
	// net/http's the method and the URL.
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = strings.Replace(msg, pe.Error(), pe.Err.Error(), 1)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = strings.Replace(msg, ue.Error(), ue.Err.Error(), 1)
	}
	if msg == "" {
		return err.Error()
	}
	return msg
}

const cpUsage = `SRC DST

Copies SRC to DST. Either may be a local path, a file:// URL or the URL
of any endpoint kind (http(s)://, dav(s)://, s3://, root://); URL to URL
streams through this process. Redirects
are followed. The adler32 of the bytes copied is computed on the way and
checked against the checksum the source offers (RFC 3230 Want-Digest)
before the destination is committed, and against the one a remote
destination reports after the copy; on a mismatch the destination is
removed and the exit code is 1.

When DST is a directory (an existing one, or a path or URL ending in /)
the file keeps SRC's base name. An existing destination file is an error
(exit 5) unless -f is given, as with gfal-copy. A progress bar is drawn
on stderr when it is a terminal.

Flags:`

func runCp(ctx context.Context, args []string) error {
	fs := newFlagSet("cp", cpUsage)
	var cf clientFlags
	cf.register(fs)
	force := fs.Bool("f", false, "overwrite an existing destination file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageErrorf("cp: want SRC and DST, got %d arguments", fs.NArg())
	}
	src, err := parseTarget(ctx, "cp", fs.Arg(0), &cf)
	if err != nil {
		return err
	}
	defer src.close()
	dst, err := parseTarget(ctx, "cp", fs.Arg(1), &cf)
	if err != nil {
		return err
	}
	defer dst.close()
	return copyFile(ctx, src, dst, *force, newProgress(os.Stderr))
}

// copyFile copies src to dst; see cpUsage for the rules.
func copyFile(ctx context.Context, src, dst *target, force bool, prog *progress) error {
	info, err := src.ep.Stat(ctx, src.path)
	if err != nil {
		return opErr("stat", src, err)
	}
	if info.IsDir {
		return opErr("copy", src, fmt.Errorf("is a directory: %w", endpoint.ErrRefused))
	}
	dstPath, err := destPath(ctx, src, dst, force)
	if err != nil {
		return err
	}
	dstName := dst.display()
	if dstPath != dst.path {
		dstName = strings.TrimSuffix(dstName, "/") + "/" + path.Base(src.path)
	}

	// A local source is read by us anyway: asking the posix kind for its
	// checksum would read the file twice. A local destination holds what
	// we wrote, which was summed on the way.
	opts := transfer.Options{SourceInfo: &info, SkipSourceSum: src.local, SkipDestSum: dst.local}
	if prog != nil {
		opts.Progress = prog.set
	}
	_, err = transfer.Copy(ctx, src.ep, dst.ep, src.path, dstPath, opts)
	prog.done(err == nil)
	var te *transfer.Error
	var ce *transfer.ChecksumError
	switch {
	case errors.As(err, &ce):
		name := src.display()
		if ce.Side == transfer.Destination {
			name = "to " + dstName
		}
		return fmt.Errorf("copy %s: %w", name, err)
	case errors.As(err, &te):
		t := src.display()
		if te.Side == transfer.Destination {
			t = dstName
		}
		op := te.Op
		if op == "copy" && te.Side == transfer.Destination {
			op = "copy to"
		}
		return &opError{op: op, target: t, err: te.Err}
	}
	return err
}

// destPath returns the path in dst to write: dst's own path, or SRC's base
// name inside it when dst is a directory. Without force, an existing file
// there is refused with ErrExist, and a destination whose existence cannot
// be told (a federator with an endpoint down answers 503) is an error that
// says so. With force, what cannot be told is not asked: the write goes
// ahead, as gfal-copy -f does.
func destPath(ctx context.Context, src, dst *target, force bool) (string, error) {
	p := dst.path
	info, err := dst.ep.Stat(ctx, p)
	if err != nil && !errors.Is(err, endpoint.ErrNotFound) {
		if !force {
			return "", errUnknownDest(err)
		}
		if dst.dirHint {
			return httpx.Join(p, "/"+path.Base(src.path)), nil
		}
		return p, nil
	}
	// "dir/" that does not exist yet is made by Put, which creates parents.
	if err == nil && info.IsDir || err != nil && dst.dirHint {
		p = httpx.Join(p, "/"+path.Base(src.path))
		info, err = dst.ep.Stat(ctx, p)
		if err != nil && !errors.Is(err, endpoint.ErrNotFound) {
			if force {
				return p, nil
			}
			return "", errUnknownDest(err)
		}
	}
	switch {
	case err != nil:
		return p, nil
	case info.IsDir:
		return "", opErr("copy to", dst, fmt.Errorf("%s is a directory: %w", p, endpoint.ErrRefused))
	case !force:
		return "", opErr("copy to", dst, fmt.Errorf("%w (use -f to overwrite)", endpoint.ErrExist))
	}
	return p, nil
}

// errUnknownDest is cp's error when the destination check fails for
// another reason than "not found".
func errUnknownDest(err error) error { return &unknownDestError{err} }

// unknownDestError says why cp could not check its destination; it wraps
// the endpoint's error so that exitCode finds its class.
type unknownDestError struct{ err error }

func (e *unknownDestError) Error() string {
	return "cp: cannot tell whether the destination exists: " + reason(e.err) + "; -f overwrites anyway"
}
func (e *unknownDestError) Unwrap() error { return e.err }

func runLs(ctx context.Context, args []string) error {
	fs := newFlagSet("ls", "URL\n\nLists a directory: names sorted, directories with a trailing /.\n\nFlags:")
	var cf clientFlags
	cf.register(fs)
	long := fs.Bool("l", false, "long format: size, mtime (RFC 3339) and name")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("ls: want one URL or path, got %d arguments", fs.NArg())
	}
	t, err := parseTarget(ctx, "ls", fs.Arg(0), &cf)
	if err != nil {
		return err
	}
	defer t.close()
	infos, err := t.ep.List(ctx, t.path)
	if errors.Is(err, endpoint.ErrRefused) {
		// ls of a file lists the file, as ls(1) does.
		if info, serr := t.ep.Stat(ctx, t.path); serr == nil && !info.IsDir {
			infos, err = []endpoint.Info{info}, nil
		}
	}
	if err != nil {
		return opErr("ls", t, err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	var b strings.Builder
	for _, in := range infos {
		name := in.Name
		if in.IsDir {
			name += "/"
		}
		if *long {
			fmt.Fprintf(&b, "%12d  %s  %s\n", in.Size, formatTime(in.ModTime), name)
		} else {
			b.WriteString(name + "\n")
		}
	}
	_, err = io.WriteString(os.Stdout, b.String())
	return err
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func runStat(ctx context.Context, args []string) error {
	fs := newFlagSet("stat", "URL\n\nDescribes a file or directory, with the adler32 the endpoint offers.\n\nFlags:")
	var cf clientFlags
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("stat: want one URL or path, got %d arguments", fs.NArg())
	}
	t, err := parseTarget(ctx, "stat", fs.Arg(0), &cf)
	if err != nil {
		return err
	}
	defer t.close()
	info, err := t.ep.Stat(ctx, t.path)
	if err != nil {
		return opErr("stat", t, err)
	}
	sums := map[string]string{}
	for k, v := range info.Checksums {
		sums[k] = v
	}
	if !info.IsDir && sums[httpx.Adler32] == "" {
		v, err := endpoint.Checksum(ctx, t.ep, t.path, httpx.Adler32)
		switch {
		case err == nil:
			sums[httpx.Adler32] = v
		case !errors.Is(err, endpoint.ErrUnsupported):
			return opErr("checksum", t, err)
		}
	}
	typ := "file"
	if info.IsDir {
		typ = "directory"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name:  %s\nsize:  %d\ntype:  %s\nmtime: %s\n", info.Name, info.Size, typ, formatTime(info.ModTime))
	if info.ETag != "" {
		fmt.Fprintf(&b, "etag:  %s\n", info.ETag)
	}
	algos := make([]string, 0, len(sums))
	for a := range sums {
		algos = append(algos, a)
	}
	sort.Strings(algos)
	for _, a := range algos {
		fmt.Fprintf(&b, "%s: %s\n", a, sums[a])
	}
	_, err = io.WriteString(os.Stdout, b.String())
	return err
}

func runRm(ctx context.Context, args []string) error {
	fs := newFlagSet("rm", "URL\n\nRemoves a file (or an empty directory).\n\nFlags:")
	var cf clientFlags
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("rm: want one URL or path, got %d arguments", fs.NArg())
	}
	t, err := parseTarget(ctx, "rm", fs.Arg(0), &cf)
	if err != nil {
		return err
	}
	defer t.close()
	if t.path == "/" {
		return usageErrorf("rm: refusing to remove the root of %s", t.raw)
	}
	return opErr("rm", t, t.ep.Delete(ctx, t.path))
}

func runMkdir(ctx context.Context, args []string) error {
	fs := newFlagSet("mkdir", "URL\n\nMakes a directory and its missing parents; an existing one is fine.\n\nFlags:")
	var cf clientFlags
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("mkdir: want one URL or path, got %d arguments", fs.NArg())
	}
	t, err := parseTarget(ctx, "mkdir", fs.Arg(0), &cf)
	if err != nil {
		return err
	}
	defer t.close()
	return opErr("mkdir", t, t.ep.Mkdir(ctx, t.path))
}
