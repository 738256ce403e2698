// Package sitetest runs lakefed's scheduled functional tests: every
// interval, each federated endpoint is asked to stat and read a small
// probe file (and optionally to write, read back and delete one), under a
// load budget per site — at most N tests of a site at once and at most R
// operations per second — so testing never hammers a site, as HammerCloud
// tests do for the WLCG but without registering the site first. Every
// test becomes a run of kind "functional" in the bench results store, so
// the dashboard shows each endpoint's history.
//
// With exclude_failing, an endpoint that fails FailAfter rounds in a row is
// marked down in the federator (Excluder) until a test passes again. A
// guard keeps a broken tester from emptying the federation (HammerCloud's
// mass-exclusion problem): when more than MaxExcludedFraction of the
// endpoints would be excluded, or every endpoint failed the same round,
// the tester declares itself suspect and excludes no one more.
//
//	s, _ := schedule.New(schedule.Options{Config: *cfg.Tests, Targets: schedule.FederatorTargets(fed),
//		Store: st, Excluder: fed, Registerer: fed.Registry(), Log: log})
//	go s.Run(ctx) // rounds until ctx ends
//	st := s.Status() // for the dashboard
package sitetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/results"
)

// Kind is the run kind the scheduled tests store.
const Kind = results.KindFunctional

// pruneEvery is how often the tester deletes its stored runs older than
// the retention: the store then holds at most an hour's runs beyond it,
// and the delete runs 24 times a day rather than every round.
const pruneEvery = time.Hour

// historyLen is how many past tests each endpoint's in-memory history
// keeps (an hour at the default interval).
const historyLen = 60

// Target is one endpoint to test.
type Target struct {
	// Name identifies the endpoint (the federator's endpoint name); the
	// excluder and the store's site column use it.
	Name string
	// Site groups endpoints that share a load budget: endpoints of one
	// site are tested at most MaxConcurrentPerSite at once and share
	// MaxRequestsPerSecond. Empty: the host:port of URL, else Name.
	Site string
	// URL is shown and stored as the run's target (credentials redacted).
	URL string
	// Path is the directory on the endpoint the probe path is relative
	// to. Empty: "/".
	Path string
	// Writable allows the probe file to be written when missing and the
	// write round trip.
	Writable bool
	// Endpoint is what is tested.
	Endpoint endpoint.Endpoint
}

// Excluder marks endpoints down (the federator's SetExcluded).
type Excluder interface {
	SetExcluded(name, why string, on bool) error
}

// Options configure a Scheduler.
type Options struct {
	// Config is the tests section; zero fields get their defaults.
	Config config.Tests
	// Targets returns the endpoints to test; it is called every round so
	// that reloads are followed. Required.
	Targets func() []Target
	// Store receives one run per endpoint test. Nil: results are kept in
	// memory only (Status).
	Store *results.Store
	// Excluder applies exclusions when Config.ExcludeFailing is set. Nil:
	// no exclusion (failures are still counted).
	Excluder Excluder
	// Registerer gets the tester's metrics. Nil: no metrics.
	Registerer prometheus.Registerer
	// Log receives exclusions and the suspect warning. Nil: slog.Default().
	Log *slog.Logger
}

// Op is one operation of an endpoint test.
type Op struct {
	// Name is "stat", "stat-dir", "put-probe", "read", "write",
	// "read-back" or "delete".
	Name string `json:"name"`
	// Offset is when it started, since the test started.
	Offset time.Duration `json:"offset"`
	// Duration is how long it took.
	Duration time.Duration `json:"duration"`
	Bytes    int64         `json:"bytes,omitempty"`
	OK       bool          `json:"ok"`
	Err      string        `json:"err,omitempty"`
}

// Result is one endpoint's test in one round.
type Result struct {
	Name    string    `json:"name"`
	Site    string    `json:"site"`
	URL     string    `json:"url"`
	Started time.Time `json:"started"`
	// Duration is the whole test, budget waits included.
	Duration time.Duration `json:"duration"`
	// OK is true when every operation succeeded.
	OK  bool   `json:"ok"`
	Err string `json:"err,omitempty"`
	// Ops are the operations, in order.
	Ops []Op `json:"ops"`
	// Latency is the duration of the first stat (the endpoint's answer
	// time for metadata): what the dashboard's latency history draws.
	Latency time.Duration `json:"latency"`
	// RunID is the stored run, 0 when not stored.
	RunID int64 `json:"run_id,omitempty"`
	// tester is set when the test could not run for the tester's own
	// reasons (shutdown): such results count neither way.
	tester bool
}

// Point is one entry of an endpoint's in-memory history.
type Point struct {
	T       time.Time     `json:"t"`
	Latency time.Duration `json:"latency"`
	OK      bool          `json:"ok"`
}

// EndpointState is what the tester knows about one endpoint.
type EndpointState struct {
	Name string `json:"name"`
	Site string `json:"site"`
	// Last is the latest test.
	Last Result `json:"last"`
	// Fails counts consecutive failed rounds.
	Fails int `json:"fails"`
	// Excluded says the tester has the endpoint marked down.
	Excluded bool `json:"excluded"`
	// History holds the latest tests, oldest first.
	History []Point `json:"history"`
}

// Status is the tester's state, for the dashboard.
type Status struct {
	Rounds    int       `json:"rounds"`
	LastRound time.Time `json:"last_round,omitzero"`
	// Suspect says the last round's failures looked like the tester's
	// own (too many endpoints failing at once); SuspectWhy says why.
	Suspect    bool            `json:"suspect"`
	SuspectWhy string          `json:"suspect_why,omitempty"`
	Endpoints  []EndpointState `json:"endpoints"`
}

// Scheduler runs the rounds. Its methods may be called concurrently.
type Scheduler struct {
	cfg      config.Tests
	opts     Options
	log      *slog.Logger
	m        *metrics
	roundMu  sync.Mutex // one round at a time; guards pruned
	pruned   time.Time  // when the last prune ran
	mu       sync.Mutex // guards the fields below
	budgets  map[string]*budget
	state    map[string]*epState
	order    []string // endpoint names in target order
	rounds   int
	last     time.Time
	suspect  bool
	whySusp  string
	probeBuf []byte
}

type epState struct {
	site     string
	last     Result
	fails    int
	excluded bool
	why      string
	hist     []Point // ring, oldest first once full
	next     int
}

// New returns a scheduler; it does nothing until Run or RunOnce.
func New(o Options) (*Scheduler, error) {
	if o.Targets == nil {
		return nil, errors.New("schedule: no Targets function")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	o.Config.SetDefaults()
	s := &Scheduler{cfg: o.Config, opts: o, log: o.Log.With("component", "tests"),
		budgets: map[string]*budget{}, state: map[string]*epState{}}
	s.probeBuf = bytes.Repeat([]byte("lakefed probe\n"), int(s.cfg.ProbeSize)/14+1)[:s.cfg.ProbeSize]
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

// FederatorTargets returns a Targets function over the federator's
// current endpoints, each its own site by host:port.
func FederatorTargets(f *federation.Federator) func() []Target {
	return func() []Target {
		tts := f.TestTargets()
		out := make([]Target, 0, len(tts))
		for _, tt := range tts {
			out = append(out, Target{Name: tt.Name, URL: tt.URL, Path: tt.Path, Writable: tt.Writable,
				Endpoint: tt.Endpoint})
		}
		return out
	}
}

// Run runs a round every Interval until ctx ends. It returns nil then.
//
// With a results store, the rounds are periods of the store's clock, and
// a round runs only where the store gives its period (ClaimPeriod):
// federators sharing a store (PostgreSQL) test each endpoint once per
// period between them, not once each. Each asks in the middle of its
// period, so clocks that differ by less than half an interval agree on
// which period it is. A store that does not answer does not stop the
// tests: the round runs.
func (s *Scheduler) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		iv := s.cfg.Interval.D()
		if s.claim(ctx, iv) {
			s.RunOnce(ctx)
		}
		now := time.Now()
		next := now.Truncate(iv).Add(iv / 2)
		if !next.After(now) {
			next = next.Add(iv)
		}
		t.Reset(next.Sub(now))
	}
}

// claimName is the work the rounds claim in the results store.
const claimName = "sitetest-round"

// claim reports whether this scheduler runs the round of the current
// period (see Run).
func (s *Scheduler) claim(ctx context.Context, iv time.Duration) bool {
	if s.opts.Store == nil {
		return true
	}
	got, err := s.opts.Store.ClaimPeriod(ctx, claimName, iv)
	if err != nil {
		s.log.Warn("the results store does not answer: testing this round without a claim", "err", err)
		return true
	}
	return got
}

func siteOf(t Target) string {
	if t.Site != "" {
		return t.Site
	}
	if u, err := url.Parse(t.URL); err == nil && u.Host != "" {
		return u.Host
	}
	return t.Name
}

// RunOnce tests every target once (sites in parallel, each within its
// budget), records the results, applies the exclusion rules and returns
// the results in target order.
func (s *Scheduler) RunOnce(ctx context.Context) []Result {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	targets := s.opts.Targets()
	results := make([]Result, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		if t.Site == "" {
			t.Site = siteOf(t)
		}
		b := s.budget(t.Site)
		wg.Go(func() {
			results[i] = s.testOne(ctx, b, t)
		})
	}
	wg.Wait()
	for i := range results {
		if s.opts.Store != nil && !results[i].tester {
			id, err := s.save(context.WithoutCancel(ctx), &results[i])
			if err != nil {
				s.log.Warn("cannot store a test result", "endpoint", results[i].Name, "err", err)
			}
			results[i].RunID = id
		}
	}
	s.pruneLocked(context.WithoutCancel(ctx))
	s.apply(targets, results, s.storedFails(context.WithoutCancel(ctx), results))
	return results
}

// storedFails counts, for each endpoint tested, the failed tests in a
// row up to this round in the results store: the history every federator
// sharing the store wrote, so that rounds run by different federators
// count towards one decision. Endpoints whose history cannot be read are
// left out (apply counts in memory for them).
func (s *Scheduler) storedFails(ctx context.Context, rs []Result) map[string]int {
	st := s.opts.Store
	if st == nil {
		return nil
	}
	out := map[string]int{}
	for _, r := range rs {
		if r.tester || r.RunID == 0 {
			continue
		}
		h, err := st.SiteHistory(ctx, r.Name, Kind, s.cfg.FailAfter)
		if err != nil {
			continue
		}
		n := 0
		for i := len(h) - 1; i >= 0 && h[i].Classification != ClassOK; i-- {
			n++
		}
		out[r.Name] = n
	}
	return out
}

func (s *Scheduler) budget(site string) *budget {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.budgets[site]
	if !ok {
		b = newBudget(s.cfg.MaxConcurrentPerSite, s.cfg.MaxRequestsPerSecond)
		s.budgets[site] = b
	}
	return b
}

// testOne runs one endpoint's test inside its site's budget.
func (s *Scheduler) testOne(ctx context.Context, b *budget, t Target) Result {
	res := Result{Name: t.Name, Site: t.Site, URL: t.URL, Started: time.Now()}
	if err := b.acquire(ctx); err != nil {
		res.tester, res.Err = true, "tester: "+err.Error()
		return res
	}
	defer b.release()
	tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.D())
	defer cancel()
	start := time.Now()
	res.Started = start
	ep := t.Endpoint
	// do runs one operation within the rate budget and records it.
	do := func(name string, fn func(ctx context.Context) (int64, error)) error {
		if err := b.wait(tctx); err != nil {
			if ctx.Err() != nil {
				res.tester = true // shutting down, not the endpoint's fault
			}
			res.Ops = append(res.Ops, Op{Name: name, Offset: time.Since(start), Err: "budget: " + err.Error()})
			return err
		}
		t0 := time.Now()
		n, err := fn(tctx)
		op := Op{Name: name, Offset: t0.Sub(start), Duration: time.Since(t0), Bytes: n, OK: err == nil}
		if err != nil {
			op.Err = err.Error()
			if ctx.Err() != nil {
				res.tester = true
			}
		}
		res.Ops = append(res.Ops, op)
		return err
	}
	dir := t.Path
	if dir == "" {
		dir = "/"
	}
	probe := path.Join(dir, s.cfg.ProbePath)
	err := s.probe(ep, t, dir, probe, do)
	if err == nil && s.cfg.WriteTest && t.Writable {
		err = s.roundTrip(ep, path.Dir(probe), do)
	}
	res.Duration = time.Since(start)
	res.OK = err == nil
	if err != nil {
		res.Err = err.Error()
	}
	for _, op := range res.Ops {
		if op.Name == "stat" || op.Name == "stat-dir" {
			res.Latency = op.Duration
			break
		}
	}
	return res
}

type doFunc func(name string, fn func(ctx context.Context) (int64, error)) error

// probe stats and reads the probe file, writing it first on a writable
// endpoint that lacks it; a read-only endpoint without one has its
// directory stat'ed instead.
func (s *Scheduler) probe(ep endpoint.Endpoint, t Target, dir, probe string, do doFunc) error {
	var info endpoint.Info
	stat := func(ctx context.Context) (int64, error) {
		var err error
		info, err = ep.Stat(ctx, probe)
		return 0, err
	}
	err := do("stat", stat)
	if errors.Is(err, endpoint.ErrNotFound) {
		if !t.Writable {
			return do("stat-dir", func(ctx context.Context) (int64, error) {
				_, err := ep.Stat(ctx, dir)
				return 0, err
			})
		}
		if err = do("put-probe", func(ctx context.Context) (int64, error) {
			return int64(len(s.probeBuf)), ep.Put(ctx, probe, bytes.NewReader(s.probeBuf), int64(len(s.probeBuf)))
		}); err != nil {
			return err
		}
		err = do("stat", stat)
	}
	if err != nil {
		return err
	}
	if info.IsDir {
		return fmt.Errorf("schedule: probe %s is a directory", probe)
	}
	n := min(info.Size, int64(s.cfg.ProbeSize))
	return do("read", func(ctx context.Context) (int64, error) {
		rc, err := ep.Open(ctx, probe, 0, n)
		if err != nil {
			return 0, err
		}
		defer rc.Close()
		got, err := io.Copy(io.Discard, rc)
		if err == nil && got != n {
			err = fmt.Errorf("schedule: read %d bytes of %s, want %d", got, probe, n)
		}
		return got, err
	})
}

// roundTrip writes a fresh file, reads it back, compares and deletes it.
func (s *Scheduler) roundTrip(ep endpoint.Endpoint, dir string, do doFunc) error {
	var tag [6]byte
	_, _ = rand.Read(tag[:])
	p := path.Join(dir, "lakefed-test-"+hex.EncodeToString(tag[:]))
	data := make([]byte, s.cfg.ProbeSize)
	_, _ = rand.Read(data)
	if err := do("write", func(ctx context.Context) (int64, error) {
		return int64(len(data)), ep.Put(ctx, p, bytes.NewReader(data), int64(len(data)))
	}); err != nil {
		return err
	}
	err := do("read-back", func(ctx context.Context) (int64, error) {
		rc, err := ep.Open(ctx, p, 0, int64(len(data)))
		if err != nil {
			return 0, err
		}
		defer rc.Close()
		got, err := io.ReadAll(io.LimitReader(rc, int64(len(data))+1))
		if err == nil && !bytes.Equal(got, data) {
			err = fmt.Errorf("schedule: %s read back %d bytes that differ from the %d written", p, len(got), len(data))
		}
		return int64(len(got)), err
	})
	derr := do("delete", func(ctx context.Context) (int64, error) { return 0, ep.Delete(ctx, p) })
	return errors.Join(err, derr)
}

// pruneLocked deletes the stored functional runs (and their samples)
// older than the retention, at most once per pruneEvery, so that about
// 4,300 runs a day do not fill the disk nor bury the manual bench runs.
// roundMu must be held.
func (s *Scheduler) pruneLocked(ctx context.Context) {
	now := time.Now()
	if s.opts.Store == nil || now.Sub(s.pruned) < pruneEvery {
		return
	}
	s.pruned = now
	n, err := s.opts.Store.Prune(ctx, Kind, now.Add(-s.cfg.Retention.D()))
	if err != nil {
		s.log.Warn("cannot delete old test results", "err", err)
		return
	}
	if n > 0 {
		s.log.Info("deleted old test results", "runs", n, "retention", s.cfg.Retention.String())
	}
}

// save stores r as a functional run.
func (s *Scheduler) save(ctx context.Context, r *Result) (int64, error) {
	st := s.opts.Store
	params := fmt.Appendf(nil, `{"probe_path":%q,"probe_size":%d,"write_test":%v,"interval":%q}`,
		s.cfg.ProbePath, s.cfg.ProbeSize, s.cfg.WriteTest, s.cfg.Interval.String())
	run := &results.Run{Kind: Kind, Target: r.URL, Site: r.Name, Params: params, Started: r.Started}
	id, err := st.CreateRun(ctx, run)
	if err != nil {
		return 0, err
	}
	samples := make([]results.Sample, 0, len(r.Ops))
	for _, op := range r.Ops {
		samples = append(samples, results.Sample{T: op.Offset.Seconds(), Kind: op.Name, Value: op.Duration.Seconds(),
			Bytes: op.Bytes, OK: op.OK, Err: op.Err})
	}
	if err := st.AddSamples(ctx, id, samples); err != nil {
		return id, err
	}
	f := results.Finish{Status: results.StatusDone, Classification: ClassOK, Ended: r.Started.Add(r.Duration),
		Summary: map[string]any{"ok": r.OK, "latency": r.Latency.Seconds(), "duration": r.Duration.Seconds(),
			"ops": len(r.Ops), "site": r.Site}}
	if !r.OK {
		f.Classification, f.Reasons, f.Error = ClassToDebug, []string{r.Err}, r.Err
	}
	return id, st.FinishRun(ctx, id, f)
}

// apply updates the per-endpoint state with a round's results and
// applies the exclusion rules with the mass-exclusion guard. stored are
// the failures in a row the results store holds (storedFails); an
// endpoint missing there counts this round's result onto its own.
func (s *Scheduler) apply(targets []Target, results []Result, stored map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rounds++
	s.last = time.Now()
	live := map[string]bool{}
	s.order = s.order[:0]
	for i, r := range results {
		live[r.Name] = true
		s.order = append(s.order, r.Name)
		e := s.state[r.Name]
		if e == nil {
			e = &epState{}
			s.state[r.Name] = e
		}
		e.site = targets[i].Site
		if e.site == "" {
			e.site = siteOf(targets[i])
		}
		if r.tester {
			continue // the tester could not run it: neither pass nor fail
		}
		e.last = r
		p := Point{T: r.Started, Latency: r.Latency, OK: r.OK}
		if len(e.hist) < historyLen {
			e.hist = append(e.hist, p)
		} else {
			e.hist[e.next] = p
			e.next = (e.next + 1) % historyLen
		}
		s.m.result(r.Name, r.OK, r.Started)
		switch n, ok := stored[r.Name]; {
		case ok:
			e.fails = n
		case r.OK:
			e.fails = 0
		default:
			e.fails++
		}
		if ex, ok := s.opts.Excluder.(interface{ Excluded(string) bool }); ok {
			// Another federator of the fleet may have excluded it, or
			// lifted the exclusion this one made.
			if e.excluded = ex.Excluded(r.Name); e.excluded && e.why == "" {
				e.why = "excluded by another federator's tests"
			}
		}
	}
	for name, e := range s.state { // endpoints removed by a reload
		if !live[name] {
			s.m.forget(name)
			delete(s.state, name)
			_ = e
		}
	}

	// The guard. Failures of the tester itself look like many endpoints
	// failing at once; those must not empty the federation.
	failedNow, tested := 0, 0
	for _, r := range results {
		if !r.tester {
			tested++
			if !r.OK {
				failedNow++
			}
		}
	}
	var lift, add, keep []string
	for _, name := range s.order {
		e := s.state[name]
		switch {
		case e.excluded && e.fails == 0:
			lift = append(lift, name)
		case e.excluded:
			keep = append(keep, name)
		case e.fails >= s.cfg.FailAfter:
			add = append(add, name)
		}
	}
	total := len(s.order)
	allowed := int(s.cfg.MaxExcludedFraction*float64(total) + 1e-9)
	s.suspect, s.whySusp = false, ""
	switch {
	case tested >= 2 && failedNow == tested:
		s.suspect = true
		s.whySusp = fmt.Sprintf("every endpoint (%d) failed this round: the tester itself may be broken", tested)
	case len(keep)+len(add) > allowed:
		s.suspect = true
		s.whySusp = fmt.Sprintf("%d of %d endpoints would be excluded, more than max_excluded_fraction %.2g allows (%d)",
			len(keep)+len(add), total, s.cfg.MaxExcludedFraction, allowed)
	}
	s.m.suspect.Set(b2f(s.suspect))
	if s.suspect && len(add) > 0 {
		s.log.Warn("tester suspect: excluding no endpoints", "reason", s.whySusp, "endpoints", add)
	}
	if s.suspect {
		add = nil
	}
	ex := s.opts.Excluder
	if !s.cfg.ExcludeFailing || ex == nil {
		return
	}
	for _, name := range lift {
		e := s.state[name]
		if err := ex.SetExcluded(name, "scheduled tests pass again", false); err != nil {
			s.log.Warn("cannot lift an exclusion", "endpoint", name, "err", err)
			continue
		}
		e.excluded = false
		s.m.excluded(name, false)
		s.log.Info("endpoint no longer excluded", "endpoint", name)
	}
	for _, name := range keep { // re-assert: health probes may have brought it back
		_ = ex.SetExcluded(name, s.state[name].why, true)
	}
	for _, name := range add {
		e := s.state[name]
		why := fmt.Sprintf("%d scheduled tests failed in a row: %s", e.fails, e.last.Err)
		if err := ex.SetExcluded(name, why, true); err != nil {
			s.log.Warn("cannot exclude an endpoint", "endpoint", name, "err", err)
			continue
		}
		e.excluded, e.why = true, why
		s.m.excluded(name, true)
		s.log.Warn("endpoint excluded", "endpoint", name, "reason", why)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Status returns a copy of the tester's state, endpoints in target order.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Rounds: s.rounds, LastRound: s.last, Suspect: s.suspect, SuspectWhy: s.whySusp}
	for _, name := range s.order {
		e, ok := s.state[name]
		if !ok {
			continue
		}
		h := make([]Point, 0, len(e.hist))
		h = append(h, e.hist[e.next:]...)
		h = append(h, e.hist[:e.next]...)
		last := e.last
		last.Ops = append([]Op(nil), last.Ops...)
		st.Endpoints = append(st.Endpoints, EndpointState{Name: name, Site: e.site, Last: last, Fails: e.fails,
			Excluded: e.excluded, History: h})
	}
	return st
}
