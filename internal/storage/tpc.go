package storage

// HTTP third-party copy (WLCG HTTP-TPC), the way FTS and gfal2 move data
// between sites: a COPY sent to one storage element names a remote URL, and
// that element moves the bytes itself.
//
//   - Pull: COPY /local with "Source: https://remote/p". The server GETs the
//     source and stores it at /local through servePut itself (temp file,
//     early write-back, fsync, rename, fsync of the directory, adler32 kept
//     beside the data): a pulled file is exactly as durable, as checked and
//     as lock- and precondition-aware as an uploaded one.
//   - Push: COPY /local with "Destination: https://other-host/p". The
//     server PUTs its file there with Content-Length, then asks the remote
//     for the adler32 (HEAD, Want-Digest) and compares it with its own.
//
// Headers named "TransferHeader<X>: v" go to the remote as "<X>: v" (how
// FTS hands a bearer token for the other side: TransferHeaderAuthorization).
// "Credential: none" is accepted and means nothing; any other Credential
// asks for delegation, which is refused with 400 as XrdHttpTPC does.
//
// The answer (the convention of dCache, DPM and XrdHttpTPC that
// davix/gfal2 parse; see the WLCG HTTP-TPC notes on the DPM WebDAV
// extensions page) is 202 with a text/plain body streamed while the copy
// runs: a performance marker at the start and every TPCMarkerInterval
//
//	Perf Marker
//		Timestamp: 1700000000
//		Stripe Index: 0
//		Stripe Bytes Transferred: 1048576
//		Total Stripe Count: 1
//	End
//
// and one last line, "success: Created" or "failure: <reason>". Each piece
// is flushed as written; the data itself never passes through memory
// whole. The status line cannot carry the outcome (it went out first), so
// clients must read to the last line, as gfal2 does.
//
// Guards, all chosen here and each cheap:
//   - the remote URL must be http or https (dav and davs are read as those,
//     as XrdHttpTPC reads them) with a host; user:password in it is refused,
//     since it would end up in logs;
//   - at most maxTPCRedirects redirects, each again http(s); a push is not
//     followed through a redirect that would turn its PUT into a GET (301,
//     302), and failure reasons never echo the remote URL (its query may
//     carry a token);
//   - no progress for TPCIdleTimeout (default 60 s, XrdHttpTPC's own
//     limit), or twice that before the first byte (XrdHttpTPC gives 120 s),
//     fails the copy; time spent on local disk work (fsync, rename) or
//     waiting for the remote's answer after the body does not count, the
//     transport's response-header timeout bounds that wait instead;
//   - the client going away cancels the transfer, and a pull then leaves
//     nothing behind (servePut removes its temp file).
//
// A COPY can make this server fetch from or send to any host it can reach
// (the nature of third-party copy), so it is off unless Config.TPC is set;
// who may ask for one is for the authorization rules in front of it to
// decide.

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/transport"
	"github.com/lakefed/lakefed/internal/keptsum"
	"github.com/lakefed/lakefed/internal/storage/davlock"
)

// Defaults of the TPC knobs in Config.
const (
	// DefaultTPCMarkerInterval is how often a running third-party copy
	// reports its progress: every 5 s, as dCache and XrdHttpTPC do and
	// FTS expects.
	DefaultTPCMarkerInterval = 5 * time.Second
	// DefaultTPCIdleTimeout is how long a third-party copy may move no
	// byte before it fails: XrdHttpTPC's 60 s.
	DefaultTPCIdleTimeout = 60 * time.Second
)

// maxTPCRedirects bounds the redirects one remote request follows (Go's
// own default, 10): a storage door redirects once to a pool, a federation
// a few times; more is a loop.
const maxTPCRedirects = 10

// Errors of a third-party copy. Their text ends up in the failure line.
var (
	errTPCIdle     = errors.New("storage: tpc: no progress")
	errTPCChecksum = errors.New("storage: tpc: adler32 mismatch")
	errTPCChanged  = errors.New("storage: tpc: source changed during the copy")
	errTPCRedirect = errors.New("storage: tpc: bad redirect")
)

// tpcClient is the HTTP client of third-party copies, shared by all of
// them (one connection pool).
type tpcClient struct {
	c      *http.Client
	marker time.Duration // TPCMarkerInterval, defaulted
	idle   time.Duration // TPCIdleTimeout, defaulted
}

// newTPCClient builds the TPC client of cfg, filling its defaults.
func newTPCClient(cfg *Config) (*tpcClient, error) {
	switch {
	case cfg.TPCMarkerInterval < 0:
		return nil, fmt.Errorf("storage: tpc_marker_interval %v is negative", cfg.TPCMarkerInterval)
	case cfg.TPCMarkerInterval == 0:
		cfg.TPCMarkerInterval = DefaultTPCMarkerInterval
	}
	switch {
	case cfg.TPCIdleTimeout < 0:
		return nil, fmt.Errorf("storage: tpc_idle_timeout %v is negative", cfg.TPCIdleTimeout)
	case cfg.TPCIdleTimeout == 0:
		cfg.TPCIdleTimeout = DefaultTPCIdleTimeout
	}
	// One transfer per connection at a time, and few at once: a small
	// idle pool. The header wait covers a remote's fsync after a PUT.
	tr, err := transport.New(endpoint.Config{CAFile: cfg.TPCCAFile},
		transport.Options{MaxIdleConns: 16, MaxIdleConnsPerHost: 4, ResponseHeaderTimeout: cfg.TPCIdleTimeout})
	if err != nil {
		return nil, fmt.Errorf("storage: tpc_ca_file: %w", err)
	}
	return &tpcClient{
		c:      &http.Client{Transport: tr, CheckRedirect: checkTPCRedirect},
		marker: cfg.TPCMarkerInterval,
		idle:   cfg.TPCIdleTimeout,
	}, nil
}

// close drops the idle connections.
func (tc *tpcClient) close() { tc.c.CloseIdleConnections() }

// checkTPCRedirect bounds and checks the redirects of a remote request.
func checkTPCRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxTPCRedirects {
		return fmt.Errorf("%w: more than %d redirects", errTPCRedirect, maxTPCRedirects)
	}
	if s := req.URL.Scheme; s != "http" && s != "https" {
		return fmt.Errorf("%w: to a %s URL", errTPCRedirect, s)
	}
	if orig := via[0].Method; orig != req.Method {
		return fmt.Errorf("%w: it turns %s into %s", errTPCRedirect, orig, req.Method)
	}
	return nil
}

// tpcRemote returns the remote URL of a third-party COPY and whether it
// pulls (Source) or pushes (Destination on another host). ok is false for
// an ordinary WebDAV COPY, which copy.go answers.
func tpcRemote(r *http.Request) (remote string, pull, ok bool) {
	if src := r.Header.Get("Source"); src != "" {
		return src, true, true
	}
	dst := r.Header.Get("Destination")
	u, err := url.Parse(dst)
	if err != nil || u.Host == "" || u.Host == r.Host {
		return "", false, false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "dav", "davs":
		return dst, false, true
	}
	return "", false, false
}

// parseRemote checks a remote URL of a third-party copy.
func parseRemote(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "dav":
		u.Scheme = "http"
	case "https", "davs":
		u.Scheme = "https"
	default:
		return nil, errors.New("not an http or https URL")
	}
	switch {
	case u.Host == "":
		return nil, errors.New("no host")
	case u.User != nil:
		return nil, errors.New("credentials in the URL; use TransferHeaderAuthorization")
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// transferHeaderPrefix is "TransferHeader" as net/http canonicalizes it.
const transferHeaderPrefix = "Transferheader"

// transferHeaders returns the headers to send to the remote: each
// TransferHeader<X> as <X>. Headers that frame the request itself or that
// the copy sets are refused: forwarding them would break or hijack it.
func transferHeaders(h http.Header) (http.Header, error) {
	out := http.Header{}
	for k, vs := range h {
		name, ok := strings.CutPrefix(k, transferHeaderPrefix)
		if !ok {
			continue
		}
		name = http.CanonicalHeaderKey(name)
		switch name {
		case "", "Host", "Content-Length", "Transfer-Encoding", "Connection", "Te", "Trailer",
			"Upgrade", "Keep-Alive", "Expect", "Range", "Want-Digest", "Proxy-Connection":
			return nil, fmt.Errorf("TransferHeader%s cannot be forwarded", name)
		}
		out[name] = append(out[name], vs...)
	}
	return out, nil
}

// tpcProgress is what the marker loop sees of a running transfer.
type tpcProgress struct {
	bytes atomic.Int64
	last  atomic.Int64 // unix nanoseconds of the last progress
	armed atomic.Bool  // bytes are expected now: the idle clock runs
	moved atomic.Bool  // a first byte has moved
}

// add counts n bytes moved now.
func (p *tpcProgress) add(n int) {
	if n > 0 {
		p.bytes.Add(int64(n))
		p.last.Store(time.Now().UnixNano())
		p.moved.Store(true)
	}
}

// arm starts (or stops) the idle clock.
func (p *tpcProgress) arm(on bool) {
	p.last.Store(time.Now().UnixNano())
	p.armed.Store(on)
}

// stalled reports whether the transfer is armed and has moved nothing
// for longer than allowed: idle, or twice that before the first byte.
func (p *tpcProgress) stalled(now time.Time, idle time.Duration) (time.Duration, bool) {
	if !p.armed.Load() {
		return 0, false
	}
	limit := idle
	if !p.moved.Load() {
		limit = 2 * idle
	}
	return limit, now.Sub(time.Unix(0, p.last.Load())) > limit
}

// serveTPC answers a third-party COPY of the clean local path p.
// Refusals known before the copy starts get a status: 400 bad headers or
// URL, 403 the root, 404 no local source (push), 409 onto a collection,
// 412 a failed precondition or Overwrite F onto an existing file, 423
// locked. Then 202, markers, and the outcome line.
func (s *Server) serveTPC(w *respWriter, r *http.Request, p, raw string, pull bool) {
	if p == "/" {
		httpError(w, http.StatusForbidden, "the root cannot be copied or overwritten")
		return
	}
	if c := r.Header.Get("Credential"); c != "" && c != "none" {
		// Delegation (gridsite) or a token exchange: not offered.
		httpError(w, http.StatusBadRequest, "unsupported Credential: only none")
		return
	}
	if pull && r.Header.Get("Destination") != "" {
		httpError(w, http.StatusBadRequest, "both Source and Destination")
		return
	}
	remote, err := parseRemote(raw)
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad remote URL: "+err.Error())
		return
	}
	fwd, err := transferHeaders(r.Header)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	switch r.Header.Get("Overwrite") {
	case "", "T", "F":
	default:
		httpError(w, http.StatusBadRequest, "bad Overwrite header: want T or F")
		return
	}
	if pull {
		s.servePull(w, r, p, remote, fwd)
	} else {
		s.servePush(w, r, p, remote, fwd)
	}
}

// servePull checks the local destination p, then pulls remote into it.
func (s *Server) servePull(w *respWriter, r *http.Request, p string, remote *url.URL, fwd http.Header) {
	// RFC 4918 §7.5.1 as for COPY: the destination must be unlocked. The
	// guard stays up for the whole transfer, so a LOCK cannot slip in.
	release, ok := s.locks.Guard(w, r, davlock.Target{Path: p})
	if !ok {
		return
	}
	defer release()
	put := pullRequest(r)
	// A first look, as PUT makes before taking its body; servePut looks
	// again under the path lock before the rename.
	var cur current
	if err := s.statRel(rel(p), &cur.st); err == nil {
		if isDir(&cur.st) {
			httpError(w, http.StatusConflict, "target is a directory")
			return
		}
		cur.exists = true
	} else if code, reason := s.fsStatus(r, err); code != http.StatusNotFound {
		httpError(w, code, reason)
		return
	}
	if cur.check(put) != 0 {
		httpError(w, http.StatusPreconditionFailed, "precondition failed")
		return
	}
	s.runTPC(w, r, func(ctx context.Context, pr *tpcProgress) error {
		return s.pull(ctx, put, p, remote, fwd, pr)
	})
}

// pullRequest is the PUT that stores the file r pulls: r's lock tokens
// and preconditions, and "If-None-Match: *" for Overwrite F (RFC 4918
// §10.6 onto an existing resource: 412).
func pullRequest(r *http.Request) *http.Request {
	put := r.Clone(r.Context())
	put.Method = http.MethodPut
	put.Header = http.Header{}
	for _, k := range []string{"If", "If-Match", "If-None-Match", "If-Unmodified-Since"} {
		if v, ok := r.Header[k]; ok {
			put.Header[k] = v
		}
	}
	if r.Header.Get("Overwrite") == "F" {
		put.Header["If-None-Match"] = []string{"*"}
	}
	put.Body, put.ContentLength = http.NoBody, 0
	return put
}

// pull GETs remote and stores it at p through servePut.
func (s *Server) pull(ctx context.Context, put *http.Request, p string, remote *url.URL, fwd http.Header, pr *tpcProgress) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, remote.String(), nil)
	if err != nil {
		return err
	}
	req.Header = fwd.Clone()
	req.Header.Set("Want-Digest", httpx.Adler32)
	pr.arm(true)
	resp, err := s.tpc.c.Do(req)
	if err != nil {
		return remoteErr("source", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("source answered %s", resp.Status)
	}
	body := &pullBody{
		ctx: ctx, s: s, r: resp.Body, h: httpx.NewHash(httpx.Adler32), pr: pr,
		want: httpx.ParseDigest(strings.Join(resp.Header["Digest"], ","))[httpx.Adler32],
		head: func() (string, error) { return s.remoteAdler32(ctx, resp.Request.URL, fwd) },
	}
	put = put.WithContext(ctx)
	put.Body, put.ContentLength = body, resp.ContentLength
	cw := httpx.NewRecorder(512, true) // the status and the start of the reason
	s.servePut(&respWriter{ResponseWriter: cw}, put, p)
	if cw.Code == http.StatusCreated || cw.Code == http.StatusNoContent {
		return nil
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if body.err != nil {
		return body.err
	}
	return fmt.Errorf("storing: %s", reasonOf(cw))
}

// pullBody is the source's body as servePut reads it: it counts progress,
// computes the adler32, and at the end checks it against the source's
// (from the GET's Digest, else a HEAD with Want-Digest). A mismatch ends
// the body with an error, so servePut removes its temp file.
type pullBody struct {
	ctx  context.Context
	s    *Server
	r    io.Reader
	h    hash.Hash
	pr   *tpcProgress
	want string                 // the source's adler32, "" when not said yet
	head func() (string, error) // asks the source for it
	err  error                  // why the body failed, for the failure line
}

func (b *pullBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.h.Write(p[:n])
	b.pr.add(n)
	if err == io.EOF {
		b.pr.arm(false) // the rest is local disk work
		if cerr := b.check(); cerr != nil {
			b.err = cerr
			return n, cerr
		}
	} else if err != nil {
		b.err = remoteErr("source", err)
		return n, b.err
	}
	return n, err
}

// check compares the adler32 of what was read with the source's.
func (b *pullBody) check() error {
	if b.want == "" {
		v, err := b.head()
		if err != nil {
			return err
		}
		if v == "" {
			// The source keeps no adler32: nothing to compare with. The
			// client (gfal2 -K) checks both ends itself.
			b.s.log.DebugContext(b.ctx, "tpc source gives no adler32")
			return nil
		}
		b.want = v
	}
	if got := httpx.SumString(b.h); got != b.want {
		return fmt.Errorf("%w: source %s, received %s", errTPCChecksum, b.want, got)
	}
	return nil
}

// Close is a no-op: the source's body is closed by pull.
func (b *pullBody) Close() error { return nil }

// remoteAdler32 asks u for its adler32 with HEAD and Want-Digest. It
// returns "" when the remote gives none, and an error when the HEAD
// fails.
func (s *Server) remoteAdler32(ctx context.Context, u *url.URL, fwd http.Header) (string, error) {
	v, _, err := s.remoteHead(ctx, u, fwd)
	return v, err
}

// remoteHead HEADs u with Want-Digest: adler32 and returns the adler32
// ("" when not given) and the Content-Length (-1 when not given).
func (s *Server) remoteHead(ctx context.Context, u *url.URL, fwd http.Header) (string, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), nil)
	if err != nil {
		return "", -1, err
	}
	req.Header = fwd.Clone()
	req.Header.Set("Want-Digest", httpx.Adler32)
	resp, err := s.tpc.c.Do(req)
	if err != nil {
		return "", -1, remoteErr("checksum request", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", -1, fmt.Errorf("checksum request answered %s", resp.Status)
	}
	return httpx.ParseDigest(strings.Join(resp.Header["Digest"], ","))[httpx.Adler32], resp.ContentLength, nil
}

// servePush checks the local source p, then pushes it to remote.
func (s *Server) servePush(w *respWriter, r *http.Request, p string, remote *url.URL, fwd http.Header) {
	// RFC 9110 §13.2 as for COPY: If-Match and friends are about the
	// source, held under its path lock for the copy (precond.go).
	release, ok := s.guardPreconditions(w, r, p)
	if !ok {
		return
	}
	defer release()
	name := rel(p)
	// O_NONBLOCK: a FIFO swapped in must not hang us.
	f, err := s.openRel(name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
		return
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
		return
	}
	if !isReg(&st) {
		httpError(w, http.StatusForbidden, "not a regular file: only files are pushed")
		return
	}
	s.runTPC(w, r, func(ctx context.Context, pr *tpcProgress) error {
		return s.push(ctx, f, &st, remote, fwd, r.Header.Get("Overwrite") == "F", pr)
	})
}

// push PUTs the open file f (stat st) to remote and checks the copy's
// size and adler32 there. The local adler32 is the kept one, else the one
// computed while sending (no second read); a kept one the bytes sent do
// not match fails the copy, as does a file changed while it was sent. On a
// mismatch the remote copy is deleted (best effort): it is known bad.
func (s *Server) push(ctx context.Context, f *os.File, st *unix.Stat_t, remote *url.URL, fwd http.Header, noOverwrite bool, pr *tpcProgress) error {
	kept, _ := s.cachedSum(httpx.Adler32, st)
	var h hash.Hash
	newBody := func() (io.ReadCloser, error) {
		h = httpx.NewHash(httpx.Adler32)
		pr.bytes.Store(0)
		return &pushBody{r: io.NewSectionReader(f, 0, st.Size), h: h, pr: pr}, nil
	}
	body, _ := newBody()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, remote.String(), body)
	if err != nil {
		return err
	}
	req.Header = fwd.Clone()
	if noOverwrite {
		req.Header.Set("If-None-Match", "*")
	}
	// A redirected PUT (307, 308) is sent again from the start.
	req.ContentLength, req.GetBody = st.Size, newBody
	// The go-ahead before the body: a door that redirects or refuses
	// does not get it first (the transport waits 1 s for it).
	req.Header.Set("Expect", "100-continue")
	pr.arm(true)
	resp, err := s.tpc.c.Do(req)
	pr.arm(false)
	if err != nil {
		return remoteErr("destination", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("destination answered %s", resp.Status)
	}
	var after unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &after); err != nil || !keptsum.SameVersion(st, &after) {
		return errTPCChanged
	}
	sent := httpx.SumString(h)
	if kept != "" && kept != sent {
		return fmt.Errorf("%w: the file read %s, its kept sum is %s", errTPCChecksum, sent, kept)
	}
	sum, size, err := s.remoteHead(ctx, resp.Request.URL, fwd)
	if err != nil {
		return err
	}
	switch {
	case size >= 0 && size != st.Size:
		err = fmt.Errorf("destination holds %d bytes, sent %d", size, st.Size)
	case sum != "" && sum != sent:
		err = fmt.Errorf("%w: destination %s, sent %s", errTPCChecksum, sum, sent)
	}
	if err != nil {
		s.deleteRemote(ctx, resp.Request.URL, fwd)
	}
	return err
}

// deleteRemote removes a copy known bad, best effort.
func (s *Server) deleteRemote(ctx context.Context, u *url.URL, fwd http.Header) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u.String(), nil)
	if err != nil {
		return
	}
	req.Header = fwd.Clone()
	resp, err := s.tpc.c.Do(req)
	if err != nil {
		s.log.WarnContext(ctx, "could not delete a bad third-party copy", "err", err)
		return
	}
	resp.Body.Close()
}

// pushBody is the local file as the PUT sends it.
type pushBody struct {
	r  io.Reader
	h  hash.Hash
	pr *tpcProgress
}

func (b *pushBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.h.Write(p[:n])
	b.pr.add(n)
	if err == io.EOF {
		// Sent: the remote's fsync and answer are bounded by the
		// transport's response-header timeout, not the idle clock.
		b.pr.arm(false)
	}
	return n, err
}

func (b *pushBody) Close() error { return nil }

// runTPC answers 202, runs the transfer in a goroutine it waits for,
// writes the performance markers meanwhile and the outcome at the end.
// It alone writes to w. The transfer is cancelled when the client goes
// away, when a marker cannot be written, or when it stalls.
func (s *Server) runTPC(w *respWriter, r *http.Request, transfer func(context.Context, *tpcProgress) error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	rc := http.NewResponseController(w)
	h := w.Header()
	h["Content-Type"] = []string{"text/plain"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusAccepted)
	var pr tpcProgress
	pr.arm(false)
	writeMarker := func(now time.Time) {
		if err := writeTPC(w, rc, perfMarker(now, pr.bytes.Load())); err != nil {
			cancel(err)
		}
	}
	writeMarker(time.Now())

	done := make(chan error, 1)
	go func() { done <- transfer(ctx, &pr) }()
	markers := time.NewTicker(s.tpc.marker)
	defer markers.Stop()
	watch := time.NewTicker(max(s.tpc.idle/4, 10*time.Millisecond))
	defer watch.Stop()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case now := <-markers.C:
			writeMarker(now)
		case now := <-watch.C:
			if limit, stalled := pr.stalled(now, s.tpc.idle); stalled {
				cancel(fmt.Errorf("%w for %v", errTPCIdle, limit))
			}
		}
	}
	if r.Context().Err() != nil {
		s.log.InfoContext(r.Context(), "tpc cancelled: the client went away", "path", r.URL.Path,
			"bytes", pr.bytes.Load())
		return
	}
	if err == nil {
		_ = writeTPC(w, rc, []byte("success: Created\n"))
		return
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	s.log.InfoContext(r.Context(), "tpc failed", "path", r.URL.Path, "bytes", pr.bytes.Load(), "err", err)
	_ = writeTPC(w, rc, []byte("failure: "+tpcReason(err)+"\n"))
}

// writeTPC writes one piece of the 202 body and flushes it.
func writeTPC(w io.Writer, rc *http.ResponseController, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

// perfMarker formats one performance marker: the block gfal2 and davix
// parse (one stripe: one stream).
func perfMarker(now time.Time, n int64) []byte {
	b := make([]byte, 0, 128)
	b = append(b, "Perf Marker\n\tTimestamp: "...)
	b = strconv.AppendInt(b, now.Unix(), 10)
	b = append(b, "\n\tStripe Index: 0\n\tStripe Bytes Transferred: "...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, "\n\tTotal Stripe Count: 1\nEnd\n"...)
	return b
}

// tpcReason turns a transfer error into the one-line reason of the
// failure line, without the package prefixes.
func tpcReason(err error) string {
	msg := strings.ReplaceAll(trimErr(err), "storage: tpc: ", "")
	if msg == "" {
		msg = "transfer failed"
	}
	return msg
}

// remoteErr describes a failed remote request without its URL (whose
// query may hold a token): the underlying cause only.
func remoteErr(what string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, errTPCRedirect) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// reasonOf is the status and the one-line reason servePut recorded.
func reasonOf(c *httpx.Recorder) string {
	line, _, _ := strings.Cut(strings.TrimSpace(c.Body.String()), "\n")
	if line == "" {
		line = http.StatusText(c.Code)
	}
	return strconv.Itoa(c.Code) + " " + line
}
