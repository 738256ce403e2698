package web

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/sitetest"
)

var runLinkRE = regexp.MustCompile(`href="/ui/run/(\d+)"`)

// section returns the HTML of <section id="id"> of a page.
func section(t *testing.T, page, id string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `<section id="`+id+`">`)
	if !ok {
		t.Fatalf("no section %q in the page", id)
	}
	s, _, _ := strings.Cut(rest, "</section>")
	return s
}

// TestTrueLabels: the overview says what it shows.
func TestTrueLabels(t *testing.T) {
	t.Run("runs table holds the runs the Sites table links to", func(t *testing.T) {
		srv, _, _ := newServer(t)
		_, body := get(t, srv.URL+"/ui/")
		runs := section(t, body, "runs")
		for _, m := range runLinkRE.FindAllStringSubmatch(section(t, body, "sites"), -1) {
			if !strings.Contains(runs, `value="`+m[1]+`"`) {
				t.Errorf("the Sites table links to run #%s, which the runs table lacks", m[1])
			}
		}
	})
	t.Run("protocol section says what is missing", func(t *testing.T) {
		srv, _, _ := newServer(t)
		_, body := get(t, srv.URL+"/ui/")
		p := section(t, body, "protocols")
		for _, w := range []string{"shown: direct, via federator", "No run yet: XRootD"} {
			if !strings.Contains(p, w) {
				t.Errorf("protocol section lacks %q:\n%s", w, p[:min(len(p), 600)])
			}
		}
	})
	t.Run("removed endpoint leaves the tables", func(t *testing.T) {
		ctx := context.Background()
		st, err := results.Open(ctx, ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		var goneRun int64
		for _, site := range []string{"site-a", "site-b"} {
			id, err := st.CreateRun(ctx, &results.Run{Kind: sitetest.Kind, Target: "http://127.0.0.1:1/", Site: site})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.FinishRun(ctx, id, results.Finish{Status: results.StatusDone, Classification: "ok",
				Summary: map[string]any{"ok": true, "latency": 0.004}}); err != nil {
				t.Fatal(err)
			}
			if site == "site-a" {
				goneRun = id
			}
		}
		// The federator, after a reload, has only site-b.
		cfg := config.Config{Federation: &config.Federation{Endpoints: []config.Endpoint{
			{Config: endpoint.Config{Name: "site-b", URL: "http://127.0.0.1:1/"}}}}}
		cfg.SetDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		fed, err := federation.New(t.Context(), *cfg.Federation, federation.Options{Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fed.Close() })
		tests := fakeTests{sitetest.Status{Rounds: 1, Endpoints: []sitetest.EndpointState{
			{Name: "site-a", Site: "gone.example", History: []sitetest.Point{{T: time.Now(), OK: true}}},
			{Name: "site-b", Site: "here.example", History: []sitetest.Point{{T: time.Now(), OK: true}}}}}}
		srv := httptest.NewServer(New(Options{Store: st, Federator: fed, Tests: tests, Log: quiet}))
		t.Cleanup(srv.Close)
		_, body := get(t, srv.URL+"/ui/")
		if s := section(t, body, "tests"); strings.Contains(s, "site-a") || !strings.Contains(s, "site-b") {
			t.Errorf("Scheduled tests table: want site-b only:\n%s", s)
		}
		sites := section(t, body, "sites")
		table, after, _ := strings.Cut(sites, "</table>")
		if strings.Contains(table, "site-a") || !strings.Contains(table, "site-b") {
			t.Errorf("Sites table: want site-b only:\n%s", table)
		}
		if !strings.Contains(after, "site-a") || !strings.Contains(after, `href="/ui/run/`+itoa(goneRun)+`"`) {
			t.Errorf("site-a's history is not linked below the Sites table:\n%s", after)
		}
		if code, _ := get(t, srv.URL+"/ui/run/"+itoa(goneRun)); code != 200 {
			t.Errorf("GET /ui/run/%d of the removed site = %d, want 200", goneRun, code)
		}
	})
}
