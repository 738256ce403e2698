// Package config reads lakefed's one YAML file, which says which roles a
// process runs (storage servers, a federator) and how. Loading is strict:
// an unknown key is an error, and every error names the line and the
// field path, so a typo in a 200-line file is found at once rather than
// silently ignored.
//
//	cfg, err := config.Load("lakefed.yaml") // defaults filled, Validate() run
//	if err != nil {
//		log.Fatal(err) // e.g. "line 12: federation.endpoints[1].url: missing"
//	}
//	fed, err := federation.New(ctx, *cfg.Federation, federation.Options{})
//
// The order is always: parse, fill defaults, Validate (every problem,
// joined), then construct.
package config

import "github.com/lakefed/lakefed/internal/logging"

// Config is the whole file. Top-level sections are roles; a process runs
// every role whose section is present.
type Config struct {
	// Listen is the host:port the federator (and later the API and
	// dashboard) listens on. Default "127.0.0.1:8080" when federation is
	// configured.
	Listen string `yaml:"listen"`
	// ListenXroot is the host:port of the root:// door to the
	// federation's namespace (XRootD clients: xrdcp, xrdfs, CMSSW, uproot
	// with fsspec-xrootd), e.g. 127.0.0.1:1094. Empty: no door.
	ListenXroot string `yaml:"listen_xroot"`
	// XrootOutageWait bounds how long a root:// door (listen_xroot and
	// cache.listen_xroot) keeps a client waiting, with kXR_wait, on one
	// request while the endpoints cannot answer, before it answers
	// kXR_ServerError (never kXR_NotFound), e.g. "5s". Zero means 5 s;
	// under a second means no wait, kXR_ServerError at once; negative is
	// an error.
	XrootOutageWait Duration `yaml:"xroot_outage_wait"`
	// StallTimeout is how long one step of a transfer (2 MiB at most) may
	// stall on the federator's listener and the cache's own, e.g. "60s":
	// an answer's step not taken by the client resets the connection
	// (nginx's send_timeout), a request body's step not sent ends it
	// (client_body_timeout); over HTTP/2, the stream. A client that
	// stops reading or sending holds a connection, an upload or a
	// proxied read's replica no longer; one that moves at least 2 MiB per
	// stall_timeout is never cut. Zero means 60 s; negative is an error.
	// Storage servers have their own storage[].stall_timeout. Read only
	// at start.
	StallTimeout Duration `yaml:"stall_timeout"`
	// XrootTLSRequired makes every root:// door (listen_xroot and
	// cache.listen_xroot) refuse a session that does not switch to TLS
	// (roots://): XRootD 5 clients are told to switch whatever their
	// URL says, and every request but kXR_protocol of a session still in
	// plain TCP gets kXR_TLSRequired. Needs tls_cert. Default false: TLS
	// when the client asks for it.
	XrootTLSRequired bool `yaml:"xroot_tls_required"`
	// Storage lists storage servers to run in this process, each serving
	// a directory on its own listen address. Nil: none.
	Storage []Storage `yaml:"storage"`
	// Federation configures the federator. Nil: no federator.
	Federation *Federation `yaml:"federation"`
	// Tests configures the scheduled functional tests of every federated
	// endpoint (tests.go). Nil: no scheduled tests.
	Tests *Tests `yaml:"tests"`
	// Cache runs a read-through block cache (cache.go). Nil: none.
	Cache *Cache `yaml:"cache"`
	// Buffer runs a write buffer in front of the federator (buffer.go).
	// Nil: none.
	Buffer *Buffer `yaml:"buffer"`
	// TLSCert is a PEM certificate chain; with TLSKey it turns on HTTPS
	// on the federator's listener and the cache's own, and TLS
	// (roots://) on the root:// doors. Storage servers have their own
	// pair. Both or neither. A reload (SIGHUP, /api/reload) reads the
	// files again.
	TLSCert string `yaml:"tls_cert"`
	// TLSKey is the PEM private key for TLSCert.
	TLSKey string `yaml:"tls_key"`
	// Auth says who may do what on every listener (auth.go). Nil:
	// everything is open.
	Auth *Auth `yaml:"auth"`
	// Operator says who may see the operator's pages (auth.go): /ui,
	// /api/* and /metrics of the federator's and the cache's listeners.
	// The zero value opens them to clients on this host only.
	Operator Operator `yaml:"operator"`
	// Shared is the state shared with the other processes of the lake
	// through Redis (shared.go). Nil: this process keeps its own.
	Shared *Shared `yaml:"shared"`
	// LogFormat is how the process writes its log to stderr: "text"
	// (key=value lines, for people and journalctl) or "json" (one object
	// per line, for log collectors). Default "text". Read only at start.
	LogFormat string `yaml:"log_format"`
	// AccessLog turns on one Info-level log line per request on the
	// federator's listener and the cache's own ("request": method, path,
	// status, bytes, duration, remote, request_id). Default false.
	// Storage servers have their own storage[].access_log. Read only at
	// start.
	AccessLog bool `yaml:"access_log"`
	// Results is the results store the dashboard shows, the scheduled
	// tests write and lakefed bench reads: a SQLite file, or a
	// PostgreSQL URL (postgres://user@host:5432/db) that several
	// federators and bench agents share. Default: tests.db when set,
	// else the bench store's default ($LAKEFED_BENCH_DB, else
	// ~/.local/share/lakefed/bench.db).
	Results string `yaml:"results"`

	// lines maps field paths to lines of the file, for error messages.
	lines map[string]int
}

// Storage is one storage server: a directory served over HTTP/WebDAV on
// its own listen address. It is the YAML shape only; package server turns
// it into the storage role's own Config, field by field, so that config
// imports no role (a test there checks that no field is left out). Zero
// values mean the storage role's defaults.
type Storage struct {
	// Listen is the host:port to listen on, e.g. 127.0.0.1:9001. Required.
	Listen string `yaml:"listen"`
	// Root is the directory served; it must exist unless CreateRoot is
	// set. Required.
	Root string `yaml:"root"`
	// CreateRoot makes Root (and its missing parents, mode 0755) on
	// start when it is missing, so that an example config runs as
	// shipped. Default false: a mistyped root is an error, not a new
	// empty site.
	CreateRoot bool `yaml:"create_root"`
	// TLSCert is a PEM certificate chain; with TLSKey it turns on HTTPS.
	// Both or neither must be set.
	TLSCert string `yaml:"tls_cert"`
	// TLSKey is the PEM private key for TLSCert.
	TLSKey string `yaml:"tls_key"`
	// AccessLog turns on one Info-level log line per request. Default
	// false: the access log sits on the HEAD hot path.
	AccessLog bool `yaml:"access_log"`
	// MaxUpload is the largest PUT body accepted, in bytes. Zero: no
	// limit.
	MaxUpload int64 `yaml:"max_upload"`
	// MetricsPath is the URL path of GET /metrics on the same listener.
	// Empty: "/metrics"; "-" turns it off.
	MetricsPath string `yaml:"metrics_path"`
	// StaleUploadAge is how old an upload temp file left by a crash must
	// be before the janitor removes it ("1h"). Zero: 1 h.
	StaleUploadAge Duration `yaml:"stale_upload_age"`
	// MaxListings is how many whole-directory reads (PROPFIND Depth 1,
	// GET of a directory) may run at once. Zero: the storage default.
	MaxListings int `yaml:"max_listings"`
	// TPC turns on WLCG HTTP third-party copy: COPY with Source (pull)
	// or with a Destination on another host (push). Default false: a
	// server that fetches from any URL a client names must only do so
	// for clients the auth rules allow.
	TPC bool `yaml:"tpc"`
	// TPCMarkerInterval is how often a running copy sends a performance
	// marker. Zero: 5s.
	TPCMarkerInterval Duration `yaml:"tpc_marker_interval"`
	// TPCIdleTimeout fails a copy that moves no byte for this long.
	// Zero: 60s.
	TPCIdleTimeout Duration `yaml:"tpc_idle_timeout"`
	// TPCCAFile is a PEM bundle of extra CAs trusted for https remotes.
	TPCCAFile string `yaml:"tpc_ca_file"`
	// StallTimeout is how long one step of a transfer (2 MiB at most,
	// an answer's or a request body's) may stall before the server lets
	// the client go, as the top-level stall_timeout. Zero means 60 s;
	// negative is an error.
	StallTimeout Duration `yaml:"stall_timeout"`
}

// SetDefaults fills every zero field that has a default. It is idempotent.
func (c *Config) SetDefaults() {
	c.Tests.setDefaults()
	c.Shared.setDefaults()
	if c.LogFormat == "" {
		c.LogFormat = logging.Text
	}
	if c.Federation == nil {
		return
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	c.Shared.setAdvertise(c.Listen, c.TLSCert != "")
	f := c.Federation
	if f.Mode == "" {
		f.Mode = "redirect"
	}
	if f.Placement == "" {
		f.Placement = "priority"
	}
	if f.FuzzKM == 0 {
		f.FuzzKM = DefaultFuzzKM
	}
	if f.FuzzLatency == 0 {
		f.FuzzLatency = Duration(DefaultFuzzLatency)
	}
	if f.MaxHops == 0 {
		f.MaxHops = DefaultMaxHops
	}
	if f.ProxyIdleTimeout == 0 {
		f.ProxyIdleTimeout = Duration(DefaultProxyIdleTimeout)
	}
	if f.RetryAfter == 0 {
		f.RetryAfter = Duration(DefaultRetryAfter)
	}
	if f.Admin.Scope == "" {
		f.Admin.Scope = DefaultAdminScope
	}
	mc := &f.MetadataCache
	if mc.MaxEntries == 0 {
		mc.MaxEntries = DefaultMaxEntries
	}
	if mc.Hot == 0 {
		mc.Hot = min(DefaultHotEntries, mc.MaxEntries)
	}
	if mc.TTL == 0 {
		mc.TTL = Duration(DefaultTTL)
	}
	if mc.NegativeTTL == 0 {
		mc.NegativeTTL = Duration(DefaultNegativeTTL)
	}
	if mc.ListAfter == 0 {
		mc.ListAfter = DefaultListAfter
	}
	if mc.ListMaxEntries == 0 {
		mc.ListMaxEntries = DefaultListMax
	}
	h := &f.Health
	if h.Interval == 0 {
		h.Interval = Duration(DefaultInterval)
	}
	if h.Timeout == 0 {
		h.Timeout = Duration(DefaultProbeTimeout)
	}
	if h.FailAfter == 0 {
		h.FailAfter = DefaultFailAfter
	}
	if h.ErrorLimit == 0 {
		h.ErrorLimit = DefaultErrorLimit
	}
	if h.RecoverAfter == 0 {
		h.RecoverAfter = DefaultRecoverAfter
	}
	for i := range f.Endpoints {
		e := &f.Endpoints[i]
		if e.Prefix == "" {
			e.Prefix = "/"
		}
		if e.Path == "" {
			e.Path = "/"
		}
		if e.Priority == 0 {
			e.Priority = 1
		}
	}
}
