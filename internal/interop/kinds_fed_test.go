package interop

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/bench"
	"github.com/lakefed/lakefed/internal/testenv"
)

// kindsUprootScript prints a ROOT file's "events" tree as JSON: the entries, and
// the sums of met and njet, so two reads of the same file compare equal.
const kindsUprootScript = `import sys, json, uproot
with uproot.open(sys.argv[1], handler=uproot.source.http.HTTPSource if "://" in sys.argv[1] else None) as f:
    t = f["events"]
    a = t.arrays(["met", "njet"], library="np")
    print(json.dumps({"n": int(t.num_entries), "met": round(float(a["met"].astype("float64").sum()), 3), "njet": int(a["njet"].sum())}))
`

// TestFourKinds is a federation of four: one file replicated on
// lakefed storage, nginx WebDAV, S3 and XRootD (root://, proxied). curl -L,
// lakefed cp, davix-get and uproot read it through the federator; the
// endpoints are killed one by one (best first, so that each kind serves in
// turn) and reads keep working until the last is gone; then 503, not 404.
func TestFourKinds(t *testing.T) {
	curl := testenv.Require(t, "curl")
	davix := testenv.Require(t, "davix-get")
	py := testenv.Require(t, "python3")
	if out, err := tryRun(nil, py, "-c", "import uproot"); err != nil {
		testenv.Missing(t, "python3 uproot: "+err.Error()+": "+out)
	}
	lakefed := lakefedBinary(t)

	store := startStorageSite(t, "storage")
	ng := startNginxSite(t, "nginx")
	s3, _ := startS3Site(t, "s3")
	xrd, _ := startXRootDSite(t, "xrootd")
	sites := []*kindSite{store, ng, s3, xrd}

	data := make([]byte, 5<<20+123)
	rng := rand.New(rand.NewPCG(6, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	work := t.TempDir()
	rootFile := filepath.Join(work, "events.root")
	if err := bench.WriteSampleROOT(rootFile, 20000, 6); err != nil {
		t.Fatal(err)
	}
	rootData, err := os.ReadFile(rootFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sites {
		s.put(t, "/lake/sample.bin", data)
		s.put(t, "/lake/events.root", rootData)
	}
	want := strings.TrimSpace(run(t, nil, py, "-c", kindsUprootScript, rootFile))

	fed := startKindFed(t, fastHealth, sites...)
	for _, s := range sites {
		fed.waitState(t, s.name, "up")
	}

	readAll := func(t *testing.T, serving *kindSite) {
		// Who answers: a redirect to the best site, or the bytes.
		code, loc := fed.peek(t, "/lake/sample.bin")
		switch {
		case serving.urlPrefix == "" && code != http.StatusOK:
			t.Errorf("GET with %s best = %d %q, want 200 (proxied)", serving.name, code, loc)
		case serving.urlPrefix != "" && (code != http.StatusFound || !strings.HasPrefix(loc, serving.urlPrefix)):
			t.Errorf("GET with %s best = %d %q, want 302 to %s...", serving.name, code, loc, serving.urlPrefix)
		}
		u := fed.url + "/lake/sample.bin"
		outs := map[string]string{
			"curl -L":    filepath.Join(work, "curl", serving.name),
			"lakefed cp": filepath.Join(work, "cp", serving.name),
			"davix-get":  filepath.Join(work, "davix", serving.name),
		}
		for _, d := range outs {
			os.MkdirAll(filepath.Dir(d), 0o755)
		}
		run(t, nil, curl, "-sSfL", "-o", outs["curl -L"], u)
		run(t, nil, lakefed, "cp", u, outs["lakefed cp"])
		run(t, nil, davix, u, outs["davix-get"])
		for client, p := range outs {
			got, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("%s via %s: %v", client, serving.name, err)
				continue
			}
			if !bytes.Equal(got, data) {
				t.Errorf("%s via %s: %d bytes, not the original %d", client, serving.name, len(got), len(data))
			}
		}
		got := strings.TrimSpace(run(t, nil, py, "-c", kindsUprootScript, fed.url+"/lake/events.root"))
		if got != want {
			t.Errorf("uproot via %s: %s, want %s (read locally)", serving.name, got, want)
		}
		var v struct{ N int }
		if json.Unmarshal([]byte(got), &v) != nil || v.N != 20000 {
			t.Errorf("uproot via %s read %q, want 20000 entries", serving.name, got)
		}
	}

	for _, s := range sites {
		t.Run("best="+s.name, func(t *testing.T) { readAll(t, s) })
		s.kill()
		fed.waitState(t, s.name, "down")
	}
	for _, p := range []string{"/lake/sample.bin", "/lake/never-cached.bin"} {
		resp, err := http.Get(fed.url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s with every endpoint down = %d (Retry-After %q), want 503 with Retry-After", p, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
}
