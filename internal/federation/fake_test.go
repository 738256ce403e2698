package federation

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// fakeEP is an in-memory endpoint that counts calls and injects failures.
type fakeEP struct {
	name     string
	redirect bool // implements Redirecter (via fakeRedirecter)
	// presign > 0: implements Redirecter with expiring URLs (via
	// fakePresigner), as S3 does.
	presign time.Duration
	signs   atomic.Int64

	mu    sync.Mutex
	files map[string][]byte // endpoint path → content
	dirs  map[string]bool

	stats, opens, probes, puts, deletes, closes atomic.Int64
	down                                        atomic.Bool            // every call: ErrUnavailable
	hang                                        atomic.Bool            // every call waits for ctx
	statErr                                     atomic.Value           // error injected into Stat
	deleteErr                                   atomic.Value           // error injected into Delete
	failAfter                                   atomic.Int64           // >0: readers fail after this many bytes
	stallAfter                                  atomic.Int64           // >0: readers hang after this many bytes until ctx ends
	onBreak                                     atomic.Pointer[func()] // run once when a reader breaks (failAfter)
	gate                                        atomic.Pointer[chan struct{}]
	openGate                                    atomic.Pointer[chan struct{}]
	// weak: versions as nginx makes them, of the size and a time only
	// (not Strong, and the same for any bytes of that size); noSums: no
	// checksums either.
	weak, noSums atomic.Bool
	// afterOpen runs once, when an Open has taken the bytes it reads.
	afterOpen atomic.Pointer[func()]
}

type fakeRedirecter struct{ *fakeEP }

// fakePresigner is a fake S3: its redirect URLs carry a serial number
// ("?sig=N") and expire after presign.
type fakePresigner struct{ *fakeEP }

func (f fakePresigner) RedirectURL(ctx context.Context, p string, op endpoint.Op) (*url.URL, error) {
	n := f.signs.Add(1)
	return url.Parse(fmt.Sprintf("http://%s.example%s?op=%s&sig=%d", f.name, p, op, n))
}

func (f fakePresigner) PresignExpiry() time.Duration { return f.presign }

func (f fakeRedirecter) RedirectURL(ctx context.Context, p string, op endpoint.Op) (*url.URL, error) {
	return url.Parse("http://" + f.name + ".example" + p)
}

func newFake(name string, redirect bool) *fakeEP {
	return &fakeEP{name: name, redirect: redirect, files: map[string][]byte{}, dirs: map[string]bool{"/": true}}
}

// asEndpoint returns the fake as the federator should see it.
func (f *fakeEP) asEndpoint() endpoint.Endpoint {
	if f.presign > 0 {
		return fakePresigner{f}
	}
	if f.redirect {
		return fakeRedirecter{f}
	}
	return f
}

func (f *fakeEP) put(p string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[p] = data
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		f.dirs[d] = true
	}
}

func (f *fakeEP) get(p string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.files[p]
	return d, ok
}

func (f *fakeEP) check(ctx context.Context) error {
	if f.hang.Load() {
		<-ctx.Done()
		return fmt.Errorf("fake %s: %w: %w", f.name, ctx.Err(), endpoint.ErrUnavailable)
	}
	if f.down.Load() {
		return fmt.Errorf("fake %s: connection refused: %w", f.name, endpoint.ErrUnavailable)
	}
	return nil
}

func (f *fakeEP) Name() string { return f.name }

func (f *fakeEP) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	f.stats.Add(1)
	if g := f.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
		}
	}
	if err := f.check(ctx); err != nil {
		return endpoint.Info{}, err
	}
	if err, _ := f.statErr.Load().(error); err != nil {
		return endpoint.Info{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.files[p]; ok {
		return f.info(p, d), nil
	}
	if f.dirs[p] {
		return endpoint.Info{Name: path.Base(p), IsDir: true}, nil
	}
	return endpoint.Info{}, fmt.Errorf("fake %s: stat %q: %w", f.name, p, endpoint.ErrNotFound)
}

func (f *fakeEP) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	if err := f.check(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dirs[dir] {
		return nil, fmt.Errorf("fake %s: list %q: %w", f.name, dir, endpoint.ErrNotFound)
	}
	var out []endpoint.Info
	for p, d := range f.files {
		if path.Dir(p) == dir {
			out = append(out, endpoint.Info{Name: path.Base(p), Size: int64(len(d))})
		}
	}
	for p := range f.dirs {
		if p != "/" && path.Dir(p) == dir {
			out = append(out, endpoint.Info{Name: path.Base(p), IsDir: true})
		}
	}
	return out, nil
}

func (f *fakeEP) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	f.opens.Add(1)
	if g := f.openGate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
		}
	}
	if err := f.check(ctx); err != nil {
		return nil, err
	}
	d, ok := f.get(p)
	if !ok {
		return nil, fmt.Errorf("fake %s: open %q: %w", f.name, p, endpoint.ErrNotFound)
	}
	ver := f.info(p, d)
	ver.Checksums = nil
	if off > int64(len(d)) {
		return nil, fmt.Errorf("fake %s: offset past end: %w", f.name, endpoint.ErrRefused)
	}
	d = d[off:]
	if n >= 0 && n < int64(len(d)) {
		d = d[:n]
	}
	var r io.Reader = bytes.NewReader(d)
	if fn := f.afterOpen.Swap(nil); fn != nil {
		(*fn)()
	}
	if fa := f.failAfter.Load(); fa > 0 {
		// The byte budget counts from the file's start: a failover that
		// comes back here past it fails at once.
		left := max(0, fa-off)
		r = io.MultiReader(io.LimitReader(r, left), failReader{f})
	}
	if sa := f.stallAfter.Load(); sa > 0 {
		left := max(0, sa-off)
		r = io.MultiReader(io.LimitReader(r, left), stallReader{ctx})
	}
	return fakeReader{io.NopCloser(r), ver}, nil
}

// info describes content d as the fake's server does: fakeInfo, made
// weak or without checksums as asked.
func (f *fakeEP) info(p string, d []byte) endpoint.Info {
	in := fakeInfo(p, d)
	if f.weak.Load() {
		in.ETag, in.Strong = fmt.Sprintf("%x-%x", in.ModTime.Unix(), in.Size), false
	}
	if f.noSums.Load() {
		in.Checksums = nil
	}
	return in
}

// fakeInfo describes content d as a server would: its ETag is the
// content's adler32 with the size, so replicas of the same bytes share
// it and different bytes of one size do not.
func fakeInfo(p string, d []byte) endpoint.Info {
	sums, _, _ := httpx.Sums(bytes.NewReader(d), httpx.Adler32)
	// The tag holds the adler32: it changes with the bytes (strong).
	return endpoint.Info{Name: path.Base(p), Size: int64(len(d)), ModTime: time.Unix(1700000000, 0),
		ETag: fmt.Sprintf("%x-%s", len(d), sums[httpx.Adler32]), Strong: true, Checksums: sums}
}

// fakeReader is what the fake's Open returns: it says which version of
// the file it reads (endpoint.Versioned).
type fakeReader struct {
	io.ReadCloser
	ver endpoint.Info
}

func (r fakeReader) Version() endpoint.Info { return r.ver }

// stallReader is a server that stopped sending (kill -STOP): a Read
// waits until the reader's context ends.
type stallReader struct{ ctx context.Context }

func (s stallReader) Read([]byte) (int, error) {
	<-s.ctx.Done()
	return 0, fmt.Errorf("fake: stalled: %w: %w", context.Cause(s.ctx), endpoint.ErrUnavailable)
}

// failReader is a connection that breaks; it runs the fake's onBreak
// first (a test's way to change the server at that moment).
type failReader struct{ f *fakeEP }

func (r failReader) Read([]byte) (int, error) {
	if fn := r.f.onBreak.Swap(nil); fn != nil {
		(*fn)()
	}
	return 0, fmt.Errorf("fake %s: connection reset: %w", r.f.name, endpoint.ErrUnavailable)
}

func (f *fakeEP) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	f.puts.Add(1)
	if err := f.check(ctx); err != nil {
		return err
	}
	d, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("fake: %w: %w", err, endpoint.ErrUnavailable)
	}
	f.put(p, d)
	return nil
}

func (f *fakeEP) Delete(ctx context.Context, p string) error {
	f.deletes.Add(1)
	if err := f.check(ctx); err != nil {
		return err
	}
	if err, _ := f.deleteErr.Load().(error); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[p]; !ok {
		return fmt.Errorf("fake %s: delete %q: %w", f.name, p, endpoint.ErrNotFound)
	}
	delete(f.files, p)
	return nil
}

func (f *fakeEP) Mkdir(ctx context.Context, p string) error {
	if err := f.check(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for d := p; d != "/"; d = path.Dir(d) {
		f.dirs[d] = true
	}
	return nil
}

// Close counts: the federator closes an endpoint it no longer uses.
func (f *fakeEP) Close() error {
	f.closes.Add(1)
	return nil
}

func (f *fakeEP) Probe(ctx context.Context) error {
	f.probes.Add(1)
	return f.check(ctx)
}

func quiet() *slog.Logger {
	if os.Getenv("FEDLOG") != "" {
		return slog.Default()
	}
	return slog.New(slog.DiscardHandler)
}

// testFed is a federator over fakes behind an httptest server.
type testFed struct {
	*Federator
	srv   *httptest.Server
	fakes map[string]*fakeEP
}

// startFed parses yamlText (a federation: section body is not enough; give
// the whole file), builds fakes by endpoint name and serves the federator.
func startFed(t testing.TB, yamlText string, fakes ...*fakeEP) *testFed {
	t.Helper()
	cfg, err := config.Parse([]byte(yamlText))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	byName := map[string]*fakeEP{}
	for _, f := range fakes {
		byName[f.name] = f
	}
	newEP := func(ctx context.Context, ec config.Endpoint, log *slog.Logger) (endpoint.Endpoint, error) {
		f, ok := byName[ec.Name]
		if !ok {
			return DefaultNewEndpoint(ctx, ec, log)
		}
		return f.asEndpoint(), nil
	}
	fed, err := New(t.Context(), *cfg.Federation, Options{Log: quiet(), NewEndpoint: newEP})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(fed.Handler())
	t.Cleanup(func() {
		srv.Close()
		fed.Close()
	})
	return &testFed{Federator: fed, srv: srv, fakes: byName}
}

// noFollow is a client that shows redirects instead of following them.
var noFollow = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

func (tf *testFed) do(t *testing.T, method, p string, hdr http.Header, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, tf.srv.URL+p, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, p, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, p, err)
	}
	return resp, string(b)
}

// eventually polls cond every 10ms until it holds or within passes.
func (tf *testFed) state(name string) string {
	for _, e := range tf.Endpoints() {
		if e.Name == name {
			return e.State
		}
	}
	return "absent"
}

// cfgYAML builds a config with the given federation lines and endpoints
// (name, extra lines). Probes are slow unless the caller sets health.
func cfgYAML(fedLines string, eps ...string) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nfederation:\n")
	for _, l := range strings.Split(strings.TrimSpace(fedLines), "\n") {
		if l != "" {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("  endpoints:\n")
	for _, e := range eps {
		lines := strings.Split(strings.TrimSpace(e), "\n")
		b.WriteString("    - " + lines[0] + "\n")
		for _, l := range lines[1:] {
			b.WriteString("      " + strings.TrimSpace(l) + "\n")
		}
	}
	return b.String()
}
