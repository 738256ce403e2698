package xroot

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go-hep.org/x/hep/xrootd"
	"go-hep.org/x/hep/xrootd/xrdfs"
	"go-hep.org/x/hep/xrootd/xrdproto"
	"go-hep.org/x/hep/xrootd/xrdproto/stat"

	"github.com/lakefed/lakefed/internal/testenv"
)

// gatedHandler is a go-hep server handler whose kXR_stat waits for gate
// (when set) and counts the stats in progress.
type gatedHandler struct {
	xrootd.Handler
	gate    chan struct{}
	in, max atomic.Int32
}

func (h *gatedHandler) Stat(sid [16]byte, req *stat.Request) (xrdproto.Marshaler, xrdproto.ResponseStatus) {
	n := h.in.Add(1)
	for m := h.max.Load(); n > m && !h.max.CompareAndSwap(m, n); m = h.max.Load() {
	}
	if h.gate != nil {
		<-h.gate
	}
	h.in.Add(-1)
	return stat.DefaultResponse{EntryStat: xrdfs.EntryStat{HasStatInfo: true, EntrySize: 7, Mtime: 1700000000}}, xrdproto.Ok
}

// countingListener counts the connections it accepts and can close them
// all, as a server that drops its idle clients does.
type countingListener struct {
	net.Listener
	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *countingListener) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *countingListener) cutAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

// startCounted serves h with go-hep's server behind a countingListener.
func startCounted(t *testing.T, h xrootd.Handler) (string, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	srv := xrootd.NewServer(h, nil)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(cl) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()); <-done })
	return ln.Addr().String(), cl
}

// TestStatConcurrentOwnConnections: concurrent stats are at the server at
// the same time, each on a connection of its own (xrootd answers one
// connection's requests one after the other), and later stats reuse
// those connections rather than dial and log in again.
func TestStatConcurrentOwnConnections(t *testing.T) {
	const n = 8
	h := &gatedHandler{Handler: xrootd.Default(), gate: make(chan struct{})}
	addr, cl := startCounted(t, h)
	e := newEndpoint(t, "root://"+addr+"//", 5*time.Second)
	ctx := context.Background()
	errs := make(chan error, n)
	for range n {
		go func() { _, err := e.Stat(ctx, "/f"); errs <- err }()
	}
	testenv.Eventually(t, 10*time.Second, "every stat at the server at once", func() bool { return h.in.Load() == n })
	close(h.gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Stat = %v", err)
		}
	}
	if got := cl.accepted(); got != n {
		t.Errorf("%d concurrent stats made %d connections, want %d", n, got, n)
	}
	for i := range 3 * n {
		if in, err := e.Stat(ctx, "/f"); err != nil || in.Size != 7 {
			t.Fatalf("Stat %d = %+v, %v; want size 7", i, in, err)
		}
	}
	if got := cl.accepted(); got != n {
		t.Errorf("after %d more stats, one at a time: %d connections, want the %d pooled ones reused", 3*n, got, n)
	}
}

// TestStatIdleClosedByServer: a pooled connection the server closed while
// it was idle costs the caller nothing: the stat goes again on a new one.
func TestStatIdleClosedByServer(t *testing.T) {
	h := &gatedHandler{Handler: xrootd.Default()}
	addr, cl := startCounted(t, h)
	e := newEndpoint(t, "root://"+addr+"//", 5*time.Second)
	ctx := context.Background()
	if _, err := e.Stat(ctx, "/f"); err != nil {
		t.Fatalf("Stat = %v", err)
	}
	cl.cutAll()
	if in, err := e.Stat(ctx, "/f"); err != nil || in.Size != 7 {
		t.Fatalf("Stat after the server closed the idle connection = %+v, %v; want size 7", in, err)
	}
	if got := cl.accepted(); got != 2 {
		t.Errorf("connections = %d, want 2 (the cut one, then a new one)", got)
	}
}

// TestStatRedirected: a redirector answers kXR_stat with kXR_redirect;
// the stat goes through go-hep, which follows it, and so do later calls.
func TestStatRedirected(t *testing.T) {
	x := startXRootD(t)
	x.seed(t, "f.bin", randomData(1234, 5))
	f := &rawFake{mode: "redirect", redirect: x.endpoint(t).addr}
	e := newEndpoint(t, "root://"+startRawFake(t, f)+"//base", 5*time.Second)
	in, err := e.Stat(context.Background(), "/f.bin")
	if err != nil || in.Size != 1234 {
		t.Fatalf("Stat through a redirect = %+v, %v; want size 1234", in, err)
	}
	if !e.noDirect.Load() {
		t.Error("after a redirected stat the endpoint still asks directly")
	}
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     xrdfs.EntryStat
		bad      bool
	}{
		{"xrootd", "2049 1234 16 1700000000\x00", xrdfs.EntryStat{HasStatInfo: true, ID: 2049, EntrySize: 1234, Flags: 16, Mtime: 1700000000}, false},
		{"more fields", "1 5 2 17 18 19 0755 u g\x00", xrdfs.EntryStat{HasStatInfo: true, ID: 1, EntrySize: 5, Flags: 2, Mtime: 17}, false},
		{"no NUL", "1 5 0 17", xrdfs.EntryStat{HasStatInfo: true, ID: 1, EntrySize: 5, Mtime: 17}, false},
		{"short", "1 5 0\x00", xrdfs.EntryStat{}, true},
		{"empty", "", xrdfs.EntryStat{}, true},
		{"not a number", "1 x 0 17\x00", xrdfs.EntryStat{}, true},
		{"negative size", "1 -5 0 17\x00", xrdfs.EntryStat{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.in))
			if (err != nil) != tc.bad || got != tc.want {
				t.Errorf("parseStat(%q) = %+v, %v; want %+v, bad=%v", tc.in, got, err, tc.want, tc.bad)
			}
		})
	}
}

// TestStatIdleExpires: connections idle longer than the idle timeout are
// closed by the pool's timer, with no call to notice them (an endpoint a
// reload replaced is never called again).
func TestStatIdleExpires(t *testing.T) {
	const n = 3
	h := &gatedHandler{Handler: xrootd.Default(), gate: make(chan struct{})}
	addr, cl := startCounted(t, h)
	e := newEndpoint(t, "root://"+addr+"//", 5*time.Second)
	e.pool.idle.IdleTimeout = 20 * time.Millisecond
	errs := make(chan error, n)
	for range n {
		go func() { _, err := e.Stat(context.Background(), "/f"); errs <- err }()
	}
	testenv.Eventually(t, 10*time.Second, "every stat at the server", func() bool { return h.in.Load() == n })
	close(h.gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Stat = %v", err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the idle connections closed", func() bool { return e.pool.idle.Idle() == 0 })
	if _, err := e.Stat(context.Background(), "/f"); err != nil {
		t.Fatalf("Stat after the idle connections expired = %v", err)
	}
	if got := cl.accepted(); got != n+1 {
		t.Errorf("connections = %d, want %d (a new one after the expiry)", got, n+1)
	}
}
