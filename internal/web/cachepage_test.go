package web

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/results"
)

// fakeCache is a CacheSource with fixed answers.
type fakeCache struct {
	st    cache.Status
	files []cache.FilePattern
}

func (f *fakeCache) Status() cache.Status       { return f.st }
func (f *fakeCache) Files() []cache.FilePattern { return f.files }

// ttcFiles are the access patterns of the TTreeCache study (a job
// without it: 15,471 reads of median 2.6 KiB; with it: 2,311 reads of
// median 90 KiB, mostly in multi-range requests), a streamed copy, a file
// read three times over, one not read yet and a path HTML must escape.
func ttcFiles() []cache.FilePattern {
	now := time.Now()
	return []cache.FilePattern{
		{Path: "/atlas/noTTC.root", Size: 1 << 30, Cached: 64 << 20, Reads: 15471, Requests: 15471,
			MedianRead: 2662, MeanRead: 3100.4, Requested: 47960100, RequestedOfSize: 0.0447, Sequential: 0.12, Last: now},
		{Path: "/atlas/TTC.root", Size: 1 << 30, Cached: 200 << 20, Reads: 2311, Requests: 140, MultiRange: 120,
			MedianRead: 92160, MeanRead: 90112, Requested: 208248832, RequestedOfSize: 0.194, Sequential: 0.3, Last: now},
		{Path: "/cms/stream.dat", Size: 4 << 20, Cached: 4 << 20, Reads: 4, Requests: 4, MedianRead: 1 << 20,
			MeanRead: 1 << 20, Requested: 4 << 20, RequestedOfSize: 1, Sequential: 1, Verified: true, Last: now},
		{Path: "/cms/a&b<re>.dat", Size: 1 << 20, Cached: 1 << 20, Reads: 30, Requests: 30, MedianRead: 100 << 10,
			MeanRead: 102400, Requested: 3 << 20, RequestedOfSize: 3, Sequential: 0.9, Last: now},
		{Path: "/lhcb/unread.root", Size: 5 << 20, Last: now},
	}
}

func cacheStatus() cache.Status {
	return cache.Status{Origin: "federation", BlockSize: 1 << 20,
		Usage: cache.Usage{Bytes: 25 << 30, MaxBytes: 200 << 30, Inodes: 950000, MaxInodes: 1000000, Files: 5},
		Group: []cache.GroupMember{{URL: "http://127.0.0.1:9100", Self: true, Up: true},
			{URL: "http://127.0.0.1:9101", Up: true}, {URL: "http://127.0.0.1:9102", Up: false}}}
}

// cacheServer serves a dashboard over c (nil: no cache).
func cacheServer(t *testing.T, c CacheSource) string {
	t.Helper()
	st, err := results.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(New(Options{Store: st, Cache: c, Log: quiet}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCachePage: /ui/cache shows the usage against the bounds, the group
// and every file's access pattern, numbers with units, and plots one
// point per file that was read.
func TestCachePage(t *testing.T) {
	fc := &fakeCache{st: cacheStatus(), files: ttcFiles()}
	base := cacheServer(t, fc)
	code, body := get(t, base+"/ui/cache")
	if code != 200 {
		t.Fatalf("GET /ui/cache = %d: %s", code, body)
	}
	usage := section(t, body, "usage")
	for _, w := range []string{"25 GiB", "200 GiB", "12.5 %", "950000 inodes", "1000000 inodes", "95.0 %",
		"5 files", `style="width: 12.5%"`, `class="fill full" style="width: 95.0%"`} {
		if !strings.Contains(usage, w) {
			t.Errorf("usage section lacks %q:\n%s", w, usage)
		}
	}
	group := section(t, body, "group")
	if n := strings.Count(group, `badge ok">up`); n != 2 {
		t.Errorf("group: %d members up, want 2:\n%s", n, group)
	}
	if !strings.Contains(group, `9102</code></td>`+"\n"+`<td><span class="badge bad">down`) ||
		!strings.Contains(group, `9100</code> <span class="tag">this node`) {
		t.Errorf("group table does not show 9102 down and 9100 as this node:\n%s", group)
	}
	files := section(t, body, "files")
	for _, w := range []string{"/atlas/noTTC.root", "15471 reads", "2.6 KiB", "3 KiB", "4.47 %", "12.0 %",
		"0 of 15471 requests", "2311 reads", "90 KiB", "120 of 140 requests",
		"/cms/a&amp;b&lt;re&gt;.dat", "300 %", "adler32 ok", "1 MiB (100 %)", "64 MiB (6.25 %)"} {
		if !strings.Contains(files, w) {
			t.Errorf("files table lacks %q", w)
		}
	}
	if strings.Contains(body, "<re>") {
		t.Errorf("a path went into the page unescaped")
	}

	pts := plotPoints(body)
	for _, id := range []string{plotReadSize, plotRequested} {
		if pts[id] != 4 {
			t.Errorf("plot %s has %d points, want 4 (one per file read; plots: %v)", id, pts[id], pts)
		}
	}
	// Each point names its file, with its values in their units, and
	// sits in the series of how it was read.
	for _, w := range []string{
		`data-series="≥ 50 % of reads sequential"><title>/cms/stream.dat: 4 reads, 1 MiB</title>`,
		`data-series="&lt; 50 % of reads sequential"><title>/atlas/noTTC.root: 15471 reads, 2.6 KiB</title>`,
		`<title>/atlas/TTC.root: 1 GiB, 19.4 %</title>`,
		"whole file read once",
	} {
		if !strings.Contains(body, w) {
			t.Errorf("the plots lack %q", w)
		}
	}

	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range findAll(doc, "table") {
		checkTable(t, "/ui/cache", tb)
	}
	checkCacheAxes(t, doc)
}

// byteTickRE is a tick label of an axis in bytes.
var byteTickRE = regexp.MustCompile(`^\d+(\.\d)? (B|KiB|MiB|GiB|TiB)$`)

// checkCacheAxes: every axis label of the cache plots names its unit and
// says it is a log scale, and the ticks of an axis in bytes carry their
// binary prefix.
func checkCacheAxes(t *testing.T, doc *html.Node) {
	t.Helper()
	labelRE := regexp.MustCompile(`^[a-z /]+ \((bytes, |%, )?log scale\)$`)
	for _, svg := range findAll(doc, "svg") {
		var id string
		for _, a := range svg.Attr {
			if a.Key == "data-plot" {
				id = a.Val
			}
		}
		labels, byteTicks := 0, 0
		for _, tx := range findAll(svg, "text") {
			s := textOf(tx)
			switch {
			case s == "" || strings.Contains(s, "sequential") || s == "whole file read once":
			case byteTickRE.MatchString(s):
				byteTicks++
			case digitRE.MatchString(s):
				if _, err := json.Number(s).Float64(); err != nil {
					t.Errorf("plot %s: tick %q is neither a number nor a size", id, s)
				}
			case labelRE.MatchString(s):
				labels++
			default:
				t.Errorf("plot %s: axis label %q names no unit and scale", id, s)
			}
		}
		if labels != 2 || byteTicks < 2 {
			t.Errorf("plot %s: %d axis labels and %d byte ticks, want 2 and at least 2", id, labels, byteTicks)
		}
	}
}

// TestCacheNavAndAPI: the navigation links the cache page only when there
// is a cache; without one the cache's URLs answer 404; the JSON is the
// cache's own.
func TestCacheNavAndAPI(t *testing.T) {
	fc := &fakeCache{st: cacheStatus(), files: ttcFiles()}
	with, without := cacheServer(t, fc), cacheServer(t, nil)
	for _, p := range []string{"/ui/", "/ui/cache"} {
		if _, body := get(t, with+p); !strings.Contains(body, `<a href="/ui/cache">cache</a>`) {
			t.Errorf("GET %s with a cache: no link to /ui/cache in the navigation", p)
		}
	}
	if _, body := get(t, without+"/ui/"); strings.Contains(body, `href="/ui/cache"`) {
		t.Errorf("GET /ui/ without a cache links /ui/cache")
	}
	for _, p := range []string{"/ui/cache", "/ui/api/cache", "/ui/api/cache/files", "/ui/plot/cache/cache-read-size.svg"} {
		if code, _ := get(t, without+p); code != 404 {
			t.Errorf("GET %s without a cache = %d, want 404", p, code)
		}
	}
	for _, tc := range []struct {
		path string
		code int
	}{
		{"/ui/plot/cache/nope.svg", 404},
		{"/ui/plot/cache/cache-read-size", 400},
	} {
		if code, _ := get(t, with+tc.path); code != tc.code {
			t.Errorf("GET %s = %d, want %d", tc.path, code, tc.code)
		}
	}
	code, body := get(t, with+"/ui/plot/cache/"+plotRequested+".svg")
	if code != 200 || !strings.HasPrefix(body, "<?xml") || len(pointRE.FindAllString(body, -1)) != 4 {
		t.Errorf("cache plot SVG = %d, %d points, want 200 and 4", code, len(pointRE.FindAllString(body, -1)))
	}

	_, body = get(t, with+"/ui/api/cache/files")
	var files []cache.FilePattern
	if err := json.Unmarshal([]byte(body), &files); err != nil {
		t.Fatalf("api/cache/files = %s: %v", body, err)
	}
	want := ttcFiles()
	for i := range want {
		want[i].First, want[i].Last = time.Time{}, time.Time{}
	}
	for i := range files {
		files[i].First, files[i].Last = time.Time{}, time.Time{}
	}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("api/cache/files = %+v, want %+v", files, want)
	}
	_, body = get(t, with+"/ui/api/cache")
	var st cache.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || !reflect.DeepEqual(st, cacheStatus()) {
		t.Errorf("api/cache = %s (%v), want %+v", body, err, cacheStatus())
	}
}

// TestCachePageEmpty: a cache no job has read through yet, with no group
// and no bounds, shows so, with no plots and no group section.
func TestCachePageEmpty(t *testing.T) {
	base := cacheServer(t, &fakeCache{st: cache.Status{Origin: "http://o/", BlockSize: 1 << 20}})
	code, body := get(t, base+"/ui/cache")
	if code != 200 {
		t.Fatalf("GET /ui/cache = %d: %s", code, body)
	}
	for _, w := range []string{"No file has been read through the cache yet", "no bound", "0 files"} {
		if !strings.Contains(body, w) {
			t.Errorf("empty cache page lacks %q", w)
		}
	}
	if strings.Contains(body, `id="group"`) || strings.Contains(body, "<svg") {
		t.Errorf("empty cache page has a group section or a plot")
	}
	_, body = get(t, base+"/ui/api/cache/files")
	if strings.TrimSpace(body) != "[]" {
		t.Errorf("api/cache/files of an empty cache = %q, want []", body)
	}
}

// TestLogAxes: on log axes, values a decade apart are equally far apart
// (the TTreeCache picture needs 2.6 KiB and 90 KiB apart, not both
// squashed under 1 MiB), the ticks of an axis in bytes read "64 KiB",
// values not above zero are left out, and the data area reaches the top
// of the picture (gonum's own log scale pads it for a misplaced label).
func TestLogAxes(t *testing.T) {
	s := series{Name: "files", X: []float64{1, 10, 100, 1000, 10000, 0}, Y: []float64{1e2, 1e3, 1e4, 1e5, 1e6, 5}}
	svg := mustRender(t, plotSpec{ID: "log", XLabel: "reads (log scale)", YLabel: "read size (bytes, log scale)",
		XUnit: "reads", YUnit: "B", LogX: true, LogY: true, Series: []series{s}})
	cxRE := regexp.MustCompile(`<circle class="lf-pt" cx="([^"]*)" cy="([^"]*)"`)
	var xs, ys []float64
	for _, m := range cxRE.FindAllStringSubmatch(svg, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		xs, ys = append(xs, x), append(ys, y)
	}
	if len(xs) != 5 {
		t.Fatalf("points = %d, want 5 (the one at x = 0 left out)", len(xs))
	}
	for _, v := range [][]float64{xs, ys} {
		d0 := v[1] - v[0]
		if d0 <= 10 {
			t.Fatalf("decades %.1f apart, want more than 10 points", d0)
		}
		for i := 2; i < len(v); i++ {
			if d := v[i] - v[i-1]; math.Abs(d-d0) > 0.01*d0 {
				t.Errorf("decade %d is %.2f apart, the first %.2f: not a log axis", i, d, d0)
			}
		}
	}
	tx := svgTexts(svg)
	for _, w := range []string{"1 KiB", "64 KiB", "1 MiB", "1", "10", "10000"} {
		if _, ok := tx[w]; !ok {
			t.Errorf("no tick %q in %v", w, tx)
		}
	}
	h, _ := strconv.ParseFloat(viewBoxRE.FindStringSubmatch(svg)[2], 64)
	top := math.Inf(-1)
	for txt, y := range tx {
		if byteTickRE.MatchString(txt) {
			top = math.Max(top, y)
		}
	}
	if top < h-25 {
		t.Errorf("top tick at %.1f of %.1f: the data area leaves a gap above it", top, h)
	}
}
