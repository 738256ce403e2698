package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/server/servertest"
)

// TestServedSite: a run through a redirecting federator names the site
// that served it, by its endpoint name from the federator's
// /api/endpoints, in the result and in the stored run, not the
// federator's address; a run straight at a site keeps the site's host.
func TestServedSite(t *testing.T) {
	ctx := context.Background()
	fed := servertest.Start(t, servertest.Options{Sites: 2})
	st, err := results.Open(ctx, t.TempDir()+"/bench.db")
	if err != nil {
		t.Fatalf("results.Open = %v", err)
	}
	defer st.Close()
	siteA := strings.TrimSuffix(strings.TrimPrefix(fed.Site("site-a").URL, "http://"), "/")

	for _, tc := range []struct {
		name    string
		url     string
		site    string // --site
		wantRes string // Result.Site
		wantRun string // the stored run's Site
	}{
		{name: "unpinned through the federator", url: fed.URL + "/", wantRes: "site-a", wantRun: "site-a"},
		{name: "pinned through the federator", url: fed.URL + "/", site: "site-b", wantRes: "site-b", wantRun: "site-b"},
		{name: "straight at a site", url: "http://" + siteA + "/", wantRes: "", wantRun: siteA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, err := NewTarget(ctx, TargetConfig{URL: tc.url, Site: tc.site, Timeout: 10 * time.Second,
				NewEndpoint: newEndpoint})
			if err != nil {
				t.Fatalf("NewTarget = %v", err)
			}
			defer tg.Close()
			o := fastOpen()
			o.Files = 8
			res, err := Open(ctx, tg, o)
			if err != nil {
				t.Fatalf("Open = %v", err)
			}
			if s := res.Summary.(*OpenSummary); s.Opens == 0 || s.Failures != 0 {
				t.Fatalf("open: opens %d failures %d (%s)", s.Opens, s.Failures, s.FirstErr)
			}
			if res.Site != tc.wantRes {
				t.Errorf("Result.Site = %q, want %q", res.Site, tc.wantRes)
			}
			id, err := Save(ctx, st, res, Classify(res, DefaultThresholds()), "")
			if err != nil {
				t.Fatalf("Save = %v", err)
			}
			run, err := st.Get(ctx, id)
			if err != nil {
				t.Fatalf("Get = %v", err)
			}
			if run.Site != tc.wantRun {
				t.Errorf("stored run's Site = %q, want %q", run.Site, tc.wantRun)
			}
			// The command's way: the run is created when it starts (Begin,
			// with the target's host) and finished by Record, which must
			// put the site learned while running in its place.
			id, err = Begin(ctx, st, res.Kind, res.Target, tc.site, res.Params, res.Started, "")
			if err != nil {
				t.Fatalf("Begin = %v", err)
			}
			if err := Record(ctx, st, id, res, Classify(res, DefaultThresholds())); err != nil {
				t.Fatalf("Record = %v", err)
			}
			if run, err = st.Get(ctx, id); err != nil || run.Site != tc.wantRun {
				t.Errorf("Begin+Record: stored run's Site = %q (%v), want %q", run.Site, err, tc.wantRun)
			}
		})
	}
}

// TestServedSiteLabel: the label for the hosts a run's reads came from:
// one site by name, several sites listed after the target, and none when
// the target served the bytes itself (a proxying federator).
func TestServedSiteLabel(t *testing.T) {
	ctx := context.Background()
	fed := servertest.Start(t, servertest.Options{Sites: 2})
	host := func(s string) string {
		return strings.TrimSuffix(strings.TrimPrefix(s, "http://"), "/")
	}
	fedHost, a, b := host(fed.URL), host(fed.Site("site-a").URL), host(fed.Site("site-b").URL)
	for _, tc := range []struct {
		name  string
		hosts []string
		want  string
	}{
		{"one site", []string{a}, "site-a"},
		{"several sites", []string{b, a}, fedHost + " (2 sites: site-a, site-b)"},
		{"proxied by the federator", []string{fedHost}, ""},
		{"nothing served", nil, ""},
		{"a host the federator does not name", []string{"127.0.0.1:1"}, "127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, err := NewTarget(ctx, TargetConfig{URL: fed.URL + "/", Timeout: 10 * time.Second})
			if err != nil {
				t.Fatalf("NewTarget = %v", err)
			}
			defer tg.Close()
			for _, h := range tc.hosts {
				tg.served.note(h)
			}
			if got := tg.servedSite(ctx); got != tc.want {
				t.Errorf("servedSite = %q, want %q", got, tc.want)
			}
		})
	}
}
