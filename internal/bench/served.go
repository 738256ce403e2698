package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// servedSet is the hosts that answered a run's reads after redirects
// (RFC 9110 section 15.4): through a redirecting federator the bytes come
// from a site, and the run is that site's history, not the federator's.
type servedSet struct {
	mu    sync.Mutex
	hosts map[string]struct{} // guarded by mu; nil until the first answer
}

// note records that host answered. A lookup of a known host allocates
// nothing.
func (s *servedSet) note(host string) {
	s.mu.Lock()
	if _, ok := s.hosts[host]; !ok {
		if s.hosts == nil {
			s.hosts = make(map[string]struct{})
		}
		s.hosts[host] = struct{}{}
	}
	s.mu.Unlock()
}

// reset forgets the hosts of an earlier run on the same target.
func (s *servedSet) reset() {
	s.mu.Lock()
	s.hosts = nil
	s.mu.Unlock()
}

// sorted returns the hosts seen, sorted.
func (s *servedSet) sorted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.hosts))
	for h := range s.hosts {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// noteServed records which host answered resp: its final URL once the
// client has followed the redirects.
func (t *Target) noteServed(resp *http.Response) {
	if resp.Request != nil && resp.Request.URL != nil {
		t.served.note(resp.Request.URL.Host)
	}
}

// servedSite names the site a run tested, for Result.Site: the pinned
// site; else, when the target redirected every request to one other
// host, that host (by its endpoint name when the target is a federator
// that says so in /api/endpoints); with several such hosts, "TARGET (N
// sites: a, b)". "" (the target's own host, Begin's default) when the
// target served the bytes itself, as a site or a proxying federator does.
func (t *Target) servedSite(ctx context.Context) string {
	if t.site != "" || t.base == nil {
		return t.site
	}
	hosts := t.served.sorted()
	if len(hosts) == 0 || (len(hosts) == 1 && hosts[0] == t.base.Host) {
		return ""
	}
	names := t.endpointNames(ctx)
	for i, h := range hosts {
		if n, ok := names[h]; ok {
			hosts[i] = n
		}
	}
	if len(hosts) == 1 {
		return hosts[0]
	}
	slices.Sort(hosts) // by name now, not by address
	return fmt.Sprintf("%s (%d sites: %s)", t.base.Host, len(hosts), strings.Join(hosts, ", "))
}

// endpointNames maps host:port to endpoint name from the target's
// GET /api/endpoints (a federator's admin API), once per run. It is best
// effort: any error, or a host shared by several endpoints, leaves the
// host unnamed.
func (t *Target) endpointNames(ctx context.Context) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	u := url.URL{Scheme: t.base.Scheme, Host: t.base.Host, Path: "/api/endpoints"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil
	}
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var eps []struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&eps); err != nil {
		return nil
	}
	names := make(map[string]string, len(eps))
	shared := make(map[string]bool)
	for _, ep := range eps {
		eu, err := url.Parse(ep.URL)
		if err != nil || eu.Host == "" || ep.Name == "" {
			continue
		}
		if n, ok := names[eu.Host]; ok && n != ep.Name {
			shared[eu.Host] = true
		}
		names[eu.Host] = ep.Name
	}
	for h := range shared {
		delete(names, h)
	}
	return names
}
