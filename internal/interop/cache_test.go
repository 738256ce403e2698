package interop

// Real clients through the cache role:
// uproot reading a branch of a ROOT file (its HTTP source sends
// multi-range requests), davix-get, gfal-copy, curl with one range and
// with several, and `lakefed bench root` showing the read pattern the
// cache recorded. Each test runs a storage role as the origin and a cache
// in front of it, both in this process on loopback, and checks the bytes
// each client got against the file written at the origin, and that the
// cache's /api/cache/files saw the client's reads (so a client that went
// around the cache cannot pass).
//
// Client flags needed beyond the obvious: none. uproot uses
// handler=uproot.source.http.HTTPSource, as in federation_clients_test.go;
// gfal-copy gets GFAL_PYTHONBIN (gfalEnv).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/bench"
	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/demo"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// cacheBlock is the tests' block size: small, so that the files below
// span many blocks and the ranges asked for cross block boundaries.
const cacheBlock = 64 << 10

// cacheSite is a cache in front of a storage role.
type cacheSite struct {
	url       string // the cache's base URL, no trailing slash
	originDir string // the directory the origin serves
}

// startCache runs a storage role as the origin and a cache over it.
func startCache(t *testing.T) *cacheSite {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	site := storagetest.Start(t, storage.Config{})
	ep, err := kinds.New(t.Context(), endpoint.Config{Name: "origin", URL: site.URL}, log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(t.Context(), cache.Config{Dir: t.TempDir(), BlockSize: cacheBlock}, ep, cache.Options{Log: log})
	if err != nil {
		t.Fatalf("cache.New: %v", err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		c.Close()
		if cl, ok := ep.(interface{ Close() error }); ok {
			cl.Close()
		}
	})
	return &cacheSite{url: srv.URL, originDir: site.Dir}
}

// put writes data at the origin as path p.
func (s *cacheSite) put(t *testing.T, p string, data []byte) {
	t.Helper()
	writeUnder(t, s.originDir, p, data)
}

// pattern returns the cache's record of p from GET /api/cache/files.
func (s *cacheSite) pattern(t *testing.T, p string) cache.FilePattern {
	t.Helper()
	resp, err := http.Get(s.url + "/api/cache/files?" + url.Values{"path": {p}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var files []cache.FilePattern
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/cache/files: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&files); err != nil {
		t.Fatalf("GET /api/cache/files: %v", err)
	}
	if len(files) != 1 || files[0].Path != p {
		t.Fatalf("/api/cache/files?path=%s = %+v, want the one file", p, files)
	}
	return files[0]
}

// cacheData is n random bytes, the same for the same seed.
func cacheData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestCacheUproot: uproot reads jet_pt of a ROOT file through the cache
// with multi-range requests, and gets the values groot reads from the
// file written at the origin.
func TestCacheUproot(t *testing.T) {
	python := testenv.Require(t, "python3")
	if out, err := tryRun(nil, python, "-c", "import uproot, awkward"); err != nil {
		testenv.Missing(t, "python3 cannot import uproot and awkward: "+strings.TrimSpace(out))
	}
	cs := startCache(t)
	local := filepath.Join(t.TempDir(), "events.root")
	if err := bench.WriteSampleROOT(local, demo.DefaultEvents, 12); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	const p = "/lake/events.root"
	cs.put(t, p, data)
	want := demoGroundTruth(t, local)

	script := filepath.Join(t.TempDir(), "read.py")
	if err := os.WriteFile(script, []byte(demoUprootScript), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(run(t, nil, python, script, cs.url+p, demo.ROOTTree, demo.ROOTBranch))
	if got != want {
		t.Errorf("uproot through the cache read (events, values, sha256 counts, sha256 values)\n %s\nwant (groot on the file written)\n %s", got, want)
	}
	fp := cs.pattern(t, p)
	if fp.MultiRange == 0 || fp.Reads <= fp.Requests {
		t.Errorf("the cache saw %d requests of %d reads, %d multi-range; want uproot's multi-range requests", fp.Requests, fp.Reads, fp.MultiRange)
	}
	if fp.Size != int64(len(data)) {
		t.Errorf("the cache has %s as %d bytes, want %d", p, fp.Size, len(data))
	}
	t.Logf("uproot through the cache: %d requests, %d reads, %d multi-range, median %d B, %.2f of the file",
		fp.Requests, fp.Reads, fp.MultiRange, fp.MedianRead, fp.RequestedOfSize)
}

// cacheWholeFile runs a client that downloads a whole file through the
// cache twice (cold: filled from the origin; warm: from the cache's disk)
// and checks the bytes each time, and that the cache served them.
func cacheWholeFile(t *testing.T, seed uint64, download func(t *testing.T, url, local string)) {
	cs := startCache(t)
	data := cacheData(3<<20+4321, seed) // many blocks, the last one short
	const p = "/lake/dir/file.bin"
	cs.put(t, p, data)
	for _, pass := range []string{"cold", "warm"} {
		local := filepath.Join(t.TempDir(), "file.bin")
		download(t, cs.url+p, local)
		got, err := os.ReadFile(local)
		if err != nil {
			t.Fatalf("%s: %v", pass, err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s read through the cache: %d bytes that differ from the %d written", pass, len(got), len(data))
		}
	}
	fp := cs.pattern(t, p)
	if fp.Requested < 2*int64(len(data)) || fp.Cached != int64(len(data)) {
		t.Errorf("the cache saw %d bytes asked for and holds %d; want at least the file twice (%d) and all of it",
			fp.Requested, fp.Cached, 2*len(data))
	}
}

// TestCacheDavix: davix-get through the cache.
func TestCacheDavix(t *testing.T) {
	davix := testenv.Require(t, "davix-get")
	cacheWholeFile(t, 21, func(t *testing.T, u, local string) {
		run(t, nil, davix, "--retry", "0", u, local)
	})
}

// TestCacheGfal: gfal-copy through the cache.
func TestCacheGfal(t *testing.T) {
	gfal := testenv.Require(t, "gfal-copy")
	env := gfalEnv(&server{})
	cacheWholeFile(t, 22, func(t *testing.T, u, local string) {
		run(t, env, gfal, "-f", u, "file://"+local)
	})
}

// TestCacheCurlRanges: curl asks the cache for one range, then for
// several in one request (RFC 9110 section 14.2); the answer is a 206,
// multipart/byteranges for several, and every part holds the file's
// bytes at the offsets its Content-Range names.
func TestCacheCurlRanges(t *testing.T) {
	curl := testenv.Require(t, "curl")
	cs := startCache(t)
	data := cacheData(10*cacheBlock+777, 23)
	const p = "/lake/ranges.bin"
	cs.put(t, p, data)
	size := int64(len(data))

	tests := []struct {
		name   string
		ranges []httpx.Range
	}{
		{"one range across blocks", []httpx.Range{{Start: cacheBlock - 100, Length: cacheBlock + 200}}},
		{"the last bytes", []httpx.Range{{Start: size - 500, Length: 500}}},
		{"several ranges", []httpx.Range{
			{Start: 0, Length: 100},
			{Start: 3*cacheBlock - 10, Length: 20},
			{Start: 5 * cacheBlock, Length: 2*cacheBlock + 1},
			{Start: size - 1, Length: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec []string
			for _, r := range tt.ranges {
				spec = append(spec, fmt.Sprintf("%d-%d", r.Start, r.Start+r.Length-1))
			}
			dir := t.TempDir()
			hdrFile, bodyFile := filepath.Join(dir, "headers"), filepath.Join(dir, "body")
			run(t, nil, curl, "-sS", "--fail", "-r", strings.Join(spec, ","), "-D", hdrFile, "-o", bodyFile, cs.url+p)
			hdr := curlHeaders(t, hdrFile)
			body, err := os.ReadFile(bodyFile)
			if err != nil {
				t.Fatal(err)
			}
			if hdr.status != http.StatusPartialContent {
				t.Fatalf("curl -r %s: status %d, want 206", strings.Join(spec, ","), hdr.status)
			}
			if len(tt.ranges) == 1 {
				r := tt.ranges[0]
				start, end, total, ok := httpx.ParseContentRange(hdr.h.Get("Content-Range"))
				if !ok || start != r.Start || end != r.Start+r.Length-1 || total != size {
					t.Errorf("Content-Range %q, want bytes %d-%d/%d", hdr.h.Get("Content-Range"), r.Start, r.Start+r.Length-1, size)
				}
				if !bytes.Equal(body, data[r.Start:r.Start+r.Length]) {
					t.Errorf("curl -r %s: %d bytes that are not the file's", spec[0], len(body))
				}
				return
			}
			mt, params, err := mime.ParseMediaType(hdr.h.Get("Content-Type"))
			if err != nil || mt != "multipart/byteranges" || params["boundary"] == "" {
				t.Fatalf("Content-Type %q, want multipart/byteranges with a boundary", hdr.h.Get("Content-Type"))
			}
			mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
			for i := 0; ; i++ {
				part, err := mr.NextPart()
				if err == io.EOF {
					if i != len(tt.ranges) {
						t.Errorf("%d parts, want %d", i, len(tt.ranges))
					}
					break
				}
				if err != nil {
					t.Fatalf("part %d: %v", i, err)
				}
				b, err := io.ReadAll(part)
				if err != nil {
					t.Fatalf("part %d: %v", i, err)
				}
				if i >= len(tt.ranges) {
					t.Errorf("part %d: more parts than the %d ranges asked for", i, len(tt.ranges))
					continue
				}
				r := tt.ranges[i]
				start, end, total, ok := httpx.ParseContentRange(part.Header.Get("Content-Range"))
				if !ok || start != r.Start || end != r.Start+r.Length-1 || total != size {
					t.Errorf("part %d: Content-Range %q, want bytes %d-%d/%d", i, part.Header.Get("Content-Range"), r.Start, r.Start+r.Length-1, size)
					continue
				}
				if !bytes.Equal(b, data[r.Start:r.Start+r.Length]) {
					t.Errorf("part %d (%s): %d bytes that are not the file's", i, part.Header.Get("Content-Range"), len(b))
				}
			}
		})
	}
	fp := cs.pattern(t, p)
	if fp.Requests != int64(len(tests)) || fp.MultiRange != 1 || fp.Reads != 6 {
		t.Errorf("the cache saw %d requests, %d multi-range, %d reads; want 3, 1, 6", fp.Requests, fp.MultiRange, fp.Reads)
	}
}

// curlAnswer is the last response head curl wrote with -D.
type curlAnswer struct {
	status int
	h      http.Header
}

func curlHeaders(t *testing.T, file string) curlAnswer {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var a curlAnswer
	for line := range strings.SplitSeq(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n") {
		if strings.HasPrefix(line, "HTTP/") {
			f := strings.Fields(line)
			a = curlAnswer{h: http.Header{}}
			if len(f) > 1 {
				a.status, _ = strconv.Atoi(f[1])
			}
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && a.h != nil {
			a.h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	if a.h == nil {
		t.Fatalf("no response head in curl's -D output:\n%s", b)
	}
	return a
}

// cacheSawLine matches the cache line of `lakefed bench root`.
var cacheSawLine = regexp.MustCompile(`(?m)^cache saw\s+(\d+) reads, median [\d.]+ [KMGT]?i?B.*, mean [\d.]+ [KMGT]?i?B, \d+% sequential, (\d+) multi-range requests, [\d.]+× the file read$`)

// rootBranchLine matches the branch line of `lakefed bench root`.
var rootBranchLine = regexp.MustCompile(`(?m)^branch\s+\S+: (\d+) entries, (\d+) values`)

// TestCacheBenchROOT: `lakefed bench root` aimed at the cache reads the
// branch without and with prefetch, gets the file's values, and prints
// for each run the reads the cache recorded during it: single ranges
// without prefetch, multi-range requests with it, and together every read
// the cache's /api/cache/files counts.
func TestCacheBenchROOT(t *testing.T) {
	lakefed := lakefedBinary(t)
	cs := startCache(t)
	local := filepath.Join(t.TempDir(), "sample.root")
	if err := bench.WriteSampleROOT(local, demo.DefaultEvents, 13); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	const p = "/lake/sample.root"
	cs.put(t, p, data)
	truth := strings.Fields(demoGroundTruth(t, local)) // events, values, ...

	out := run(t, []string{"LAKEFED_BENCH_DB=" + filepath.Join(t.TempDir(), "results.db")},
		lakefed, "bench", "root", "--prefetch", "both", cs.url+p)
	branches := rootBranchLine.FindAllStringSubmatch(out, -1)
	saw := cacheSawLine.FindAllStringSubmatch(out, -1)
	if len(branches) != 2 || len(saw) != 2 {
		t.Fatalf("lakefed bench root --prefetch both: %d branch lines and %d cache lines, want 2 of each:\n%s", len(branches), len(saw), out)
	}
	for i, b := range branches {
		if b[1] != truth[0] || b[2] != truth[1] {
			t.Errorf("run %d read %s entries and %s values, want %s and %s (groot on the file written)", i+1, b[1], b[2], truth[0], truth[1])
		}
	}
	var reads, multi [2]int64
	for i, m := range saw {
		reads[i], _ = strconv.ParseInt(m[1], 10, 64)
		multi[i], _ = strconv.ParseInt(m[2], 10, 64)
	}
	if multi[0] != 0 || multi[1] == 0 {
		t.Errorf("multi-range requests the cache saw: %d without prefetch, %d with; want none, then some", multi[0], multi[1])
	}
	fp := cs.pattern(t, p)
	if reads[0] == 0 || reads[1] == 0 || reads[0]+reads[1] != fp.Reads || multi[1] != fp.MultiRange {
		t.Errorf("the runs show %d + %d reads and %d multi-range requests; the cache counted %d and %d in all",
			reads[0], reads[1], multi[1], fp.Reads, fp.MultiRange)
	}
	t.Logf("lakefed bench root through the cache:\n%s", out)
}

// TestCacheUprootManyBaskets: uproot reads a branch of hundreds of
// baskets in one multi-range request (446 ranges for the bench's sample
// file); the cache answers it as asked, not with the whole file.
func TestCacheUprootManyBaskets(t *testing.T) {
	py := testenv.Require(t, "python3")
	cs := startCache(t)
	local := filepath.Join(t.TempDir(), "big.root")
	if err := bench.WriteSampleROOT(local, bench.SampleEvents, 12); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	cs.put(t, "/lake/big.root", data)
	script := filepath.Join(t.TempDir(), "read.py")
	if err := os.WriteFile(script, []byte(demoUprootScript), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, nil, py, script, cs.url+"/lake/big.root", demo.ROOTTree, demo.ROOTBranch)
	if fp := cs.pattern(t, "/lake/big.root"); fp.MultiRange == 0 || fp.RequestedOfSize > 1 {
		t.Errorf("uproot through the cache: %d multi-range requests, %.2f of the file asked for; want its vector reads answered as asked",
			fp.MultiRange, fp.RequestedOfSize)
	}
}
