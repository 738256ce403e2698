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

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

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
	// TLSCert and TLSKey turn on HTTPS on the federator's listener and
	// the cache's own (storage servers have their own pair). Both or
	// neither.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	// Auth says who may do what on every listener (auth.go). Nil:
	// everything is open.
	Auth *Auth `yaml:"auth"`

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
}

// Federation is the federator: one namespace over many endpoints.
type Federation struct {
	// Mode is how GET is answered: "redirect" (302 to the best replica,
	// the default) or "proxy" (the federator streams the bytes). An
	// endpoint may override it; endpoints clients cannot reach (file://)
	// are always proxied.
	Mode string `yaml:"mode"`
	// Placement picks the endpoint a PUT goes to: "priority" (the first
	// healthy writable endpoint by priority, the default) or "spread"
	// (round-robin over the healthy writable endpoints of the best
	// priority, to balance load).
	Placement string `yaml:"placement"`
	// GeoIPDB is a MaxMind GeoIP2/GeoLite2 City database used to locate
	// clients for proximity ranking. Empty: ClientNetworks only.
	GeoIPDB string `yaml:"geoip_db"`
	// ClientNetworks map client address ranges to locations, used when
	// GeoIPDB is empty or does not know the client.
	ClientNetworks []ClientNetwork `yaml:"client_networks"`
	// FuzzKM is the distance within which replicas count as equally near,
	// so load spreads randomly among them (as Dynafed's fuzz does).
	// Default 100 km; a negative value turns spreading by distance off.
	FuzzKM float64 `yaml:"fuzz_km"`
	// FuzzLatency is the same for recent latency. Default 5ms.
	FuzzLatency Duration `yaml:"fuzz_latency"`
	// MaxHops bounds how many federators a request may pass through
	// (X-Lakefed-Hops); a federator reached at MaxHops asks no upstream.
	// Default 3.
	MaxHops int `yaml:"max_hops"`
	// RetryAfter is sent with 503 answers. Default 10s.
	RetryAfter Duration `yaml:"retry_after"`
	// ProxyIdleTimeout bounds the wait for the next bytes of a proxied
	// read: a replica silent for this long (a stalled server, kill -STOP)
	// is left, and the read goes on from another replica holding the
	// same bytes at the same offset. Default 5s.
	ProxyIdleTimeout Duration `yaml:"proxy_idle_timeout"`
	// MetadataCache bounds the cache of locate answers.
	MetadataCache MetadataCache `yaml:"metadata_cache"`
	// Health configures active probes and passive failure counting.
	Health Health `yaml:"health"`
	// Endpoints are the storage endpoints federated. At least one.
	Endpoints []Endpoint `yaml:"endpoints"`
	// Admin restricts the federator's admin API (POST /api/reload).
	Admin Admin `yaml:"admin"`

	// RestartNeeded is not read from the file: package server fills it,
	// when it reloads the file, with the settings that changed but are
	// read only at start (RestartChanges), so that the reload answer can
	// say so. Nil: none.
	RestartNeeded []string `yaml:"-"`
}

// Admin restricts the admin API. Until it has real authentication, only
// a client on the federator's own host may use it, and only from a page
// of the federator's own origin (see federation's reload handler).
type Admin struct {
	// AllowRemote lets clients on other hosts call POST /api/reload.
	// Default false: only loopback clients may (127.0.0.0/8, ::1).
	AllowRemote bool `yaml:"allow_remote"`
}

// ClientNetwork places the clients of some address ranges.
type ClientNetwork struct {
	// Networks are CIDR prefixes ("10.0.0.0/8", "2001:db8::/32").
	Networks []string `yaml:"networks"`
	// Location is [latitude, longitude] in degrees. Required.
	Location Location `yaml:"location"`
}

// MetadataCache bounds the federator's cache of locate answers.
type MetadataCache struct {
	// MaxEntries is the most paths kept; the least recently used go
	// first. Default 100000.
	MaxEntries int `yaml:"max_entries"`
	// TTL is how long a found path is trusted. Default 60s.
	TTL Duration `yaml:"ttl"`
	// NegativeTTL is how long "found nowhere" is trusted. Default 5s;
	// "0s" is taken as the default too, use a tiny value such as 1ms to
	// turn it nearly off.
	NegativeTTL Duration `yaml:"negative_ttl"`
}

// Health configures how endpoints are marked down and up again.
type Health struct {
	// Interval between active probes of each endpoint. Default 2s: a
	// probe that fails fast (a refused connection) is repeated at once,
	// so a dead site is excluded within one interval.
	Interval Duration `yaml:"interval"`
	// Timeout is the probe's latency limit: a probe slower than this
	// failed. Default 2s.
	Timeout Duration `yaml:"timeout"`
	// FailAfter consecutive failed probes mark an endpoint down.
	// Default 2.
	FailAfter int `yaml:"fail_after"`
	// ErrorLimit consecutive request errors (unavailable answers to real
	// requests) mark an endpoint down. Default 5.
	ErrorLimit int `yaml:"error_limit"`
	// RecoverAfter consecutive good probes mark a down endpoint up.
	// Default 2.
	RecoverAfter int `yaml:"recover_after"`
}

// Endpoint is one federated endpoint. The connection fields (name, url,
// timeout, ca_file, ...) are endpoint.Config's, inline.
type Endpoint struct {
	endpoint.Config `yaml:",inline"`
	// Prefix is the part of the federated namespace the endpoint holds.
	// Default "/".
	Prefix string `yaml:"prefix"`
	// Path is where Prefix lives on the endpoint, relative to the URL.
	// Default "/" (the URL's own path).
	Path string `yaml:"path"`
	// Priority ranks replicas: lower is preferred. Default 1 (zero means
	// the default).
	Priority int `yaml:"priority"`
	// Location is [latitude, longitude] in degrees, for proximity
	// ranking. Empty: unknown (ranked after located replicas at equal
	// priority when the client's location is known).
	Location Location `yaml:"location"`
	// Writable lets PUT, DELETE and MKCOL reach the endpoint.
	Writable bool `yaml:"writable"`
	// Mode overrides Federation.Mode for this endpoint: "redirect" or
	// "proxy". Empty: inherit.
	Mode string `yaml:"mode"`
}

// Location is a [latitude, longitude] pair in degrees; empty when unknown.
type Location []float64

// Known reports whether l holds a position.
func (l Location) Known() bool { return len(l) == 2 }

// Duration is a time.Duration written as a string ("30s", "250ms").
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("want a duration such as \"30s\"")
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"30s\", \"250ms\")", n.Value)
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// Size is a byte count written as a string ("64MiB", "10GB", "4096").
type Size int64

// UnmarshalYAML parses a size with an optional unit: B, kB/KB, MB, GB, TB
// (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024).
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("want a size such as \"64MiB\"")
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return err
	}
	*s = Size(v)
	return nil
}

// ParseSize parses "64MiB", "1.5GB", "4096" into bytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	mult := map[string]float64{
		"": 1, "B": 1,
		"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	}[unit]
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || f < 0 {
		return 0, fmt.Errorf("invalid size %q (want e.g. \"64MiB\", \"10GB\")", s)
	}
	return int64(f * mult), nil
}

// Defaults of the fields whose zero value means "the default".
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultMaxEntries   = 100000
	DefaultTTL          = 60 * time.Second
	DefaultNegativeTTL  = 5 * time.Second
	DefaultInterval     = 2 * time.Second
	DefaultProbeTimeout = 2 * time.Second
	DefaultFailAfter    = 2
	DefaultErrorLimit   = 5
	DefaultRecoverAfter = 2
	DefaultFuzzKM       = 100
	DefaultFuzzLatency  = 5 * time.Millisecond
	DefaultMaxHops      = 3
	DefaultRetryAfter   = 10 * time.Second
	// DefaultProxyIdleTimeout: a replica that sends nothing for this long
	// during a proxied read is taken as stalled.
	DefaultProxyIdleTimeout = 5 * time.Second
)

// MaxFileSize is the largest config file Load reads. A config is a few
// kilobytes; anything near this is a mistake or an attack, and parsing it
// would cost memory out of proportion.
const MaxFileSize = 4 << 20

// ErrTooLarge is returned by Load for a file larger than MaxFileSize.
var ErrTooLarge = errors.New("config: file larger than 4 MiB")

// Load reads, parses, fills defaults and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s:\n%w", path, err)
	}
	return c, nil
}

// readFile reads path, refusing (without reading on) a file larger than
// MaxFileSize.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: %s", ErrTooLarge, path)
	}
	return data, nil
}

// Parse parses a config from YAML text, fills defaults and validates it.
// The error joins every problem found, each a *FieldError.
func Parse(data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, syntaxError(data, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &FieldError{Msg: "empty config"}
	}
	if err := checkAliases(&doc); err != nil {
		return nil, err
	}
	c := &Config{}
	d := &decoder{lines: map[string]int{}}
	d.decode(doc.Content[0], reflect.ValueOf(c).Elem(), "")
	c.lines = d.lines
	if d.stopped {
		return nil, errors.Join(d.errs...)
	}
	// Validate even when decoding failed: a value of the wrong type must
	// not hide a bad URL further down (check-config reports every
	// problem). The fields that failed to decode kept their zero value,
	// so what Validate says of them is dropped: the decode error says it.
	c.SetDefaults()
	errs := d.errs
	for _, e := range unjoin(c.Validate()) {
		if !coveredBy(e, d.errs) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, byLine)
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// unjoin returns the errors errors.Join put in err, or err alone.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// coveredBy reports whether e is about a field (or a field inside one)
// that one of decodeErrs is about.
func coveredBy(e error, decodeErrs []error) bool {
	var fe *FieldError
	if !errors.As(e, &fe) || fe.Path == "" {
		return false
	}
	for _, de := range decodeErrs {
		var d *FieldError
		if errors.As(de, &d) && d.Path != "" &&
			(fe.Path == d.Path || strings.HasPrefix(fe.Path, d.Path+".") || strings.HasPrefix(fe.Path, d.Path+"[")) {
			return true
		}
	}
	return false
}

// byLine orders problems by their line in the file; those without one
// (a missing field) last.
func byLine(a, b error) int {
	line := func(e error) int {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Line > 0 {
			return fe.Line
		}
		return math.MaxInt
	}
	return cmp.Compare(line(a), line(b))
}

// SetDefaults fills every zero field that has a default. It is idempotent.
func (c *Config) SetDefaults() {
	c.Tests.setDefaults()
	if c.Federation == nil {
		return
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
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
	mc := &f.MetadataCache
	if mc.MaxEntries == 0 {
		mc.MaxEntries = DefaultMaxEntries
	}
	if mc.TTL == 0 {
		mc.TTL = Duration(DefaultTTL)
	}
	if mc.NegativeTTL == 0 {
		mc.NegativeTTL = Duration(DefaultNegativeTTL)
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

// validator collects problems with their paths.
type validator struct {
	lines map[string]int
	errs  []error
}

func (v *validator) errorf(path, format string, a ...any) {
	v.errs = append(v.errs, &FieldError{Line: v.line(path), Path: path, Msg: fmt.Sprintf(format, a...)})
}

// line finds the line of path, or of its nearest parent that has one
// (a missing field is reported at its enclosing item).
func (v *validator) line(path string) int {
	for p := path; p != ""; {
		if l, ok := v.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// Validate checks every field and returns every problem, joined, each a
// *FieldError naming its field (and line, when c came from a file). It
// expects SetDefaults to have run.
func (c *Config) Validate() error {
	v := &validator{lines: c.lines}
	if len(c.Storage) == 0 && c.Federation == nil && c.Cache == nil {
		v.errorf("", "no role configured: give a storage list, a federation section or a cache section")
	}
	listens := map[string]string{}
	checkListen := func(path, addr string) {
		if addr == "" {
			v.errorf(path, "missing (want host:port)")
			return
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			v.errorf(path, "want host:port, got %q", addr)
			return
		}
		if other, dup := listens[addr]; dup {
			v.errorf(path, "%s is also used by %s", addr, other)
		}
		listens[addr] = path
	}
	if c.Federation != nil {
		checkListen("listen", c.Listen)
	}
	for i, s := range c.Storage {
		p := fmt.Sprintf("storage[%d]", i)
		checkListen(p+".listen", s.Listen)
		if s.Root == "" {
			v.errorf(p+".root", "missing (the directory to serve)")
		}
		if (s.TLSCert == "") != (s.TLSKey == "") {
			v.errorf(p+".tls_cert", "tls_cert and tls_key go together")
		}
	}
	if c.Federation != nil {
		c.Federation.validate(v, "federation")
	}
	c.Tests.validate(v, "tests", c.Federation != nil)
	if c.Cache != nil && c.Cache.Listen != "" {
		checkListen("cache.listen", c.Cache.Listen)
	}
	if c.ListenXroot != "" {
		if c.Federation == nil {
			v.errorf("listen_xroot", "the root:// door serves the federation: it needs a federation section")
		}
		checkListen("listen_xroot", c.ListenXroot)
	}
	if c.Cache != nil && c.Cache.ListenXroot != "" {
		checkListen("cache.listen_xroot", c.Cache.ListenXroot)
	}
	if c.XrootOutageWait < 0 {
		v.errorf("xroot_outage_wait", "must not be negative")
	}
	c.Cache.validate(v, "cache", c.Federation != nil)
	if (c.TLSCert == "") != (c.TLSKey == "") {
		v.errorf("tls_cert", "tls_cert and tls_key go together")
	}
	c.Auth.validate(v, "auth")
	c.Buffer.validate(v, "buffer", c.Federation)
	return errors.Join(v.errs...)
}

func (f *Federation) validate(v *validator, path string) {
	oneOf := func(p, val string, allowed ...string) {
		for _, a := range allowed {
			if val == a {
				return
			}
		}
		v.errorf(p, "%q is not one of %s", val, strings.Join(allowed, ", "))
	}
	oneOf(path+".mode", f.Mode, "redirect", "proxy")
	oneOf(path+".placement", f.Placement, "priority", "spread")
	for i, cn := range f.ClientNetworks {
		p := fmt.Sprintf("%s.client_networks[%d]", path, i)
		if len(cn.Networks) == 0 {
			v.errorf(p+".networks", "missing (a list of CIDR prefixes)")
		}
		for j, n := range cn.Networks {
			if _, err := netip.ParsePrefix(n); err != nil {
				v.errorf(fmt.Sprintf("%s.networks[%d]", p, j), "%q is not a CIDR prefix", n)
			}
		}
		if !cn.Location.Known() {
			v.errorf(p+".location", "missing (want [latitude, longitude])")
		}
		validLocation(v, p+".location", cn.Location)
	}
	if f.MaxHops < 1 {
		v.errorf(path+".max_hops", "must be at least 1")
	}
	if f.ProxyIdleTimeout < 0 {
		v.errorf(path+".proxy_idle_timeout", "must not be negative")
	}
	if f.RetryAfter < 0 {
		v.errorf(path+".retry_after", "must not be negative")
	}
	if f.FuzzLatency < 0 {
		v.errorf(path+".fuzz_latency", "must not be negative")
	}
	mc := f.MetadataCache
	if mc.MaxEntries < 1 {
		v.errorf(path+".metadata_cache.max_entries", "must be at least 1")
	}
	if mc.TTL < 0 {
		v.errorf(path+".metadata_cache.ttl", "must not be negative")
	}
	if mc.NegativeTTL < 0 {
		v.errorf(path+".metadata_cache.negative_ttl", "must not be negative")
	}
	h := f.Health
	if h.Interval <= 0 {
		v.errorf(path+".health.interval", "must be positive")
	}
	if h.Timeout <= 0 {
		v.errorf(path+".health.timeout", "must be positive")
	}
	for name, n := range map[string]int{"fail_after": h.FailAfter, "error_limit": h.ErrorLimit, "recover_after": h.RecoverAfter} {
		if n < 1 {
			v.errorf(path+".health."+name, "must be at least 1")
		}
	}
	if len(f.Endpoints) == 0 {
		v.errorf(path+".endpoints", "missing (at least one endpoint)")
	}
	names := map[string]int{}
	for i := range f.Endpoints {
		p := fmt.Sprintf("%s.endpoints[%d]", path, i)
		e := &f.Endpoints[i]
		if j, dup := names[e.Name]; dup && e.Name != "" {
			v.errorf(p+".name", "%q is also the name of endpoints[%d]", e.Name, j)
		}
		names[e.Name] = i
		e.validate(v, p)
		f.validatePresign(v, p, e)
	}
}

// validatePresign refuses an endpoint (s3) whose pre-signed redirect URLs
// expire sooner than the metadata cache keeps them: a client redirected
// from a cached answer near the end of its TTL would get a dead URL. The
// federator refuses it too at start (federation.Reload); here check-config
// finds it, with the line. Proxied endpoints are exempt: their URLs are
// never handed out.
func (f *Federation) validatePresign(v *validator, p string, e *Endpoint) {
	s, _, err := endpoint.Resolve(e.Config)
	if err != nil || s.Can&endpoint.CapPresign == 0 || e.EffectiveMode(f) == "proxy" {
		return
	}
	expiry, what := endpoint.DefaultPresignExpiry, "the default presign_expiry"
	if e.S3 != nil && e.S3.PresignExpiry != 0 {
		expiry, what = e.S3.PresignExpiry, "presign_expiry"
	}
	// An absent field is reported at its endpoint's line.
	if ttl := f.MetadataCache.TTL.D(); ttl > 0 && expiry < ttl {
		v.errorf(p+".s3.presign_expiry", "%s %v is shorter than federation.metadata_cache.ttl %v: a redirect URL served from the cache "+
			"could have expired; raise s3.presign_expiry or lower metadata_cache.ttl (or use mode: proxy)", what, expiry, ttl)
	}
}

func (e *Endpoint) validate(v *validator, p string) {
	switch {
	case e.Name == "":
		v.errorf(p+".name", "missing")
	case !validName(e.Name):
		v.errorf(p+".name", "%q: use letters, digits, '.', '_' and '-' only", e.Name)
	}
	// The table of schemes decides, as it does for kinds.New: what one
	// accepts the other builds.
	var fe *endpoint.FieldError
	if e.URL == "" {
		v.errorf(p+".url", "missing")
	} else if _, _, err := endpoint.Resolve(e.Config); errors.As(err, &fe) {
		v.errorf(p+"."+fe.Field, "%s", fe.Msg)
	}
	for _, f := range []struct{ name, val string }{{"prefix", e.Prefix}, {"path", e.Path}} {
		if c, err := httpx.CleanPath(f.val); err != nil {
			v.errorf(p+"."+f.name, "%v", err)
		} else if c != f.val {
			v.errorf(p+"."+f.name, "%q is not clean (did you mean %q?)", f.val, c)
		}
	}
	if e.Priority < 0 {
		v.errorf(p+".priority", "must not be negative")
	}
	if e.Mode != "" && e.Mode != "redirect" && e.Mode != "proxy" {
		v.errorf(p+".mode", "%q is not one of redirect, proxy", e.Mode)
	}
	if e.Timeout < 0 {
		v.errorf(p+".timeout", "must not be negative")
	}
	validLocation(v, p+".location", e.Location)
}

func validLocation(v *validator, p string, l Location) {
	switch {
	case len(l) == 0:
	case len(l) != 2:
		v.errorf(p, "want [latitude, longitude], got %d numbers", len(l))
	case l[0] < -90 || l[0] > 90:
		v.errorf(p, "latitude %v is outside [-90, 90]", l[0])
	case l[1] < -180 || l[1] > 180:
		v.errorf(p, "longitude %v is outside [-180, 180]", l[1])
	}
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// EffectiveMode returns the endpoint's mode: its own, else the
// federation's.
func (e *Endpoint) EffectiveMode(f *Federation) string {
	if e.Mode != "" {
		return e.Mode
	}
	return f.Mode
}
