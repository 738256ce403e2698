// Package xroot is the root:// endpoint kind: a directory tree on an XRootD
// server (xrootd, dCache, EOS, DPM, StoRM), reached with go-hep's XRootD
// client. It is how lakefed federates the grid storage CMS AAA and most of
// WLCG are built on, beside HTTP, S3 and local endpoints.
//
//	ep, err := xroot.New(ctx, endpoint.Config{Name: "t2", URL: "root://xrd.example.org:1094//store"}, nil)
//	info, err := ep.Stat(ctx, "/data/f.root")        // kXR_stat on /store/data/f.root
//	rc, err := ep.Open(ctx, "/data/f.root", 0, -1)   // pipelined kXR_read, own connection
//	sum, err := ep.Checksum(ctx, "/data/f.root", "adler32") // kXR_query checksum
//	bufs, err := ep.ReadV(ctx, "/data/f.root", []xroot.Range{{0, 100}, {4096, 100}})
//
// HTTP clients cannot follow a redirect to root://, so the federator
// proxies this kind by default; when the server also has an HTTP door
// (XrdHttp) and the config gives it as http_url, RedirectURL sends clients
// there.
//
// Every path is stripped of CGI ("?..."), cleaned and refused if it tries
// to climb out ("..") before anything is sent. One go-hep client (one
// multiplexed TCP connection, plus kXR_bind data connections for writes)
// serves all calls of an endpoint but three; it is re-dialled when it
// breaks. Open streams on a connection of its own, speaking kXR_read by
// hand (direct.go: go-hep's reads copy every byte twice), and so does
// Checksum (cksum.go); Stat takes a connection from a pool of idle ones
// (pool.go: xrootd answers one connection's requests one at a time, and
// a federator's look-ups come from many clients at once), and so does
// StatList, a kXR_dirlist with kXR_dstat that stands for a kXR_stat of
// each file in a directory (list.go). Every
// call is bounded by the endpoint's Timeout, so a dead or silent server
// gives ErrUnavailable, never a hang (conn.go explains how go-hep is kept
// from hanging or panicking).
package xroot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go-hep.org/x/hep/xrootd/xrdfs"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// ChunkSize is the length of one kXR_write request, and of one kXR_read
// when reads go through go-hep (servers that need authentication or
// redirect; direct.go has the usual read path). Those reads keep
// ReadAhead of them in flight, so a stream is not bound by the round trip.
// Together they bound the memory one such reader holds (16 MiB).
const (
	ChunkSize = 8 << 20
	ReadAhead = 2
)

// checksumTimeoutFactor stretches Timeout for kXR_query checksum: the server
// may have to read the whole file to answer (a 6 GiB file takes a while).
const checksumTimeoutFactor = 30

// Endpoint is a root:// endpoint. It is safe for concurrent use. Close
// releases its connections; an Endpoint that is never closed holds its
// session's TCP connection and up to poolIdle idle ones for Stat.
type Endpoint struct {
	name    string
	addr    string   // host:port
	user    string   // login name sent to the server
	base    string   // clean absolute path on the server; "/" for the whole namespace
	httpURL *url.URL // XrdHttp door, or nil
	timeout time.Duration
	log     *slog.Logger

	wg sync.WaitGroup // relay goroutines and watchdogs; Close waits for them

	mu      sync.Mutex // guards cur, dialing and closed
	cur     *session   // live session, or nil
	dialing *dialCall  // dial in progress, or nil
	closed  bool

	pool      *pool       // plain connections for kXR_stat (pool.go)
	noDirect  atomic.Bool // the server made a direct read or stat fall back (direct.go, pool.go); use go-hep from now on
	notListed atomic.Bool // the server is a load balancer: StatList refuses (list.go)
	readChunk int64       // kXR_read length on the direct path: directChunk (tests make it small)
}

// dialCall is one dial that concurrent callers share.
type dialCall struct {
	done chan struct{}
	s    *session
	err  error
}

var (
	_ endpoint.Endpoint     = (*Endpoint)(nil)
	_ endpoint.Checksummer  = (*Endpoint)(nil)
	_ endpoint.Redirecter   = (*Endpoint)(nil)
	_ endpoint.RedirectGate = (*Endpoint)(nil)
	_ endpoint.StatLister   = (*Endpoint)(nil)
	_ io.Closer             = (*Endpoint)(nil)

	_ endpoint.ValidatorReporter = (*Endpoint)(nil)
)

// New makes a root:// endpoint from cfg. cfg.URL is
// root://[user@]host[:port]//base/path (xroot:// is the same); the base
// path defaults to "/". cfg.HTTPURL, when set, is the http(s) URL of the
// same server's HTTP door at the namespace root ("https://host:8443/"):
// redirect URLs are that plus base plus path. New does not connect: the
// first call (or Probe) does, so a server that is down at start-up does
// not stop the federator from starting.
func New(ctx context.Context, cfg endpoint.Config, log *slog.Logger) (*Endpoint, error) {
	_ = ctx // nothing to do at construction; kept for the constructor signature
	if cfg.Name == "" {
		return nil, errors.New("xroot: endpoint name is empty")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("xroot: endpoint %s: bad url: %w", cfg.Name, err)
	}
	sc, _ := endpoint.LookupScheme(u.Scheme)
	switch {
	case sc.Kind == endpoint.KindXRoot:
	case u.Scheme == "roots" || u.Scheme == "xroots":
		return nil, fmt.Errorf("xroot: endpoint %s: %s:// (TLS) is not supported by the go-hep client", cfg.Name, u.Scheme)
	default:
		return nil, fmt.Errorf("xroot: endpoint %s: url scheme %q is not root://", cfg.Name, u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return nil, fmt.Errorf("xroot: endpoint %s: url %q has no host", cfg.Name, cfg.URL)
	}
	if port == "" {
		port = strconv.Itoa(sc.DefaultPort)
	}
	base, err := httpx.CleanPath(u.Path) // "//store/x" -> "/store/x"; CGI was left in u.RawQuery
	if err != nil {
		return nil, fmt.Errorf("xroot: endpoint %s: base path: %w", cfg.Name, err)
	}
	user := "lakefed"
	if u.User != nil && u.User.Username() != "" {
		user = u.User.Username()
	}
	e := &Endpoint{
		name:    cfg.Name,
		addr:    net.JoinHostPort(host, port),
		user:    user,
		base:    base,
		timeout: cfg.TimeoutOrDefault(),

		readChunk: directChunk,
	}
	if cfg.HTTPURL != "" {
		hu, err := url.Parse(cfg.HTTPURL)
		if err != nil || (hu.Scheme != "http" && hu.Scheme != "https") || hu.Host == "" {
			return nil, fmt.Errorf("xroot: endpoint %s: http_url %q is not an http(s) URL", cfg.Name, cfg.HTTPURL)
		}
		hu.RawQuery, hu.Fragment = "", ""
		e.httpURL = hu
	}
	if log == nil {
		log = slog.Default()
	}
	e.log = log.With("component", "endpoint", "endpoint", cfg.Name, "kind", "xroot")
	e.pool = newPool(e.addr, e.user, e.timeout)
	return e, nil
}

// Name returns the endpoint's name from the config.
func (e *Endpoint) Name() string { return e.name }

// Close drops the connection and waits for the goroutines that serve it.
// Calls made after Close fail with ErrUnavailable.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	e.closed = true
	s := e.cur
	e.cur = nil
	e.mu.Unlock()
	if s != nil {
		s.kill()
	}
	e.pool.close()
	e.wg.Wait()
	return nil
}

// isClosed reports whether Close has been called.
func (e *Endpoint) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// remote turns an endpoint path into the server path: CGI stripped, cleaned
// (".." refused, never sent), joined to the base.
func (e *Endpoint) remote(p string) (string, error) {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	c, err := httpx.CleanPath(p)
	if err != nil {
		return "", fmt.Errorf("%w: %w", endpoint.ErrRefused, err)
	}
	return httpx.Join(e.base, c), nil
}

// session returns the live session, dialling one if there is none.
// Concurrent callers share one dial.
func (e *Endpoint) session(ctx context.Context) (*session, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: endpoint closed", endpoint.ErrUnavailable)
	}
	if e.cur != nil && e.cur.alive() {
		s := e.cur
		e.mu.Unlock()
		return s, nil
	}
	e.cur = nil
	dc := e.dialing
	if dc == nil {
		dc = &dialCall{done: make(chan struct{})}
		e.dialing = dc
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			s, err := dial(e.addr, e.user, e.timeout, &e.wg)
			e.mu.Lock()
			dc.s, dc.err = s, err
			e.dialing = nil
			if err == nil {
				if e.closed {
					s.kill()
				} else {
					e.cur = s
				}
			}
			e.mu.Unlock()
			close(dc.done)
			if err == nil {
				e.log.Debug("xroot session up", "addr", e.addr)
			}
		}()
	}
	e.mu.Unlock()
	select {
	case <-dc.done:
		if dc.err != nil {
			return nil, fmt.Errorf("%w: connect %s: %w", endpoint.ErrUnavailable, e.addr, dc.err)
		}
		return dc.s, nil
	case <-ctx.Done():
		return nil, ctxErr(ctx)
	}
}

// drop kills s and forgets it, so the next call dials again.
func (e *Endpoint) drop(s *session, why string) {
	if !s.alive() {
		return
	}
	s.kill()
	e.mu.Lock()
	if e.cur == s {
		e.cur = nil
	}
	e.mu.Unlock()
	e.log.Warn("xroot session dropped", "addr", e.addr, "reason", why)
}

// do runs f on the live session, with the session's context, and waits at
// most d for it (see conn.go): a server error comes back as is; no answer
// within d kills the session. It holds no locks while it waits.
func (e *Endpoint) do(ctx context.Context, d time.Duration, f func(s *session) error) error {
	_, err := e.doSession(ctx, d, f)
	return err
}

// doSession is do that also returns the session the call ran on, for
// callers that go on using it (Put's open, then its writes).
func (e *Endpoint) doSession(ctx context.Context, d time.Duration, f func(s *session) error) (*session, error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxErr(ctx)
	}
	s, err := e.session(ctx)
	if err != nil {
		return nil, err
	}
	err = e.await(ctx, s, d, func() error { return f(s) })
	var ab abandoned
	if err != nil && ctx.Err() == nil && !s.alive() && !errors.As(err, &ab) {
		// The session died under the call, killed by another call's
		// failure or a broken connection, not by this caller, and the
		// call has returned (an abandoned one may still be running, and
		// f writes its caller's variables): try once more on a fresh
		// session. The calls made through do are single requests
		// (stat, dirlist, mkdir -p, rm, rmdir, Put's open of a new
		// temporary file); a retried rm whose first try did land
		// reports ErrNotFound.
		s2, err2 := e.session(ctx)
		if err2 != nil {
			return s, err
		}
		s = s2
		err = e.await(ctx, s, d, func() error { return f(s) })
	}
	return s, err
}

// await runs f (a call on s, made with s.sctx) and waits for it, the
// timer d or ctx, whichever comes first.
func (e *Endpoint) await(ctx context.Context, s *session, d time.Duration, f func() error) error {
	return e.wait(ctx, s, d, start(f))
}

// errLost is wait's answer when the session died before the call
// returned.
var errLost = fmt.Errorf("%w: connection lost", endpoint.ErrUnavailable)

// abandoned marks wait's answer when it stopped waiting for a call that
// may still be running (session lost, no answer in time).
type abandoned struct{ error }

func (a abandoned) Unwrap() error { return a.error }

// start runs f in a goroutine and returns where its error will arrive.
// f must be a call on a session made with the session's context: it ends
// when the server answers or the session is killed.
func start(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return done
}

// wait waits for done (a call on s), the timer d or ctx, whichever comes
// first. No answer within d kills s. When ctx ends first the call goes on
// and a watchdog makes sure it ends within d.
func (e *Endpoint) wait(ctx context.Context, s *session, d time.Duration, done <-chan error) error {
	t := time.NewTimer(d)
	select {
	case err := <-done:
		t.Stop()
		e.check(s, err)
		return err
	case <-t.C:
		e.drop(s, "no answer within timeout")
		return abandoned{fmt.Errorf("%w: no answer within %v", endpoint.ErrUnavailable, d)}
	case <-s.dead:
		t.Stop()
		// The session's context is cancelled, so the call ends at once;
		// take its own answer when it comes, so that callers know it has
		// returned (and may retry on a fresh session).
		select {
		case err := <-done:
			return err
		case <-time.After(time.Second):
			return abandoned{errLost}
		}
	case <-ctx.Done():
		e.watch(s, t, done)
		return ctxErr(ctx)
	}
}

// watch waits in the background for done, dropping s if the timer t fires
// first. It owns t.
func (e *Endpoint) watch(s *session, t *time.Timer, done <-chan error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		t.Stop()
		return
	}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		select {
		case err := <-done:
			t.Stop()
			e.check(s, err)
		case <-t.C:
			e.drop(s, "no answer within timeout")
		case <-s.dead:
			t.Stop()
		}
	}()
}

// check drops s when err says the session, not the server, failed.
func (e *Endpoint) check(s *session, err error) {
	if err == nil || isOurs(err) {
		return
	}
	if _, broken := classOf(err); broken {
		e.drop(s, err.Error())
	}
}

// info converts a stat answer for endpoint path p.
func info(p string, st xrdfs.EntryStat) endpoint.Info {
	name := path.Base(p)
	if p == "/" {
		name = "/"
	}
	return endpoint.Info{
		Name:    name,
		Size:    st.EntrySize,
		ModTime: time.Unix(st.Mtime, 0).UTC(),
		IsDir:   st.Flags&xrdfs.StatIsDir != 0,
	}
}

// Stat describes p (kXR_stat). A missing path wraps ErrNotFound. Checksums
// are not filled: ask Checksum, which costs the server a read when it has
// none stored.
func (e *Endpoint) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	rp, err := e.remote(p)
	if err != nil {
		return endpoint.Info{}, wrapErr("stat", p, err)
	}
	st, err := e.stat(ctx, rp)
	if err != nil {
		return endpoint.Info{}, wrapErr("stat", p, err)
	}
	c, _ := httpx.CleanPath(strings.SplitN(p, "?", 2)[0])
	return info(c, st), nil
}

// stat is kXR_stat of the server path rp: on a pooled connection of its
// own (pool.go), or through the go-hep session for servers that need it.
func (e *Endpoint) stat(ctx context.Context, rp string) (xrdfs.EntryStat, error) {
	if !e.noDirect.Load() {
		st, err := e.statPooled(ctx, rp)
		switch {
		case errors.Is(err, errFallback):
			e.noDirect.Store(true)
			e.log.Debug("xroot direct requests off: server needs authentication or redirects", "addr", e.addr)
		case !errors.Is(err, errTryGoHEP):
			return st, err
		}
	}
	var st xrdfs.EntryStat
	err := e.do(ctx, e.timeout, func(s *session) error {
		var err error
		st, err = s.cli.FS().Stat(s.sctx, rp)
		return err
	})
	return st, err
}

// List returns the entries in dir (kXR_dirlist with kXR_dstat, so one round
// trip gives names and stat info). A missing dir wraps ErrNotFound, a file
// ErrRefused.
func (e *Endpoint) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	rp, err := e.remote(dir)
	if err != nil {
		return nil, wrapErr("list", dir, err)
	}
	var ents []xrdfs.EntryStat
	err = e.do(ctx, e.timeout, func(s *session) error {
		var err error
		ents, err = s.cli.FS().Dirlist(s.sctx, rp)
		return err
	})
	if err != nil {
		if serverCode(err) == codeIOError || serverCode(err) == codeFSError {
			// xrootd answers ENOTDIR with an I/O error: tell a file
			// apart from a failing disk by asking.
			if st, serr := e.Stat(ctx, dir); serr == nil && !st.IsDir {
				return nil, opErr("list", dir, fmt.Errorf("%w: not a directory", endpoint.ErrRefused))
			}
		}
		return nil, wrapErr("list", dir, err)
	}
	out := make([]endpoint.Info, 0, len(ents))
	for _, st := range ents {
		n := st.EntryName
		if n == "" || n == "." || n == ".." {
			continue
		}
		in := info("/"+n, st)
		if !st.HasStatInfo {
			// Servers without kXR_dstat: one stat per entry.
			full, err := e.Stat(ctx, httpx.Join(mustClean(dir), "/"+n))
			if err != nil {
				return nil, err
			}
			in = full
		}
		out = append(out, in)
	}
	return out, nil
}

func mustClean(p string) string {
	c, err := httpx.CleanPath(strings.SplitN(p, "?", 2)[0])
	if err != nil {
		return "/"
	}
	return c
}

// Delete removes the file or empty directory p (kXR_rm, or kXR_rmdir when
// p is a directory). A missing path wraps ErrNotFound; the endpoint root
// cannot be deleted (ErrRefused).
func (e *Endpoint) Delete(ctx context.Context, p string) error {
	rp, err := e.remote(p)
	if err != nil {
		return wrapErr("delete", p, err)
	}
	if rp == e.base {
		return opErr("delete", p, fmt.Errorf("%w: the endpoint root", endpoint.ErrRefused))
	}
	st, err := e.Stat(ctx, p)
	if err != nil {
		return err
	}
	err = e.do(ctx, e.timeout, func(s *session) error {
		if st.IsDir {
			return s.cli.FS().RemoveDir(s.sctx, rp)
		}
		return s.cli.FS().RemoveFile(s.sctx, rp)
	})
	if err != nil && st.IsDir && (serverCode(err) == codeFSError || serverCode(err) == codeIOError || serverCode(err) == codeItExists) {
		// xrootd 5.5 reports ENOTEMPTY as an FS error, 5.6 and later as
		// kXR_ItExists (XProtocol's mapError); a refusal, not an outage.
		if ents, lerr := e.List(ctx, p); lerr == nil && len(ents) > 0 {
			return opErr("delete", p, endpoint.ErrNotEmpty)
		}
	}
	return wrapErr("delete", p, err)
}

// Mkdir creates directory p and its missing parents (kXR_mkdir with
// kXR_mkdirpath). An existing directory is not an error; an existing file
// wraps ErrExist.
func (e *Endpoint) Mkdir(ctx context.Context, p string) error {
	rp, err := e.remote(p)
	if err != nil {
		return wrapErr("mkdir", p, err)
	}
	err = e.do(ctx, e.timeout, func(s *session) error {
		return s.cli.FS().MkdirAll(s.sctx, rp, 0o755)
	})
	if err == nil {
		return nil
	}
	if c, _ := classOf(err); c != endpoint.ErrUnavailable || serverCode(err) != 0 {
		// Tell "a file is in the way" from other refusals.
		if st, serr := e.Stat(ctx, p); serr == nil {
			if st.IsDir {
				return nil
			}
			return opErr("mkdir", p, endpoint.ErrExist)
		}
	}
	return wrapErr("mkdir", p, err)
}

// Probe checks that the server answers a kXR_stat of the base path within
// Timeout. A missing base path counts as unavailable: the endpoint is
// misconfigured or its storage is not mounted.
func (e *Endpoint) Probe(ctx context.Context) error {
	_, err := e.stat(ctx, e.base)
	if err == nil {
		return nil
	}
	if isOurs(err) && errors.Is(err, endpoint.ErrUnavailable) {
		return opErr("probe", "", err)
	}
	return opErr("probe", "", fmt.Errorf("%w: stat %q: %w", endpoint.ErrUnavailable, e.base, err))
}

// Checksum asks the server for p's checksum (kXR_query kXR_Qcksum, on a
// connection of its own: see cksum.go for why). Only adler32 is asked for: it is the one the WLCG
// sites keep; others wrap ErrUnsupported, as does a server with no
// checksum configured (xrootd's "xrootd.chksum" directive). The server may
// read the whole file to answer, so its answer may take
// checksumTimeoutFactor times Timeout (connecting and login: Timeout).
func (e *Endpoint) Checksum(ctx context.Context, p, algo string) (string, error) {
	algo = strings.ToLower(algo)
	if algo != httpx.Adler32 {
		return "", opErr("checksum", p, fmt.Errorf("%s: %w", algo, endpoint.ErrUnsupported))
	}
	rp, err := e.remote(p)
	if err != nil {
		return "", wrapErr("checksum", p, err)
	}
	ans, err := queryChecksum(ctx, e.addr, e.user, rp, e.timeout, e.timeout*checksumTimeoutFactor)
	if err != nil {
		if ctx.Err() != nil {
			return "", wrapErr("checksum", p, ctxErr(ctx))
		}
		return "", wrapErr("checksum", p, err)
	}
	// The answer is "<algo> <value>", NUL-terminated.
	ans = strings.TrimRight(ans, "\x00\n ")
	name, val, ok := strings.Cut(ans, " ")
	if !ok || !strings.EqualFold(name, algo) {
		return "", opErr("checksum", p, fmt.Errorf("server answered %q: %w", ans, endpoint.ErrUnsupported))
	}
	sums := httpx.ParseDigest(algo + "=" + strings.TrimSpace(val))
	v, ok := sums[algo]
	if !ok {
		return "", opErr("checksum", p, fmt.Errorf("bad %s value %q: %w", algo, val, endpoint.ErrUnavailable))
	}
	return v, nil
}

// CanRedirect reports whether the endpoint has an HTTP door (http_url):
// HTTP clients cannot follow a redirect to root://, so without one the
// federator proxies.
func (e *Endpoint) CanRedirect() bool { return e.httpURL != nil }

// RedirectURL returns the URL of p on the server's HTTP door (http_url +
// base + p) for any op: XrdHttp serves GET, PUT and DELETE. Without
// http_url it wraps ErrUnsupported and the federator proxies.
func (e *Endpoint) RedirectURL(ctx context.Context, p string, op endpoint.Op) (*url.URL, error) {
	if e.httpURL == nil {
		return nil, opErr("redirect", p, fmt.Errorf("no http_url: %w", endpoint.ErrUnsupported))
	}
	rp, err := e.remote(p)
	if err != nil {
		return nil, wrapErr("redirect", p, err)
	}
	u := *e.httpURL
	u.Path = httpx.Join(mustClean(u.Path), rp)
	u.RawPath = ""
	return &u, nil
}

// tempName returns a hidden name beside rp for an upload in progress.
func tempName(rp string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	dir, name := path.Split(rp)
	return dir + "." + name + ".lakefed-" + hex.EncodeToString(b[:])
}

// Validators are weak: kXR_stat gives the size and the modification
// second, which a file replaced with its time kept shares.
func (e *Endpoint) Validators() endpoint.Validators { return endpoint.ValidatorsWeak }
