package web

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/results"
)

// benchKinds are the run kinds the runs table lists (functional runs of
// the scheduled tests have their own section).
var benchKinds = []string{"open", "read", "io", "root"}

// namedPlot is one rendered plot of a page.
type namedPlot struct {
	ID    string
	Title string
	SVG   template.HTML
	Note  string
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"dur": func(r results.Run) string {
		if r.Ended.IsZero() {
			return "—"
		}
		return fmtDur(r.Ended.Sub(r.Started))
	},
	"ms":  func(d time.Duration) string { return fmtMS(d.Seconds()) },
	"fms": func(ms float64) string { return fmtMS(ms / 1000) },
	"fs":  func(s float64) string { return fmtMS(s) },
	"hz":  fmtHz,
	"mbs": fmtMBps,
	"pct": fmtPct,
	"sec": func(s float64) string { return fmtDur(time.Duration(s * float64(time.Second))) },
	"rate": func(kind string, f float64) string {
		if kind == "open" {
			return fmtHz(f)
		}
		return fmtMBps(f)
	},
	"class": func(c string) string {
		switch c {
		case "ok":
			return "ok"
		case "to debug":
			return "bad"
		}
		return "none"
	},
	"figure": keyFigure,
	"label":  protoLabel,
}

// summaryMap decodes a run's summary.
func summaryMap(r results.Run) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Summary, &m)
	return m
}

func num(m map[string]any, k string) float64 {
	if v, ok := m[k].(float64); ok {
		return v
	}
	return math.NaN()
}

// keyFigure is the one number the runs table shows for a run.
func keyFigure(r results.Run) string {
	m := summaryMap(r)
	switch r.Kind {
	case "open":
		return fmt.Sprintf("%s of %s expected, %s failed", fmtHz(num(m, "observed_rate")), fmtHz(num(m, "expected_rate")),
			fmtPct(num(m, "fail_frac")))
	case "read":
		return fmt.Sprintf("%.0f of %.0f jobs sustained, block read %s", num(m, "sustained_last"), num(m, "target_jobs"),
			fmtMS(num(m, "mean_block_time")))
	case "io":
		if v, ok := m["verified"].(bool); ok && v {
			return "verified"
		}
		return "not verified"
	case "root":
		return fmt.Sprintf("%.0f calls", num(m, "calls"))
	}
	return ""
}

// protoLabel names the way a run reached its site, for the per-endpoint
// and per-protocol time series: the protocol from the target's scheme,
// and "via federator" when a site was pinned through one.
func protoLabel(r results.Run) string {
	u, err := url.Parse(r.Target)
	if err != nil {
		return r.Site
	}
	proto := u.Scheme
	if s, ok := endpoint.LookupScheme(u.Scheme); ok {
		proto = s.Protocol
	}
	if r.Site != "" && r.Site != u.Host {
		return fmt.Sprintf("%s via federator → %s", proto, r.Site)
	}
	return fmt.Sprintf("%s %s", proto, cmp.Or(u.Host, r.Site))
}
