package federation

import (
	"encoding/json"
	"net/http"
	"time"
)

// EndpointStatus is one endpoint's state as /api/endpoints shows it.
type EndpointStatus struct {
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Kind      string    `json:"kind"` // "local" or "upstream"
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
}

// Endpoints returns the state of every endpoint, in config order.
func (f *Federator) Endpoints() []EndpointStatus {
	s := f.snap.Load()
	out := make([]EndpointStatus, 0, len(s.members))
	for _, m := range s.members {
		st := EndpointStatus{
			Name: m.name, URL: m.url, Kind: "local", Prefix: m.prefix, Priority: m.priority,
			Mode: "redirect", Writable: m.writable, State: "up",
			LatencyMS: float64(m.h.Latency()) / float64(time.Millisecond),
			LastError: m.lastErr(), Requests: m.h.requests.Load(), Errors: m.h.errors.Load(),
		}
		if m.upstream {
			st.Kind = "upstream"
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

func (f *Federator) serveEndpoints(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(f.Endpoints())
}

// serveReload re-reads the config through Options.Reload and applies it.
func (f *Federator) serveReload(w http.ResponseWriter, r *http.Request) {
	if f.opts.Reload == nil {
		httpError(w, http.StatusNotImplemented, "lakefed: reload: this federator has no config file to reload")
		return
	}
	cfg, err := f.opts.Reload(r.Context())
	if err == nil {
		err = f.Reload(*cfg)
	}
	if err != nil {
		f.log.Warn("reload failed", "err", err)
		httpError(w, http.StatusBadRequest, "lakefed: reload: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(f.Endpoints())
}
