package xroot

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go-hep.org/x/hep/xrootd"
	"go-hep.org/x/hep/xrootd/xrdfs"
	"go-hep.org/x/hep/xrootd/xrdproto"
	"go-hep.org/x/hep/xrootd/xrdproto/stat"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// failTimeout is the endpoint Timeout of the failure tests.
const failTimeout = 300 * time.Millisecond

// hangBound catches a missing timeout; it is not a speed measurement.
const hangBound = 10 * time.Second

// allOps runs every method of e once and returns their errors by name.
func allOps(e *Endpoint) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"Stat": func(ctx context.Context) error { _, err := e.Stat(ctx, "/f"); return err },
		"List": func(ctx context.Context) error { _, err := e.List(ctx, "/d"); return err },
		"Open": func(ctx context.Context) error {
			rc, err := e.Open(ctx, "/f", 0, -1)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.ReadAll(rc)
			return err
		},
		"Put":      func(ctx context.Context) error { return e.Put(ctx, "/f", strings.NewReader("x"), 1) },
		"Delete":   func(ctx context.Context) error { return e.Delete(ctx, "/f") },
		"Mkdir":    func(ctx context.Context) error { return e.Mkdir(ctx, "/d") },
		"Probe":    func(ctx context.Context) error { return e.Probe(ctx) },
		"Checksum": func(ctx context.Context) error { _, err := e.Checksum(ctx, "/f", "adler32"); return err },
		"ReadV":    func(ctx context.Context) error { _, err := e.ReadV(ctx, "/f", []Range{{0, 1}}); return err },
	}
}

func checkUnavailable(t *testing.T, e *Endpoint) {
	t.Helper()
	ops := allOps(e)
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		err := within(t, hangBound, func() error { return ops[n](context.Background()) })
		if !errors.Is(err, endpoint.ErrUnavailable) || errors.Is(err, endpoint.ErrNotFound) || errors.Is(err, endpoint.ErrRefused) {
			t.Errorf("%s = %v, want only ErrUnavailable", n, err)
		}
	}
}

func TestServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	checkUnavailable(t, newEndpoint(t, "root://"+addr+"//base", failTimeout))
}

// TestServerSilent: a server that accepts TCP and never answers (not even
// the handshake) gives ErrUnavailable, not a hang.
func TestServerSilent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	checkUnavailable(t, newEndpoint(t, "root://"+ln.Addr().String()+"//base", failTimeout))
}

// fakeHandler is a go-hep XRootD server handler that records the paths
// it is sent and can hang on one of them.
type fakeHandler struct {
	xrootd.Handler
	hangOn  string
	release chan struct{}

	mu    sync.Mutex // guards paths
	paths []string
}

func (h *fakeHandler) Stat(sid [16]byte, req *stat.Request) (xrdproto.Marshaler, xrdproto.ResponseStatus) {
	h.mu.Lock()
	h.paths = append(h.paths, req.Path)
	h.mu.Unlock()
	if req.Path == h.hangOn {
		<-h.release
	}
	return stat.DefaultResponse{EntryStat: xrdfs.EntryStat{HasStatInfo: true, EntrySize: 42, Mtime: 1700000000}}, xrdproto.Ok
}

func (h *fakeHandler) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.paths)
}

// startFake serves h on loopback with go-hep's server.
func startFake(t *testing.T, h *fakeHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := xrootd.NewServer(h, nil)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		close(h.release)
		_ = srv.Shutdown(context.Background())
		<-done
	})
	return ln.Addr().String()
}

func TestPathsSentClean(t *testing.T) {
	h := &fakeHandler{Handler: xrootd.Default(), release: make(chan struct{})}
	addr := startFake(t, h)
	e := newEndpoint(t, "root://"+addr+"//base/", 5*time.Second)
	ctx := context.Background()
	for _, p := range []string{"/a/b.root?authz=secret&x=1", "//a/./b.root", "/a/b.root?"} {
		if in, err := e.Stat(ctx, p); err != nil || in.Size != 42 || in.Name != "b.root" {
			t.Errorf("Stat(%q) = %+v, %v, want size 42 named b.root", p, in, err)
		}
	}
	for _, p := range []string{"/a/../../etc/passwd", "/..", "/a/..%2f..", "/a\x00b"} {
		if _, err := e.Stat(ctx, p); !errors.Is(err, endpoint.ErrRefused) {
			t.Errorf("Stat(%q) = %v, want ErrRefused", p, err)
		}
	}
	want := []string{"/base/a/b.root", "/base/a/b.root", "/base/a/b.root"}
	if got := h.seen(); !slices.Equal(got, want) {
		t.Errorf("server saw %q, want %q (no CGI, no '..')", got, want)
	}
}

// TestRequestHangs: the server logs in, then never answers one request.
// The call gives ErrUnavailable, the session is dropped, and the next call
// works on a new one.
func TestRequestHangs(t *testing.T) {
	h := &fakeHandler{Handler: xrootd.Default(), hangOn: "/slow", release: make(chan struct{})}
	addr := startFake(t, h)
	e := newEndpoint(t, "root://"+addr+"//", failTimeout)
	ctx := context.Background()
	if _, err := e.Stat(ctx, "/fast"); err != nil {
		t.Fatalf("Stat(/fast) = %v", err)
	}
	err := within(t, hangBound, func() error { _, err := e.Stat(ctx, "/slow"); return err })
	if !errors.Is(err, endpoint.ErrUnavailable) {
		t.Errorf("Stat(/slow) = %v, want ErrUnavailable", err)
	}
	err = within(t, hangBound, func() error { _, err := e.Stat(ctx, "/fast"); return err })
	if err != nil {
		t.Errorf("Stat(/fast) after a hung request = %v, want nil (a new session)", err)
	}
}

// TestCallerCancel: a caller that gives up does not break the session for
// the others.
func TestCallerCancel(t *testing.T) {
	h := &fakeHandler{Handler: xrootd.Default(), release: make(chan struct{})}
	addr := startFake(t, h)
	e := newEndpoint(t, "root://"+addr+"//", 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Stat(ctx, "/x"); !errors.Is(err, context.Canceled) || !errors.Is(err, endpoint.ErrUnavailable) {
		t.Errorf("Stat(cancelled ctx) = %v, want ErrUnavailable and context.Canceled", err)
	}
	for i := range 20 {
		if _, err := e.Stat(context.Background(), "/x"); err != nil {
			t.Fatalf("Stat %d after a cancelled call = %v", i, err)
		}
	}
}
