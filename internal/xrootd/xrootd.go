// Package xrootd is lakefed's root:// front door: it speaks the XRootD
// protocol (v5, XProtocol.hh) to xrdcp, xrdfs, the XRootD Python bindings,
// uproot through fsspec-xrootd and CMSSW-style jobs, and serves a
// Namespace (the federator's, or the cache's) to them.
//
//	door := xrootd.New(ns, xrootd.Options{Log: log, Registerer: reg})
//	ln, _ := net.Listen("tcp", "127.0.0.1:1094")
//	go door.Serve(ctx, ln) // returns nil once Close is called
//	defer door.Close()
//	st := door.Stats()     // opens, redirects, errors by class
//
// The door answers like a redirector: an open for read of a file with a
// root:// replica gets kXR_redirect to the best one the client has not
// tried (the tried= CGI); other files are served through Namespace.Open,
// whose replica failover is the namespace's. A handle opens one reader at
// its first read and moves it from range to range after that
// (endpoint.RangeSeeker); over plain TCP, kXR_read moves the bytes from
// the origin's socket to the client's with splice(2) when the reader can
// (endpoint.Splicer), so they never pass through the door's memory. A missing file is kXR_NotFound
// at once; a namespace that cannot answer (endpoint.ErrUnavailable) gets
// kXR_wait for up to Options.OutageWait (5 s), then kXR_ServerError, and
// never kXR_NotFound: the "not found that was an outage" and the
// ten-minute stall are the two failures of the CMS AAA redirectors this
// door must not have.
//
// The wire code is lakefed's own, written from XProtocol.hh with
// encoding/binary and xrdproto's public constants; nothing was copied from
// go-hep's server (go-hep.org/x/hep/xrootd, BSD-3), whose dispatch is a
// closed switch over the internal xrdenc package, has no readv, pgread,
// locate or query, does not strip CGI and lets "/../" escape its export.
// Requests served: kXR_protocol, login, auth (ztn and unix), ping, endsess,
// stat, statx, dirlist (with kXR_dstat), locate, open, read, readv, pgread,
// write, pgwrite, sync, close, query checksum, config (uproot and
// fsspec-xrootd ask for the readv limits), space and stats, and the
// namespace requests mkdir, rm, rmdir, mv, truncate and chmod, which the
// Namespace does when it has the power (namespace.go). Anything else gets
// kXR_Unsupported with the request's name.
//
// Security: with Options.TLS the door speaks roots://, XRootD 5's
// in-protocol TLS (kXR_protocol's kXR_wantTLS answered with
// kXR_gotoTLS, then a TLS handshake on the same connection), and with
// RequireTLS it refuses clients that stay in plain TCP. A bearer token
// comes with a request in the authz= CGI of its path (xrdcp
// 'roots://host//p?authz=Bearer%20<jwt>'), or once for the connection:
// over TLS with Authorize, the login answer offers ztn, whose XrdCl
// plugin sends the token it finds in BEARER_TOKEN (and the other WLCG
// discovery places) in kXR_auth, and unix, the anonymous fallback.
// A client certificate (or RFC 3820 proxy, with its VOMS attributes)
// presented in the roots:// handshake reaches Options.Authorize too
// (PeerCertificates), for requests that carry no token. Options.Authorize
// decides each request before the namespace is asked; a refusal is
// kXR_NotAuthorized, never kXR_NotFound.
//
// Uploads are buffered in a temporary file and stored by Namespace.Put on
// kXR_close, whose answer is the Put's: a failed or cut upload is never
// visible. The door announces itself as a manager supporting pgread and
// pgwrite (kXR_isManager|kXR_suppgrw), so xrdcp 5 uses pgread/pgwrite by
// default (XRD_CPUSEPGWRTRD=0 makes it use plain read/write, which the
// door serves too) and takes the door as the load balancer it returns
// to, with tried=, when a data server it was sent to fails.
//
// Bounds: a request's data is at most MaxWrite bytes for writes and 64 KiB
// for anything else (a larger dlen closes the connection before anything
// is allocated); each connection has at most MaxFiles open files and
// MaxInFlight requests at once, and an idle timeout; responses are sent
// in parts of at most 2 MiB, whatever the client asked for.
package xrootd

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// Namespace is what the door serves. Every method may be called
// concurrently. Paths are clean and absolute (httpx.CleanPath), without
// the client's CGI. The namespace requests need more, found by type
// assertion: Delete and Mkdir as an endpoint.Endpoint has them (rm,
// mkdir), endpoint.DirRemover (rmdir; else Delete), Renamer (mv),
// Truncater, Chmoder, SpaceReporter (query space) and Locator (locate);
// without one, the request is kXR_Unsupported.
type Namespace interface {
	// Stat describes path; a missing path wraps endpoint.ErrNotFound.
	Stat(ctx context.Context, path string) (endpoint.Info, error)
	// List returns the entries directly inside dir.
	List(ctx context.Context, dir string) ([]endpoint.Info, error)
	// Open reads n bytes of path from off (n < 0: to the end). Replica
	// failover is the namespace's job.
	Open(ctx context.Context, path string, off, n int64) (io.ReadCloser, error)
	// Put stores r (size bytes, or -1) as path; a failed Put leaves
	// nothing new visible.
	Put(ctx context.Context, path string, r io.Reader, size int64) error
	// Checksum returns path's checksum for algo ("adler32"...).
	Checksum(ctx context.Context, path, algo string) (string, error)
	// Replicas lists the URLs of path's replicas, best first (any
	// scheme). The door redirects an open for read to the first root://
	// (or roots://) one whose host is not in the client's tried= CGI;
	// with none, it serves the bytes itself through Open.
	Replicas(ctx context.Context, path string) ([]*url.URL, error)
}

// ReplicaStater is implemented by namespaces that can describe a path and
// list its replicas from one look-up (the federator's). An open for read
// then asks it once, not Stat and then Replicas: each of those finds the
// path's entry and ranks its replicas again.
type ReplicaStater interface {
	// StatReplicas is Stat of path and, for a file, Replicas of it,
	// from one look-up. A directory has no replicas.
	StatReplicas(ctx context.Context, path string) (endpoint.Info, []*url.URL, error)
}

// Options configure a Server. The zero value is usable.
type Options struct {
	// Log gets connection-level problems. Nil: slog.Default().
	Log *slog.Logger
	// Registerer receives the lakefed_xroot_* metrics. Nil: none exported.
	Registerer prometheus.Registerer
	// OutageWait bounds how long the door keeps a client waiting for one
	// request (the same request and path, on one connection) while the
	// namespace is unavailable (endpoint.ErrUnavailable): it answers
	// kXR_wait, of at most a fifth of the bound each (at least 1 s), until
	// this much time has passed since the first such answer, then
	// kXR_ServerError, never kXR_NotFound. The client stops waiting for
	// an outage that lasts, and one that ends meanwhile costs it little.
	// kXR_wait counts whole seconds, so a bound under 1 s means no wait:
	// kXR_ServerError at once. Zero means DefaultOutageWait.
	OutageWait time.Duration
	// Advertise is the host:port locate answers give for the door itself
	// (files it serves, directories). Empty: the connection's local address.
	Advertise string
	// TempDir holds uploads until close Puts them. Empty: os.TempDir().
	TempDir string
	// MaxWrite bounds the data of one write or pgwrite request, in bytes.
	// Zero means 16 MiB. A larger one closes the connection.
	MaxWrite int64
	// MaxFiles bounds the open files of one connection. Zero means 1024.
	MaxFiles int
	// MaxInFlight bounds the requests one connection has in progress at
	// once; the door stops reading the connection at the bound. Zero
	// means 16.
	MaxInFlight int
	// IdleTimeout closes a connection that sends no request for this
	// long. Zero means 10 minutes.
	IdleTimeout time.Duration
	// IOTimeout bounds reading one request's data and writing one
	// response part. Zero means 1 minute.
	IOTimeout time.Duration
	// RequestTimeout bounds each namespace call of a metadata request
	// (stat, dirlist, locate, open, query) and each close's Put. Zero
	// means 5 minutes.
	RequestTimeout time.Duration

	// TLS turns on roots://, XRootD's in-protocol TLS (protocol 5,
	// XProtocol.hh): the kXR_protocol answer says kXR_haveTLS, and a
	// client that asks for TLS (kXR_wantTLS: a roots:// URL) gets
	// kXR_gotoTLS and the TLS handshake on the same connection, before
	// its kXR_login. Nil: no TLS; a roots:// client is told the server
	// cannot encrypt and gives up. The config is used as it is, with its
	// client certificate settings; the door reads no identity from them.
	TLS *tls.Config
	// RequireTLS refuses clients that do not switch to TLS: the
	// kXR_protocol answer says kXR_tlsLogin, which makes XRootD 5
	// clients switch whatever their URL's scheme, and every request of
	// a connection still in plain TCP but kXR_protocol gets
	// kXR_TLSRequired. Only with TLS.
	RequireTLS bool
	// now is the clock of OutageWait; nil: time.Now. Tests set it.
	now func() time.Time

	// Authorize decides each request that names a path: whether the
	// bearer token the request's CGI carries in authz= ("Bearer%20<jwt>"
	// or the bare JWT, as XrdCl and gfal2 send it) may do act (one of
	// the Act constants) on the clean path p. A request without authz
	// acts with the connection's token, the last one granted anything
	// on it (xrdcp's checksum query carries no CGI), and without one
	// token is "": the caller is anonymous. An authz that is empty or
	// badly escaped is passed as a token no issuer signed. A non-nil
	// error refuses the request with kXR_NotAuthorized and the error's
	// text, before the namespace is asked anything, so a refusal never
	// tells whether the path exists. Requests on an open file handle
	// were decided at the open. A granted token goes with the request's
	// namespace calls (httpx.WithBearer), for endpoints that pass their
	// caller's token on. On a roots:// connection whose client presented
	// a certificate, ctx carries it (PeerCertificates): with no token,
	// that certificate is the caller. Nil: everything is allowed, and
	// tokens are neither read nor passed on.
	Authorize func(ctx context.Context, token, act, p string) error
}

// DefaultOutageWait is Options.OutageWait when it is zero: xrdcp and
// xrdfs give up on an outage after about this long.
const DefaultOutageWait = 5 * time.Second

// outageSteps is how many kXR_wait answers OutageWait is split into, at
// most: a client asks again that often during the outage.
const outageSteps = 5

// The actions Authorize is asked about; they are the names package auth
// gives them.
const (
	// ActRead is stat, locate, checksum query and open for read.
	ActRead = "read"
	// ActList is dirlist; stat and locate accept it in place of read.
	ActList = "list"
	// ActCreate is an upload of a path that does not exist.
	ActCreate = "create"
	// ActModify is an upload over a file that exists (kXR_delete,
	// xrdcp -f).
	ActModify = "modify"
)

func (o *Options) fill() {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.OutageWait == 0 {
		o.OutageWait = DefaultOutageWait
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.MaxWrite <= 0 {
		o.MaxWrite = 16 << 20
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = 1024
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 16
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.IOTimeout <= 0 {
		o.IOTimeout = time.Minute
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 5 * time.Minute
	}
}

// requestWorkers bounds the goroutines kept idle for requests (of all
// connections), requestWorkerIdle how long one is kept unused: as many
// as run at once in a busy moment, gone within seconds of it.
const (
	requestWorkers    = 256
	requestWorkerIdle = 30 * time.Second
)

// maxArgs bounds the data of any request but write and pgwrite: a path
// with its CGI (4 KiB paths), a statx list, a 1024-item readv list.
const maxArgs = 64 << 10

// Stats are the door's counters since New.
type Stats struct {
	// Connections is the number of connections open now.
	Connections int64 `json:"connections"`
	// Opens counts kXR_open requests answered with a file handle or a
	// redirect.
	Opens int64 `json:"opens"`
	// Redirects counts opens answered with kXR_redirect.
	Redirects int64 `json:"redirects"`
	// ReadBytes and WrittenBytes count file data sent and received.
	ReadBytes    int64 `json:"read_bytes"`
	WrittenBytes int64 `json:"written_bytes"`
	// SplicedBytes counts the part of ReadBytes moved from an origin's
	// socket to the client's with splice(2), never copied by the door.
	SplicedBytes int64 `json:"spliced_bytes"`
	// Errors counts error answers by class: "notfound", "unavailable"
	// (kXR_wait, or kXR_ServerError once the waits are used up),
	// "refused", "server" (any other failure), "protocol" (malformed or
	// unsupported requests).
	Errors map[string]int64 `json:"errors"`
}

// The error classes Stats and the metrics count.
const (
	classNotFound    = "notfound"
	classUnavailable = "unavailable"
	classRefused     = "refused"
	classServer      = "server"
	classProtocol    = "protocol"
)

var classes = []string{classNotFound, classUnavailable, classRefused, classServer, classProtocol}

// Server is a root:// door. Its methods may be called concurrently.
type Server struct {
	ns   Namespace
	opts Options
	log  *slog.Logger

	conns, opens, redirects, readBytes, writtenBytes, splicedBytes atomic.Int64
	errs                                                           map[string]*atomic.Int64 // fixed keys: classes
	ops                                                            opCounts                 // for kXR_query stats

	mOpens, mRedirects, mRead, mWritten, mSpliced prometheus.Counter
	mErrors                                       *prometheus.CounterVec

	bufs sync.Pool     // *readScratch: read, pgread and readv answers
	done chan struct{} // closed by Close
	// reqs runs the requests that go beside their connection's reader
	// loop, on goroutines kept between requests (endpoint.Workers): a
	// new goroutine per open grew its stack to the depth of a look-up.
	reqs *endpoint.Workers

	mu        sync.Mutex // guards the fields below
	closed    bool
	listeners map[net.Listener]struct{}
	active    map[net.Conn]struct{}
	wg        sync.WaitGroup // Serve loops and connections
}

// New returns a door serving ns. It listens nowhere until Serve.
func New(ns Namespace, opts Options) *Server {
	opts.fill()
	s := &Server{
		ns: ns, opts: opts,
		log:       opts.Log.With("component", "xrootd"),
		errs:      map[string]*atomic.Int64{},
		done:      make(chan struct{}),
		reqs:      endpoint.NewWorkers(requestWorkers, requestWorkerIdle),
		listeners: map[net.Listener]struct{}{},
		active:    map[net.Conn]struct{}{},
	}
	for _, c := range classes {
		s.errs[c] = new(atomic.Int64)
	}
	s.ops.start = time.Now()
	s.bufs.New = func() any { return newReadScratch() }
	s.mOpens = prometheus.NewCounter(prometheus.CounterOpts{Name: "lakefed_xroot_opens_total",
		Help: "root:// opens answered with a file handle or a redirect."})
	s.mRedirects = prometheus.NewCounter(prometheus.CounterOpts{Name: "lakefed_xroot_redirects_total",
		Help: "root:// opens answered with kXR_redirect to a replica."})
	s.mRead = prometheus.NewCounter(prometheus.CounterOpts{Name: "lakefed_xroot_read_bytes_total",
		Help: "File bytes sent by the root:// door."})
	s.mWritten = prometheus.NewCounter(prometheus.CounterOpts{Name: "lakefed_xroot_written_bytes_total",
		Help: "File bytes received by the root:// door."})
	s.mSpliced = prometheus.NewCounter(prometheus.CounterOpts{Name: "lakefed_xroot_spliced_bytes_total",
		Help: "File bytes the root:// door moved from an origin's socket to its client's with splice(2), without copying them (part of lakefed_xroot_read_bytes_total)."})
	s.mErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lakefed_xroot_errors_total",
		Help: "root:// error answers by class: notfound, unavailable, refused, server, protocol."}, []string{"class"})
	for _, c := range classes {
		s.mErrors.WithLabelValues(c)
	}
	if r := opts.Registerer; r != nil {
		for _, c := range []prometheus.Collector{s.mOpens, s.mRedirects, s.mRead, s.mWritten, s.mSpliced, s.mErrors} {
			if err := r.Register(c); err != nil {
				s.log.Warn("metric not registered", "err", err)
			}
		}
	}
	return s
}

// Stats returns the door's counters.
func (s *Server) Stats() Stats {
	st := Stats{
		Connections: s.conns.Load(), Opens: s.opens.Load(), Redirects: s.redirects.Load(),
		ReadBytes: s.readBytes.Load(), WrittenBytes: s.writtenBytes.Load(), SplicedBytes: s.splicedBytes.Load(),
		Errors: make(map[string]int64, len(classes)),
	}
	for _, c := range classes {
		st.Errors[c] = s.errs[c].Load()
	}
	return st
}

func (s *Server) countError(class string) {
	s.errs[class].Add(1)
	s.mErrors.WithLabelValues(class).Inc()
}

// ErrServerClosed is what Serve returns when called after Close.
var ErrServerClosed = errors.New("xrootd: server closed")

// Serve accepts connections on ln until Close or ctx ends, serving each
// in its own goroutine. It returns nil after Close (or ctx's end), else
// the listener's error. Serve may be called for several listeners.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			if closed || ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				delete(s.listeners, ln)
			}
			s.mu.Unlock()
			if closed || ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors, a connection aborted before
			// accept: wait a little and go on, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			case <-s.done:
			}
			continue
		}
		backoff = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.active[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.conns.Add(1)
			defer s.conns.Add(-1)
			s.serveConn(ctx, nc)
			nc.Close()
			s.mu.Lock()
			delete(s.active, nc)
			s.mu.Unlock()
		}()
	}
}

// Close closes the listeners and every connection (uploads not yet
// closed are dropped, not stored), and waits for Serve loops and
// connection goroutines to end.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.done)
	}
	s.closed = true
	var err error
	for ln := range s.listeners {
		if cerr := ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
			err = cerr
		}
	}
	for nc := range s.active {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.reqs.Close() // after the connections, which wait for their requests
	return err
}
