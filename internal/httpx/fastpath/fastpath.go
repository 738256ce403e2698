// Package fastpath is a minimal HTTP/1.1 loop in front of net/http for
// plain (non-TLS) listeners, for the roles whose hot path is many small
// GETs and HEADs on keep-alive connections: the storage role (a
// federator's Stat fan-out) and the federator (warm redirects).
//
// Why: a HEAD through net/http costs about 9 µs of CPU, most of it outside
// the handler (request parsing into maps, header sorting and formatting, a
// goroutine and buffers per connection, deadline updates); profiles of
// the storage role under `ab -k -c16` HEAD load showed the handler at 17 %
// of the CPU and net/http's own request path at about 45 %. nginx answers
// the same HEAD for a third of that. So the common case gets its own code
// path, and everything else keeps net/http's well-tested behaviour.
//
// How: every accepted connection starts here. A request is offered to the
// Responder only when it is the plain case, checked strictly (parse.go):
// GET or HEAD, HTTP/1.1 or 1.0, an origin-form target of unreserved
// characters (no %-escapes; a query only when Options.Query lets the
// Responder see it), CRLF line endings, only headers
// from a short list that cannot change an answer (Host, User-Agent,
// Accept, Connection, X-Request-ID, ...), no body, and a head that fits
// the buffer and the http.Server's MaxHeaderBytes. Anything else, and
// every request the Responder declines, hands the connection, with every
// byte read so far, to the http.Server, which then owns it to the end.
// Hand-off is always correct: net/http sees exactly the bytes the client
// sent. So this package decides only "plain or not", and every error
// answer, limit (431, 413, 400) and other method stays with the tested
// handler.
//
// A Responder answers with Answer's calls (a status, headers, then End,
// Body or File), or, for an answer made by a handler's own code (the
// federator's proxied reads, through httpx.ServeContent), through
// Answer.Writer, an http.ResponseWriter over the connection whose body
// may also be moved by splice(2) (Writer.Splice).
//
// What the loop does for every answer, as net/http does it: the Date
// header; the request ID (X-Request-Id: the client's when sane, else a
// fresh one, chosen by httpx.AppendRequestID as httpx.TagRequest
// chooses); Connection and persistence by the request's version; the
// Content-Length that frames the body; pipelined answers in order; the
// idle timeout, the header read timeout (a client that trickles its head
// is cut when the http.Server's ReadHeaderTimeout has passed since its
// first byte); graceful shutdown. In place of the http.Server's
// WriteTimeout, which would bound a whole answer, the stall timeout
// (Options.StallTimeout, httpx.SendConn) bounds each step of one, on the
// connections it hands to net/http too.
//
// What it does not do: the http.Server's Handler never runs for a request
// the Responder answers. A Responder may therefore answer only what the
// handler chain would answer the same way, byte for byte but for Date:
// on a listener whose chain decides anything per request — authentication,
// path rules, an operator gate, a rate limit — the fast path must not be
// used (or its Responder must decline every such request), and whatever
// the chain does for every request (metrics, the access log) the
// Responder does too. TLS listeners stay on net/http: a handed-off
// *tls.Conn would no longer look like one to it (ALPN, r.TLS).
package fastpath

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
)

// DefaultBufferSize is Options.BufferSize when it is zero: the read and
// write buffer of a connection. A request head larger than the buffer is
// handed off; client heads of the plain case are a few hundred bytes.
const DefaultBufferSize = 4 << 10

// DefaultShutdownTimeout is Options.ShutdownTimeout when it is zero.
const DefaultShutdownTimeout = 10 * time.Second

// Options tune a Server. The zero value is the defaults.
type Options struct {
	// BufferSize is the read and the write buffer of each connection.
	// Zero: DefaultBufferSize.
	BufferSize int
	// ShutdownTimeout is how long Serve's graceful shutdown lets
	// requests in flight finish before it cuts their connections. Zero:
	// DefaultShutdownTimeout. Server.Shutdown takes a context instead.
	ShutdownTimeout time.Duration
	// Log receives the panics of a Responder. Nil: slog.Default().
	Log *slog.Logger
	// StallTimeout is how long each step of sending an answer may take
	// (httpx.SendConn) before the connection is reset, here and on the
	// connections handed to the http.Server. Zero:
	// httpx.DefaultStallTimeout; negative: none.
	StallTimeout time.Duration
	// Query offers the Responder plain requests with a query
	// (Request.Query), for a Responder that reads it, with the
	// handler's own function, and declines every query it does not
	// answer as the handler would. False: a request with a query goes
	// to the http.Server.
	Query bool
}

// Responder answers the plain requests of a Server.
type Responder interface {
	// Respond answers req through a (or a.Writer) and returns true, or
	// returns false having ended nothing (a.End, a.Body or a.File not
	// called, nothing written through a.Writer), and the request, with
	// the rest of the connection, goes to the http.Server. It is called from the connection's goroutine, one
	// request at a time per connection; req and a are valid only during
	// the call.
	Respond(a *Answer, req *Request) bool
}

// Server runs the fast path and an http.Server behind it on one
// listener. Its methods are safe for concurrent use.
type Server struct {
	srv  *http.Server
	resp Responder
	opts Options
	log  *slog.Logger
	hl   *handoffListener // the connections srv serves

	// From srv, as net/http applies them (zero: no limit).
	idleTimeout   time.Duration
	headerTimeout time.Duration
	maxHead       int

	stallTimeout time.Duration // Options.StallTimeout, resolved

	// Buffers of connections: an idle keep-alive connection holds its
	// pair, a closed one gives both back, a handed-off one keeps its
	// reader (it holds the bytes net/http has still to read).
	readers sync.Pool
	writers sync.Pool

	date atomic.Pointer[cachedDate]

	shutting atomic.Bool
	wg       sync.WaitGroup // one per connection goroutine

	mu      sync.Mutex // guards conns, ln, hl, srvDone
	conns   map[*conn]struct{}
	ln      net.Listener
	srvDone chan error // srv.Serve's result; nil until Serve started it

	shutdownOnce sync.Once
	shutdownErr  error
}

// New returns a Server that answers plain requests with r and hands the
// others to srv. srv's Handler, limits and timeouts apply to what it is
// handed; its ReadHeaderTimeout, IdleTimeout (each falling back on
// ReadTimeout, as in net/http) and MaxHeaderBytes apply to the fast path
// too; its WriteTimeout is not applied here (opts.StallTimeout is).
func New(srv *http.Server, r Responder, opts Options) *Server {
	if opts.BufferSize <= 0 {
		opts.BufferSize = DefaultBufferSize
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	s := &Server{
		srv: srv, resp: r, opts: opts, log: log,
		idleTimeout:   cmpOr(srv.IdleTimeout, srv.ReadTimeout),
		headerTimeout: cmpOr(srv.ReadHeaderTimeout, srv.ReadTimeout),
		maxHead:       srv.MaxHeaderBytes,
		conns:         map[*conn]struct{}{},
	}
	if s.maxHead <= 0 {
		s.maxHead = http.DefaultMaxHeaderBytes
	}
	switch {
	case opts.StallTimeout == 0:
		s.stallTimeout = httpx.DefaultStallTimeout
	case opts.StallTimeout > 0:
		s.stallTimeout = opts.StallTimeout
	}
	size := opts.BufferSize
	s.readers.New = func() any { return bufio.NewReaderSize(nil, size) }
	s.writers.New = func() any { return bufio.NewWriterSize(nil, size) }
	return s
}

// cmpOr is a when it is positive, else b.
func cmpOr(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// Serve accepts connections on ln until Shutdown or a failure of ln, and
// closes ln. Like http.Server.Serve it returns http.ErrServerClosed after
// Shutdown, and any other error of ln as is; connections already
// accepted keep running until Shutdown. Call it once.
func (s *Server) Serve(ln net.Listener) error {
	defer ln.Close()
	s.mu.Lock()
	switch {
	case s.shutting.Load():
		s.mu.Unlock()
		return http.ErrServerClosed
	case s.ln != nil:
		s.mu.Unlock()
		return errors.New("fastpath: Serve called twice")
	}
	s.ln = ln
	s.hl = newHandoffListener(ln.Addr())
	s.srvDone = make(chan error, 1)
	hl, done := s.hl, s.srvDone
	s.mu.Unlock()
	go func() { done <- s.srv.Serve(hl) }()
	err := s.acceptLoop(ln)
	if s.shutting.Load() {
		return http.ErrServerClosed
	}
	return err
}

// acceptLoop accepts until ln fails (also when Shutdown closes it); it
// backs off on the transient errors net/http backs off on (out of
// descriptors, an aborted connection), 5 ms doubling up to 1 s.
func (s *Server) acceptLoop(ln net.Listener) error {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
				errors.Is(err, syscall.ECONNABORTED) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := &conn{s: s, c: nc}
		s.mu.Lock()
		if s.shutting.Load() {
			s.mu.Unlock()
			nc.Close()
			return net.ErrClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// Shutdown stops accepting, closes idle connections of both paths, lets
// the active ones finish their request (and hand off, if it comes to
// that) until ctx is done, then closes those left (a Responder call in
// progress is still waited for), and shuts the http.Server down with ctx
// (Close when that fails); it turns the http.Server's keep-alives off. It
// returns ctx's error when it had to cut connections. Later calls wait
// for the first and return its result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutting.Store(true)
	ln, hl, srvDone := s.ln, s.hl, s.srvDone
	for c := range s.conns {
		if c.state.Load() == stateIdle {
			// Wakes its read; it sees shutting and closes.
			c.c.SetReadDeadline(aLongTimeAgo)
		}
	}
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	// net/http's connections drain beside the fast path's: the idle ones
	// close now, the others after their answer. Its listener stays open
	// until the fast path's requests in flight are done, since one of
	// them may yet be handed off; srv.Shutdown would close it.
	s.srv.SetKeepAlivesEnabled(false)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.mu.Lock()
		for c := range s.conns {
			c.c.Close()
		}
		s.mu.Unlock()
		<-done
	}
	if serr := s.srv.Shutdown(ctx); serr != nil {
		s.srv.Close()
		if err == nil {
			err = serr
		}
	}
	if hl != nil {
		hl.Close() // in case srv.Serve had not taken it yet
	}
	if srvDone != nil {
		if serr := <-srvDone; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	}
	return err
}

// aLongTimeAgo is a read deadline that has passed: setting it wakes a
// blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// forget drops c from the tracked connections.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// Serve runs a Server for srv and r on ln until ctx is done, then shuts it
// down gracefully (requests in flight get opts.ShutdownTimeout) and
// returns nil. A failure of ln shuts it down too and is returned, as
// "serve: ...", and a shutdown that had to cut connections as
// "shutdown: ...". Serve closes ln.
func Serve(ctx context.Context, ln net.Listener, srv *http.Server, r Responder, opts Options) error {
	s := New(srv, r, opts)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	serr := s.Shutdown(sctx)
	if err == nil {
		err = <-errc
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("shutdown: %w", serr)
	}
	return nil
}

// httpDate returns t as an HTTP date (RFC 9110 §5.6.7), formatted once per
// second and shared by the connections.
func (s *Server) httpDate(t time.Time) []byte {
	sec := t.Unix()
	if d := s.date.Load(); d != nil && d.sec == sec {
		return d.b
	}
	d := &cachedDate{sec: sec, b: t.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)}
	s.date.Store(d)
	return d.b
}

// cachedDate is one formatted Date header value and its second; never
// changed once stored.
type cachedDate struct {
	sec int64
	b   []byte
}
