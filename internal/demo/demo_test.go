package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/testenv"
)

// quiet is a logger that drops everything.
var quiet = slog.New(slog.DiscardHandler)

// noRedirect is a client that shows the federator's answers as they are.
var noRedirect = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// start runs a demo on a free port, in a fresh TMPDIR so that tests can
// see its temporary directory go, stopped by t.Cleanup.
func start(t *testing.T, opts Options) *Demo {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir())
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	opts.Log = quiet
	d, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return d
}

func get(t *testing.T, c *http.Client, method, u string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, u, err)
	}
	return resp, body
}

// TestSamplesThroughFederator checks every sample file: redirected to its
// best site when that site is redirected to, streamed by the federator
// when only the proxied site has it, and the same bytes as on disk.
func TestSamplesThroughFederator(t *testing.T) {
	d := start(t, Options{})
	for _, s := range Samples {
		t.Run(strings.TrimPrefix(s.Path, "/"), func(t *testing.T) {
			best := d.Site(s.Sites[0])
			want, err := os.ReadFile(filepath.Join(best.Dir, filepath.FromSlash(s.Path)))
			if err != nil {
				t.Fatal(err)
			}
			if s.Size > 0 && int64(len(want)) != s.Size {
				t.Errorf("%s on disk: %d bytes, want %d", s.Path, len(want), s.Size)
			}
			for _, name := range s.Sites[1:] {
				other, err := os.ReadFile(filepath.Join(d.Site(name).Dir, filepath.FromSlash(s.Path)))
				if err != nil || !bytes.Equal(other, want) {
					t.Errorf("%s on %s differs from the copy on %s (err %v)", s.Path, name, best.Name, err)
				}
			}
			resp, body := get(t, noRedirect, http.MethodGet, d.FederatorURL+s.Path)
			switch best.Mode {
			case "redirect":
				if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != strings.TrimSuffix(best.URL, "/")+s.Path {
					t.Fatalf("GET %s = %s, Location %q; want 302 to %s", s.Path, resp.Status, resp.Header.Get("Location"), best.Name)
				}
				_, body = get(t, http.DefaultClient, http.MethodGet, d.FederatorURL+s.Path)
			case "proxy":
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s = %s, want 200 (proxied)", s.Path, resp.Status)
				}
			}
			if !bytes.Equal(body, want) {
				t.Errorf("GET %s: %d bytes differ from the %d on disk", s.Path, len(body), len(want))
			}
		})
	}
}

// TestMergedListing: a directory whose files are on different sites is
// listed whole through the federator.
func TestMergedListing(t *testing.T) {
	d := start(t, Options{})
	req, _ := http.NewRequest("PROPFIND", d.FederatorURL+"/demo/data/run2/", nil)
	req.Header.Set("Depth", "1")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMultiStatus {
		t.Fatalf("PROPFIND /demo/data/run2/ = %s, want 207", resp.Status)
	}
	for _, name := range []string{"calib.json", "hits-0003.dat"} { // site-a only, site-c only
		if !strings.Contains(string(body), name) {
			t.Errorf("PROPFIND /demo/data/run2/ does not list %s:\n%s", name, body)
		}
	}
}

// TestConfigFile: the config the demo wrote loads, and names the sites as
// they run.
func TestConfigFile(t *testing.T) {
	d := start(t, Options{})
	cfg, err := config.Load(d.ConfigPath)
	if err != nil {
		t.Fatalf("config.Load(%s): %v", d.ConfigPath, err)
	}
	if len(cfg.Storage) != 3 || cfg.Federation == nil || len(cfg.Federation.Endpoints) != 3 {
		t.Fatalf("config: %d storage servers, federation %v; want 3 and 3 endpoints", len(cfg.Storage), cfg.Federation)
	}
	for i, e := range cfg.Federation.Endpoints {
		s := d.Sites[i]
		if e.Name != s.Name || e.URL != s.URL || e.EffectiveMode(cfg.Federation) != s.Mode || e.Writable != s.Writable {
			t.Errorf("endpoint %d = %s %s mode %s writable %v; want %s %s %s %v", i, e.Name, e.URL,
				e.EffectiveMode(cfg.Federation), e.Writable, s.Name, s.URL, s.Mode, s.Writable)
		}
	}
	if "http://"+cfg.Listen != d.FederatorURL {
		t.Errorf("config listen %q, federator at %s", cfg.Listen, d.FederatorURL)
	}
}

// TestStopSite: with site-a gone, the federator sends clients to site-b
// within a few probe intervals.
func TestStopSite(t *testing.T) {
	d := start(t, Options{ProbeInterval: 100 * time.Millisecond})
	if err := d.StopSite("site-a"); err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSuffix(d.Site("site-b").URL, "/") + "/demo/README.txt"
	var loc string
	if testenv.Within(10*time.Second, func() bool {
		resp, _ := get(t, noRedirect, http.MethodGet, d.FederatorURL+"/demo/README.txt")
		loc = resp.Header.Get("Location")
		return loc == want
	}) {
		return
	}
	t.Fatalf("after stopping site-a, GET /demo/README.txt goes to %q, want %q", loc, want)
}

// TestStopRemovesTempDir: cancelling the context stops everything, Wait
// returns nil, and the temporary directory is gone.
func TestStopRemovesTempDir(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	d, err := Start(ctx, Options{Listen: "127.0.0.1:0", Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Temporary || !strings.HasPrefix(d.Dir, os.Getenv("TMPDIR")) {
		t.Fatalf("Dir %s (temporary %v), want a temporary directory under %s", d.Dir, d.Temporary, os.Getenv("TMPDIR"))
	}
	done := make(chan error, 1)
	go func() { done <- d.Wait() }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Wait: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return within 30s of cancel")
	}
	if _, err := os.Stat(d.Dir); !os.IsNotExist(err) {
		t.Errorf("after stop, %s: %v; want it removed", d.Dir, err)
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(d.FederatorURL, "http://"), time.Second); err == nil {
		t.Errorf("the federator still accepts connections after stop")
	}
	if err := d.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestKeepDir: a given directory is kept, data and all.
func TestKeepDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	d, err := Start(context.Background(), Options{Dir: dir, Listen: "127.0.0.1:0", Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"lakefed.yaml", "bench.db", "site-a" + ROOTPath} {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			t.Errorf("after stop with Dir set: %v", err)
		}
	}
}

// TestBusyPort: a taken address is reported clearly and leaves nothing
// behind.
func TestBusyPort(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Start(context.Background(), Options{Listen: ln.Addr().String(), Log: quiet})
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "127.0.0.1:0") {
		t.Fatalf("Start on a busy port: %v; want an error saying it is in use and suggesting 127.0.0.1:0", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("Start failed but left %d entries in TMPDIR (first %s)", len(left), left[0].Name())
	}
}

// TestBench: the start-up benchmark stores an open and a read run, both
// complete, in the demo's own store.
func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("the benchmark takes about 10 s")
	}
	var out testenv.SyncBuffer
	d := start(t, Options{Bench: true, Out: &out, Command: "go run ./cmd/lakefed"})
	select {
	case <-d.BenchDone():
	case <-time.After(3 * time.Minute):
		t.Fatal("the benchmark did not finish within 3 minutes")
	}
	// The command it prints names the binary as the Try: lines do
	// (every printed command works as printed).
	if want := "to list the runs: go run ./cmd/lakefed bench list --db " + ShellQuote(d.DBPath); !strings.Contains(out.String(), want) {
		t.Errorf("bench output does not print %q:\n%s", want, out.String())
	}
	runs, err := d.BenchRuns(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, r := range runs {
		kinds[r.Kind] = true
		if r.Status != "done" || r.Classification == "" || r.Target != d.FederatorURL+"/" {
			t.Errorf("run %d (%s): status %q, classification %q, target %q; want done, classified, %s/",
				r.ID, r.Kind, r.Status, r.Classification, r.Target, d.FederatorURL)
		}
	}
	if len(runs) != 2 || !kinds["open"] || !kinds["read"] {
		t.Errorf("stored runs %v, want one open and one read", kinds)
	}
	if filepath.Dir(d.DBPath) != d.Dir {
		t.Errorf("results store %s is not in the demo's directory %s", d.DBPath, d.Dir)
	}
}

// TestDashboardMounted: the dashboard answers at /ui and under /ui/ on the
// federator's listener, the namespace everywhere else, and the dashboard
// sees the demo's results store and federator.
func TestDashboardMounted(t *testing.T) {
	d := start(t, Options{})
	resp, _ := get(t, noRedirect, http.MethodGet, d.FederatorURL+"/ui")
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui = %s to %q, want 301 to /ui/", resp.Status, resp.Header.Get("Location"))
	}
	resp, body := get(t, noRedirect, http.MethodGet, d.FederatorURL+"/ui/")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "site-a") {
		t.Errorf("GET /ui/ = %s, %s; want 200 text/html naming site-a:\n%s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	resp, body = get(t, noRedirect, http.MethodGet, d.FederatorURL+"/ui/api/endpoints")
	for _, s := range d.Sites {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), s.Name) {
			t.Errorf("GET /ui/api/endpoints = %s without %s:\n%s", resp.Status, s.Name, body)
		}
	}
	// A run stored in the demo's store shows in the dashboard's API.
	id, err := d.Store.CreateRun(context.Background(), &results.Run{Kind: "open", Target: d.FederatorURL + "/", Site: "demo-test"})
	if err != nil {
		t.Fatal(err)
	}
	resp, body = get(t, noRedirect, http.MethodGet, d.FederatorURL+"/ui/api/runs")
	var runs []results.Run
	if err := json.Unmarshal(body, &runs); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/api/runs = %s, %v:\n%s", resp.Status, err, body)
	}
	if len(runs) != 1 || runs[0].ID != id || runs[0].Site != "demo-test" {
		t.Errorf("GET /ui/api/runs = %+v, want the one run %d stored in the demo's store", runs, id)
	}
	resp, _ = get(t, noRedirect, http.MethodGet, d.FederatorURL+"/uix/demo/README.txt")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /uix/demo/README.txt = %s, want the federator's 404 (only /ui and /ui/... are the dashboard's)", resp.Status)
	}
}
