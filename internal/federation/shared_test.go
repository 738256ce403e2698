package federation

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/shared"
	"github.com/lakefed/lakefed/internal/testenv"
)

// sharedFeds starts n federators over the same fakes, sharing state
// through one Redis.
func sharedFeds(t *testing.T, n int, yamlText string, fakes ...*fakeEP) []*Federator {
	t.Helper()
	byName := map[string]*fakeEP{}
	for _, f := range fakes {
		byName[f.name] = f
	}
	newEP := func(ctx context.Context, ec config.Endpoint, log *slog.Logger) (endpoint.Endpoint, error) {
		return byName[ec.Name].asEndpoint(), nil
	}
	return sharedFedsWith(t, n, yamlText, newEP, time.Second, nil)
}

// sharedFedsWith starts n federators sharing state through one Redis,
// with leases of lease, their endpoints made by newEP (nil: the real
// kinds); onInval(i, paths), when set, runs before federator i drops
// paths another one wrote.
func sharedFedsWith(t *testing.T, n int, yamlText string, newEP NewEndpointFunc,
	lease time.Duration, onInval func(i int, paths []string)) []*Federator {
	t.Helper()
	r := testenv.StartRedis(t)
	cfg, err := config.Parse([]byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	var feds []*Federator
	for i := range n {
		var fed *Federator
		sh, err := shared.New(t.Context(), shared.Options{URL: r.URL, Lease: lease, Log: quiet(),
			OnInvalidate: func(paths []string) {
				if onInval != nil {
					onInval(i, paths)
				}
				fed.ForgetShared(paths)
			},
			OnFlush: func() { fed.ForgetAll() }})
		if err != nil {
			t.Fatal(err)
		}
		fed, err = New(t.Context(), *cfg.Federation, Options{Log: quiet(), NewEndpoint: newEP, Shared: sh})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { sh.Run(ctx); close(done) }()
		t.Cleanup(func() { fed.Close(); cancel(); <-done; sh.Close() })
		testenv.Eventually(t, 5*time.Second, "joined the shared state", func() bool { return !sh.Degraded() && sh.Trusted() })
		feds = append(feds, fed)
	}
	return feds
}

// Federators sharing state probe an endpoint once per interval between
// them, not once each, and all of them see it die within about one
// interval.
func TestSharedProbes(t *testing.T) {
	a := newFake("site-a", true)
	const interval = 200 * time.Millisecond
	feds := sharedFeds(t, 3, cfgYAML("health: {interval: 200ms, timeout: 150ms, fail_after: 1, recover_after: 1}",
		ep("site-a", "writable: true")), a)
	before := a.probes.Load()
	<-time.After(20 * interval) // a span to count the probes in, not a wait for an event
	probes := a.probes.Load() - before
	if max := int64(20*1.3) + 3; probes > max {
		t.Errorf("%d probes in 20 intervals by 3 federators sharing state, want about 20 (at most %d), not 60", probes, max)
	}
	a.down.Store(true)
	died := time.Now()
	for _, f := range feds {
		tf := &testFed{Federator: f}
		if !testenv.Within(3*interval-time.Since(died), func() bool { return tf.state("site-a") != "up" }) {
			t.Fatalf("a federator still has site-a up %v after it died (interval %v)", time.Since(died), interval)
		}
	}
}

// An exclusion decided by one federator's scheduled tests is taken by
// the others within a health interval, and lifted by all when any
// federator's tests lift it: the fleet decides once.
func TestSharedExclusions(t *testing.T) {
	a := newFake("site-a", true)
	const interval = 200 * time.Millisecond
	feds := sharedFeds(t, 3, cfgYAML("health: {interval: 200ms, timeout: 150ms, fail_after: 1, recover_after: 1}",
		ep("site-a", "writable: true")), a)
	if err := feds[0].SetExcluded("site-a", "3 scheduled tests failed in a row", true); err != nil {
		t.Fatal(err)
	}
	for i, f := range feds {
		tf := &testFed{Federator: f}
		testenv.Eventually(t, 10*interval, fmt.Sprintf("federator %d takes the exclusion", i), func() bool {
			return f.Excluded("site-a") && tf.state("site-a") != "up"
		})
	}
	if err := feds[2].SetExcluded("site-a", "scheduled tests pass again", false); err != nil {
		t.Fatal(err)
	}
	for i, f := range feds {
		tf := &testFed{Federator: f}
		testenv.Eventually(t, 10*interval, fmt.Sprintf("federator %d lifts the exclusion federator 2 lifted", i), func() bool {
			return !f.Excluded("site-a") && tf.state("site-a") == "up"
		})
	}
}

// Replica disagreements found by one federator are listed by every
// federator sharing state (and outlive its restart: they are in Redis).
func TestSharedDisagreements(t *testing.T) {
	a, b := newFake("ra", false), newFake("rb", false)
	a.put("/f", []byte("one version"))
	b.put("/f", []byte("another, longer version"))
	feds := sharedFeds(t, 2, cfgYAML(slowHealth, ep("ra"), ep("rb")), a, b)
	feds[0].lookup(t.Context(), feds[0].snap.Load(), "/f", 0)
	found := false
	for _, d := range feds[1].Disagreements() {
		found = found || d.Path == "/f"
	}
	if !found {
		t.Fatalf("the other federator does not list the disagreement one found: %+v", feds[1].Disagreements())
	}
}

// Concurrent cold look-ups of one path on three federators sharing
// state reach the endpoint about once between them, not three times:
// one takes the path's lease and asks, the others read its answer.
func TestSharedColdLookupsAskOnce(t *testing.T) {
	a := newFake("ra", false)
	const n = 60
	for i := range n {
		a.put(fmt.Sprintf("/c/%d", i), []byte("data"))
	}
	feds := sharedFeds(t, 3, cfgYAML(slowHealth, ep("ra")), a)
	before := a.stats.Load()
	for i := range n {
		p := fmt.Sprintf("/c/%d", i)
		var wg sync.WaitGroup
		for _, f := range feds {
			wg.Go(func() {
				if e := f.lookup(t.Context(), f.snap.Load(), p, 0); e.status != 200 {
					t.Errorf("lookup %s = %d", p, e.status)
				}
			})
		}
		wg.Wait()
	}
	asked := float64(a.stats.Load()-before) / n
	if asked > 1.1 {
		t.Errorf("each path was asked of the endpoint %.2f times by 3 federators sharing state, want at most 1.1", asked)
	}
	t.Logf("endpoint asked %.2f times per path", asked)
}
