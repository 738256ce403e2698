package federation

import (
	"context"
	"fmt"
	"time"

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
//
// With state shared through Redis, the mark is the fleet's: the other
// federators take it within a health interval, and lift it when any
// federator's tests lift it (sharedExclusion).
func (f *Federator) SetExcluded(name, why string, on bool) error {
	s := f.snap.Load()
	m, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("federation: exclude: no endpoint %q", name)
	}
	if sh := f.opts.Shared; sh != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		key := exclusionKey(name)
		if on {
			_ = sh.Put(ctx, key, []byte(why), sharedExclusionTTL)
		} else {
			_ = sh.Drop(ctx, key)
		}
	}
	f.exclude(m, why, on)
	return nil
}

// sharedExclusionTTL is how long an exclusion stays shared after the
// federator that made it last said so. Its scheduled tests say so every
// round (a minute by default); a federator that stops saying so (it
// died) has its exclusion lapse after this, and the health probes decide
// again.
const sharedExclusionTTL = 10 * time.Minute // many rounds of any fleet's tests

func exclusionKey(name string) string { return "exclude:" + name }

// exclude sets or lifts m's exclusion in this process.
func (f *Federator) exclude(m *member, why string, on bool) {
	if !on {
		if m.h.excluded.CompareAndSwap(true, false) {
			// Up again at once when the shared verdict had it up
			// meanwhile (followShared), else when its probes say so.
			m.mm.up.Set(b2f(m.h.Up()))
			f.log.Info("endpoint exclusion lifted", "endpoint", m.name, "reason", why)
		}
		return
	}
	if !m.h.excluded.CompareAndSwap(false, true) {
		return // already excluded
	}
	msg := "excluded: " + why
	m.h.lastErr.Store(&msg)
	m.h.probeOKs.Store(0)
	f.setState(m, false, msg) // no-op when the probes had it down already
}

// sharedExclusion makes this federator's exclusions those of the
// fleet: what the scheduled tests of any federator sharing state decided
// (SetExcluded) is taken, and what they lifted is lifted, whichever
// federator made it. Nothing changes while Redis cannot be reached.
func (f *Federator) sharedExclusion(ctx context.Context, m *member) {
	sh := f.opts.Shared
	if sh == nil || sh.Degraded() {
		return
	}
	why, err := sh.Get(ctx, exclusionKey(m.name))
	switch {
	case err != nil:
	case why != nil && !m.h.excluded.Load():
		f.exclude(m, string(why), true)
	case why == nil && m.h.excluded.Load():
		f.exclude(m, "lifted by the fleet's scheduled tests", false)
	}
}

// Excluded reports whether the endpoint name is currently excluded by
// SetExcluded.
func (f *Federator) Excluded(name string) bool {
	m, ok := f.snap.Load().byName[name]
	return ok && m.h.excluded.Load()
}
