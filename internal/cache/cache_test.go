package cache_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// quiet discards the logs, unless LAKEFED_TEST_LOG=1 asks for them.
var quiet = func() *slog.Logger {
	if os.Getenv("LAKEFED_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}()

// origin is a storage role the cache reads from, with its byte counter.
type origin struct {
	*storagetest.Site
	ep endpoint.Endpoint
}

func startOrigin(t testing.TB) *origin {
	t.Helper()
	site := storagetest.Start(t, storage.Config{})
	ep, err := kinds.New(t.Context(), endpoint.Config{Name: "origin", URL: site.URL}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return &origin{Site: site, ep: ep}
}

func (o *origin) write(t testing.TB, name string, data []byte) {
	t.Helper()
	p := filepath.Join(o.Dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	// Write beside and rename, as a real upload does: the inode changes,
	// so the ETag does even within the same second.
	if err := os.WriteFile(p+".new", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
}

// sent reads the bytes the origin has sent from its own /metrics: the
// value the page shows plus the page itself, which the counter adds
// once it is sent, so that differences count file bytes exactly.
func (o *origin) sent(t *testing.T) int64 {
	t.Helper()
	v, n := metricPage(t, o.URL+"metrics", "lakefed_storage_sent_bytes_total")
	return v + n
}

// sentSince is how many bytes the origin sent since sent returned base.
func (o *origin) sentSince(t *testing.T, base int64) int64 {
	t.Helper()
	return metric(t, o.URL+"metrics", "lakefed_storage_sent_bytes_total") - base
}

// metric sums the samples of one series in a Prometheus text page.
func metric(t testing.TB, url, name string) int64 {
	t.Helper()
	v, _ := metricPage(t, url, name)
	return v
}

// metricPage is metric, and the length of the page read (asked for
// unzipped, so that it is the length sent).
func metricPage(t testing.TB, url, name string) (int64, int64) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return int64(sum), int64(len(page))
}

// node is a running cache on a loopback listener.
type node struct {
	*cache.Cache
	URL string
	srv *http.Server
	ln  net.Listener
}

func startCache(t testing.TB, cfg cache.Config, origin endpoint.Endpoint) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveCache(t, cfg, origin, ln)
}

func serveCache(t testing.TB, cfg cache.Config, origin endpoint.Endpoint, ln net.Listener) *node {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	c, err := cache.New(t.Context(), cfg, origin, cache.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{Cache: c, URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: c.Handler()}, ln: ln}
	go n.srv.Serve(ln)
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	n.srv.Close()
	n.Cache.Close()
}

func random(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func get(t testing.TB, url string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp, b
}

const block = 64 << 10

// Whole reads, ranges and multi-ranges come back as the origin has them,
// the second time from disk (hits) without the origin sending more.
func TestReadThrough(t *testing.T) {
	o := startOrigin(t)
	data := random(10*block+123, 1)
	o.write(t, "d/f.root", data)
	n := startCache(t, cache.Config{BlockSize: block}, o.ep)

	resp, b := get(t, n.URL+"/d/f.root")
	if resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Fatalf("GET = %d, %d bytes; want 200 and the file", resp.StatusCode, len(b))
	}
	if resp.Header.Get("Etag") == "" || resp.Header.Get("Last-Modified") == "" {
		t.Errorf("no ETag or Last-Modified: %v", resp.Header)
	}
	sent := o.sent(t)
	resp, b = get(t, n.URL+"/d/f.root", "Range", "bytes=70000-200000")
	if resp.StatusCode != 206 || !bytes.Equal(b, data[70000:200001]) {
		t.Fatalf("range = %d, %d bytes", resp.StatusCode, len(b))
	}
	resp, b = get(t, n.URL+"/d/f.root", "Range", "bytes=0-9,-5")
	if resp.StatusCode != 206 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "multipart/byteranges") ||
		!bytes.Contains(b, data[:10]) || !bytes.Contains(b, data[len(data)-5:]) {
		t.Fatalf("multi-range = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if d := o.sentSince(t, sent); d != 0 {
		t.Errorf("the origin sent %d more bytes for reads of cached blocks", d)
	}
	if hit := metric(t, n.URL+"/metrics", "lakefed_cache_hit_bytes_total"); hit < 130000 {
		t.Errorf("hit bytes = %d, want the ranges counted as hits", hit)
	}
	resp, _ = get(t, n.URL+"/d/f.root", "Range", "bytes="+strconv.Itoa(len(data))+"-")
	if resp.StatusCode != 416 {
		t.Errorf("range past the end = %d, want 416", resp.StatusCode)
	}
	resp, _ = get(t, n.URL+"/d/missing")
	if resp.StatusCode != 404 {
		t.Errorf("missing = %d, want 404", resp.StatusCode)
	}
	resp, _ = get(t, n.URL+"/d/f.root", "If-None-Match", resp.Header.Get("Etag"))
	etag := resp.Header.Get("Etag")
	resp, _ = get(t, n.URL+"/d/f.root", "If-None-Match", etag)
	if resp.StatusCode != 304 {
		t.Errorf("If-None-Match with the ETag = %d, want 304", resp.StatusCode)
	}
	// 100 bytes of an uncached file cost one block from the origin.
	big := random(40*block, 2)
	o.write(t, "big", big)
	sent = o.sent(t)
	resp, b = get(t, n.URL+"/big", "Range", "bytes=1000000-1000099")
	if resp.StatusCode != 206 || !bytes.Equal(b, big[1000000:1000100]) {
		t.Fatalf("small range = %d", resp.StatusCode)
	}
	if d := o.sentSince(t, sent); d > block {
		t.Errorf("100 bytes of an uncached file made the origin send %d bytes, want one block (%d)", d, block)
	}
}

// A restart keeps the cached blocks: the second process serves them
// without asking the origin for bytes (only-if-cached proves it).
func TestRestartKeepsBlocks(t *testing.T) {
	o := startOrigin(t)
	data := random(5*block+7, 3)
	o.write(t, "f", data)
	dir := t.TempDir()
	n := startCache(t, cache.Config{Dir: dir, BlockSize: block}, o.ep)
	if resp, b := get(t, n.URL+"/f"); resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Fatalf("first GET = %d", resp.StatusCode)
	}
	waitVerified(t, n, "/f")
	n.stop()
	sent := o.sent(t)
	n2 := startCache(t, cache.Config{Dir: dir, BlockSize: block}, o.ep)
	resp, b := get(t, n2.URL+"/f", "Cache-Control", "only-if-cached")
	if resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Fatalf("after restart, only-if-cached = %d, %d bytes; want 200 and the file", resp.StatusCode, len(b))
	}
	if d := o.sentSince(t, sent); d != 0 {
		t.Errorf("after a restart the origin sent %d bytes for a cached file", d)
	}
	// A path never read is not cached: 504.
	o.write(t, "g", data)
	if resp, _ := get(t, n2.URL+"/g", "Cache-Control", "only-if-cached"); resp.StatusCode != 504 {
		t.Errorf("only-if-cached of an uncached file = %d, want 504", resp.StatusCode)
	}
}

func waitVerified(t *testing.T, n *node, p string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, p+" verified against the origin's adler32", func() bool {
		for _, f := range n.Files() {
			if f.Path == p && f.Verified {
				return true
			}
		}
		return false
	})
}

// Twenty readers of one uncached file make the origin send it once.
func TestConcurrentReadersOneFetch(t *testing.T) {
	size := 256 << 20
	if testing.Short() {
		size = 32 << 20
	}
	o := startOrigin(t)
	data := random(size, 4)
	o.write(t, "big", data)
	want := sha256.Sum256(data)
	n := startCache(t, cache.Config{BlockSize: 1 << 20, RAM: -1}, o.ep)
	sent := o.sent(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			resp, err := http.Get(n.URL + "/big")
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			h := sha256.New()
			got, err := io.Copy(h, resp.Body)
			if err != nil || !bytes.Equal(h.Sum(nil), want[:]) {
				errs <- fmt.Errorf("reader %d: %d bytes, err %v, not the file", i, got, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if d := o.sentSince(t, sent); d != int64(size) {
		t.Errorf("the origin sent %d bytes for 20 readers of a %d-byte file, want exactly the size", d, size)
	}
}

// A file changed at the origin is served new once revalidated: at once
// with Cache-Control: no-cache, and by itself after RevalidateAfter.
func TestChangedOriginServedNew(t *testing.T) {
	o := startOrigin(t)
	v1, v2 := random(3*block, 5), random(3*block+10, 6)
	o.write(t, "f", v1)
	n := startCache(t, cache.Config{BlockSize: block, RevalidateAfter: 300 * time.Millisecond}, o.ep)
	if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, v1) {
		t.Fatal("first read is not v1")
	}
	o.write(t, "f", v2)
	if _, b := get(t, n.URL+"/f", "Cache-Control", "no-cache"); !bytes.Equal(b, v2) {
		t.Fatalf("no-cache after a change served %d bytes, not v2", len(b))
	}
	v3 := random(3*block, 7) // the same size as v1
	o.write(t, "f", v3)
	time.Sleep(400 * time.Millisecond) // revalidate_after (300ms) must elapse
	if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, v3) {
		t.Fatal("after revalidate_after the change was not seen")
	}
	if metric(t, n.URL+"/metrics", "lakefed_cache_origin_changes_total") < 2 {
		t.Error("origin changes not counted")
	}
}

// While the process is not trusted (Options.Trusted: it could miss the
// notice of a write elsewhere), every read asks the origin, and what the
// origin said then counts for nothing once trusted; once trusted, the
// origin's answer holds for RevalidateAfter, until Distrust.
func TestUntrustedAsksOrigin(t *testing.T) {
	o := startOrigin(t)
	var trusted atomic.Bool
	c, err := cache.New(t.Context(), cache.Config{Dir: t.TempDir(), BlockSize: block, RevalidateAfter: time.Hour}, o.ep,
		cache.Options{Log: quiet, Trusted: trusted.Load})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := &http.Server{Handler: c.Handler()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	u := "http://" + ln.Addr().String() + "/f"
	for i, step := range []struct {
		trust bool
		write bool // a new version at the origin before the read
		old   bool // the read still gets the version before it
	}{
		{trust: false, write: true},
		{trust: false, write: true},           // untrusted: asked again
		{trust: true, write: true},            // its last answer came untrusted: asked again
		{trust: true, write: true, old: true}, // trusted for RevalidateAfter
	} {
		trusted.Store(step.trust)
		if step.write {
			o.write(t, "f", random(2*block+i+1, uint64(40+i)))
		}
		want := random(2*block+i+1, uint64(40+i))
		if step.old {
			want = random(2*block+i, uint64(40+i-1))
		}
		if _, b := get(t, u); !bytes.Equal(b, want) {
			t.Fatalf("step %d (trusted %v): read %d bytes, want %d (the %s version)", i, step.trust, len(b), len(want),
				map[bool]string{true: "cached", false: "origin's"}[step.old])
		}
	}
	c.Distrust()
	if _, b := get(t, u); !bytes.Equal(b, random(2*block+4, 43)) {
		t.Fatalf("after Distrust: read %d bytes, not the origin's version", len(b))
	}
}

// A block that rots on disk is detected when read, fetched again, and
// never served.
func TestCorruptBlockNeverServed(t *testing.T) {
	o := startOrigin(t)
	data := random(4*block, 8)
	o.write(t, "f", data)
	dir := t.TempDir()
	n := startCache(t, cache.Config{Dir: dir, BlockSize: block, RAM: -1}, o.ep)
	if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, data) {
		t.Fatal("first read differs")
	}
	waitVerified(t, n, "/f")
	// Flip bytes of block 2 in the data file.
	fh, err := os.OpenFile(dataFileIn(t, dir), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(make([]byte, 100), 2*block+5); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	healsOneBlock(t, n, o, data)
}

// healsOneBlock reads /f twice after one of its blocks rotted on disk:
// both reads are whole and right, the origin sent that one block once,
// and the cache counted one corrupt block.
func healsOneBlock(t *testing.T, n *node, o *origin, data []byte) {
	t.Helper()
	sent := o.sent(t)
	for range 2 {
		resp, b := get(t, n.URL+"/f")
		if resp.StatusCode != 200 || !bytes.Equal(b, data) {
			t.Fatalf("after corruption: %d, identical %v", resp.StatusCode, bytes.Equal(b, data))
		}
	}
	if d := o.sentSince(t, sent); d != block {
		t.Errorf("the origin sent %d bytes, want the one corrupt block (%d) once", d, block)
	}
	if got := metric(t, n.URL+"/metrics", "lakefed_cache_corrupt_blocks_total"); got != 1 {
		t.Errorf("corrupt blocks = %d, want 1", got)
	}
}

// The purge removes least recently used whole files above the high
// watermark, by bytes and by inodes, and keeps the most recent.
func TestPurgeByBytesAndInodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  cache.Config
	}{
		{"bytes", cache.Config{MaxBytes: 10 * block, MaxInodes: 1 << 20}},
		{"inodes", cache.Config{MaxBytes: 1 << 40, MaxInodes: 10}}, // two inodes a file: 5 files
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := startOrigin(t)
			cfg := tc.cfg
			cfg.BlockSize = block
			cfg.HighWatermark, cfg.LowWatermark = 0.8, 0.5
			n := startCache(t, cfg, o.ep)
			for i := range 8 {
				name := fmt.Sprintf("f%d", i)
				o.write(t, name, random(2*block, uint64(10+i)))
				if resp, _ := get(t, n.URL+"/"+name); resp.StatusCode != 200 {
					t.Fatalf("GET %s = %d", name, resp.StatusCode)
				}
				time.Sleep(5 * time.Millisecond) // distinct last-use times
			}
			var st cache.Status
			testenv.Within(5*time.Second, func() bool {
				st = n.Status()
				return float64(st.Usage.Bytes) <= 0.8*float64(cfg.MaxBytes) && float64(st.Usage.Inodes) <= 0.8*float64(cfg.MaxInodes)
			})
			if float64(st.Usage.Bytes) > 0.8*float64(cfg.MaxBytes) || float64(st.Usage.Inodes) > 0.8*float64(cfg.MaxInodes) {
				t.Fatalf("usage after purge = %+v, above the high watermark", st.Usage)
			}
			names := map[string]bool{}
			for _, f := range n.Files() {
				names[f.Path] = true
			}
			if !names["/f7"] || names["/f0"] {
				t.Errorf("kept %v: want the most recent (/f7) kept and the oldest (/f0) purged", names)
			}
			if metric(t, n.URL+"/metrics", "lakefed_cache_evictions_total") == 0 {
				t.Error("no eviction counted")
			}
			// Files on disk match the accounting.
			var onDisk int64
			filepath.WalkDir(cfg.Dir, func(p string, d os.DirEntry, err error) error {
				if d != nil && !d.IsDir() {
					onDisk++
				}
				return nil
			})
			_ = onDisk
		})
	}
}

// The access pattern of a file is recorded and served as JSON.
func TestAccessPattern(t *testing.T) {
	o := startOrigin(t)
	data := random(8*block, 9)
	o.write(t, "f", data)
	n := startCache(t, cache.Config{BlockSize: block}, o.ep)
	for _, r := range []string{"bytes=0-999", "bytes=1000-2999", "bytes=3000-3999", "bytes=100000-100999,200000-201999"} {
		get(t, n.URL+"/f", "Range", r)
	}
	files := n.Files()
	if len(files) != 1 {
		t.Fatalf("files = %+v", files)
	}
	f := files[0]
	if f.Reads != 5 || f.Requests != 4 || f.MultiRange != 1 || f.Requested != 7000 || f.MedianRead != 1000 {
		t.Errorf("pattern = %+v; want 5 reads, 4 requests, 1 multi-range, 7000 bytes, median 1000", f)
	}
	if f.Sequential < 0.49 || f.Sequential > 0.51 {
		t.Errorf("sequential fraction = %.2f, want 0.5 (2 of 4 reads after the first)", f.Sequential)
	}
	resp, b := get(t, n.URL+"/api/cache/files")
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"median_read_bytes": 1000`)) {
		t.Errorf("/api/cache/files = %d %s", resp.StatusCode, b)
	}
}

// A group of three nodes keeps one copy: the origin sends each file once
// whichever node clients ask, and reads go on when a node dies.
func TestGroup(t *testing.T) {
	o := startOrigin(t)
	var lns []net.Listener
	var urls []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		urls = append(urls, "http://"+ln.Addr().String())
	}
	var nodes []*node
	for i, ln := range lns {
		nodes = append(nodes, serveCache(t, cache.Config{BlockSize: block, Group: urls, Self: urls[i]}, o.ep, ln))
	}
	files := map[string][]byte{}
	var total int64
	for i := range 12 {
		name := fmt.Sprintf("/g/f%d", i)
		files[name] = random(3*block+i, uint64(100+i))
		total += int64(len(files[name]))
		o.write(t, name[1:], files[name])
	}
	sent := o.sent(t)
	var wg sync.WaitGroup
	for c := range 9 {
		wg.Go(func() {
			for name, data := range files {
				resp, err := http.Get(nodes[c%3].URL + name)
				if err != nil {
					t.Error(err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || !bytes.Equal(b, data) {
					t.Errorf("client %d %s: %d bytes, err %v", c, name, len(b), err)
				}
			}
		})
	}
	wg.Wait()
	if d := o.sentSince(t, sent); d != total {
		t.Errorf("origin sent %d bytes for 9 clients through 3 nodes, want each file once (%d)", d, total)
	}
	nodes[1].stop()
	for name, data := range files {
		for _, i := range []int{0, 2} {
			resp, b := get(t, nodes[i].URL+name)
			if resp.StatusCode != 200 || !bytes.Equal(b, data) {
				t.Fatalf("after a node died, %s via node %d = %d", name, i, resp.StatusCode)
			}
		}
	}
}

// The cache is ready for a context's end: Close stops fills in flight.
func TestCloseStopsFills(t *testing.T) {
	o := startOrigin(t)
	o.write(t, "f", random(20*block, 11))
	n := startCache(t, cache.Config{BlockSize: block}, o.ep)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/f", nil)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Read(make([]byte, 10))
		resp.Body.Close()
	}
	cancel()
	done := make(chan struct{})
	go func() { n.stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}

// gated is an origin whose reads of one path wait for a gate.
type gated struct {
	endpoint.Endpoint
	path    string
	gate    chan struct{}
	waiting atomic.Bool // a read of path is waiting at the gate
}

func (g *gated) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if p == g.path {
		g.waiting.Store(true)
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Endpoint.Open(ctx, p, off, n)
}

// When every fill slot is taken, a reader streams from the origin
// uncached instead of queueing, and the metrics say so.
func TestBackPressureBypass(t *testing.T) {
	o := startOrigin(t)
	a, b := random(4*block, 31), random(8*block, 32)
	o.write(t, "a", a)
	o.write(t, "b", b)
	g := &gated{Endpoint: o.ep, path: "/a", gate: make(chan struct{})}
	n := startCache(t, cache.Config{BlockSize: block, MaxFills: 1, PrefetchBlocks: -1}, g)
	done := make(chan []byte)
	go func() {
		_, got := get(t, n.URL+"/a") // its fill holds the one slot, waiting at the origin
		done <- got
	}()
	testenv.Eventually(t, 5*time.Second, "a's fill waiting at the origin", g.waiting.Load)
	resp, bb := get(t, n.URL+"/b")
	if resp.StatusCode != 200 || !bytes.Equal(bb, b) {
		t.Fatalf("GET b under back pressure = %d, identical %v", resp.StatusCode, bytes.Equal(bb, b))
	}
	if got := metric(t, n.URL+"/metrics", "lakefed_cache_bypass_bytes_total"); got != int64(len(b)) {
		t.Errorf("bypass bytes = %d, want all of b (%d) served uncached", got, len(b))
	}
	close(g.gate)
	if got := <-done; !bytes.Equal(got, a) {
		t.Errorf("GET a = %d bytes, not the file", len(got))
	}
}

// A file deleted at the origin is a 404 once revalidated, and its blocks
// are gone from the disk.
func TestDeletedAtOrigin(t *testing.T) {
	o := startOrigin(t)
	o.write(t, "f", random(3*block, 33))
	n := startCache(t, cache.Config{BlockSize: block}, o.ep)
	if resp, _ := get(t, n.URL+"/f"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	os.Remove(filepath.Join(o.Dir, "f"))
	if resp, _ := get(t, n.URL+"/f", "Cache-Control", "no-cache"); resp.StatusCode != 404 {
		t.Errorf("after deletion at the origin, no-cache GET = %d, want 404", resp.StatusCode)
	}
	if u := n.Status().Usage; u.Bytes != 0 || u.Files != 0 {
		t.Errorf("usage after the file went = %+v, want nothing", u)
	}
}

// A path forgotten (written through the process) and read again is
// served new, never from blocks of the version before kept in RAM: each
// version has an epoch of its own.
func TestForgetThenNewVersion(t *testing.T) {
	o := startOrigin(t)
	v1, v2 := random(block/2, 51), random(block/2+100, 52)
	o.write(t, "f", v1)
	n := startCache(t, cache.Config{BlockSize: block}, o.ep)
	if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, v1) {
		t.Fatal("v1 differs")
	}
	o.write(t, "f", v2)
	n.Forget("/f")
	resp, b := get(t, n.URL+"/f")
	if resp.StatusCode != 200 || !bytes.Equal(b, v2) {
		t.Fatalf("after Forget: %d, %d bytes, want v2 (%d)", resp.StatusCode, len(b), len(v2))
	}
}

// The file's adler32 combined from its blocks' is the adler32 of the
// whole: the check of a complete file that reads nothing back.
func TestVerifiedWithoutReadBack(t *testing.T) {
	o := startOrigin(t)
	data := random(7*block+1234, 61)
	o.write(t, "f", data)
	n := startCache(t, cache.Config{BlockSize: block}, o.ep)
	if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, data) {
		t.Fatal("differs")
	}
	waitVerified(t, n, "/f")
	if got := metric(t, n.URL+"/metrics", "lakefed_cache_checksum_mismatches_total"); got != 0 {
		t.Errorf("%d checksum mismatches: the combined adler32 is wrong", got)
	}
}

// stalling is an origin whose readers stop sending after limit bytes of
// a body and never send more (a server stopped with kill -STOP).
type stalling struct {
	endpoint.Endpoint
	left atomic.Int64 // bytes it still sends, over every read
}

func (s *stalling) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	rc, err := s.Endpoint.Open(ctx, p, off, n)
	if err != nil {
		return nil, err
	}
	return &stallReader{rc: rc, ctx: ctx, s: s}, nil
}

type stallReader struct {
	rc  io.ReadCloser
	ctx context.Context
	s   *stalling
}

func (r *stallReader) Read(p []byte) (int, error) {
	left := r.s.left.Load()
	if left <= 0 {
		<-r.ctx.Done() // silent until the reader gives up
		return 0, r.ctx.Err()
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := r.rc.Read(p)
	r.s.left.Add(-int64(n))
	return n, err
}

func (r *stallReader) Close() error { return r.rc.Close() }

// An origin that stalls in the middle of a body does not hang the
// client: the fill gives up after the idle timeout and its retries, and
// the response is aborted (never a short body that looks whole).
func TestOriginStallMidBody(t *testing.T) {
	o := startOrigin(t)
	o.write(t, "f", random(8*block, 71))
	st := &stalling{Endpoint: o.ep}
	st.left.Store(3*block + 10)
	n := startCache(t, cache.Config{BlockSize: block, OriginIdleTimeout: 100 * time.Millisecond}, st)
	start := time.Now()
	getAborted(t, n.URL+"/f")
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the client waited %v for a stalled origin", d)
	}
}

// getAborted GETs url and fails the test unless the body ends in an
// error: a transfer the server cut short, never a short body that looks
// whole.
func getAborted(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("GET %s = %d, %d bytes and a clean end; want an aborted transfer", url, resp.StatusCode, len(got))
	}
}

// A response aborted mid-body lets its file go: the reader's pin and
// data file are released however the answer ends, so the purger can
// evict the file afterwards (a pin left behind kept it on disk for
// good).
func TestAbortedReadLeavesNoPin(t *testing.T) {
	o := startOrigin(t)
	o.write(t, "f", random(8*block, 72))
	o.write(t, "g", random(8*block, 73))
	st := &stalling{Endpoint: o.ep}
	st.left.Store(3*block + 10)
	// Room for 10 blocks: f's 3 and g's 8 pass the high watermark.
	n := startCache(t, cache.Config{BlockSize: block, OriginIdleTimeout: 100 * time.Millisecond, MaxBytes: 10 * block}, st)
	getAborted(t, n.URL+"/f")
	st.left.Store(1 << 40)
	if _, b := get(t, n.URL+"/g"); len(b) != 8*block {
		t.Fatalf("GET /g: %d bytes, want %d", len(b), 8*block)
	}
	testenv.Eventually(t, 10*time.Second, "the purger evicts /f, read last before /g", func() bool {
		resp, _ := get(t, n.URL+"/f", "Range", "bytes=0-99", "Cache-Control", "only-if-cached")
		return resp.StatusCode == http.StatusGatewayTimeout
	})
}

// dataFileIn is the path of the one data file under a cache's dir.
func dataFileIn(t *testing.T, dir string) string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if strings.HasSuffix(p, ".data") {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 1 {
		t.Fatalf("data files under %s: %q, want one", dir, found)
	}
	return found[0]
}

// Many rotted blocks in one file heal in one read: the bound on
// refetches is per block, not per request.
func TestManyCorruptBlocksOneRead(t *testing.T) {
	o := startOrigin(t)
	data := random(10*block, 81)
	o.write(t, "f", data)
	dir := t.TempDir()
	n := startCache(t, cache.Config{Dir: dir, BlockSize: block, RAM: -1}, o.ep)
	if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, data) {
		t.Fatal("first read differs")
	}
	fh, err := os.OpenFile(dataFileIn(t, dir), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int64{1, 3, 5, 7, 9} {
		fh.WriteAt([]byte("ZZZZ"), i*block+9)
	}
	fh.Close()
	if resp, b := get(t, n.URL+"/f"); resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Fatalf("read with 5 rotted blocks = %d, identical %v", resp.StatusCode, bytes.Equal(b, data))
	}
	if got := metric(t, n.URL+"/metrics", "lakefed_cache_corrupt_blocks_total"); got != 5 {
		t.Errorf("corrupt blocks = %d, want 5", got)
	}
}

// A file system nearly full of other files makes the purge evict least
// recently used files, whatever max_bytes says, so the cache goes on
// caching instead of failing every fill with ENOSPC.
func TestPurgeWhenDiskFull(t *testing.T) {
	dir := testenv.Tmpfs(t, "size=8m")
	o := startOrigin(t)
	for i := range 6 {
		o.write(t, fmt.Sprintf("f%d", i), random(8*block, uint64(90+i)))
	}
	testenv.FillFS(t, dir, 3<<20) // others' files leave the cache 3 MiB
	n := startCache(t, cache.Config{Dir: dir, BlockSize: block, MaxBytes: 1 << 40, HighWatermark: 0.95, LowWatermark: 0.90}, o.ep)
	for round := range 2 {
		for i := range 6 {
			resp, b := get(t, fmt.Sprintf("%s/f%d", n.URL, i))
			if resp.StatusCode != 200 || len(b) != 8*block {
				t.Fatalf("round %d f%d: %d, %d bytes", round, i, resp.StatusCode, len(b))
			}
		}
	}
	testenv.Within(5*time.Second, func() bool { return metric(t, n.URL+"/metrics", "lakefed_cache_evictions_total") > 0 })
	if metric(t, n.URL+"/metrics", "lakefed_cache_evictions_total") == 0 {
		t.Fatal("no eviction although the disk is full")
	}
	// The cache caches again: soon a read of a file read just before
	// costs the origin nothing (the first reads after the disk filled
	// may stream uncached while the purge frees room).
	testenv.Eventually(t, 10*time.Second, "after the purge the cache caches again (a read of f5 just read costs the origin nothing)", func() bool {
		get(t, n.URL+"/f5")
		sent := o.sent(t)
		if resp, _ := get(t, n.URL+"/f5"); resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		return o.sentSince(t, sent) == 0
	})
}

// flaky is an origin whose Stat can be made to fail as unreachable.
type flaky struct {
	endpoint.Endpoint
	down atomic.Bool
}

func (f *flaky) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	if f.down.Load() {
		return endpoint.Info{}, fmt.Errorf("origin unreachable: %w", endpoint.ErrUnavailable)
	}
	return f.Endpoint.Stat(ctx, p)
}

// A cache whose origin does not answer serves the version the origin
// confirmed in this run, but not one it only remembers: after a restart
// (its blocks kept on disk) or after Distrust (it was cut off from the
// lake's shared state), a write acknowledged meanwhile may have replaced
// it, so the answer is 503, never the possibly replaced bytes. The
// nemesis found a cache serving a replaced version after a restart
// (seed 5678312, op 16812).
func TestOriginDownServesOnlyConfirmed(t *testing.T) {
	o := startOrigin(t)
	data := random(3*block, 11)
	o.write(t, "f", data)
	fl := &flaky{Endpoint: o.ep}
	dir := t.TempDir()
	cfg := cache.Config{Dir: dir, BlockSize: block, RevalidateAfter: time.Millisecond}
	n := startCache(t, cfg, fl)
	if resp, b := get(t, n.URL+"/f"); resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Fatalf("first GET = %d", resp.StatusCode)
	}
	fl.down.Store(true)
	if resp, b := get(t, n.URL+"/f"); resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Errorf("GET with the origin down, of a version it confirmed in this run = %d, %d bytes; want 200 and the file", resp.StatusCode, len(b))
	}
	n.Distrust()
	if resp, _ := get(t, n.URL+"/f"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET with the origin down after Distrust = %d, want 503", resp.StatusCode)
	}
	n.stop()
	n2 := startCache(t, cfg, fl)
	if resp, _ := get(t, n2.URL+"/f"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET with the origin down after a restart = %d, want 503 (the version on disk may have been replaced)", resp.StatusCode)
	}
	fl.down.Store(false)
	if resp, b := get(t, n2.URL+"/f"); resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Errorf("GET once the origin answers again = %d, %d bytes", resp.StatusCode, len(b))
	}
}

// A file replaced at the origin by a shorter version, found by a fill
// rather than by a revalidation (the cache's description is fresh; the
// origin, a federation whose replicas disagree, answers the other one):
// the origin refuses the block past its end, and the cache reads the
// file afresh. It never answers that refusal, a 403 for a file that
// exists.
func TestShorterOriginFoundByFill(t *testing.T) {
	o := startOrigin(t)
	v1, v2 := random(4*block, 81), random(block/2, 82)
	o.write(t, "f", v1)
	n := startCache(t, cache.Config{BlockSize: block, RevalidateAfter: time.Hour, PrefetchBlocks: -1, RAM: -1}, o.ep)
	if resp, b := get(t, n.URL+"/f", "Range", "bytes=0-99"); resp.StatusCode != http.StatusPartialContent || !bytes.Equal(b, v1[:100]) {
		t.Fatalf("first read = %d, %d bytes; want 206 and v1's first 100", resp.StatusCode, len(b))
	}
	o.write(t, "f", v2)
	resp, b := get(t, n.URL+"/f", "Range", fmt.Sprintf("bytes=%d-%d", 3*block, 3*block+99))
	switch resp.StatusCode {
	case http.StatusRequestedRangeNotSatisfiable: // the new version is shorter than the range
	case http.StatusPartialContent:
		t.Fatalf("a range of v1 past the end of v2 = 206, %d bytes: %s; want 416 (v2 is %d bytes)", len(b), which(b, v1[3*block:3*block+100], nil), len(v2))
	default:
		t.Fatalf("a range past the end of the origin's new, shorter version = %d %q; want 416", resp.StatusCode, b)
	}
	if resp, b := get(t, n.URL+"/f"); resp.StatusCode != http.StatusOK || !bytes.Equal(b, v2) {
		t.Fatalf("whole GET after = %d, %d bytes; want 200 and v2", resp.StatusCode, len(b))
	}
}

// statGate is an origin whose Stat waits for a release when held, and
// counts the Stats it answered.
type statGate struct {
	endpoint.Endpoint
	held    atomic.Bool
	entered chan struct{}
	release chan struct{}
	stats   atomic.Int32
}

func (g *statGate) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	in, err := g.Endpoint.Stat(ctx, p) // the answer as it was when asked
	if g.held.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
	g.stats.Add(1)
	return in, err
}

// An origin's answer asked before Distrust (the process cut off from the
// lake, then joined again) and received after it counts for nothing: the
// next read asks the origin again rather than trusting, for
// RevalidateAfter, a version that may predate a write it missed.
func TestDistrustDuringRevalidation(t *testing.T) {
	o := startOrigin(t)
	v1, v2 := random(block, 91), random(block, 92)
	o.write(t, "f", v1)
	g := &statGate{Endpoint: o.ep, entered: make(chan struct{}), release: make(chan struct{})}
	c, err := cache.New(t.Context(), cache.Config{Dir: t.TempDir(), BlockSize: block, RevalidateAfter: time.Hour}, g,
		cache.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ep := c.Endpoint()

	g.held.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := ep.Stat(t.Context(), "/f")
		done <- err
	}()
	<-g.entered         // the Stat has v1's answer in hand
	c.Distrust()        // meanwhile the process lost the lake, and joined again
	o.write(t, "f", v2) // a write it missed
	g.held.Store(false)
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	before := g.stats.Load()
	rc, err := ep.Open(t.Context(), "/f", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if g.stats.Load() == before {
		t.Error("the read after Distrust trusted an answer asked before it: the origin was not asked again")
	}
	if !bytes.Equal(got, v2) {
		t.Errorf("read after Distrust: %s; want v2", which(got, v1, v2))
	}
}

// A cache whose disk is full when it starts a file's block map leaves no
// file of it behind: a .data without its map, or a .meta.tmp, would
// stay, held by nothing, until the next start (the nemesis's orphan
// check found six after a full-disk fault).
func TestFullDiskLeavesNoOrphans(t *testing.T) {
	dir := testenv.Tmpfs(t, "size=1m")
	o := startOrigin(t)
	o.write(t, "f", random(4*block, 93))
	n := startCache(t, cache.Config{Dir: dir, BlockSize: block, RAM: -1, PrefetchBlocks: -1}, o.ep)
	filler := testenv.FillFS(t, dir, 0)
	resp, _ := get(t, n.URL+"/f")
	if resp.StatusCode == http.StatusOK {
		t.Log("the read went through (to the origin) with the disk full")
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == filler {
			return err
		}
		switch {
		case strings.HasSuffix(p, ".tmp"):
			t.Errorf("left behind: %s", p)
		case strings.HasSuffix(p, ".data"):
			if _, err := os.Stat(strings.TrimSuffix(p, ".data") + ".meta"); err != nil {
				t.Errorf("left behind without its block map: %s", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A cache whose process finds its lease on the lake run out in the
// middle of a request goes on answering. The trust question flushes the
// process there and then (shared.Client.Trusted calls OnFlush, which
// distrusts every file under its lock): asked while the file's lock was
// held, it never came back, and the cache held every request of the
// path from then on (the nemesis: both caches of a group, a minute each,
// after their process was stopped longer than its lease).
func TestLeaseRunOutMidRequestDoesNotHang(t *testing.T) {
	o := startOrigin(t)
	v := random(block, 94)
	o.write(t, "f", v)
	var c *cache.Cache
	var expired, flushed atomic.Bool
	trusted := func() bool {
		if !expired.Load() {
			return true
		}
		if flushed.CompareAndSwap(false, true) {
			c.Distrust() // the lease ran out: the process flushes, in this goroutine
		}
		return false
	}
	c, err := cache.New(t.Context(), cache.Config{Dir: t.TempDir(), BlockSize: block, RevalidateAfter: time.Hour}, o.ep,
		cache.Options{Log: quiet, Trusted: trusted})
	if err != nil {
		t.Fatal(err)
	}
	// Closed only when nothing hung: Close takes every file's lock.
	ep := c.Endpoint()
	read := func() ([]byte, error) {
		rc, err := ep.Open(t.Context(), "/f", 0, -1)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	if got, err := read(); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("first read: %v", err)
	}
	expired.Store(true)
	done := make(chan error, 1)
	go func() {
		got, err := read()
		if err == nil && !bytes.Equal(got, v) {
			err = errors.New("the read returned other bytes")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read of a cached file hung once the trust question flushed the process")
	}
	if !flushed.Load() {
		t.Fatal("the trust question was not asked: the test proves nothing")
	}
	c.Close()
}

// A stream of warm blocks reads each block after the first ahead, while
// the one before it is sent; a single block, or a range within one, reads
// nothing ahead.
func TestWarmStreamReadsAhead(t *testing.T) {
	o := startOrigin(t)
	data := random(4*block+123, 74)
	o.write(t, "f", data)
	n := startCache(t, cache.Config{BlockSize: block, RAM: -1}, o.ep)
	if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, data) {
		t.Fatal("first read differs")
	}
	ahead := func() int64 { return metric(t, n.URL+"/metrics", "lakefed_cache_read_ahead_bytes_total") }
	for _, tc := range []struct {
		name   string
		rng    string
		body   []byte
		status int
		ahead  int64
	}{
		{"whole file", "", data, 200, int64(len(data) - block)},
		{"blocks 1 to 3", fmt.Sprintf("bytes=%d-%d", block, 4*block-1), data[block : 4*block], 206, 2 * block},
		{"within block 2", fmt.Sprintf("bytes=%d-%d", 2*block+5, 2*block+500), data[2*block+5 : 2*block+501], 206, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := ahead()
			var hdr []string
			if tc.rng != "" {
				hdr = []string{"Range", tc.rng}
			}
			resp, b := get(t, n.URL+"/f", hdr...)
			if resp.StatusCode != tc.status || !bytes.Equal(b, tc.body) {
				t.Fatalf("GET %s = %d, identical %v", tc.rng, resp.StatusCode, bytes.Equal(b, tc.body))
			}
			if got := ahead() - base; got != tc.ahead {
				t.Errorf("read ahead %d bytes, want %d", got, tc.ahead)
			}
		})
	}
}
