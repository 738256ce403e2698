package web

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/lakefed/lakefed/internal/buffer"
	"github.com/lakefed/lakefed/internal/results"
)

// fakeBuffer is a BufferSource with fixed answers.
type fakeBuffer struct {
	st   buffer.Status
	hist []buffer.Sample
}

func (f *fakeBuffer) Status() buffer.Status    { return f.st }
func (f *fakeBuffer) History() []buffer.Sample { return f.hist }

// busyBuffer is a buffer 90 % full whose cloud target is down: 12 files
// (3 GiB) pending for 12m34s, two of them failing (one path HTML must
// escape), site-a having taken 40 files at 10 GiB in 100 s.
func busyBuffer(now time.Time) *fakeBuffer {
	st := buffer.Status{PendingFiles: 12, PendingBytes: 3 << 30, OldestPendingSeconds: 754,
		HeldFiles: 20, HeldBytes: 4 << 30, UsedBytes: 4608 << 20, MaxBytes: 5 << 30, Migrated: 40,
		Failures: []buffer.Failure{
			{Path: "/store/user/a&b<re>.root", Target: "cloud", Reason: "unavailable",
				Error: "dial tcp 127.0.0.1:9: connection refused", Attempts: 3, At: now.Add(-time.Minute),
				NextTry: now.Add(4 * time.Second)},
			{Path: "/store/user/run2/f.root", Target: "tape", Reason: "verify_adler32",
				Error: "adler32 on tape is 0a0b0c0d, want 11223344", Attempts: 1, At: now.Add(-30 * time.Second),
				NextTry: now.Add(-time.Second)},
		},
		Targets: []buffer.TargetStatus{
			{Name: "cloud", Failures: 7, LastError: "dial tcp 127.0.0.1:9: connection refused",
				DownUntil: now.Add(time.Minute)},
			{Name: "site-a", Files: 40, Bytes: 10 << 30, Seconds: 100, BytesPerSecond: float64(10<<30) / 100},
			{Name: "tape", Failures: 1, LastError: "adler32 on tape is 0a0b0c0d, want 11223344"},
		}}
	// Five minutes of samples: writes pile up faster than cloud takes
	// them.
	var hist []buffer.Sample
	for i := range 30 {
		hist = append(hist, buffer.Sample{Time: now.Add(time.Duration(i-30) * 10 * time.Second),
			PendingBytes: int64(i) * 100 << 20, PendingFiles: i / 3})
	}
	return &fakeBuffer{st: st, hist: hist}
}

// bufferServer serves a dashboard over b (nil: no buffer).
func bufferServer(t *testing.T, b BufferSource) string {
	t.Helper()
	st, err := results.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(New(Options{Store: st, Buffer: b, Log: quiet}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBufferPage: /ui/buffer shows the pending files and bytes, the age
// of the oldest, the disk against its bound, the migrated and failing
// files, every target's throughput and state, every failure with its
// reason, and plots the pending bytes with one point per sample and one
// for now.
func TestBufferPage(t *testing.T) {
	fb := busyBuffer(time.Now())
	base := bufferServer(t, fb)
	code, body := get(t, base+"/ui/buffer")
	if code != 200 {
		t.Fatalf("GET /ui/buffer = %d: %s", code, body)
	}
	figs := section(t, body, "figures")
	for _, w := range []string{
		`id="fig-pending"`, ">3 GiB<", "12 files acknowledged",
		`id="fig-oldest"`, ">12m34s<",
		`class="figure-tile bad" id="fig-disk"`, ">4.5 GiB<", "of 5 GiB (max_bytes): 90.0 %", `class="fill full" style="width: 90.0%"`,
		`id="fig-migrated"`, ">40 files<", "20 files, 4 GiB held on disk",
		`class="figure-tile bad" id="fig-failing"`, ">2 files<",
	} {
		if !strings.Contains(figs, w) {
			t.Errorf("figures lack %q:\n%s", w, figs)
		}
	}
	checkFigureUnits(t, figs)

	targets := section(t, body, "targets")
	for _, w := range []string{"site-a", "40 files", "10 GiB", "1m40s", "107 MB/s", `badge ok">taking copies`,
		"held off until", "7 copies", "connection refused", `badge warn" title="it answers, but the last copy of these files failed">failing for 1 file<`,
		"1 copy<"} {
		if !strings.Contains(targets, w) {
			t.Errorf("targets table lacks %q", w)
		}
	}
	if n := strings.Count(targets, "held off until"); n != 1 {
		t.Errorf("targets table: %d targets held off, want 1 (cloud)", n)
	}
	fails := section(t, body, "failures")
	for _, w := range []string{"/store/user/a&amp;b&lt;re&gt;.root", `badge warn">unavailable`, `badge warn">verify_adler32`,
		"3 attempts", "1 attempt<", "due now", "want 11223344"} {
		if !strings.Contains(fails, w) {
			t.Errorf("failures table lacks %q", w)
		}
	}
	// The page's now comes a little after the fake's.
	if !regexp.MustCompile(`>in (4|3\.\d)s<`).MatchString(fails) {
		t.Errorf("failures table does not say the next try of a&b<re>.root is in about 4s")
	}
	if strings.Contains(body, "<re>") {
		t.Errorf("a path went into the page unescaped")
	}

	if pts := plotPoints(body); pts[plotPending] != len(fb.hist)+1 {
		t.Errorf("plot %s has %d points, want %d (a sample each and now)", plotPending, pts[plotPending], len(fb.hist)+1)
	}
	for _, w := range []string{
		// The newest point is now, at the Status's figures.
		`<title>now: 12 files pending: 0s ago, 3 GiB</title>`,
		// The sample of 2.73 GiB (28 × 100 MiB) ten seconds before the
		// last one (and the page's now a little after the fake's).
		`<title>9 files pending: 20(\.\d)?s ago, 2\.73 GiB</title>`,
		`buffer bound \(max_bytes, 5 GiB\)`,
	} {
		if !regexp.MustCompile(w).MatchString(body) {
			t.Errorf("the plot lacks %s", w)
		}
	}

	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range findAll(doc, "table") {
		checkTable(t, "/ui/buffer", tb)
	}
	checkBufferAxes(t, doc, "GiB", "minutes ago")
}

// checkFigureUnits fails for a headline figure whose value is a number
// without its unit.
func checkFigureUnits(t *testing.T, figs string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(figs))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, div := range findAll(doc, "div") {
		for _, a := range div.Attr {
			if a.Key == "class" && a.Val == "value" {
				n++
				if v := textOf(div); digitRE.MatchString(v) && !unitRE.MatchString(v) {
					t.Errorf("figure %q has no unit", v)
				}
			}
		}
	}
	if n != 5 {
		t.Errorf("%d headline figures, want 5", n)
	}
}

// checkBufferAxes: the plot's y axis is labelled with its binary unit,
// the x axis with how long ago, and every tick is a plain number or
// "now".
func checkBufferAxes(t *testing.T, doc *html.Node, unit, ago string) {
	t.Helper()
	tickRE := regexp.MustCompile(`^(\d+(\.\d+)?|now)$`)
	svgs := findAll(doc, "svg")
	if len(svgs) != 1 {
		t.Fatalf("%d plots on /ui/buffer, want 1", len(svgs))
	}
	var y, x bool
	for _, tx := range findAll(svgs[0], "text") {
		switch s := textOf(tx); {
		case s == "pending ("+unit+")":
			y = true
		case s == ago:
			x = true
		case s == "" || tickRE.MatchString(s) || s == "pending bytes" || strings.HasPrefix(s, "buffer bound"):
		default:
			t.Errorf("plot text %q is neither an axis label with its unit, a tick nor a legend entry", s)
		}
	}
	if !x || !y {
		t.Errorf("axis labels: x %q %v, y %q %v; want both", ago, x, "pending ("+unit+")", y)
	}
}

// TestBufferNavAndAPI: the navigation links the buffer page only when
// there is a buffer; without one its URLs answer 404; the JSON is the
// buffer's own /api/buffer (its Status and "history").
func TestBufferNavAndAPI(t *testing.T) {
	fb := busyBuffer(time.Now())
	with, without := bufferServer(t, fb), bufferServer(t, nil)
	for _, p := range []string{"/ui/", "/ui/buffer"} {
		if _, body := get(t, with+p); !strings.Contains(body, `<a href="/ui/buffer">buffer</a>`) {
			t.Errorf("GET %s with a buffer: no link to /ui/buffer in the navigation", p)
		}
	}
	if _, body := get(t, without+"/ui/"); strings.Contains(body, `href="/ui/buffer"`) {
		t.Errorf("GET /ui/ without a buffer links /ui/buffer")
	}
	for _, p := range []string{"/ui/buffer", "/ui/api/buffer", "/ui/plot/buffer/" + plotPending + ".svg"} {
		if code, _ := get(t, without+p); code != 404 {
			t.Errorf("GET %s without a buffer = %d, want 404", p, code)
		}
	}
	for _, tc := range []struct {
		path string
		code int
	}{
		{"/ui/plot/buffer/nope.svg", 404},
		{"/ui/plot/buffer/" + plotPending, 400},
	} {
		if code, _ := get(t, with+tc.path); code != tc.code {
			t.Errorf("GET %s = %d, want %d", tc.path, code, tc.code)
		}
	}
	code, body := get(t, with+"/ui/plot/buffer/"+plotPending+".svg")
	if n := len(pointRE.FindAllString(body, -1)); code != 200 || !strings.HasPrefix(body, "<?xml") || n != len(fb.hist)+1 {
		t.Errorf("buffer plot SVG = %d, %d points, want 200 and %d", code, n, len(fb.hist)+1)
	}

	_, body = get(t, with+"/ui/api/buffer")
	var got bufferJSON
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("api/buffer = %s: %v", body, err)
	}
	// Times go through JSON as text: compare them as instants.
	want := bufferJSON{Status: fb.st, History: fb.hist}
	norm := func(b *bufferJSON) {
		for i := range b.Failures {
			b.Failures[i].At, b.Failures[i].NextTry = b.Failures[i].At.UTC().Round(0), b.Failures[i].NextTry.UTC().Round(0)
		}
		for i := range b.Targets {
			b.Targets[i].DownUntil = b.Targets[i].DownUntil.UTC().Round(0)
		}
		for i := range b.History {
			b.History[i].Time = b.History[i].Time.UTC().Round(0)
		}
	}
	want.Failures = append([]buffer.Failure(nil), want.Failures...)
	want.Targets = append([]buffer.TargetStatus(nil), want.Targets...)
	want.History = append([]buffer.Sample(nil), want.History...)
	norm(&got)
	norm(&want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("api/buffer = %+v, want %+v", got, want)
	}
	if !strings.Contains(body, `"history": [`) || !strings.Contains(body, `"pending_bytes": 3221225472`) {
		t.Errorf("api/buffer does not read as /api/buffer does:\n%.400s", body)
	}
}

// TestBufferPageEmpty: a buffer that has not sampled yet, holds nothing
// and has no bound says so, with no plot and no tables.
func TestBufferPageEmpty(t *testing.T) {
	base := bufferServer(t, &fakeBuffer{st: buffer.Status{Failures: []buffer.Failure{}}})
	code, body := get(t, base+"/ui/buffer")
	if code != 200 {
		t.Fatalf("GET /ui/buffer = %d: %s", code, body)
	}
	for _, w := range []string{"No sample yet", ">none pending<", ">0 B<", "no bound (max_bytes unset)", ">0 files<",
		"No pending file is failing", "No targets"} {
		if !strings.Contains(body, w) {
			t.Errorf("empty buffer page lacks %q", w)
		}
	}
	if strings.Contains(body, "<svg") || strings.Contains(body, "figure-tile bad") || strings.Contains(body, `class="bar"`) {
		t.Errorf("empty buffer page has a plot, a figure marked bad or a usage bar")
	}
	_, body = get(t, base+"/ui/api/buffer")
	if !strings.Contains(body, `"history": []`) || !strings.Contains(body, `"failures": []`) {
		t.Errorf("api/buffer of an empty buffer = %s, want empty lists, not null", body)
	}
}

// TestBufferPlotScale: the y axis takes the binary unit of the largest
// value; the bound is drawn only when the line comes within a quarter of
// it, so that a far bound does not flatten the line into the axis.
func TestBufferPlotScale(t *testing.T) {
	now := time.Now()
	hist := []buffer.Sample{{Time: now.Add(-time.Minute), PendingBytes: 512 << 10, PendingFiles: 2},
		{Time: now.Add(-50 * time.Second), PendingBytes: 3 << 20, PendingFiles: 5}}
	for _, tc := range []struct {
		name         string
		pending, max int64
		unit         string
		bound        bool
	}{
		{"MiB, far bound", 2 << 20, 500 << 30, "MiB", false},
		{"bound near", 2 << 20, 8 << 20, "MiB", true},
		{"KiB", 0, 0, "KiB", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist
			if tc.unit == "KiB" {
				h = hist[:1]
			}
			plots, err := bufferPlots(buffer.Status{PendingBytes: tc.pending, MaxBytes: tc.max}, h, now)
			if err != nil || len(plots) != 1 {
				t.Fatalf("bufferPlots = %d plots, %v; want 1", len(plots), err)
			}
			svg := string(plots[0].SVG)
			if !strings.Contains(svg, ">pending ("+tc.unit+")<") {
				t.Errorf("y axis is not in %s:\n%.300s", tc.unit, svg)
			}
			if got := strings.Contains(svg, "buffer bound"); got != tc.bound {
				t.Errorf("bound drawn = %v, want %v", got, tc.bound)
			}
			if n := len(pointRE.FindAllString(svg, -1)); n != len(h)+1 {
				t.Errorf("%d points, want %d", n, len(h)+1)
			}
		})
	}
	for _, tc := range []struct {
		v    float64
		unit string
	}{{0, "B"}, {1023, "B"}, {1024, "KiB"}, {5 << 30, "GiB"}, {3 << 40, "TiB"}} {
		if u, _ := byteUnit(tc.v); u != tc.unit {
			t.Errorf("byteUnit(%v) = %q, want %q", tc.v, u, tc.unit)
		}
	}
}
