// Package storage is lakefed's storage role: one local directory served
// over HTTP and WebDAV the way grid clients (davix, gfal2, rclone, curl,
// ROOT) expect a minimal storage element to behave.
//
//	srv, err := storage.New(storage.Config{Listen: "127.0.0.1:9001", Root: "/data"}, log)
//	if err != nil { return err }
//	defer srv.Close()
//	return srv.ListenAndServe(ctx) // nil after ctx is cancelled and requests drained
//
// On plain HTTP every connection starts on a lean HTTP/1.1 loop (package
// fastpath; the storage role's answers are in fast.go) that answers the plain GET and HEAD of a file (or a 404) itself, with
// sendfile, and hands the connection to net/http at the first request it
// does not take. Behind that, GET, HEAD, PUT and OPTIONS run on
// hand-written handlers: zero-copy reads (sendfile) with RFC 9110 ranges
// and conditionals by httpx.ServeContent, the one ranged read every role
// answers with, RFC 3230 Want-Digest with
// checksums kept beside the data (.lakefed-sums), and atomic uploads (temp file,
// early write-back, fsync, rename, fsync dir) with the adler32 computed on
// the fly. PROPFIND, PROPPATCH, MKCOL, DELETE, COPY,
// MOVE, LOCK and UNLOCK go to golang.org/x/net/webdav over a FileSystem
// adapter rooted at Root; dead properties live in extended attributes.
//
// Path safety: every request path (and the Destination header) goes through
// httpx.CleanPath; names starting with ".lakefed-" are reserved for the
// server's own temp files and are neither listed nor reachable. Symlinks
// are resolved by the kernel with openat2(RESOLVE_BENEATH) on the read path
// and by os.Root everywhere else: a symlink that stays inside Root is
// followed, one that leads outside Root (or is absolute) is refused with 403
// on GET/HEAD/PUT and looks absent (404) to the WebDAV methods.
//
// Resources: a janitor goroutine (New to Close) removes the temp files and
// directories a crash left; running out of file descriptors answers 503 with
// Retry-After; directory listings (PROPFIND Depth 1, GET) are streamed or
// bounded by Config.MaxListings. See janitor.go, limits.go, propfind.go.
//
// Observability: /metrics (Prometheus text, own registry) is served on the
// same listener and shadows a file named "metrics" at the root (see
// Config.MetricsPath); an access log line per request is off by default.
package storage

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/fastpath"
	"github.com/lakefed/lakefed/internal/logging"
	"github.com/lakefed/lakefed/internal/storage/davlock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/webdav"
	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"
)

// DefaultListen is the address a storage server listens on when
// Config.Listen is empty.
const DefaultListen = "127.0.0.1:9001"

// Config is one storage server. The YAML shape of a `storage:` list item
// in lakefed's config file is config.Storage, which package server turns
// into this, field by field.
type Config struct {
	// Listen is the host:port to listen on, e.g. 127.0.0.1:9001. Empty
	// means DefaultListen. Only ListenAndServe uses it.
	Listen string
	// Root is the directory served; it must exist. Required.
	Root string
	// TLSCert is a PEM certificate chain; with TLSKey it turns on HTTPS.
	// Both or neither must be set.
	TLSCert string
	// TLSKey is the PEM private key for TLSCert.
	TLSKey string
	// AccessLog turns on one Info-level log line per request (method,
	// path, status, bytes, duration, remote). Default false: the access
	// log sits on the HEAD hot path, so it costs nothing unless asked for.
	AccessLog bool
	// MaxUpload is the largest PUT body accepted, in bytes. Zero means no
	// limit; a larger upload gets 413 and leaves nothing behind.
	MaxUpload int64
	// MetricsPath is the URL path where GET /metrics (Prometheus text
	// format) is served on the same listener. Empty means "/metrics"; "-"
	// turns it off. A file at that path under Root is shadowed.
	MetricsPath string
	// StaleUploadAge is how old (by mtime; for a directory, the newest in
	// its tree) a temp entry of an upload or a copy (".lakefed-upload-*",
	// left by a crash) must be before the janitor removes it, e.g. "1h" in
	// YAML. Zero means DefaultStaleUploadAge (1 h); negative is an error.
	// Temp entries a live operation of this process uses are never
	// removed, whatever their age (see janitor.go). The janitor sweeps
	// Root once at start and then every quarter of this age (1 s to 15 min).
	StaleUploadAge time.Duration
	// MaxListings is how many expensive requests (PROPFIND Depth 1 and GET
	// of a directory, each reading a whole directory) may run at once; one
	// more gets 503 with Retry-After. Zero means DefaultMaxListings;
	// negative is an error.
	MaxListings int
	// TPC turns on HTTP third-party copy (tpc.go): COPY with a Source
	// URL (pull) or a Destination on another host (push). Default false:
	// a server that fetches from and sends to any URL a client names must
	// not do so for anyone; turn it on where the rules in front of COPY
	// say who may, or on a trusted network. Off, such a COPY gets 403.
	TPC bool
	// TPCMarkerInterval is how often a running HTTP third-party copy
	// (tpc.go) sends a performance marker. Zero means
	// DefaultTPCMarkerInterval (5 s); negative is an error.
	TPCMarkerInterval time.Duration
	// TPCIdleTimeout fails a third-party copy that moves no byte for this
	// long (twice this before its first byte), and bounds the wait for a
	// remote's answer. Zero means DefaultTPCIdleTimeout (60 s); negative
	// is an error.
	TPCIdleTimeout time.Duration
	// TPCCAFile is a PEM bundle of extra CAs to trust for the https
	// remotes of third-party copies. Empty: the system roots.
	TPCCAFile string
	// StallTimeout is how long one step of a transfer (at most
	// httpx.StallStep bytes of an answer or of a request body) may stall
	// before the client is let go (httpx.SendConn, httpx.StallHandler).
	// Zero means httpx.DefaultStallTimeout (60 s); negative is an error.
	StallTimeout time.Duration
}

// Limits and timeouts of the HTTP server. They are not configurable yet:
// nothing has needed other values.
const (
	maxHeaderBytes    = 64 << 10 // larger request headers get 431
	readHeaderTimeout = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 10 * time.Second
	reservedPrefix    = httpx.ReservedPrefix // names the server keeps for itself
	uploadPrefix      = reservedPrefix + "upload-"
	keptPrefix        = reservedPrefix + "kept-" // a replaced destination a failed COPY could not put back (copy.go); never swept
)

// Server serves one directory over HTTP/WebDAV. Its methods are safe for
// concurrent use. Close releases the directory handles.
type Server struct {
	cfg         Config
	log         *slog.Logger
	root        *os.Root // every write and every WebDAV operation goes through it
	rootDir     *os.File // O_PATH handle on Root for openat2; nil without openat2
	rootFD      int      // rootDir's descriptor, valid while rootDir is open
	tlsConfig   *tls.Config
	metricsPath string // "" when metrics are off
	reg         *prometheus.Registry
	m           *metrics
	metricsH    http.Handler
	dav         *webdav.Handler
	locks       *davlock.Locks
	sums        singleflight.Group // coalesces checksum computations per file
	paths       pathLocks          // per-path lock of the methods that change a path (precond.go)
	temps       tempOwners         // temp names live operations use (atomic.go)
	handler     http.Handler
	tpc         *tpcClient // HTTP third-party copy (tpc.go)
	guarded     bool       // Guard was called: no fast path
	// mayRead: whether the caller of r may read p under the rules Guard
	// put in front (GuardReads); nil: no such rules.
	mayRead func(r *http.Request, p string) bool

	listings chan struct{} // semaphore of expensive requests, capacity MaxListings

	// The janitor (janitor.go) runs from New until Close.
	stopJanitor context.CancelFunc
	janitorDone chan struct{}
	swept       chan struct{} // closed when the janitor's start pass is done

	// writeChunk writes one chunk of an upload; tests replace it to
	// inject errors such as ENOSPC.
	writeChunk func(f *os.File, p []byte) (int, error)
	// hooks stop operations where tests interleave them; nil in
	// production.
	hooks *testHooks
	// commitRename renames a PUT's temp file into place under the path
	// lock (Root.Rename); tests replace it to hold a PUT at that point.
	commitRename func(oldname, newname string) error
}

// testHooks are called, when set, at points where a test puts one
// operation between the steps of another.
type testHooks struct {
	aside func() // install moved the destination aside (copy.go)
	walk  func() // a janitor pass listed the sidecars and is about to walk Root
}

// New checks cfg and builds a Server. It returns every problem it finds at
// once and never panics. log may be nil (slog.Default()).
func New(cfg Config, log *slog.Logger) (*Server, error) {
	return newServer(cfg, log, nil)
}

// newServer is New with hooks (nil in production), set before the
// janitor starts.
func newServer(cfg Config, log *slog.Logger, hooks *testHooks) (*Server, error) {
	// Tagged: the lines about a request carry its ID, whatever logger
	// the caller built.
	log = logging.Tagged(log).With("component", "storage")
	var errs []error
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	} else if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		errs = append(errs, fmt.Errorf("storage: listen %q: %w", cfg.Listen, err))
	}
	if cfg.MaxUpload < 0 {
		errs = append(errs, fmt.Errorf("storage: max_upload %d is negative", cfg.MaxUpload))
	}
	switch {
	case cfg.StaleUploadAge < 0:
		errs = append(errs, fmt.Errorf("storage: stale_upload_age %v is negative", cfg.StaleUploadAge))
	case cfg.StaleUploadAge == 0:
		cfg.StaleUploadAge = DefaultStaleUploadAge
	}
	switch {
	case cfg.StallTimeout < 0:
		errs = append(errs, fmt.Errorf("storage: stall_timeout %v is negative", cfg.StallTimeout))
	case cfg.StallTimeout == 0:
		cfg.StallTimeout = httpx.DefaultStallTimeout
	}
	switch {
	case cfg.MaxListings < 0:
		errs = append(errs, fmt.Errorf("storage: max_listings %d is negative", cfg.MaxListings))
	case cfg.MaxListings == 0:
		cfg.MaxListings = DefaultMaxListings
	}
	metricsPath := cfg.MetricsPath
	switch {
	case metricsPath == "":
		metricsPath = "/metrics"
	case metricsPath == "-":
		metricsPath = ""
	case !strings.HasPrefix(metricsPath, "/"):
		errs = append(errs, fmt.Errorf("storage: metrics_path %q must start with /", metricsPath))
	}
	var tlsConfig *tls.Config
	switch {
	case cfg.TLSCert == "" && cfg.TLSKey == "":
	case cfg.TLSCert == "" || cfg.TLSKey == "":
		errs = append(errs, errors.New("storage: tls_cert and tls_key must be set together"))
	default:
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("storage: tls: %w", err))
		} else {
			tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
	}
	tpc, err := newTPCClient(&cfg)
	if err != nil {
		errs = append(errs, err)
	}
	var root *os.Root
	if cfg.Root == "" {
		errs = append(errs, errors.New("storage: root is required"))
	} else if fi, err := os.Stat(cfg.Root); err != nil {
		errs = append(errs, fmt.Errorf("storage: root: %w", err))
	} else if !fi.IsDir() {
		errs = append(errs, fmt.Errorf("storage: root %q is not a directory", cfg.Root))
	} else if root, err = os.OpenRoot(cfg.Root); err != nil {
		errs = append(errs, fmt.Errorf("storage: root: %w", err))
	}
	if len(errs) > 0 {
		if root != nil {
			root.Close()
		}
		return nil, errors.Join(errs...)
	}

	s := &Server{
		cfg:         cfg,
		log:         log,
		root:        root,
		rootFD:      -1,
		tlsConfig:   tlsConfig,
		metricsPath: metricsPath,
		reg:         prometheus.NewRegistry(),
		listings:    make(chan struct{}, cfg.MaxListings),
		janitorDone: make(chan struct{}),
		swept:       make(chan struct{}),
		writeChunk:  (*os.File).Write,
		tpc:         tpc,
		hooks:       hooks,
	}
	s.commitRename = root.Rename
	s.locks = davlock.New(lockFiles{s}, log)
	s.openBeneath()
	s.m = newMetrics(s.reg)
	s.metricsH = promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	s.dav = &webdav.Handler{
		FileSystem: davFS{s},
		LockSystem: davlock.Pass{}, // s.locks.Guard checks locks before x/net/webdav runs
		Logger: func(r *http.Request, err error) {
			if err != nil && log.Enabled(r.Context(), slog.LevelDebug) {
				log.DebugContext(r.Context(), "webdav request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
		},
	}
	s.handler = http.HandlerFunc(s.serveHTTP)
	ctx, cancel := context.WithCancel(context.Background())
	s.stopJanitor = cancel
	go func() {
		defer close(s.janitorDone)
		s.runJanitor(ctx)
	}()
	return s, nil
}

// openBeneath opens the O_PATH handle used with openat2(RESOLVE_BENEATH),
// and leaves rootDir nil (so os.Root is used) when the kernel lacks openat2.
func (s *Server) openBeneath() {
	f, err := os.OpenFile(s.cfg.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	fd := int(f.Fd())
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	probe, err := unix.Openat2(fd, ".", &how)
	if err != nil {
		f.Close()
		s.log.Info("openat2 unavailable, resolving paths with os.Root", "err", err)
		return
	}
	unix.Close(probe)
	s.rootDir, s.rootFD = f, fd
}

// Close stops the janitor, waits for it and releases the handles on Root.
// Call it after Serve has returned.
func (s *Server) Close() error {
	s.stopJanitor()
	<-s.janitorDone
	s.tpc.close()
	if s.rootDir != nil {
		s.rootDir.Close()
	}
	return s.root.Close()
}

// Handler returns the server's HTTP handler: the WebDAV tree plus
// /metrics (unless Config.MetricsPath is "-"). It recovers panics into a
// 500 and a log line.
func (s *Server) Handler() http.Handler { return s.handler }

// Guard puts mw in front of the handler: rules every request must pass
// (package auth's middleware). The fast path is off from then on, since
// it answers plain GETs without the handler. Call it before Serve.
func (s *Server) Guard(mw func(http.Handler) http.Handler) {
	s.handler = mw(s.handler)
	s.guarded = true
}

// GuardReads gives the listing the read rule of what Guard put in front:
// mayRead reports whether the caller of r may read (GET, HEAD) p. A
// PROPFIND Depth 1 then describes only the members its caller could HEAD
// and gives the others 403 (livelist.go), so that a listing never says
// more of a file than a HEAD of it would. Call it before Serve.
func (s *Server) GuardReads(mayRead func(r *http.Request, p string) bool) { s.mayRead = mayRead }

// MetricsPath is the path /metrics is served at; "" when off.
func (s *Server) MetricsPath() string { return s.metricsPath }

// UseTLS serves HTTPS with cfg in place of the TLSCert/TLSKey pair: one
// that asks for client certificates and reloads its own (auth.ServerTLS).
// Call it before Serve.
func (s *Server) UseTLS(cfg *tls.Config) { s.tlsConfig = cfg }

// Registry returns the Prometheus registry holding this server's metrics,
// for callers that want to gather them elsewhere.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Serve answers HTTP (or HTTPS, when TLS is configured) on ln until ctx is
// cancelled, then shuts down gracefully (in-flight requests get up to 10 s)
// and returns nil. Any other failure of the listener is returned. Serve
// closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		// The ID first, so that what Guard put in front (an auth
		// refusal) is logged and answered with it too.
		Handler:           httpx.StallHandler(httpx.RequestIDs(s.handler), s.cfg.StallTimeout),
		ConnContext:       httpx.StallConnContext,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	send := s.cfg.StallTimeout
	if s.tlsConfig == nil && !s.guarded {
		err := fastpath.Serve(ctx, ln, srv, fastResponder{s}, fastpath.Options{ShutdownTimeout: shutdownTimeout, Log: s.log, StallTimeout: send})
		if err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		return nil
	}
	ln = httpx.SendListener(ln, send)
	errc := make(chan error, 1)
	go func() {
		if s.tlsConfig != nil {
			srv.TLSConfig = s.tlsConfig.Clone()
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("storage: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("storage: serve: %w", serr)
	}
	if err != nil {
		return fmt.Errorf("storage: shutdown: %w", err)
	}
	return nil
}

// ListenAndServe listens on Config.Listen and calls Serve.
//
// The soft RLIMIT_NOFILE needs no raising here: the Go runtime already
// raised it to the hard limit (minus one) when the process started
// (limits.go, TestRlimitNofileRaised).
func (s *Server) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	return s.Serve(ctx, ln)
}

// URL returns the base URL clients use for a server listening on addr:
// http or https by the TLS setting, ending in "/".
func (s *Server) URL(addr net.Addr) string {
	scheme := "http"
	if s.tlsConfig != nil {
		scheme = "https"
	}
	return scheme + "://" + addr.String() + "/"
}
