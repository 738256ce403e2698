package http

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// A connection of its own to a near server has a fixed receive buffer
// (ownReadBuffer, doubled by the kernel), not one autotuning lets grow
// to tcp_rmem's maximum under a reader that keeps the stream open.
func TestOwnConnReadBuffer(t *testing.T) {
	data := strings.Repeat("x", 4<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte(data))
	}))
	t.Cleanup(srv.Close)
	ep, err := New(context.Background(), endpoint.Config{Name: "t", URL: srv.URL}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	rc, err := ep.Open(endpoint.WithSplice(t.Context()), "/f", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	o, ok := rc.(*body).rc.(*ownBody)
	if !ok {
		t.Fatalf("reader %T is not on a connection of its own", rc.(*body).rc)
	}
	if rtt, ok := roundTrip(o.conn); !ok || rtt >= nearRTT {
		t.Fatalf("round trip to a loopback server = %v, %v; want under %v", rtt, ok, nearRTT)
	}
	var got int
	sc, _ := o.conn.SyscallConn()
	if err := sc.Control(func(fd uintptr) { got, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) }); err != nil {
		t.Fatal(err)
	}
	if want := 2 * ownReadBuffer; got != want {
		t.Errorf("SO_RCVBUF of a connection of its own to a near server = %d, want %d", got, want)
	}
}
