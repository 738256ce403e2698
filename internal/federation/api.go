package federation

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/auth"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
)

// EndpointStatus is one endpoint's state as /api/endpoints shows it.
type EndpointStatus struct {
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Kind      string    `json:"kind"` // endpoint.KindHTTP, KindS3, KindXRoot, KindPosix or KindUpstream
	Prefix    string    `json:"prefix"`
	Priority  int       `json:"priority"`
	Mode      string    `json:"mode"` // "redirect" or "proxy"
	Writable  bool      `json:"writable"`
	State     string    `json:"state"` // "up" or "down"
	LatencyMS float64   `json:"latency_ms"`
	LastError string    `json:"last_error,omitempty"`
	Since     time.Time `json:"since,omitzero"` // last state change
	Requests  uint64    `json:"requests"`
	Errors    uint64    `json:"errors"`
	// Validators is what the endpoint's versions are worth:
	// "strong" (an equal ETag means the same bytes), "weak" (a file
	// replaced with its size and time kept keeps its ETag, as nginx's
	// and root:// ones do: a proxied read that breaks is resumed on it
	// only when a checksum proves the bytes the same, else it aborts),
	// or "unknown" (an HTTP server not yet asked about a file).
	Validators endpoint.Validators `json:"validators"`
}

// Endpoints returns the state of every endpoint, in config order.
func (f *Federator) Endpoints() []EndpointStatus {
	s := f.snap.Load()
	out := make([]EndpointStatus, 0, len(s.members))
	for _, m := range s.members {
		st := EndpointStatus{
			Name: m.name, URL: m.url, Kind: kindOf(m), Prefix: m.prefix, Priority: m.priority,
			Mode: "redirect", Writable: m.writable, State: "up",
			LatencyMS: float64(m.h.Latency()) / float64(time.Millisecond),
			LastError: m.lastErr(), Requests: m.h.requests.Load(), Errors: m.h.errors.Load(),
			Validators: endpoint.ValidatorsOf(m.ep),
		}
		if m.proxy {
			st.Mode = "proxy"
		}
		if !m.h.Up() {
			st.State = "down"
		}
		if t := m.h.lastChange.Load(); t != 0 {
			st.Since = time.Unix(0, t)
		}
		out = append(out, st)
	}
	return out
}

// kindOf is the kind that serves m, as the scheme table resolves its
// config (the same answer config validation and kinds.New get); "" for a
// config the table does not know, which validation would have refused.
func kindOf(m *member) string {
	_, kind, err := endpoint.Resolve(m.cfg.Config)
	if err != nil {
		return ""
	}
	return kind
}

func (f *Federator) serveEndpoints(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if st := f.SharedState(); st != "" {
		w.Header().Set(SharedHeader, st)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(f.Endpoints())
}

// ReloadAnswer is what POST /api/reload answers once the new config is
// applied.
type ReloadAnswer struct {
	// Status is "reloaded", or "reloaded; listen changed from A to B:
	// takes effect on restart; ..." when settings read only at start
	// changed (config.ReloadStatus).
	Status string `json:"status"`
	// RestartNeeded lists those settings, one phrase each; empty when
	// none.
	RestartNeeded []string `json:"restart_needed"`
	// Endpoints is the new endpoint set, as /api/endpoints shows it.
	Endpoints []EndpointStatus `json:"endpoints"`
}

// serveReload re-reads the config through Options.Reload and applies it,
// for an admin (checkAdmin).
func (f *Federator) serveReload(w http.ResponseWriter, r *http.Request) {
	// The body (callers send "{}" or nothing) carries no settings, but it
	// is read, bounded, before any answer: over HTTP/2 a handler that
	// returns with the body unread makes Go's server reset the stream
	// (RFC 9113 §8.1 allows it after a complete response), and curl 7.88
	// then reports error 92 for a complete 200 whose DATA raced the reset.
	if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 64<<10)); err != nil {
		httpError(w, http.StatusRequestEntityTooLarge, "lakefed: reload: the request body is not read: "+err.Error())
		return
	}
	if f.opts.Reload == nil {
		httpError(w, http.StatusNotImplemented, "lakefed: reload: this federator has no config file to reload")
		return
	}
	if code, msg := checkAdmin(r, f.snap.Load().cfg.Admin); code != 0 {
		f.log.WarnContext(r.Context(), "reload refused", "status", code, "remote", r.RemoteAddr, "err", msg)
		httpError(w, code, "lakefed: reload: "+msg)
		return
	}
	cfg, err := f.opts.Reload(r.Context())
	if err == nil {
		err = f.Reload(*cfg)
	}
	if err != nil {
		f.log.WarnContext(r.Context(), "reload failed", "err", err)
		httpError(w, http.StatusBadRequest, "lakefed: reload: "+err.Error())
		return
	}
	ans := ReloadAnswer{Status: config.ReloadStatus(cfg.RestartNeeded), RestartNeeded: cfg.RestartNeeded, Endpoints: f.Endpoints()}
	if ans.RestartNeeded == nil {
		ans.RestartNeeded = []string{}
	} else {
		f.log.WarnContext(r.Context(), "reloaded; settings read only at start changed", "status", ans.Status)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// IsAdmin reports whether id may call the admin API wherever it calls
// from: a token with adm.Scope, or a caller adm.Identities names. The
// one rule for the admin API and for the operator's pages, which admins
// may see too.
func IsAdmin(id auth.Identity, adm config.Admin) bool {
	return id.HasScope(adm.Scope) || id.Kind != auth.Anonymous && slices.Contains(adm.Identities, id.Name)
}

// checkAdmin vets an admin API request and returns the status and reason
// to refuse it with, or 0. The caller (the identity in the request's
// context, auth.WithCaller; anonymous without one) must be an admin
// (IsAdmin), or on this host when adm allows loopback clients. A browser
// sends a cross-site form POST (or a fetch with a CORS-safelisted content
// type such as text/plain) without a preflight, carrying whatever
// cookies, client certificate or network position the victim has; so
// also: the request's Origin (RFC 6454 section 7), or else its Referer
// (RFC 9110 section 10.1.3), must name this host, and the body must be
// declared application/json, which no form can send and which makes a
// cross-site fetch preflighted (Fetch standard, CORS-safelisted
// request-header).
func checkAdmin(r *http.Request, adm config.Admin) (int, string) {
	id, _ := auth.IdentityFrom(r.Context())
	admin := IsAdmin(id, adm)
	if !admin && !(adm.LoopbackAllowed() && loopback(r.RemoteAddr)) {
		return http.StatusForbidden, fmt.Sprintf("%s is not an admin: send a token with scope %q or a certificate federation.admin.identities names", id, adm.Scope)
	}
	if !admin && !literalHost(r.Host) {
		// DNS rebinding: a page of evil.example whose name now resolves
		// to 127.0.0.1 is same-origin with Host evil.example.
		return http.StatusForbidden, fmt.Sprintf("Host %q refused: name the federator by its address or localhost", r.Host)
	}
	if o := r.Header.Get("Origin"); o != "" {
		if !sameHost(o, r.Host) {
			return http.StatusForbidden, fmt.Sprintf("cross-origin request from %q refused", o)
		}
	} else if ref := r.Header.Get("Referer"); ref != "" && !sameHost(ref, r.Host) {
		return http.StatusForbidden, fmt.Sprintf("cross-site request from %q refused", ref)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, "send Content-Type: application/json"
	}
	return 0, ""
}

// loopback reports whether the host:port addr is a loopback address.
func loopback(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// literalHost reports whether the Host header host names the machine
// without DNS: an IP address or localhost (RFC 6761 section 6.3).
func literalHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return strings.EqualFold(h, "localhost")
}

// sameHost reports whether the URL u (an Origin or a Referer) names the
// host:port host. "null", the origin of sandboxed and file pages, never
// does.
func sameHost(u, host string) bool {
	p, err := url.Parse(u)
	return err == nil && p.Host != "" && strings.EqualFold(p.Host, host)
}
