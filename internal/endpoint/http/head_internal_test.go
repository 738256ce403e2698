package http

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// failingTransport fails every request: what a HEAD on the endpoint's own
// connections must never reach.
type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("the Transport was used")
}

// headServer answers HEAD of any path as a 7-byte file, each answer
// waiting for gate (when set), and counts its connections.
type headServer struct {
	srv     *httptest.Server
	gate    chan struct{}
	in      atomic.Int32
	conns   atomic.Int32
	closing atomic.Bool // answer with Connection: close
}

func startHeadServer(t *testing.T) *headServer {
	hs := &headServer{}
	hs.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.in.Add(1)
		if hs.gate != nil {
			<-hs.gate
		}
		h := w.Header()
		h.Set("Content-Length", "7")
		h.Set("Last-Modified", "Tue, 14 Nov 2023 22:13:20 GMT")
		h.Set("Content-Type", "application/octet-stream")
		if hs.closing.Load() {
			h.Set("Connection", "close")
		}
		hs.in.Add(-1)
	}))
	hs.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			hs.conns.Add(1)
		}
	}
	hs.srv.Start()
	t.Cleanup(hs.srv.Close)
	return hs
}

func newHeadEndpoint(t *testing.T, u string) *Endpoint {
	ep, err := New(context.Background(), endpoint.Config{Name: "t", URL: u}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	ep.client.Transport = failingTransport{}
	return ep
}

// TestHeadOwnConnections: a Stat's HEAD goes on the endpoint's own
// keep-alive connections, not through the Transport: concurrent ones
// each on a connection, reused after; a connection the server closed
// while idle costs the caller nothing; one the answer asked to close is
// not reused.
func TestHeadOwnConnections(t *testing.T) {
	const n = 6
	hs := startHeadServer(t)
	hs.gate = make(chan struct{})
	ep := newHeadEndpoint(t, hs.srv.URL)
	ctx := context.Background()
	errs := make(chan error, n)
	for range n {
		go func() { _, err := ep.Stat(ctx, "/f"); errs <- err }()
	}
	testenv.Eventually(t, 10*time.Second, "every HEAD at the server at once", func() bool { return hs.in.Load() == n })
	close(hs.gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Stat = %v", err)
		}
	}
	stat := func(what string) {
		t.Helper()
		if in, err := ep.Stat(ctx, "/f"); err != nil || in.Size != 7 || in.IsDir {
			t.Fatalf("Stat %s = %+v, %v; want a 7-byte file", what, in, err)
		}
	}
	for range 3 * n {
		stat("one at a time")
	}
	if got := hs.conns.Load(); got != n {
		t.Errorf("connections = %d, want the %d of the concurrent HEADs, reused", got, n)
	}

	hs.srv.CloseClientConnections()
	stat("after the server closed the idle connections")
	if got := hs.conns.Load(); got != n+1 {
		t.Errorf("connections = %d, want %d (one new)", got, n+1)
	}

	hs.closing.Store(true)
	stat("answered with Connection: close")
	hs.closing.Store(false)
	before := hs.conns.Load()
	stat("after a Connection: close")
	stat("again")
	if got := hs.conns.Load(); got != before+1 {
		t.Errorf("connections = %d, want %d (the closed one not reused, the new one kept)", got, before+1)
	}
}

// TestHeadViaTransport: HEADs that must keep the Transport's rules (TLS,
// a proxy) go through it.
func TestHeadViaTransport(t *testing.T) {
	hs := startHeadServer(t)
	ep := newHeadEndpoint(t, hs.srv.URL)
	ep.headDirect = false
	if _, err := ep.Stat(context.Background(), "/f"); err == nil {
		t.Error("Stat through the failing Transport succeeded: the HEAD did not go through it")
	}
	proxied := func(*http.Request) (*url.URL, error) { return &url.URL{Scheme: "http", Host: "proxy:3128"}, nil }
	for _, tc := range []struct {
		name  string
		base  string
		proxy func(*http.Request) (*url.URL, error)
		want  bool
	}{
		{"plain", "http://storage.example.org/", nil, true},
		{"tls", "https://storage.example.org/", nil, false},
		{"proxied", "http://storage.example.org/", proxied, false},
	} {
		u, _ := url.Parse(tc.base)
		if got := headDirect(&http.Transport{Proxy: tc.proxy}, u); got != tc.want {
			t.Errorf("headDirect(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
