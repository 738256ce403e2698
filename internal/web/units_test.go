package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/lakefed/lakefed/internal/results"
)

// bigSeed does not survive a float64 (it would print as 4.847e+18).
const bigSeed = uint64(4847123456789012345)

// unitServer serves the dashboard over a store holding an open run and a
// read run with the parameters and summaries the bench writes (seeds,
// durations in nanoseconds, rates in bytes/s and Hz, times in seconds).
func unitServer(t *testing.T) (url string, openID, readID int64) {
	t.Helper()
	ctx := context.Background()
	st, err := results.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mk := func(kind string, params, summary map[string]any, steps []results.Step) int64 {
		p, _ := json.Marshal(params)
		id, err := st.CreateRun(ctx, &results.Run{Kind: kind, Target: "http://127.0.0.1:9001/", Site: "site-a",
			Started: time.Now().Add(-time.Minute), Params: p})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetSteps(ctx, id, steps); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishRun(ctx, id, results.Finish{Status: results.StatusDone, Classification: "ok", Summary: summary}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	common := map[string]any{"seed": bigSeed, "speed": 10, "jobs": 50, "step": 5, "every": 30 * time.Second,
		"hold": time.Minute, "period": 2 * time.Second, "files": 40, "file_size": 1 << 20}
	steps := []results.Step{{Index: 0, Start: 0, Jobs: 5, Expected: 2.5e7, Observed: 2.4e7, Ops: 100, Mean: 0.0123,
		P50: 0.011, P90: 0.02, P99: 0.031, IOWait: 0.25, Sustained: 5}}
	openID = mk("open", common, map[string]any{"observed_rate": 15.2, "expected_rate": 16, "max_observed_rate": 17,
		"fail_frac": 0.012, "mean": 0.0042, "p50": 0.004, "p90": 0.006, "p99": 0.009, "max": 0.02, "opens": 1200,
		"failures": 3, "jobs": 50, "slope": 0.97, "speed": 10}, steps)
	readID = mk("read", common, map[string]any{"mean_block_time": 0.0123, "expected_rate": 2.5e7,
		"observed_rate": 2.4e7, "io_wait": 0.25, "reads": 900, "bytes": 943718400, "block": 1 << 20,
		"sustained_last": 45, "target_jobs": 50, "p50": 0.011}, steps)
	srv := httptest.NewServer(New(Options{Store: st, Log: quiet}))
	t.Cleanup(srv.Close)
	return srv.URL, openID, readID
}

// unitRE is what makes a number readable: a unit after it.
var (
	unitRE   = regexp.MustCompile(`\d\s?(ms|s|Hz|MB/s|%|×|B|KiB|MiB|GiB|TiB|[a-zA-Z]{3,})(\s|,|/|$)|\d(m\d|h\d)`)
	digitRE  = regexp.MustCompile(`\d`)
	numRE    = regexp.MustCompile(`^[-+]?\d+(\.\d+)?([^\d.:]|$)`) // a number, not an address or a date
	expRE    = regexp.MustCompile(`\d[eE][+-]\d`)
	idKeys   = []string{"seed"} // identifiers, not quantities
	countCol = []string{"stage", "jobs", "ops", "failed", "sustained jobs", "runs ok", "runs to debug", "requests",
		"errors", "failed in a row"}
)

// textOf is the text inside n.
func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(b.String())
}

// findAll returns the elements named tag under n.
func findAll(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == tag {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

// tableCells returns, per row of table t, its header and data cells' text.
func tableCells(t *html.Node) (head []string, rows [][]string) {
	for _, tr := range findAll(t, "tr") {
		var cells []string
		isHead := tr.Parent != nil && tr.Parent.Data == "thead"
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
				cells = append(cells, textOf(c))
			}
		}
		if isHead {
			head = cells
		} else {
			rows = append(rows, cells)
		}
	}
	return head, rows
}

// TestUnits renders the run and compare pages in-process and reads them
// as a person would: no exponent notation, the seed as
// the integer it is, durations as durations, and every number of the
// summary, parameter, compare and stage tables followed by its unit.
func TestUnits(t *testing.T) {
	base, openID, readID := unitServer(t)
	pages := []struct{ name, path string }{
		{"open run", fmt.Sprintf("/ui/run/%d", openID)},
		{"read run", fmt.Sprintf("/ui/run/%d", readID)},
		{"compare", fmt.Sprintf("/ui/compare?ids=%d,%d", openID, readID)},
		{"overview", "/ui/"},
	}
	for _, pg := range pages {
		t.Run(pg.name, func(t *testing.T) {
			code, body := get(t, base+pg.path)
			if code != http.StatusOK {
				t.Fatalf("GET %s = %d: %s", pg.path, code, body)
			}
			doc, err := html.Parse(strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			for _, tb := range findAll(doc, "table") {
				checkTable(t, pg.path, tb)
			}
			// Text a person reads: table cells, headings, SVG labels.
			if m := expRE.FindString(textOf(doc)); m != "" {
				t.Errorf("GET %s: exponent notation %q in the page", pg.path, m)
			}
			if pg.name != "overview" {
				for _, w := range []string{fmt.Sprint(bigSeed), ">30s<", ">1m0s<"} {
					if !strings.Contains(body, w) {
						t.Errorf("GET %s: no %q in the page", pg.path, w)
					}
				}
				for _, bad := range []string{"30000000000", "4.847e+18"} {
					if strings.Contains(body, bad) {
						t.Errorf("GET %s: %q in the page", pg.path, bad)
					}
				}
			}
		})
	}
}

// checkTable fails for a numeric cell without a unit. Key-value tables
// (row header, then values) exempt identifiers; column tables exempt the
// columns that count things and say so in their header.
func checkTable(t *testing.T, page string, tb *html.Node) {
	t.Helper()
	head, rows := tableCells(tb)
	for _, r := range rows {
		if len(r) == 0 {
			continue
		}
		kvTable := head == nil || head[0] == ""
		for i, cell := range r {
			if !numRE.MatchString(cell) || isDate(cell) {
				continue
			}
			switch {
			case kvTable && i == 0:
				continue
			case kvTable && slices.Contains(idKeys, strings.TrimSuffix(r[0], " (parameter)")):
				continue
			case !kvTable && i < len(head) && slices.Contains(countCol, head[i]):
				continue
			}
			if !unitRE.MatchString(cell) {
				col := r[0]
				if !kvTable && i < len(head) {
					col = head[i]
				}
				t.Errorf("GET %s: %q (%s) has no unit", page, cell, col)
			}
		}
	}
}

var dateRE = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`)

func isDate(s string) bool { return dateRE.MatchString(s) }

// TestPlotAxisUnits: every axis of the run and compare plots names its
// unit in parentheses, or is a count (jobs) or a time ago.
func TestPlotAxisUnits(t *testing.T) {
	base, openID, readID := unitServer(t)
	_, body := get(t, fmt.Sprintf("%s/ui/compare?ids=%d,%d", base, openID, readID))
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	labelRE := regexp.MustCompile(`\((ms|s|Hz|MB/s|%|% of job time)\)|^jobs$|ago$`)
	for _, svg := range findAll(doc, "svg") {
		var id string
		for _, a := range svg.Attr {
			if a.Key == "data-plot" {
				id = a.Val
			}
		}
		for _, tx := range findAll(svg, "text") {
			s := textOf(tx)
			if s == "" || digitRE.MatchString(s) && !strings.Contains(s, "▲") || s == "y = x" || strings.HasPrefix(s, "#") {
				continue // tick labels, legend entries
			}
			if !labelRE.MatchString(strings.Split(s, " · ")[0]) {
				t.Errorf("plot %s: axis label %q names no unit", id, s)
			}
		}
	}
}

func TestFormat(t *testing.T) {
	cases := []struct {
		name, kind, key string
		v               any
		want            string
	}{
		{"seed exact", "open", "seed", json.Number("4847123456789012345"), "4847123456789012345"},
		{"duration", "open", "every", json.Number("30000000000"), "30s"},
		{"open rate", "open", "observed_rate", json.Number("15.2"), "15.2 Hz"},
		{"read rate", "read", "observed_rate", json.Number("24000000"), "24.0 MB/s"},
		{"latency", "open", "p50", json.Number("0.004"), "4.00 ms"},
		{"fraction", "open", "fail_frac", json.Number("0.012"), "1.20 %"},
		{"size", "read", "block", json.Number("1048576"), "1 MiB"},
		{"count", "open", "opens", json.Number("1200"), "1200 opens"},
		{"speed", "open", "speed", json.Number("10"), "10×"},
		{"string", "io", "adler32", "0a0b0c0d", "0a0b0c0d"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fmtKeyed(c.kind, c.key, c.v); got != c.want {
				t.Errorf("fmtKeyed(%q, %q, %v) = %q, want %q", c.kind, c.key, c.v, got, c.want)
			}
		})
	}
}
