package federation

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// health is one endpoint's state, all atomics: the redirect path reads it
// on every request and must not lock.
//
// An endpoint goes down after FailAfter consecutive failed probes or
// ErrorLimit consecutive request errors, and comes back after
// RecoverAfter consecutive good probes (hysteresis: one lucky probe does
// not bring back a flapping site).
type health struct {
	up atomic.Bool
	// excluded is set by SetExcluded (the scheduled tests found the
	// endpoint failing): it keeps the endpoint out of use whatever the
	// probes say, until lifted.
	excluded   atomic.Bool
	probeFails atomic.Int32 // consecutive failed probes (written by the prober only)
	probeOKs   atomic.Int32 // consecutive good probes while down
	reqErrs    atomic.Int32 // consecutive request errors
	latency    atomic.Uint64
	lastErr    atomic.Pointer[string]
	lastChange atomic.Int64 // unix ns of the last up/down change
	requests   atomic.Uint64
	errors     atomic.Uint64
}

// Up reports whether the endpoint is usable: up by the health checks and
// not excluded.
func (h *health) Up() bool { return h.up.Load() && !h.excluded.Load() }

// Latency returns the recent latency (an EWMA of probes and Stats).
func (h *health) Latency() time.Duration {
	return time.Duration(math.Float64frombits(h.latency.Load()))
}

// observe folds one latency sample into the EWMA (weight 0.3).
func (h *health) observe(d time.Duration) {
	for range 8 {
		old := h.latency.Load()
		v := math.Float64frombits(old)
		if old == 0 {
			v = float64(d)
		} else {
			v = 0.7*v + 0.3*float64(d)
		}
		if h.latency.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

func (h *health) setErr(err error) {
	s := err.Error()
	h.lastErr.Store(&s)
}

// setUp changes the state and reports whether it changed.
func (f *Federator) setState(m *member, up bool, why string) {
	if !m.h.up.CompareAndSwap(!up, up) {
		return
	}
	m.h.lastChange.Store(time.Now().UnixNano())
	f.epoch.Add(1)
	if up {
		m.h.reqErrs.Store(0)
		m.mm.up.Set(b2f(m.h.Up())) // an excluded endpoint stays down (followShared)
		m.mm.ups.Inc()
		f.log.Info("endpoint up", "endpoint", m.name, "reason", why)
	} else {
		m.h.probeOKs.Store(0)
		m.mm.up.Set(0)
		m.mm.downs.Inc()
		f.log.Warn("endpoint down", "endpoint", m.name, "reason", why, "err", m.lastErr())
	}
}

func (m *member) lastErr() string {
	if p := m.h.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// requestResult is the passive health check: every answer of a real
// request counts. Only ErrUnavailable counts as a failure: "not found",
// "refused" and an upstream's "unavailable for this path"
// (ErrPathUnavailable) are answers, so the endpoint is alive.
func (f *Federator) requestResult(s *snapshot, m *member, err error, d time.Duration) {
	if m.peer {
		return // a holder answers while it is a live member (held.go)
	}
	m.h.requests.Add(1)
	if err == nil || !errors.Is(endpoint.Class(err), endpoint.ErrUnavailable) || errors.Is(err, endpoint.ErrPathUnavailable) {
		if m.h.reqErrs.Load() != 0 {
			m.h.reqErrs.Store(0)
		}
		if d > 0 {
			m.h.observe(d)
		}
		return
	}
	m.h.errors.Add(1)
	m.h.setErr(err)
	m.mm.errors.Inc()
	if int(m.h.reqErrs.Add(1)) >= s.cfg.Health.ErrorLimit {
		f.setState(m, false, "request errors")
	}
}

// probeLoop probes m every interval until ctx ends. The settings are
// re-read each round so that a reload changing them takes effect.
func (f *Federator) probeLoop(ctx context.Context, m *member) {
	for {
		s := f.snap.Load()
		hc := s.cfg.Health
		round := f.sharedProbe(ctx, s, m)
		if round == probeSelf {
			f.probeOnce(ctx, s, m)
		}
		f.sharedExclusion(ctx, m)
		// A federator that takes another's verdicts looks at them a few
		// times an interval: the prober's probe may come at any moment
		// of it, and all federators should agree within about one.
		steps := 1
		if round == followed {
			steps = followSteps
		}
		for i := range steps {
			t := time.NewTimer(hc.Interval.D() / time.Duration(steps))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if i < steps-1 {
				f.followShared(ctx, m)
			}
		}
	}
}

// followSteps is how many times an interval a federator that does not
// probe an endpoint itself reads the shared verdict on it.
const followSteps = 4

// A round of the health checks of one endpoint, with shared state.
const (
	probeSelf = iota // probe it yourself: nothing is shared, or nobody published
	probed           // this federator probed it and published the verdict
	followed         // this federator took another's published verdict
)

// probeOnce runs one round of probes: one, and more at once while the
// connection is refused.
//
// A refused connection is certain: nothing listens where the endpoint
// was (a killed server, a stopped door). Waiting an interval to see it
// again kept a killed site in use for FailAfter intervals (4 s with
// interval 2 s), so it is probed again at once, and a dead site is down
// within one interval of dying. Every other failure keeps the
// hysteresis, FailAfter probes an interval apart: a timeout may be a
// slow moment of the network, an error answer (503 while starting) a
// passing one.
func (f *Federator) probeOnce(ctx context.Context, s *snapshot, m *member) {
	for f.probe(ctx, s, m) && m.h.up.Load() {
	}
}

// probe runs one probe and reports whether its connection was refused
// (see probeOnce). A probe slower than the health timeout failed even if
// it answered: an endpoint that slow is no use to a client.
func (f *Federator) probe(ctx context.Context, s *snapshot, m *member) (refused bool) {
	hc := s.cfg.Health
	pctx, cancel := context.WithTimeout(ctx, hc.Timeout.D())
	start := time.Now()
	err := m.ep.Probe(pctx)
	d := time.Since(start)
	cancel()
	if ctx.Err() != nil {
		return false // shutting down: not the endpoint's fault
	}
	if err == nil && d > hc.Timeout.D() {
		err = errors.New("probe slower than the health timeout")
	}
	if err == nil {
		m.h.observe(d)
		m.h.probeFails.Store(0)
		// Good probes of an excluded endpoint do not count towards its
		// recovery: after the exclusion is lifted it needs RecoverAfter
		// of them, like any endpoint that was down.
		if !m.h.up.Load() && !m.h.excluded.Load() && int(m.h.probeOKs.Add(1)) >= hc.RecoverAfter {
			f.setState(m, true, "probes")
		}
		return false
	}
	m.h.setErr(err)
	m.h.probeOKs.Store(0)
	if int(m.h.probeFails.Add(1)) >= hc.FailAfter {
		f.setState(m, false, "probes")
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// sharedState is one endpoint's state as the federator that probed it
// published it for the others (sharedProbe).
type sharedState struct {
	Up   bool   `json:"up"`
	Err  string `json:"err,omitempty"`
	Node string `json:"node"`
}

// sharedProbe shares the active health checks of the federators sharing
// state: each interval, one of them (whoever takes the endpoint's lease)
// probes it and publishes its state, and the others take that state, so
// an endpoint gets one probe per interval, not one per federator, and
// all of them agree on it. It reports the round: probed (this federator
// took the lease and probed), followed (it took another's verdict), or
// probeSelf when it must probe itself: it shares nothing, Redis cannot be
// reached, or nobody published a state (the prober died; its lease ends
// within an interval).
func (f *Federator) sharedProbe(ctx context.Context, s *snapshot, m *member) int {
	sh := f.opts.Shared
	if sh == nil || sh.Degraded() {
		return probeSelf
	}
	interval := s.cfg.Health.Interval.D()
	got, err := sh.TryLease(ctx, "probe:"+m.name, interval*9/10)
	if err != nil {
		return probeSelf
	}
	if got {
		f.probeOnce(ctx, s, m)
		b, _ := json.Marshal(sharedState{Up: m.h.up.Load(), Err: m.lastErr(), Node: sh.Node()})
		_ = sh.Put(ctx, healthKey(m), b, 3*interval)
		return probed
	}
	if !f.followShared(ctx, m) {
		return probeSelf
	}
	return followed
}

func healthKey(m *member) string { return "health:" + m.name }

// followShared takes the verdict on m another federator published, and
// reports whether there was one.
func (f *Federator) followShared(ctx context.Context, m *member) bool {
	sh := f.opts.Shared
	if sh == nil || sh.Degraded() {
		return false
	}
	b, err := sh.Get(ctx, healthKey(m))
	var st sharedState
	if err != nil || b == nil || json.Unmarshal(b, &st) != nil {
		return false
	}
	if !st.Up && st.Err != "" {
		m.h.setErr(errors.New(st.Err))
	}
	f.setState(m, st.Up, "probed by "+st.Node) // an exclusion stays: Up checks it apart
	return true
}
