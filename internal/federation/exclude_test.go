package federation

import (
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// TestExcluded: an excluded endpoint is down whatever its probes say, is
// not redirected to, and comes back only through RecoverAfter good probes
// after the mark is lifted.
func TestExcluded(t *testing.T) {
	a, b := newFake("site-a", true), newFake("site-b", true)
	a.put("/f", []byte("x"))
	b.put("/f", []byte("x"))
	tf := startFed(t, cfgYAML("health: {interval: 10ms, fail_after: 1, recover_after: 2}", ep("site-a", "priority: 1"), ep("site-b", "priority: 2")), a, b)
	if err := tf.SetExcluded("site-a", "scheduled tests fail", true); err != nil {
		t.Fatalf("SetExcluded(site-a) = %v", err)
	}
	if !tf.Excluded("site-a") || tf.state("site-a") != "down" {
		t.Fatalf("after SetExcluded site-a: excluded %v, state %s; want true, down", tf.Excluded("site-a"), tf.state("site-a"))
	}
	// Good probes while excluded must not bring it back.
	start := a.probes.Load()
	testenv.Eventually(t, 5*time.Second, "five more probes of site-a", func() bool { return a.probes.Load() >= start+5 })
	if got := tf.state("site-a"); got != "down" {
		t.Fatalf("excluded site-a after good probes is %s, want down", got)
	}
	resp, _ := tf.do(t, "GET", "/f", nil, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != 302 || loc != "http://site-b.example/f" {
		t.Errorf("GET /f with site-a excluded = %d %q, want 302 to site-b", resp.StatusCode, loc)
	}
	if err := tf.SetExcluded("site-a", "again", true); err != nil || !tf.Excluded("site-a") {
		t.Errorf("SetExcluded twice = %v, excluded %v; want nil, true", err, tf.Excluded("site-a"))
	}
	if err := tf.SetExcluded("site-a", "tests pass", false); err != nil || tf.Excluded("site-a") {
		t.Fatalf("lifting = %v, excluded %v; want nil, false", err, tf.Excluded("site-a"))
	}
	testenv.Eventually(t, 5*time.Second, "site-a back up by its probes", func() bool { return tf.state("site-a") == "up" })
	if err := tf.SetExcluded("nope", "x", true); err == nil {
		t.Error("SetExcluded(unknown) = nil, want an error")
	}
}

// TestPrefixLiveEndpoints: lakefed_federation_prefix_live_endpoints counts,
// per configured prefix, the endpoints that can serve it and are usable:
// an endpoint for "/" serves "/scratch" too, one for "/scratch" does not
// serve "/", and an upstream is not counted. Every replica of "/" down
// gives 0 there while "/scratch" still has one.
func TestPrefixLiveEndpoints(t *testing.T) {
	a, b, c, up := newFake("site-a", true), newFake("site-b", true), newFake("site-c", true), newFake("upper", true)
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a"), ep("site-b"), ep("site-c", "prefix: /scratch"),
		"name: upper\nurl: lakefed://upper.example/"), a, b, c, up)
	metrics := func() string {
		_, body := tf.do(t, "GET", "/metrics", nil, nil)
		return body
	}
	check := func(when string, want ...string) {
		t.Helper()
		body := metrics()
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				t.Errorf("%s: /metrics lacks %q", when, w)
			}
		}
	}
	check("all up",
		`lakefed_federation_prefix_endpoints{prefix="/"} 2`,
		`lakefed_federation_prefix_live_endpoints{prefix="/"} 2`,
		`lakefed_federation_prefix_endpoints{prefix="/scratch"} 3`,
		`lakefed_federation_prefix_live_endpoints{prefix="/scratch"} 3`)
	for _, name := range []string{"site-a", "site-b"} {
		if err := tf.SetExcluded(name, "scheduled tests fail", true); err != nil {
			t.Fatal(err)
		}
	}
	check("site-a and site-b excluded",
		`lakefed_federation_endpoint_up{endpoint="site-a"} 0`,
		`lakefed_federation_endpoint_up{endpoint="site-b"} 0`,
		`lakefed_federation_prefix_live_endpoints{prefix="/"} 0`,
		`lakefed_federation_prefix_live_endpoints{prefix="/scratch"} 1`)
	if body := metrics(); strings.Count(body, "lakefed_federation_prefix_endpoints{") != 2 {
		t.Errorf("want prefix series for / and /scratch only:\n%s", body)
	}
}
