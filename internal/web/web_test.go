package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/sitetest"
)

var quiet = slog.New(slog.DiscardHandler)

// seed writes an open run, a read run and two functional runs.
func seed(t *testing.T, st *results.Store) (openID, readID int64) {
	t.Helper()
	ctx := context.Background()
	mk := func(kind, target, site, class string, summary any, steps []results.Step, samples []results.Sample) int64 {
		id, err := st.CreateRun(ctx, &results.Run{Kind: kind, Target: target, Site: site, Started: time.Now().Add(-time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetSteps(ctx, id, steps); err != nil {
			t.Fatal(err)
		}
		if err := st.AddSamples(ctx, id, samples); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishRun(ctx, id, results.Finish{Status: results.StatusDone, Classification: class, Summary: summary}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	var steps []results.Step
	var samples []results.Sample
	for i := range 4 {
		j := 2 * (i + 1)
		steps = append(steps, results.Step{Index: i, Jobs: j, Expected: float64(j) * 2, Observed: float64(j) * 1.9,
			Ops: 10, FailFrac: 0.01 * float64(i), P50: 0.002, Mean: 0.5, IOWait: 0.1 * float64(i)})
	}
	for i := range 30 {
		samples = append(samples, results.Sample{T: float64(i) / 10, Kind: "open", Value: 0.001 * float64(i%5+1), OK: true})
	}
	openID = mk("open", "http://127.0.0.1:9001/", "127.0.0.1:9001", "ok",
		map[string]any{"observed_rate": 15.2, "expected_rate": 16, "fail_frac": 0}, steps, samples)
	for i := range samples {
		samples[i].Kind = "read"
	}
	readID = mk("read", "http://127.0.0.1:8080/", "site-a", "to debug",
		map[string]any{"sustained_last": 6, "target_jobs": 8, "mean_block_time": 0.5}, steps, samples)
	for range 2 {
		mk(sitetest.Kind, "http://127.0.0.1:9001/", "site-a", "ok", map[string]any{"ok": true, "latency": 0.004}, nil,
			[]results.Sample{{Kind: "stat", Value: 0.004, OK: true}})
	}
	return openID, readID
}

type fakeTests struct{ st sitetest.Status }

func (f fakeTests) Status() sitetest.Status { return f.st }

func newServer(t *testing.T) (*httptest.Server, int64, int64) {
	t.Helper()
	st, err := results.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o, r := seed(t, st)
	tests := fakeTests{sitetest.Status{Rounds: 3, Suspect: true, SuspectWhy: "every endpoint (2) failed",
		Endpoints: []sitetest.EndpointState{{Name: "site-a", Site: "127.0.0.1:9001", Fails: 2,
			History: []sitetest.Point{{T: time.Now(), OK: true}, {T: time.Now(), OK: false}}}}}}
	srv := httptest.NewServer(New(Options{Store: st, Tests: tests, Log: quiet}))
	t.Cleanup(srv.Close)
	return srv, o, r
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var pointRE = regexp.MustCompile(`<circle class="` + PointClass + `"`)

// plotPoints counts the data points of each plot (by data-plot) of a page.
func plotPoints(html string) map[string]int {
	out := map[string]int{}
	parts := strings.Split(html, "<svg ")
	for _, p := range parts[1:] {
		m := regexp.MustCompile(`data-plot="([^"]+)"`).FindStringSubmatch(p)
		if m == nil {
			continue
		}
		end := strings.Index(p, "</svg>")
		out[m[1]] += len(pointRE.FindAllString(p[:end], -1))
	}
	return out
}

func TestPages(t *testing.T) {
	srv, openID, readID := newServer(t)
	cases := []struct {
		name, path string
		want       []string
		plots      map[string]int // plot id -> points it must have
	}{
		{"overview", "/ui/", []string{"Sites", "127.0.0.1:9001", "site-a", "Tester suspect", "to debug",
			fmt.Sprintf(`href="/ui/run/%d"`, openID), "HTTP/WebDAV via federator → site-a"},
			map[string]int{"open-series": 30, "read-series": 30, "functional": 2}},
		{"open run", fmt.Sprintf("/ui/run/%d", openID), []string{"Observed against expected open rate", "y = x", "Stages"},
			map[string]int{"open-rate": 4, "open-failures": 4, "open-time": 4, "series-open": 30}},
		{"read run", fmt.Sprintf("/ui/run/%d", readID), []string{"Average block read time", "to debug"},
			map[string]int{"read-blocktime": 4, "read-rate": 8, "read-iowait": 4, "series-read": 30}},
		{"compare", fmt.Sprintf("/ui/compare?ids=%d,%d", openID, readID), []string{"Comparing runs", `class="differ"`},
			map[string]int{"open-rate": 4, "read-blocktime": 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv.URL+tc.path)
			if code != http.StatusOK {
				t.Fatalf("GET %s = %d: %s", tc.path, code, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s: no %q in the page", tc.path, w)
				}
			}
			got := plotPoints(body)
			for id, n := range tc.plots {
				if got[id] != n {
					t.Errorf("GET %s: plot %s has %d points, want %d (plots: %v)", tc.path, id, got[id], n, got)
				}
			}
		})
	}
}

func TestPlotSVGAndAPI(t *testing.T) {
	srv, openID, _ := newServer(t)
	code, body := get(t, fmt.Sprintf("%s/ui/plot/run/%d/open-rate.svg", srv.URL, openID))
	if code != 200 || !strings.HasPrefix(body, "<?xml") || len(pointRE.FindAllString(body, -1)) != 4 {
		t.Errorf("plot SVG = %d, %d points, want 200 and 4", code, len(pointRE.FindAllString(body, -1)))
	}
	for _, tc := range []struct {
		path string
		code int
	}{
		{fmt.Sprintf("/ui/plot/run/%d/nope.svg", openID), 404},
		{"/ui/run/999", 404},
		{"/ui/run/abc", 400},
		{"/ui/compare", 400},
		{"/ui/compare?ids=1,x", 400},
		{"/ui/api/runs?limit=-1", 400},
		{"/ui", 200}, // redirect to /ui/
		{"/ui/static/style.css", 200},
	} {
		if code, _ := get(t, srv.URL+tc.path); code != tc.code {
			t.Errorf("GET %s = %d, want %d", tc.path, code, tc.code)
		}
	}
	_, body = get(t, srv.URL+"/ui/api/runs?kind=open")
	var runs []results.Run
	if err := json.Unmarshal([]byte(body), &runs); err != nil || len(runs) != 1 || runs[0].ID != openID {
		t.Errorf("api/runs?kind=open = %s (%v), want run %d", body, err, openID)
	}
	_, body = get(t, fmt.Sprintf("%s/ui/api/runs/%d", srv.URL, openID))
	var one struct {
		ID    int64          `json:"id"`
		Steps []results.Step `json:"steps"`
	}
	if err := json.Unmarshal([]byte(body), &one); err != nil || one.ID != openID || len(one.Steps) != 4 {
		t.Errorf("api/runs/%d = %s (%v), want 4 steps", openID, body, err)
	}
	_, body = get(t, srv.URL+"/ui/api/endpoints")
	var eps endpointsJSON
	if err := json.Unmarshal([]byte(body), &eps); err != nil || eps.Tests == nil || eps.Tests.Rounds != 3 {
		t.Errorf("api/endpoints = %s (%v), want the tests' status", body, err)
	}
	_, body = get(t, srv.URL+"/ui/api/sites")
	var sites []results.SiteStatus
	if err := json.Unmarshal([]byte(body), &sites); err != nil || len(sites) != 3 {
		t.Errorf("api/sites = %s (%v), want 3 (site, kind) rows", body, err)
	}
}

func TestRenderEmptyPlot(t *testing.T) {
	svg, err := renderSVG(plotSpec{ID: "x", Series: []series{{Name: "a"}}})
	if err != nil || svg != "" {
		t.Errorf("renderSVG(no points) = %q, %v; want empty", svg, err)
	}
	svg, err = renderSVG(plotSpec{ID: "x", Title: "t", XLabel: "xl", YLabel: "yl", Diagonal: true,
		Series: []series{{Name: "a", X: []float64{1, 2, 3}, Y: []float64{1, 4, 9}, Line: true}}})
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	if n := len(pointRE.FindAllString(s, -1)); n != 3 {
		t.Errorf("points = %d, want 3", n)
	}
	for _, w := range []string{`data-plot="x"`, ">xl<", ">yl<", "y = x"} {
		if !strings.Contains(s, w) {
			t.Errorf("SVG has no %q", w)
		}
	}
}

// A run from several bench agents is drawn with a series per node.
func TestRunSeriesPerNode(t *testing.T) {
	ctx := context.Background()
	st, err := results.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, err := st.CreateRun(ctx, &results.Run{Kind: "open", Target: "http://127.0.0.1:9001/", Site: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var samples []results.Sample
	for i := range 40 {
		samples = append(samples, results.Sample{T: float64(i) / 10, Kind: "open", Job: i % 4, Value: 0.002, OK: true,
			Node: fmt.Sprintf("agent-%d", i%2)})
	}
	if err := st.AddSamples(ctx, id, samples); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, id, results.Finish{Status: results.StatusDone}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Store: st, Log: quiet}))
	defer srv.Close()
	code, body := get(t, fmt.Sprintf("%s/ui/run/%d", srv.URL, id))
	if code != http.StatusOK {
		t.Fatalf("GET run page = %d", code)
	}
	for _, node := range []string{"node agent-0", "node agent-1"} {
		if !strings.Contains(body, node) {
			t.Errorf("run page has no series of %q", node)
		}
	}
	if n := plotPoints(body)["series-open"]; n != 40 {
		t.Errorf("series-open has %d points, want 40 (20 per node)", n)
	}
}
