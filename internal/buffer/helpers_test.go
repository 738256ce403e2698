package buffer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
	"github.com/lakefed/lakefed/internal/httpx"
)

var quiet = slog.New(slog.DiscardHandler)

// newPosix returns a posix endpoint on a fresh directory, and the
// directory.
func newPosix(t testing.TB, name string) (*posix.Endpoint, string) {
	t.Helper()
	dir := t.TempDir()
	ep, err := posix.New(context.Background(), endpoint.Config{Name: name, URL: "file://" + dir}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return ep, dir
}

// fake wraps a real target and misbehaves on demand. It hides the
// target's Checksummer (the buffer must then read copies back); wrap it
// in summing to show it.
type fake struct {
	endpoint.Endpoint
	down     atomic.Bool   // Put, Stat and Delete fail with ErrUnavailable
	corrupt  atomic.Int32  // the next N Puts store one byte flipped
	truncate atomic.Int32  // the next N Puts store half the bytes
	gate     chan struct{} // when set, Put waits for it to close (or ctx)
	started  chan string   // when set, Put sends its path once it is called
	puts     atomic.Int32  // Puts called
	returned atomic.Int32  // Puts returned
	stats    atomic.Int32  // Stats called
	mu       sync.Mutex
	stored   []string // adler32 of each Put that completed, in order
}

func (f *fake) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	f.puts.Add(1)
	defer f.returned.Add(1)
	if f.started != nil {
		select {
		case f.started <- p:
		default:
		}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return fmt.Errorf("gated put: %w: %w", endpoint.ErrUnavailable, ctx.Err())
		}
	}
	if f.down.Load() {
		return fmt.Errorf("fake put: %w", endpoint.ErrUnavailable)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	switch {
	case f.corrupt.Load() > 0:
		f.corrupt.Add(-1)
		if len(data) > 0 {
			data[len(data)/2] ^= 0x40
		}
	case f.truncate.Load() > 0:
		f.truncate.Add(-1)
		data = data[:len(data)/2]
		size = int64(len(data))
	}
	if err := f.Endpoint.Put(ctx, p, bytes.NewReader(data), size); err != nil {
		return err
	}
	f.mu.Lock()
	f.stored = append(f.stored, httpx.Adler32Of(data))
	f.mu.Unlock()
	return nil
}

func (f *fake) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	f.stats.Add(1)
	if f.down.Load() {
		return endpoint.Info{}, fmt.Errorf("fake stat: %w", endpoint.ErrUnavailable)
	}
	in, err := f.Endpoint.Stat(ctx, p)
	in.Checksums = nil // only what Checksum would say, and this fake has none
	return in, err
}

func (f *fake) Delete(ctx context.Context, p string) error {
	if f.down.Load() {
		return fmt.Errorf("fake delete: %w", endpoint.ErrUnavailable)
	}
	return f.Endpoint.Delete(ctx, p)
}

func (f *fake) storedSums() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stored...)
}

// summing is a fake that shows the target's own Checksum.
type summing struct{ *fake }

func (s summing) Checksum(ctx context.Context, p, algo string) (string, error) {
	return endpoint.Checksum(ctx, s.fake.Endpoint, p, algo)
}

// start opens a buffer on cfg (a fresh Dir unless set), runs it, and
// serves Wrap(next) on a loopback test server, all stopped when the test
// ends.
func start(t testing.TB, cfg Config, next http.Handler, opts Options) (*Buffer, *httptest.Server) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if opts.Log == nil {
		opts.Log = quiet
	}
	if next == nil {
		next = http.NotFoundHandler()
	}
	b, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	srv := httptest.NewServer(b.Wrap(next))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b, srv
}

// fastRetry is a config's retry for tests.
func fastRetry(c Config) Config {
	c.RetryInitial, c.RetryMax = 5*time.Millisecond, 40*time.Millisecond
	return c
}

func put(t testing.TB, url string, data []byte, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
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
		t.Fatalf("GET %s: %v", url, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp, body
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// counter returns the value of a counter series with the given labels in
// reg, or -1 when there is none.
func counter(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metric
				}
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// dirNames lists a directory's names.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func readFile(t testing.TB, dir, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
