package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/logging"
)

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
		if s.StallTimeout < 0 {
			v.errorf(p+".stall_timeout", "must not be negative")
		}
	}
	if c.StallTimeout < 0 {
		v.errorf("stall_timeout", "must not be negative")
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
	c.Shared.validate(v, "shared")
	if c.Shared != nil && c.Shared.Advertise != "" && c.Federation == nil {
		v.errorf("shared.advertise", "the URL of this process's federator: it needs a federation section")
	}
	if c.Cache != nil && len(c.Cache.Group) == 1 && c.Cache.Group[0] == GroupShared && c.Shared == nil {
		v.errorf("cache.group", "[shared] needs a shared section (the Redis the nodes find each other in)")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		v.errorf("tls_cert", "tls_cert and tls_key go together")
	}
	if c.XrootTLSRequired && c.TLSCert == "" {
		v.errorf("xroot_tls_required", "needs tls_cert and tls_key: the root:// doors speak TLS with them")
	}
	c.Auth.validate(v, "auth")
	c.Operator.validate(v, "operator", c.Auth != nil)
	if c.Federation != nil && len(c.Federation.Admin.Identities) > 0 && c.Auth == nil {
		v.errorf("federation.admin.identities", "needs an auth section to verify them")
	}
	c.Buffer.validate(v, "buffer", c.Federation)
	if !logging.ValidFormat(c.LogFormat) {
		v.errorf("log_format", "%q is not one of %s, %s", c.LogFormat, logging.Text, logging.JSON)
	}
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
	if mc.Hot < 0 {
		v.errorf(path+".metadata_cache.hot", "must not be negative")
	}
	if mc.TTL < 0 {
		v.errorf(path+".metadata_cache.ttl", "must not be negative")
	}
	if mc.NegativeTTL < 0 {
		v.errorf(path+".metadata_cache.negative_ttl", "must not be negative")
	}
	if mc.ListAfter < -1 {
		v.errorf(path+".metadata_cache.list_after", "must be -1 (never list) or more")
	}
	if mc.ListMaxEntries < 0 {
		v.errorf(path+".metadata_cache.list_max_entries", "must not be negative")
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
