package web

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/lakefed/lakefed/internal/bench"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/sitetest"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// serve runs h on a loopback port until the test ends.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// startStorage runs the storage role on a loopback port.
func startStorage(t *testing.T) string {
	t.Helper()
	return storagetest.Start(t, storage.Config{}).URL
}

// benchSetup runs short open and read tests against a storage role,
// directly and through a federator, saves them to a store, and serves the
// federator with the dashboard mounted at /ui as lakefed serve does.
func benchSetup(t *testing.T) (base string, st *results.Store) {
	t.Helper()
	ctx := t.Context()
	siteURL := startStorage(t)
	st, err := results.Open(ctx, filepath.Join(t.TempDir(), "bench.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	cfg := config.Config{Federation: &config.Federation{Endpoints: []config.Endpoint{
		{Config: endpoint.Config{Name: "site-a", URL: siteURL}, Writable: true}}}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	fed, err := federation.New(ctx, *cfg.Federation, federation.Options{Log: quiet})
	if err != nil {
		t.Fatalf("federation.New = %v", err)
	}
	t.Cleanup(func() { fed.Close() })
	sched, err := sitetest.New(sitetest.Options{Config: config.Tests{WriteTest: true, MaxRequestsPerSecond: 1000},
		Targets: sitetest.FederatorTargets(fed), Store: st, Excluder: fed, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	dash := New(Options{Store: st, Federator: fed, Tests: sched, Log: quiet})
	mux := http.NewServeMux()
	mux.Handle("/ui/", withLayoutCheck(dash))
	mux.Handle("/ui", dash)
	mux.Handle("/", fed.Handler())
	base = serve(t, mux)

	newEP := func(ctx context.Context, c endpoint.Config) (endpoint.Endpoint, error) {
		return kinds.New(ctx, c, slog.New(slog.DiscardHandler))
	}
	direct, err := bench.NewTarget(ctx, bench.TargetConfig{URL: siteURL, NewEndpoint: newEP})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := bench.Prepare(ctx, direct, bench.PrepareOptions{OpenFiles: 40, ReadFiles: 4, ReadSize: 1 << 20,
		ROOTEvents: 200, Common: bench.Common{Seed: 3}}); err != nil {
		t.Fatalf("Prepare = %v", err)
	}
	viaFed, err := bench.NewTarget(ctx, bench.TargetConfig{URL: base + "/", Site: "site-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer viaFed.Close()
	for _, tg := range []*bench.Target{direct, viaFed} {
		res, err := bench.Open(ctx, tg, bench.OpenOptions{Common: bench.Common{Speed: 100, Seed: 1, Reuse: true},
			Ramp: bench.Ramp{Jobs: 8, Step: 2, Every: 10 * time.Second, Hold: 20 * time.Second}})
		if err != nil {
			t.Fatalf("Open(%s) = %v", tg, err)
		}
		if _, err := bench.Save(ctx, st, res, bench.Classify(res, bench.DefaultThresholds()), ""); err != nil {
			t.Fatal(err)
		}
		rres, err := bench.Read(ctx, tg, bench.ReadOptions{Common: bench.Common{Speed: 200, Seed: 2, Reuse: true},
			Ramp: bench.Ramp{Jobs: 6, Step: 2, Every: 60 * time.Second}, Block: 64 << 10})
		if err != nil {
			t.Fatalf("Read(%s) = %v", tg, err)
		}
		if _, err := bench.Save(ctx, st, rres, bench.Classify(rres, bench.DefaultThresholds()), ""); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if res := sched.RunOnce(ctx); !res[0].OK {
			t.Errorf("scheduled test of site-a failed: %s", res[0].Err)
		}
	}
	dash.Sample()
	return base, st
}

// TestBrowser loads the overview, a run page and the compare page in
// headless Chromium at 1400 px wide after a short bench run, and checks
// what a person sees: the plots are in the DOM with
// their data points, no text overflows its box and the page does not
// scroll sideways, every plot fills at least 80 % of its figure's width,
// every number of the tables has its unit, and a screenshot of each page
// (kept under $TMPDIR/lakefed-ui for a human to look at) is not blank.
func TestBrowser(t *testing.T) {
	chromium := testenv.Require(t, "chromium")
	base, st := benchSetup(t)

	runs, err := st.List(t.Context(), results.Filter{Kind: "open"})
	if err != nil || len(runs) != 2 {
		t.Fatalf("open runs = %d (%v), want 2", len(runs), err)
	}
	shots := filepath.Join(os.TempDir(), "lakefed-ui")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, page := range []struct {
		name, path string
		plots      []string
	}{
		{"overview", "/ui/", []string{"open-series", "read-series", "functional", "latency"}},
		{"run", "/ui/run/" + itoa(runs[0].ID), []string{"open-rate", "open-failures", "series-open"}},
		{"compare", "/ui/compare?ids=" + itoa(runs[0].ID) + "," + itoa(runs[1].ID), []string{"open-rate"}},
	} {
		t.Run(page.name, func(t *testing.T) {
			dom := runChromium(t, chromium, "--window-size=1400,2400", "--dump-dom", base+checkURL(page.path))
			pts := domPoints(dom)
			for _, id := range page.plots {
				if pts[id] == 0 {
					t.Errorf("%s in Chromium: plot %q has no data points (plots: %v)", page.path, id, pts)
				}
			}
			checkLayout(t, page.path, dom)

			shot := filepath.Join(shots, page.name+".png")
			runChromium(t, chromium, "--screenshot="+shot, "--window-size=1400,2400", "--hide-scrollbars", base+page.path)
			t.Logf("screenshot of %s: %s", page.path, shot)
			checkNotBlank(t, shot)
		})
	}
}

// layoutScript measures, in the browser, what overflows and how wide the
// plots are, and leaves the answer as JSON in <pre id="lf-check">.
const layoutScript = `<script>
(function () {
  var over = [];
  document.querySelectorAll("body *").forEach(function (e) {
    if (e.closest("svg")) { return; }
    if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1) {
      over.push(e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + " " +
        e.scrollWidth + " > " + e.clientWidth + ": " + (e.textContent || "").trim().slice(0, 80));
    }
  });
  var de = document.documentElement;
  if (de.scrollWidth > de.clientWidth + 1) { over.push("page " + de.scrollWidth + " > " + de.clientWidth); }
  var plots = [];
  document.querySelectorAll("svg.lf-plot").forEach(function (s) {
    var f = s.parentElement, cs = getComputedStyle(f);
    plots.push({id: s.getAttribute("data-plot"), width: s.getBoundingClientRect().width,
      container: f.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight)});
  });
  var pre = document.createElement("pre");
  pre.id = "lf-check";
  pre.textContent = JSON.stringify({viewport: window.innerWidth, overflow: over, plots: plots});
  document.body.appendChild(pre);
})();
</script>`

// checkParam asks withLayoutCheck for the layout script.
const checkParam = "lf-layout-check"

func checkURL(p string) string {
	if strings.Contains(p, "?") {
		return p + "&" + checkParam + "=1"
	}
	return p + "?" + checkParam + "=1"
}

// withLayoutCheck adds layoutScript to the pages asked for with
// checkParam: the dashboard itself runs no JavaScript, and headless
// Chromium's --dump-dom shows the DOM after the page's scripts ran.
func withLayoutCheck(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get(checkParam) == "" {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = io.WriteString(w, strings.Replace(rec.Body.String(), "</body>", layoutScript+"</body>", 1))
	})
}

// checkLayout reads the layout script's answer and the tables of a DOM
// dump.
func checkLayout(t *testing.T, page, dom string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Viewport float64  `json:"viewport"`
		Overflow []string `json:"overflow"`
		Plots    []struct {
			ID               string
			Width, Container float64
		} `json:"plots"`
	}
	found := false
	for _, pre := range findAll(doc, "pre") {
		for _, a := range pre.Attr {
			if a.Key == "id" && a.Val == "lf-check" {
				found = true
				if err := json.Unmarshal([]byte(textOf(pre)), &res); err != nil {
					t.Fatalf("%s: layout check answered %q: %v", page, textOf(pre), err)
				}
			}
		}
	}
	if !found {
		t.Fatalf("%s: the layout script did not run in Chromium", page)
	}
	if res.Viewport < 1300 || res.Viewport > 1500 {
		t.Errorf("%s: viewport %.0f px, want about 1400", page, res.Viewport)
	}
	for _, o := range res.Overflow {
		t.Errorf("%s at %.0f px: text overflows: %s", page, res.Viewport, o)
	}
	if len(res.Plots) == 0 {
		t.Errorf("%s: no plots measured", page)
	}
	for _, p := range res.Plots {
		if p.Width < 0.8*p.Container {
			t.Errorf("%s: plot %s is %.0f px wide in a %.0f px figure, want at least 80%%", page, p.ID, p.Width, p.Container)
		}
	}
	for _, tb := range findAll(doc, "table") {
		checkTable(t, page, tb)
	}
}

// checkNotBlank fails when the PNG at path is not a picture of a page.
func checkNotBlank(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	colors, ink := inkStats(img)
	b := img.Bounds()
	if b.Dx() != 1400 {
		t.Errorf("screenshot %s is %d px wide, want 1400", path, b.Dx())
	}
	if frac := float64(ink) / float64(b.Dx()*b.Dy()); colors < 16 || frac < 0.02 {
		t.Errorf("screenshot %s looks blank: %d colours, %.3f of pixels not white", path, colors, frac)
	}
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// runChromium runs headless Chromium with a fresh profile and returns its
// standard output.
func runChromium(t *testing.T, chromium string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, chromium, all...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

var (
	svgOpenRE = regexp.MustCompile(`<svg[^>]*data-plot="([^"]+)"`)
	domPtRE   = regexp.MustCompile(`<circle[^>]*class="` + PointClass + `"`)
)

// domPoints counts the data points of each plot in a DOM dump.
func domPoints(dom string) map[string]int {
	out := map[string]int{}
	locs := svgOpenRE.FindAllStringSubmatchIndex(dom, -1)
	for i, l := range locs {
		end := len(dom)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		id := dom[l[2]:l[3]]
		out[id] += len(domPtRE.FindAllString(dom[l[0]:end], -1))
	}
	return out
}

// inkStats counts the distinct colours of img and its pixels that are not
// (near) white.
func inkStats(img image.Image) (colors, ink int) {
	seen := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			if len(seen) < 4096 {
				seen[r<<16|g<<8|bl] = true
			}
			if r < 240 || g < 240 || bl < 240 {
				ink++
			}
		}
	}
	return len(seen), ink
}
