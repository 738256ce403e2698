package federation

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// TestDeadSiteExcludedWithinInterval: with the default health settings
// (interval 2s, fail_after 2) a site whose server is killed, so that
// connections are refused, is out of use within 2 s, even when it dies
// just after a good probe. Refused connections are certain: the failed
// probe is repeated at once instead of an interval later, which took
// fail_after intervals (about 4 s).
// Both kinds that speak HTTP keep the refusal in their error chain.
func TestDeadSiteExcludedWithinInterval(t *testing.T) {
	for _, scheme := range []string{"http", "lakefed"} {
		t.Run(scheme, func(t *testing.T) { deadSite(t, scheme) })
	}
}

func deadSite(t *testing.T, scheme string) {
	probed := make(chan struct{}, 16)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Nothing but the prober asks it.
		select {
		case probed <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer site.Close()
	u := scheme + "://" + strings.TrimPrefix(site.URL, "http://") + "/"
	tf := startFed(t, cfgYAML("", "name: site\nurl: "+u))
	if got := tf.snap.Load().cfg.Health; got.Interval.D() != 2*time.Second || got.FailAfter != 2 {
		t.Fatalf("default health: interval %v, fail_after %d; this test is about 2s and 2", got.Interval.D(), got.FailAfter)
	}
	testenv.Eventually(t, 5*time.Second, "site up", func() bool { return tf.state("site") == "up" })

	// Kill it just after a probe: the worst case, a whole interval to
	// the next one.
	for len(probed) > 0 {
		<-probed
	}
	select {
	case <-probed:
	case <-time.After(5 * time.Second):
		t.Fatal("no probe within 5s")
	}
	// httptest's Close waits for the probe being answered: its answer
	// is in, and the next probe is an interval away.
	site.Close()
	killed := time.Now()
	testenv.Eventually(t, 4*time.Second, "killed site marked down", func() bool { return tf.state("site") == "down" })
	// One interval (2 s) and the immediate retries; the hysteresis they
	// replace takes fail_after intervals (4 s). The second beyond one
	// interval is for a machine loaded by other tests, where the prober's
	// timer and goroutine start late.
	if d := time.Since(killed); d > 3*time.Second {
		t.Errorf("killed site marked down after %v, want within about one 2s interval", d.Round(10*time.Millisecond))
	}
}
