package federation

import (
	"fmt"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// TestTarget is one federated endpoint as the scheduled functional tests
// (package internal/sitetest) see it: the federator's own endpoint
// instance, so tests use the same connections, credentials and path
// mapping as client requests do.
type TestTarget struct {
	// Name is the endpoint's name from the config.
	Name string
	// URL is the configured URL, credentials redacted.
	URL string
	// Path is where the federated prefix lives on the endpoint (clean,
	// "/" for the endpoint's root): probe files go below it.
	Path string
	// Writable says PUT and DELETE may reach the endpoint.
	Writable bool
	// Upstream marks another lakefed federator (kind upstream).
	Upstream bool
	// Endpoint is the endpoint itself; safe for concurrent use.
	Endpoint endpoint.Endpoint
}

// TestTargets returns the endpoints of the current configuration, in
// config order. Called every round, it follows reloads.
func (f *Federator) TestTargets() []TestTarget {
	s := f.snap.Load()
	out := make([]TestTarget, 0, len(s.members))
	for _, m := range s.members {
		out = append(out, TestTarget{Name: m.name, URL: m.url, Path: m.path, Writable: m.writable,
			Upstream: m.upstream, Endpoint: m.ep})
	}
	return out
}

// SetExcluded marks the endpoint name down (on) because of why — the
// scheduled tests found it failing consistently — or lifts that mark
// (off). An excluded endpoint is treated as down by locate, ranking,
// listing and placement, exactly as one the probes took down, and shows
// as "down" in /api/endpoints with last_error "excluded: why"; the probes
// cannot bring it back while the mark stands. Lifting does not bring it up
// at once: the health probes do, after RecoverAfter good probes (the usual
// hysteresis). Setting a mark that is already set, or lifting one that is
// not, changes nothing. Unknown names are an error.
func (f *Federator) SetExcluded(name, why string, on bool) error {
	s := f.snap.Load()
	m, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("federation: exclude: no endpoint %q", name)
	}
	if !on {
		if m.h.excluded.CompareAndSwap(true, false) {
			f.log.Info("endpoint exclusion lifted", "endpoint", name, "reason", why)
		}
		return nil
	}
	if !m.h.excluded.CompareAndSwap(false, true) {
		return nil // already excluded
	}
	msg := "excluded: " + why
	m.h.lastErr.Store(&msg)
	m.h.probeOKs.Store(0)
	f.setState(m, false, msg) // no-op when the probes had it down already
	return nil
}

// Excluded reports whether the endpoint name is currently excluded by
// SetExcluded.
func (f *Federator) Excluded(name string) bool {
	m, ok := f.snap.Load().byName[name]
	return ok && m.h.excluded.Load()
}
