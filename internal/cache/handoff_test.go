package cache_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// paced is an origin whose reads of one path stop before every block
// until the test lets them on (pacedBody.step), so that a test knows
// which blocks a fill has and whether a reader waits for them.
type paced struct {
	endpoint.Endpoint
	path  string
	opens chan *pacedBody // every read of path, as it is opened
}

func newPaced(ep endpoint.Endpoint, p string) *paced {
	return &paced{Endpoint: ep, path: p, opens: make(chan *pacedBody, 16)}
}

func (p *paced) Open(ctx context.Context, path string, off, n int64) (io.ReadCloser, error) {
	rc, err := p.Endpoint.Open(ctx, path, off, n)
	if err != nil || path != p.path {
		return rc, err
	}
	b := &pacedBody{rc: rc, ctx: ctx, off: off, passed: -1, step: make(chan struct{})}
	p.opens <- b
	return b, nil
}

// pacedBody stops at every block boundary until a receive on step (or
// step closed) lets it past.
type pacedBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	off    int64
	passed int64 // the boundary last let past
	step   chan struct{}
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.off%block == 0 && b.passed != b.off {
		select {
		case <-b.step:
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		}
		b.passed = b.off
	}
	p = p[:min(int64(len(p)), block-b.off%block)]
	n, err := b.rc.Read(p)
	b.off += int64(n)
	return n, err
}

func (b *pacedBody) Close() error { return b.rc.Close() }

// Version is the version the origin's reader says it reads: the cache
// checks it.
func (b *pacedBody) Version() endpoint.Info {
	v, _ := endpoint.VersionOf(b.rc)
	return v
}

// stepWhenWaiting lets body fetch its next block once the cache counts
// waits reader waits for fills in all: the reader waits for that block.
func stepWhenWaiting(t *testing.T, n *node, body *pacedBody, waits int64) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("wait %d for a fill", waits), func() bool {
		return metric(t, n.URL+"/metrics", "lakefed_cache_fill_waits_total") >= waits
	})
	body.step <- struct{}{}
}

// A cold read is served the bytes its fill fetched as the fill hands
// them over, none read back from disk; a warm read reads them from disk.
func TestColdReadHandedOver(t *testing.T) {
	o := startOrigin(t)
	const blocks = 6
	data := random(blocks*block-100, 71)
	o.write(t, "f", data)
	p := newPaced(o.ep, "/f")
	n := startCache(t, cache.Config{BlockSize: block, RAM: -1, PrefetchBlocks: -1}, p)
	got := make(chan []byte, 1)
	go func() {
		_, b := get(t, n.URL+"/f")
		got <- b
	}()
	fill := <-p.opens
	for k := range int64(blocks) {
		// The reader waits for block k before the fill may fetch it, so
		// the fill finds it waiting.
		stepWhenWaiting(t, n, fill, k+1)
	}
	close(fill.step)
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("cold GET = %d bytes, not the file", len(b))
	}
	if d := metric(t, n.URL+"/metrics", "lakefed_cache_disk_read_bytes_total"); d != 0 {
		t.Errorf("a cold read read %d bytes back from disk, want 0: the fill hands its blocks over", d)
	}
	if h := metric(t, n.URL+"/metrics", "lakefed_cache_handed_bytes_total"); h != int64(len(data)) {
		t.Errorf("handed bytes = %d, want the file's %d", h, len(data))
	}
	if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, data) {
		t.Fatalf("warm GET = %d bytes, not the file", len(b))
	}
	if d := metric(t, n.URL+"/metrics", "lakefed_cache_disk_read_bytes_total"); d != int64(len(data)) {
		t.Errorf("a warm read read %d bytes from disk, want the file's %d", d, len(data))
	}
}

// A reader waits on a fill of one version while the file changes at the
// origin and a reader of the new version waits on a fill of its own at
// the same block: when both fills bring that block, the new version's
// reader gets the new bytes only, and the old one's answer breaks off
// (its version is gone) without a byte of the new version.
func TestChangeMidFillNeverHandsOtherVersion(t *testing.T) {
	o := startOrigin(t)
	const blocks = 6
	v1, v2 := random(blocks*block, 72), random(blocks*block, 73)
	o.write(t, "f", v1)
	p := newPaced(o.ep, "/f")
	n := startCache(t, cache.Config{BlockSize: block, RAM: -1, PrefetchBlocks: -1}, p)

	type answer struct {
		status int
		body   []byte
		err    error
	}
	read := func(hdr ...string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			req, err := http.NewRequest(http.MethodGet, n.URL+"/f", nil)
			if err != nil {
				ch <- answer{err: err}
				return
			}
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				ch <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			ch <- answer{resp.StatusCode, b, err}
		}()
		return ch
	}

	const mid = 3
	old := read()
	fill1 := <-p.opens
	for k := range int64(mid) {
		stepWhenWaiting(t, n, fill1, k+1)
	}
	testenv.Eventually(t, 10*time.Second, "the old version's reader waiting for its fill", func() bool {
		return metric(t, n.URL+"/metrics", "lakefed_cache_fill_waits_total") >= mid+1
	})

	o.write(t, "f", v2)
	cur := read("Cache-Control", "no-cache")
	fill2 := <-p.opens
	for k := range int64(mid) {
		stepWhenWaiting(t, n, fill2, mid+1+k+1)
	}
	testenv.Eventually(t, 10*time.Second, "the new version's reader waiting for its fill", func() bool {
		return metric(t, n.URL+"/metrics", "lakefed_cache_fill_waits_total") >= 2*mid+2
	})
	// Block mid of both versions arrives now, the old one's first.
	fill1.step <- struct{}{}
	close(fill2.step)
	close(fill1.step)

	a := <-cur
	if a.err != nil || a.status != http.StatusOK || !bytes.Equal(a.body, v2) {
		t.Fatalf("GET of the new version = %d, %d bytes, %v: %s; want v2 whole", a.status, len(a.body), a.err, which(a.body, v1, v2))
	}
	a = <-old
	if a.status != http.StatusOK || !bytes.Equal(a.body, v1[:len(a.body)]) {
		t.Fatalf("GET of the old version = %d, %d bytes: %s; want a prefix of v1", a.status, len(a.body), which(a.body, v1, v2))
	}
	if a.err == nil || len(a.body) == len(v1) {
		t.Errorf("GET of the old version ended with %d bytes, err %v; want it broken off, its version gone", len(a.body), a.err)
	}
}

// A reader that falls behind its fill (its client reads nothing until
// the fill has the whole file) still reads none of it back from disk:
// it claimed the blocks of its window before the fill had them.
func TestSlowReaderHandedOver(t *testing.T) {
	o := startOrigin(t)
	const blocks = 9 // the block waited for, and as many claimed as may be
	data := random(blocks*block, 74)
	o.write(t, "f", data)
	n := startCache(t, cache.Config{BlockSize: block, RAM: -1, PrefetchBlocks: -1}, o.ep)
	resp, err := http.Get(n.URL + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	testenv.Eventually(t, 10*time.Second, "the fill has the whole file", func() bool {
		return metric(t, n.URL+"/metrics", "lakefed_cache_origin_bytes_total") == int64(len(data))
	})
	b, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("GET = %d bytes, %v; want the file", len(b), err)
	}
	if d := metric(t, n.URL+"/metrics", "lakefed_cache_disk_read_bytes_total"); d != 0 {
		t.Errorf("a reader behind its fill read %d bytes back from disk, want 0", d)
	}
}

// A cold read by a reader slower than its origin, of a file of more
// than two runs (at most 64 blocks each): the fill gets no further ahead
// of the reader than its claims reach, so the reader holds at most the
// block it sends and 8 claimed (maxClaims), and every block is handed
// over, none read back from disk. The fill pauses for the reader longer
// than the origin's idle timeout, which a pause is not counted against:
// the origin is opened once per run, never again.
func TestSlowColdReadPacesFill(t *testing.T) {
	o := startOrigin(t)
	const blocks = 2*64 + 10
	data := random(blocks*block, 75)
	o.write(t, "f", data)
	ep := &countedOpens{Endpoint: o.ep}
	const idle = 100 * time.Millisecond
	n := startCache(t, cache.Config{BlockSize: block, RAM: -1, PrefetchBlocks: -1, OriginIdleTimeout: idle}, ep)
	w := &gatedWriter{hdr: http.Header{}, open: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/f", nil))
	}()
	// The reader's first write waits: it holds block 0 and claims 8.
	testenv.Eventually(t, 10*time.Second, "both runs paused for the reader, the blocks read recorded", func() bool {
		return metric(t, n.URL+"/metrics", "lakefed_cache_fills_paused") == 2 &&
			metric(t, n.URL+"/metrics", "lakefed_cache_origin_bytes_total") >= 9*block
	})
	if got, want := metric(t, n.URL+"/metrics", "lakefed_cache_origin_bytes_total"), int64(9*block); got != want {
		t.Errorf("with the reader at block 0, the fill fetched %d bytes, want %d (the block sent and 8 claimed)", got, want)
	}
	// What is waited for here is time itself: the pause outlasts the
	// idle timeout.
	<-time.After(4 * idle)
	close(w.open)
	<-done
	if w.code != http.StatusOK || !bytes.Equal(w.body.Bytes(), data) {
		t.Fatalf("GET = %d, %d bytes; want 200 and the file", w.code, w.body.Len())
	}
	if d := metric(t, n.URL+"/metrics", "lakefed_cache_disk_read_bytes_total"); d != 0 {
		t.Errorf("a cold read read %d bytes back from disk, want 0: the fill hands every block over", d)
	}
	if h := metric(t, n.URL+"/metrics", "lakefed_cache_handed_bytes_total"); h != int64(len(data)) {
		t.Errorf("handed bytes = %d, want the file's %d", h, len(data))
	}
	if got := ep.opens.Load(); got != 3 {
		t.Errorf("the origin was opened %d times, want 3 (one per run): a paused fill's read was cut as idle", got)
	}
}

// TestStalledReaderFillGoesOn: a reader that stops taking bytes (its
// client holds the connection and reads nothing) holds its runs paused
// only for MaxFillPause; then they fill to their end, to disk, and let
// the origin go, and the reader, when it reads again, gets the file.
func TestStalledReaderFillGoesOn(t *testing.T) {
	o := startOrigin(t)
	const blocks = 2*64 + 10
	data := random(blocks*block, 76)
	o.write(t, "f", data)
	n := startCache(t, cache.Config{BlockSize: block, RAM: -1, PrefetchBlocks: -1, MaxFillPause: 200 * time.Millisecond}, o.ep)
	w := &gatedWriter{hdr: http.Header{}, open: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/f", nil))
	}()
	// The two runs the reader started (blocks 0 to 127) fill to their
	// end while it still takes nothing.
	testenv.Eventually(t, 10*time.Second, "the stalled reader's runs filled to their end", func() bool {
		return metric(t, n.URL+"/metrics", "lakefed_cache_origin_bytes_total") == 2*64*block &&
			metric(t, n.URL+"/metrics", "lakefed_cache_fills_paused") == 0
	})
	close(w.open)
	<-done
	if w.code != http.StatusOK || !bytes.Equal(w.body.Bytes(), data) {
		t.Fatalf("GET = %d, %d bytes; want 200 and the file", w.code, w.body.Len())
	}
}

// countedOpens counts the origin's opens.
type countedOpens struct {
	endpoint.Endpoint
	opens atomic.Int64
}

func (c *countedOpens) Open(ctx context.Context, path string, off, n int64) (io.ReadCloser, error) {
	c.opens.Add(1)
	return c.Endpoint.Open(ctx, path, off, n)
}

// gatedWriter is a client that takes no byte of the body until the test
// closes open. It is written by the handler's goroutine only; read it
// once the handler returned.
type gatedWriter struct {
	hdr  http.Header
	code int
	body bytes.Buffer
	open chan struct{}
}

func (w *gatedWriter) Header() http.Header { return w.hdr }

func (w *gatedWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	<-w.open
	return w.body.Write(p)
}

// A fill paused for its slow reader gives its fill slot back: with
// every slot held by the paused runs of a slow reader, another file's
// cold read is still filled, not streamed from the origin uncached.
func TestPausedFillsLeaveSlots(t *testing.T) {
	o := startOrigin(t)
	slow, other := random(2*64*block, 76), random(4*block, 77)
	o.write(t, "slow", slow)
	o.write(t, "other", other)
	n := startCache(t, cache.Config{BlockSize: block, RAM: -1, PrefetchBlocks: -1, MaxFills: 2}, o.ep)
	w := &gatedWriter{hdr: http.Header{}, open: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/slow", nil))
	}()
	testenv.Eventually(t, 10*time.Second, "both runs of the slow read paused", func() bool {
		return metric(t, n.URL+"/metrics", "lakefed_cache_fills_paused") == 2
	})
	if _, b := get(t, n.URL+"/other"); !bytes.Equal(b, other) {
		t.Fatalf("GET /other = %d bytes, not the file", len(b))
	}
	if by := metric(t, n.URL+"/metrics", "lakefed_cache_bypass_bytes_total"); by != 0 {
		t.Errorf("GET /other streamed %d bytes uncached, want 0: the paused fills held every slot", by)
	}
	close(w.open)
	<-done
	if w.code != http.StatusOK || !bytes.Equal(w.body.Bytes(), slow) {
		t.Fatalf("slow GET = %d, %d bytes; want 200 and the file", w.code, w.body.Len())
	}
}

// A fill paused for its slow reader does not hold back another reader
// of the same file: that reader's claims move the fill on, and it reads
// the whole file while the slow one still takes nothing.
func TestPausedFillServesOtherReader(t *testing.T) {
	o := startOrigin(t)
	data := random(2*64*block+3, 78)
	o.write(t, "f", data)
	n := startCache(t, cache.Config{BlockSize: block, RAM: -1, PrefetchBlocks: -1}, o.ep)
	w := &gatedWriter{hdr: http.Header{}, open: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/f", nil))
	}()
	testenv.Eventually(t, 10*time.Second, "both runs of the slow read paused", func() bool {
		return metric(t, n.URL+"/metrics", "lakefed_cache_fills_paused") == 2
	})
	if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, data) {
		t.Fatalf("second reader's GET = %d bytes, not the file", len(b))
	}
	close(w.open)
	<-done
	if w.code != http.StatusOK || !bytes.Equal(w.body.Bytes(), data) {
		t.Fatalf("slow GET = %d, %d bytes; want 200 and the file", w.code, w.body.Len())
	}
}
