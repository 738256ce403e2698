package interop

// Real clients of the field through the federator: curl -L, davix-get
// failing over with the metalink while the first-ranked replica is down,
// gfal-copy down and up (the upload through the federator's 307), an
// rclone listing merged across sites, and uproot reading the demo ROOT
// file's jet_pt branch. Each test runs its own in-process demo
// (internal/demo): three storage sites and a federator on loopback
// ports.
//
// Client flags needed beyond the obvious:
//
//	davix-get   --metalink failover (the default) for the failover; --retry 0 keeps a failure fast
//	gfal-copy   none (env GFAL_PYTHONBIN=/usr/bin/python3, as for the storage tests)
//	rclone      a webdav remote with vendor "other" on the federator's URL
//	uproot      handler=uproot.source.http.HTTPSource: the default http handler
//	            (fsspec) needs aiohttp, which `pip install uproot` does not bring

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go-hep.org/x/hep/groot"
	"go-hep.org/x/hep/groot/rtree"

	"github.com/lakefed/lakefed/internal/demo"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
)

// startDemo runs an in-process demo on free ports, stopped by t.Cleanup.
func startDemo(t *testing.T, opts demo.Options) *demo.Demo {
	t.Helper()
	opts.Listen = "127.0.0.1:0"
	opts.Dir = filepath.Join(t.TempDir(), "demo")
	opts.Log = slog.New(slog.DiscardHandler)
	d, err := demo.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("demo.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("demo.Stop: %v", err)
		}
	})
	return d
}

// demoSiteFile returns the bytes of path on the named site's disk.
func demoSiteFile(t *testing.T, d *demo.Demo, site, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.Site(site).Dir, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// demoSameFile asserts that the local file got holds want.
func demoSameFile(t *testing.T, what, got string, want []byte) {
	t.Helper()
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("%s: %d bytes that differ from the original's %d", what, len(b), len(want))
	}
}

// redirects is how many times the federator has sent a client to site
// (302 for reads, 307 for writes).
func demoRedirects(t *testing.T, d *demo.Demo, site string) float64 {
	t.Helper()
	mfs, err := d.Federator.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "lakefed_federation_redirects_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "endpoint" && l.GetValue() == site {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no lakefed_federation_redirects_total{endpoint=%q} in the federator's metrics", site)
	return 0
}

// demoNoFollow shows the federator's answers as they are.
var demoNoFollow = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// TestFederationCurl: curl -L reads every replicated sample through the
// federator, byte-identical.
func TestFederationCurl(t *testing.T) {
	curl := testenv.Require(t, "curl")
	d := startDemo(t, demo.Options{})
	for _, s := range demo.Samples {
		if len(s.Sites) < 2 {
			continue
		}
		before := demoRedirects(t, d, s.Sites[0])
		local := filepath.Join(t.TempDir(), filepath.Base(s.Path))
		run(t, nil, curl, "-sS", "-L", "--fail", "-o", local, d.FederatorURL+s.Path)
		demoSameFile(t, "curl -L "+s.Path, local, demoSiteFile(t, d, s.Sites[0], s.Path))
		if demoRedirects(t, d, s.Sites[0]) <= before {
			t.Errorf("curl -L %s: the federator did not redirect to %s", s.Path, s.Sites[0])
		}
	}
}

// TestFederationDavixFailover: site-a, first in rank, is down but the
// federator does not know yet (its probes are an hour apart and it has
// the file's metadata cached), so it still redirects there. davix-get
// follows the 302, fails to connect, asks the federator for the metalink
// (HEAD, then GET with Accept: application/metalink4+xml), tries site-a
// again (first in the metalink), then gets the file from site-b. With --metalink no it must fail: that
// proves the failover was the metalink's doing.
func TestFederationDavixFailover(t *testing.T) {
	davix := testenv.Require(t, "davix-get")
	d := startDemo(t, demo.Options{ProbeInterval: time.Hour, MetadataTTL: 10 * time.Minute})
	const p = "/demo/data/run1/hits-0001.dat" // on site-a and site-b
	want := demoSiteFile(t, d, "site-b", p)

	// Cache the metadata while site-a is up, then take site-a down.
	siteA := strings.TrimSuffix(d.Site("site-a").URL, "/")
	if resp, err := demoNoFollow.Get(d.FederatorURL + p); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.Header.Get("Location") != siteA+p {
		t.Fatalf("GET %s: Location %q, want site-a's %s", p, resp.Header.Get("Location"), siteA+p)
	}
	if err := d.StopSite("site-a"); err != nil {
		t.Fatal(err)
	}
	resp, err := demoNoFollow.Get(d.FederatorURL + p)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != siteA+p {
		t.Fatalf("with site-a just stopped, GET %s = %s to %q; the test needs the federator to still send clients to site-a",
			p, resp.Status, resp.Header.Get("Location"))
	}
	ml := demoMetalinkURLs(t, d.FederatorURL+p)
	if len(ml) < 2 || ml[0] != siteA+p {
		t.Fatalf("metalink of %s lists %q; want site-a first and site-b after it", p, ml)
	}

	local := filepath.Join(t.TempDir(), "no-metalink.dat")
	if out, err := tryRun(nil, davix, "--retry", "0", "--metalink", "no", d.FederatorURL+p, local); err == nil {
		t.Fatalf("davix-get --metalink no succeeded with site-a down; the failover below would prove nothing\n%s", out)
	}
	local = filepath.Join(t.TempDir(), "failover.dat")
	out := run(t, nil, davix, "--retry", "0", "--metalink", "failover", "--trace", "header", d.FederatorURL+p, local)
	siteB := strings.TrimPrefix(strings.TrimSuffix(d.Site("site-b").URL, "/"), "http://")
	if !strings.Contains(out, "Accept: "+httpx.MetalinkType) || !strings.Contains(out, "Host: "+siteB) {
		t.Errorf("davix-get's trace shows no metalink request or no GET from site-b (%s):\n%s", siteB, out)
	}
	demoSameFile(t, "davix-get with site-a down", local, want)
}

// demoMetalinkURLs asks the federator for the metalink of u and returns its
// URLs in priority order.
func demoMetalinkURLs(t *testing.T, u string) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Accept", httpx.MetalinkType)
	resp, err := demoNoFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metalink of %s: %s", u, resp.Status)
	}
	ml, err := httpx.ParseMetalink(resp.Body)
	if err != nil {
		t.Fatalf("metalink of %s: %v", u, err)
	}
	if len(ml.Files) != 1 {
		t.Fatalf("metalink of %s has %d files, want 1", u, len(ml.Files))
	}
	urls := slices.Clone(ml.Files[0].URLs)
	slices.SortStableFunc(urls, func(a, b httpx.MetalinkURL) int { return a.Priority - b.Priority })
	var out []string
	for _, x := range urls {
		out = append(out, x.URL)
	}
	return out
}

// TestFederationGfal: gfal-copy downloads a replicated file through the
// federator, and uploads one: the federator answers the PUT with a 307 to
// site-a (the writable site of best priority), and the bytes land there.
func TestFederationGfal(t *testing.T) {
	gfal := testenv.Require(t, "gfal-copy")
	env := gfalEnv(&server{})
	d := startDemo(t, demo.Options{})

	const p = "/demo/data/run1/hits-0002.dat" // site-b and site-c
	local := filepath.Join(t.TempDir(), "down.dat")
	run(t, env, gfal, "-f", d.FederatorURL+p, "file://"+local)
	demoSameFile(t, "gfal-copy download", local, demoSiteFile(t, d, "site-b", p))

	up := filepath.Join(t.TempDir(), "up.bin")
	data := make([]byte, 300_000)
	r := rand.New(rand.NewChaCha8([32]byte{7}))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(up, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const dst = "/demo/uploads/gfal.bin"
	before := demoRedirects(t, d, "site-a")
	run(t, env, gfal, "-f", "file://"+up, d.FederatorURL+dst)
	if demoRedirects(t, d, "site-a") <= before {
		t.Errorf("gfal-copy upload: the federator did not redirect the PUT to site-a")
	}
	demoSameFile(t, "site-a's copy of the upload", filepath.Join(d.Site("site-a").Dir, filepath.FromSlash(dst)), data)
	for _, other := range []string{"site-b", "site-c"} {
		if _, err := os.Stat(filepath.Join(d.Site(other).Dir, filepath.FromSlash(dst))); !os.IsNotExist(err) {
			t.Errorf("the upload also reached %s (%v); want it on site-a only", other, err)
		}
	}
	// And back down through the federator.
	back := filepath.Join(t.TempDir(), "back.bin")
	run(t, env, gfal, "-f", d.FederatorURL+dst, "file://"+back)
	demoSameFile(t, "gfal-copy of the upload", back, data)
}

// TestFederationRclone: an rclone webdav remote on the federator lists
// /demo recursively as the union of the three sites' trees.
func TestFederationRclone(t *testing.T) {
	rclone := testenv.Require(t, "rclone")
	d := startDemo(t, demo.Options{})
	env := []string{
		"RCLONE_CONFIG=" + filepath.Join(t.TempDir(), "no-rclone.conf"),
		"RCLONE_CONFIG_LF_TYPE=webdav",
		"RCLONE_CONFIG_LF_URL=" + d.FederatorURL + "/",
		"RCLONE_CONFIG_LF_VENDOR=other",
	}
	out := run(t, env, rclone, "lsf", "-R", "--retries", "1", "lf:demo")
	var got []string
	for l := range strings.SplitSeq(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, "NOTICE") {
			got = append(got, l)
		}
	}
	want := map[string]bool{}
	for _, s := range demo.Samples {
		rel := strings.TrimPrefix(s.Path, "/demo/")
		want[rel] = true
		for dir := filepath.Dir(rel); dir != "."; dir = filepath.Dir(dir) {
			want[dir+"/"] = true
		}
	}
	var wantList []string
	for k := range want {
		wantList = append(wantList, k)
	}
	slices.Sort(got)
	slices.Sort(wantList)
	if !slices.Equal(got, wantList) {
		t.Errorf("rclone lsf -R lf:demo =\n%s\nwant (files of all three sites)\n%s", strings.Join(got, "\n"), strings.Join(wantList, "\n"))
	}
}

// demoUprootScript reads the jagged branch over HTTP and prints the event
// count, the value count and the SHA-256 of the per-event counts (int32
// little-endian) and of the flattened values (float32 little-endian).
const demoUprootScript = `
import sys, hashlib
import awkward as ak, uproot
url, tree, branch = sys.argv[1:4]
f = uproot.open(url, handler=uproot.source.http.HTTPSource)
a = f[tree][branch].array()
n = ak.to_numpy(ak.num(a)).astype("<i4")
v = ak.to_numpy(ak.flatten(a)).astype("<f4")
print(len(a), len(v), hashlib.sha256(n.tobytes()).hexdigest(), hashlib.sha256(v.tobytes()).hexdigest())
`

// TestFederationUproot: uproot reads the demo ROOT file's jet_pt through
// the federator (redirected to site-a), and gets exactly the values groot
// reads from the file on disk.
func TestFederationUproot(t *testing.T) {
	python := testenv.Require(t, "python3")
	if out, err := exec.Command(python, "-c", "import uproot, awkward").CombinedOutput(); err != nil {
		testenv.Missing(t, "python3 cannot import uproot: "+strings.TrimSpace(string(out)))
	}
	d := startDemo(t, demo.Options{})
	want := demoGroundTruth(t, filepath.Join(d.Site("site-a").Dir, filepath.FromSlash(demo.ROOTPath)))

	script := filepath.Join(t.TempDir(), "read.py")
	if err := os.WriteFile(script, []byte(demoUprootScript), 0o644); err != nil {
		t.Fatal(err)
	}
	before := demoRedirects(t, d, "site-a")
	got := strings.TrimSpace(run(t, nil, python, script, d.FederatorURL+demo.ROOTPath, demo.ROOTTree, demo.ROOTBranch))
	if got != want {
		t.Errorf("uproot through the federator read (events, values, sha256 counts, sha256 values)\n %s\nwant (groot on disk)\n %s", got, want)
	}
	if demoRedirects(t, d, "site-a") <= before {
		t.Errorf("uproot: the federator did not redirect to site-a; was it read through the federator?")
	}
}

// demoGroundTruth reads the jagged branch with groot and formats what the
// uproot script prints.
func demoGroundTruth(t *testing.T, path string) string {
	t.Helper()
	f, err := groot.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o, err := f.Get(demo.ROOTTree)
	if err != nil {
		t.Fatal(err)
	}
	tree, ok := o.(rtree.Tree)
	if !ok {
		t.Fatalf("%s in %s is a %T, not a tree", demo.ROOTTree, path, o)
	}
	var pt []float32
	r, err := rtree.NewReader(tree, []rtree.ReadVar{{Name: demo.ROOTBranch, Value: &pt}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hn, hv := sha256.New(), sha256.New()
	var events, values int
	err = r.Read(func(rtree.RCtx) error {
		events++
		values += len(pt)
		_ = binary.Write(hn, binary.LittleEndian, int32(len(pt)))
		_ = binary.Write(hv, binary.LittleEndian, pt)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if events != demo.DefaultEvents || values == 0 {
		t.Fatalf("groot read %d events and %d values from %s; want %d events", events, values, path, demo.DefaultEvents)
	}
	return fmt.Sprintf("%d %d %s %s", events, values, hex.EncodeToString(hn.Sum(nil)), hex.EncodeToString(hv.Sum(nil)))
}
