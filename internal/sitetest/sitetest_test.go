package sitetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/testenv"
)

// fakeEP is an in-memory endpoint that counts calls, the calls in flight
// on its site, and fails every call when down.
type fakeEP struct {
	name  string
	site  *siteCounter
	down  atomic.Bool
	mu    sync.Mutex
	files map[string][]byte
	calls atomic.Int64
}

// siteCounter is shared by the endpoints of one site: operations in flight
// now and at most, and when each started.
type siteCounter struct {
	inflight, maxInflight atomic.Int64
	mu                    sync.Mutex
	starts                []time.Time
}

func (c *siteCounter) enter() func() {
	n := c.inflight.Add(1)
	for {
		m := c.maxInflight.Load()
		if n <= m || c.maxInflight.CompareAndSwap(m, n) {
			break
		}
	}
	c.mu.Lock()
	c.starts = append(c.starts, time.Now())
	c.mu.Unlock()
	// Hold the call a little so overlapping tests would be seen.
	time.Sleep(2 * time.Millisecond) // the call's duration: overlapping tests must overlap in time
	return func() { c.inflight.Add(-1) }
}

func newFake(name string, site *siteCounter) *fakeEP {
	return &fakeEP{name: name, site: site, files: map[string][]byte{}}
}

var errDown = fmt.Errorf("fake: down: %w", endpoint.ErrUnavailable)

func (f *fakeEP) begin() (func(), error) {
	f.calls.Add(1)
	done := f.site.enter()
	if f.down.Load() {
		done()
		return nil, errDown
	}
	return done, nil
}

func (f *fakeEP) Name() string { return f.name }
func (f *fakeEP) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	done, err := f.begin()
	if err != nil {
		return endpoint.Info{}, err
	}
	defer done()
	if p == "/" {
		return endpoint.Info{Name: "/", IsDir: true}, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.files[p]
	if !ok {
		return endpoint.Info{}, endpoint.ErrNotFound
	}
	return endpoint.Info{Name: p, Size: int64(len(b))}, nil
}
func (f *fakeEP) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	return nil, endpoint.ErrUnsupported
}
func (f *fakeEP) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	done, err := f.begin()
	if err != nil {
		return nil, err
	}
	defer done()
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.files[p]
	if !ok {
		return nil, endpoint.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b[off : off+n])), nil
}
func (f *fakeEP) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	done, err := f.begin()
	if err != nil {
		return err
	}
	defer done()
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.files[p] = b
	f.mu.Unlock()
	return nil
}
func (f *fakeEP) Delete(ctx context.Context, p string) error {
	done, err := f.begin()
	if err != nil {
		return err
	}
	defer done()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[p]; !ok {
		return endpoint.ErrNotFound
	}
	delete(f.files, p)
	return nil
}
func (f *fakeEP) Mkdir(ctx context.Context, p string) error { return nil }
func (f *fakeEP) Probe(ctx context.Context) error           { return nil }

// fakeExcluder records exclusions.
type fakeExcluder struct {
	mu  sync.Mutex
	on  map[string]bool
	set int
}

func (x *fakeExcluder) SetExcluded(name, why string, on bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.on == nil {
		x.on = map[string]bool{}
	}
	x.set++
	if on {
		x.on[name] = true
	} else {
		delete(x.on, name)
	}
	return nil
}

func (x *fakeExcluder) excluded() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for n := range x.on {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var quiet = slog.New(slog.DiscardHandler)

// fleet builds n writable endpoints, each its own site.
func fleet(n int) ([]*fakeEP, []Target) {
	var eps []*fakeEP
	var ts []Target
	for i := range n {
		name := fmt.Sprintf("ep%d", i)
		ep := newFake(name, &siteCounter{})
		eps = append(eps, ep)
		ts = append(ts, Target{Name: name, Site: name, URL: "http://" + name + "/", Writable: true, Endpoint: ep})
	}
	return eps, ts
}

func newSched(t *testing.T, cfg config.Tests, ts []Target, x Excluder, reg prometheus.Registerer, st *results.Store) *Scheduler {
	t.Helper()
	s, err := New(Options{Config: cfg, Targets: func() []Target { return ts }, Excluder: x, Registerer: reg,
		Store: st, Log: quiet})
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	return s
}

func TestRoundWritesProbeAndStores(t *testing.T) {
	ctx := context.Background()
	st, err := results.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eps, ts := fleet(2)
	ts[1].Writable = false // read-only, no probe file: stat the directory
	s := newSched(t, config.Tests{WriteTest: true, MaxRequestsPerSecond: 1000}, ts, nil, nil, st)
	res := s.RunOnce(ctx)
	if len(res) != 2 || !res[0].OK || !res[1].OK {
		t.Fatalf("RunOnce = %+v, want two passing tests", res)
	}
	if _, ok := eps[0].files["/lakefed-probe"]; !ok {
		t.Errorf("probe file not written on the writable endpoint")
	}
	if len(eps[0].files) != 1 {
		t.Errorf("files left on ep0 = %d, want 1 (the probe; the round-trip file deleted)", len(eps[0].files))
	}
	var names []string
	for _, op := range res[0].Ops {
		names = append(names, op.Name)
	}
	if got, want := strings.Join(names, ","), "stat,put-probe,stat,read,write,read-back,delete"; got != want {
		t.Errorf("ops of ep0 = %s, want %s", got, want)
	}
	if res[1].Ops[len(res[1].Ops)-1].Name != "stat-dir" {
		t.Errorf("ops of read-only ep1 = %+v, want it to end with stat-dir", res[1].Ops)
	}
	runs, err := st.List(ctx, results.Filter{Kind: Kind})
	if err != nil || len(runs) != 2 {
		t.Fatalf("stored runs = %d (%v), want 2", len(runs), err)
	}
	for _, r := range runs {
		if r.Classification != "ok" || r.ID == 0 {
			t.Errorf("run %+v, want ok", r)
		}
	}
	// A second round reads the probe without writing it again.
	res = s.RunOnce(ctx)
	if res[0].Ops[1].Name != "read" {
		t.Errorf("second round ops = %+v, want stat then read", res[0].Ops)
	}
	if st := s.Status(); st.Rounds != 2 || len(st.Endpoints) != 2 || len(st.Endpoints[0].History) != 2 {
		t.Errorf("Status = %+v, want 2 rounds with history", st)
	}
}

// TestRetention: a round deletes the stored functional runs older than
// tests.retention with their samples, and keeps younger ones and every
// run of lakefed bench, however old.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	st, err := results.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	stored := map[string]int64{}
	for name, r := range map[string]results.Run{
		"old functional":   {Kind: Kind, Target: "http://ep0/", Site: "ep0", Started: now.Add(-49 * time.Hour)},
		"young functional": {Kind: Kind, Target: "http://ep0/", Site: "ep0", Started: now.Add(-47 * time.Hour)},
		"old bench":        {Kind: "open", Target: "http://ep0/", Site: "ep0", Started: now.Add(-30 * 24 * time.Hour)},
	} {
		id, err := st.CreateRun(ctx, &r)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.AddSamples(ctx, id, []results.Sample{{Kind: "stat", OK: true}}); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishRun(ctx, id, results.Finish{Status: results.StatusDone}); err != nil {
			t.Fatal(err)
		}
		stored[name] = id
	}
	_, ts := fleet(1)
	s := newSched(t, config.Tests{MaxRequestsPerSecond: 1000, Retention: config.Duration(48 * time.Hour)}, ts, nil, nil, st)
	res := s.RunOnce(ctx)
	tests := []struct {
		name string
		id   int64
		kept bool
	}{
		{"old functional", stored["old functional"], false},
		{"young functional", stored["young functional"], true},
		{"old bench", stored["old bench"], true},
		{"this round's", res[0].RunID, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.Get(ctx, tt.id)
			if kept := err == nil; kept != tt.kept {
				t.Errorf("run %d kept = %v (%v), want %v", tt.id, kept, err, tt.kept)
			}
			sm, err := st.Samples(ctx, tt.id, results.SampleFilter{})
			if err != nil || (len(sm) > 0) != tt.kept {
				t.Errorf("run %d samples = %d (%v), want kept %v", tt.id, len(sm), err, tt.kept)
			}
		})
	}
}

// TestBudget: many endpoints of one site are tested one at a time and
// their operations are spaced by the rate bound; another site is not
// held back by it.
func TestBudget(t *testing.T) {
	site := &siteCounter{}
	var ts []Target
	var eps []*fakeEP
	for i := range 4 {
		ep := newFake(fmt.Sprintf("s%d", i), site)
		eps = append(eps, ep)
		ts = append(ts, Target{Name: ep.name, Site: "one-site", Writable: true, Endpoint: ep})
	}
	const rate = 50.0
	s := newSched(t, config.Tests{WriteTest: true, MaxConcurrentPerSite: 1, MaxRequestsPerSecond: rate}, ts, nil, nil, nil)
	t0 := time.Now()
	res := s.RunOnce(context.Background())
	elapsed := time.Since(t0)
	for _, r := range res {
		if !r.OK {
			t.Fatalf("test %s failed: %s", r.Name, r.Err)
		}
	}
	if m := site.maxInflight.Load(); m != 1 {
		t.Errorf("max operations in flight on the site = %d, want 1 (max_concurrent_per_site 1)", m)
	}
	var calls int64
	for _, ep := range eps {
		calls += ep.calls.Load()
	}
	// Operations start at least 1/rate apart, so in elapsed at most
	// rate*elapsed+1 of them can have started.
	if limit := int64(rate*elapsed.Seconds()) + 1; calls > limit {
		t.Errorf("%d operations in %v, budget allows at most %d", calls, elapsed, limit)
	}
	if calls != 4*7 {
		t.Errorf("calls = %d, want 28 (7 per endpoint)", calls)
	}
	site.mu.Lock()
	defer site.mu.Unlock()
	sort.Slice(site.starts, func(i, j int) bool { return site.starts[i].Before(site.starts[j]) })
	// The slots are 1/rate apart; the first call may start late, so check
	// the span of the last calls against the count.
	if n := len(site.starts); n >= 2 {
		span := site.starts[n-1].Sub(site.starts[0])
		if min := time.Duration(float64(n-2) / rate * float64(time.Second)); span < min {
			t.Errorf("%d calls spanned %v, the rate bound needs at least %v", n, span, min)
		}
	}
}

func TestBudgetConcurrency(t *testing.T) {
	site := &siteCounter{}
	var ts []Target
	for i := range 6 {
		ep := newFake(fmt.Sprintf("c%d", i), site)
		ts = append(ts, Target{Name: ep.name, Site: "s", Writable: true, Endpoint: ep})
	}
	s := newSched(t, config.Tests{MaxConcurrentPerSite: 2, MaxRequestsPerSecond: 100000}, ts, nil, nil, nil)
	s.RunOnce(context.Background())
	if m := site.maxInflight.Load(); m > 2 || m < 1 {
		t.Errorf("max in flight = %d, want 1..2 (max_concurrent_per_site 2)", m)
	}
}

func TestExclusionGuard(t *testing.T) {
	cases := []struct {
		name     string
		n, down  int
		fraction float64
		want     int // endpoints excluded after FailAfter rounds
		suspect  bool
	}{
		{"below the fraction", 4, 1, 0.5, 1, false},
		{"at the fraction", 4, 2, 0.5, 2, false},
		{"above the fraction", 4, 3, 0.5, 0, true},
		{"every endpoint failing is the tester", 4, 4, 1, 0, true},
		{"fraction 0.25 of 4", 4, 2, 0.25, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eps, ts := fleet(tc.n)
			for i := range tc.down {
				eps[i].down.Store(true)
			}
			x := &fakeExcluder{}
			reg := prometheus.NewRegistry()
			s := newSched(t, config.Tests{ExcludeFailing: true, FailAfter: 2, MaxExcludedFraction: tc.fraction,
				MaxRequestsPerSecond: 100000}, ts, x, reg, nil)
			s.RunOnce(context.Background())
			if got := x.excluded(); len(got) != 0 {
				t.Fatalf("after 1 failed round excluded %v, want none (fail_after 2)", got)
			}
			s.RunOnce(context.Background())
			got := x.excluded()
			if len(got) != tc.want {
				t.Errorf("excluded %v, want %d endpoints", got, tc.want)
			}
			st := s.Status()
			if st.Suspect != tc.suspect {
				t.Errorf("suspect = %v (%s), want %v", st.Suspect, st.SuspectWhy, tc.suspect)
			}
			if g := gauge(t, reg, "lakefed_tests_tester_suspect"); g != b2f(tc.suspect) {
				t.Errorf("lakefed_tests_tester_suspect = %v, want %v", g, b2f(tc.suspect))
			}
			if tc.want == 0 {
				return
			}
			// Recovery lifts the exclusion.
			for _, ep := range eps {
				ep.down.Store(false)
			}
			s.RunOnce(context.Background())
			if got := x.excluded(); len(got) != 0 {
				t.Errorf("after recovery excluded %v, want none", got)
			}
		})
	}
}

// TestTesterFailureExcludesNothing: when the tester itself breaks (here:
// every endpoint fails at once, as when its own network is gone), no
// endpoint is excluded however many rounds fail, and exclusions made
// before stay within the bound.
func TestTesterFailureExcludesNothing(t *testing.T) {
	eps, ts := fleet(5)
	x := &fakeExcluder{}
	s := newSched(t, config.Tests{ExcludeFailing: true, FailAfter: 1, MaxExcludedFraction: 1,
		MaxRequestsPerSecond: 100000}, ts, x, nil, nil)
	for _, ep := range eps {
		ep.down.Store(true)
	}
	for range 4 {
		s.RunOnce(context.Background())
	}
	if got := x.excluded(); len(got) != 0 {
		t.Errorf("excluded %v although every endpoint failed together, want none", got)
	}
	if !s.Status().Suspect {
		t.Errorf("not suspect after rounds where everything failed")
	}
	// A cancelled tester (shutdown) counts nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	eps[0].down.Store(false)
	before := s.Status().Endpoints[0].Fails
	for _, r := range s.RunOnce(ctx) {
		if r.OK {
			t.Errorf("test %s passed with a cancelled context", r.Name)
		}
	}
	if after := s.Status().Endpoints[0].Fails; after != before {
		t.Errorf("fails went %d -> %d on a cancelled round, want unchanged", before, after)
	}
}

// TestReassertsExclusion: the scheduler re-asserts exclusions every round
// (the federator's mark can be cleared by its probes).
func TestReassertsExclusion(t *testing.T) {
	eps, ts := fleet(4)
	eps[0].down.Store(true)
	x := &fakeExcluder{}
	s := newSched(t, config.Tests{ExcludeFailing: true, FailAfter: 1, MaxRequestsPerSecond: 100000}, ts, x, nil, nil)
	s.RunOnce(context.Background())
	n := x.set
	s.RunOnce(context.Background())
	if x.set <= n {
		t.Errorf("SetExcluded calls %d -> %d: the exclusion was not re-asserted", n, x.set)
	}
	if !errors.Is(errDown, endpoint.ErrUnavailable) {
		t.Fatal("fake error class")
	}
}

// gauge reads an unlabelled gauge from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// probeCounter wraps a fake to count the federator's health probes.
type probeCounter struct {
	*fakeEP
	probes atomic.Int64
}

func (p *probeCounter) Probe(ctx context.Context) error {
	p.probes.Add(1)
	return nil // the health probe passes: only the scheduled tests see the failure
}

// TestFederatorExclusion runs the scheduler against a real federator over
// fake endpoints: a failing endpoint is excluded (down in
// /api/endpoints) and stays down while its health probes pass, and comes
// back after the tests pass again.
func TestFederatorExclusion(t *testing.T) {
	ctx := t.Context()
	fakes := map[string]*probeCounter{}
	cfg := config.Config{Federation: &config.Federation{}}
	for _, n := range []string{"a", "b", "c"} {
		fakes[n] = &probeCounter{fakeEP: newFake(n, &siteCounter{})}
		cfg.Federation.Endpoints = append(cfg.Federation.Endpoints, config.Endpoint{
			Config: endpoint.Config{Name: n, URL: "http://" + n + ".invalid/"}, Writable: true})
	}
	cfg.Federation.Health.Interval = config.Duration(10 * time.Millisecond)
	cfg.SetDefaults()
	fed, err := federation.New(ctx, *cfg.Federation, federation.Options{Log: quiet,
		NewEndpoint: func(ctx context.Context, ec config.Endpoint, _ *slog.Logger) (endpoint.Endpoint, error) {
			return fakes[ec.Name], nil
		}})
	if err != nil {
		t.Fatalf("federation.New = %v", err)
	}
	defer fed.Close()
	s, err := New(Options{Config: config.Tests{ExcludeFailing: true, FailAfter: 1, MaxRequestsPerSecond: 100000},
		Targets: FederatorTargets(fed), Excluder: fed, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	state := func(name string) string {
		for _, e := range fed.Endpoints() {
			if e.Name == name {
				return e.State
			}
		}
		return "missing"
	}
	fakes["b"].down.Store(true)
	s.RunOnce(ctx)
	if got := state("b"); got != "down" || !fed.Excluded("b") {
		t.Fatalf("after a failed test b is %s (excluded %v), want down and excluded", got, fed.Excluded("b"))
	}
	if state("a") != "up" || state("c") != "up" {
		t.Errorf("a %s, c %s: want both up", state("a"), state("c"))
	}
	// Several passing health probes must not bring an excluded endpoint back.
	testenv.Eventually(t, 10*time.Second, "six probes of b", func() bool { return fakes["b"].probes.Load() >= 6 })
	if got := state("b"); got != "down" {
		t.Errorf("after passing probes excluded b is %s, want down", got)
	}
	if err := fed.SetExcluded("nope", "x", true); err == nil {
		t.Errorf("SetExcluded(unknown) = nil, want an error")
	}
	fakes["b"].down.Store(false)
	s.RunOnce(ctx)
	if fed.Excluded("b") {
		t.Errorf("b still excluded after a passing test")
	}
	testenv.Eventually(t, 10*time.Second, "b up", func() bool { return state("b") == "up" })
}

// TestClassificationMetric: lakefed_tests_classification says the class
// of each endpoint's latest test, "to debug" while it fails and "ok"
// again once it passes, with the start of that test in
// lakefed_tests_last_timestamp_seconds; an endpoint removed by a reload
// leaves no series behind.
func TestClassificationMetric(t *testing.T) {
	ctx := context.Background()
	eps, ts := fleet(2)
	reg := prometheus.NewRegistry()
	targets := ts
	s, err := New(Options{Config: config.Tests{MaxRequestsPerSecond: 1000}, Targets: func() []Target { return targets },
		Registerer: reg, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	class := func(name, c string) (float64, bool) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("Gather = %v", err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "lakefed_tests_classification" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["endpoint"] == name && labels["classification"] == c {
					return m.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	want := func(when, name string, toDebug bool) {
		t.Helper()
		for c, w := range map[string]float64{ClassToDebug: b2f(toDebug), ClassOK: b2f(!toDebug)} {
			if got, ok := class(name, c); !ok || got != w {
				t.Errorf("%s: lakefed_tests_classification{endpoint=%q,classification=%q} = %v (present %v), want %v",
					when, name, c, got, ok, w)
			}
		}
	}
	before := time.Now()
	eps[1].down.Store(true)
	s.RunOnce(ctx)
	want("ep1 failing", "ep0", false)
	want("ep1 failing", "ep1", true)
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "lakefed_tests_last_timestamp_seconds" {
			for _, m := range mf.GetMetric() {
				if v := m.GetGauge().GetValue(); v < float64(before.Unix()) || v > float64(time.Now().Unix()+1) {
					t.Errorf("lakefed_tests_last_timestamp_seconds = %v, want the round's start (after %d)", v, before.Unix())
				}
			}
		}
	}
	eps[1].down.Store(false)
	s.RunOnce(ctx)
	want("ep1 passing again", "ep1", false)

	targets = ts[:1] // ep1 removed by a reload
	s.RunOnce(ctx)
	if _, ok := class("ep1", ClassOK); ok {
		t.Errorf("lakefed_tests_classification of the removed ep1 is still exported")
	}
}
