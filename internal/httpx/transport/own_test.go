package transport

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// A connection of its own to a near server has a fixed receive buffer
// (ownReadBuffer, doubled by the kernel), not one autotuning lets grow
// to tcp_rmem's maximum under a reader that keeps the stream open.
func TestOwnConnReadBuffer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 4<<20))
	}))
	t.Cleanup(srv.Close)
	tr, err := New(endpoint.Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(endpoint.WithSplice(t.Context()), http.MethodGet, srv.URL+"/f", nil)
	if !Owns(tr, req) {
		t.Fatal("a whole-file GET to splice does not go on a connection of its own")
	}
	resp, err := Own(tr, req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	o := resp.Body.(*OwnBody)
	if rtt, ok := roundTrip(o.sock.Conn); !ok || rtt >= nearRTT {
		t.Fatalf("round trip to a loopback server = %v, %v; want under %v", rtt, ok, nearRTT)
	}
	var got int
	sc, _ := o.sock.Conn.SyscallConn()
	if err := sc.Control(func(fd uintptr) { got, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) }); err != nil {
		t.Fatal(err)
	}
	if want := 2 * ownReadBuffer; got != want {
		t.Errorf("SO_RCVBUF of a connection of its own to a near server = %d, want %d", got, want)
	}
}

// TestRoundTripper: an SDK's client over RoundTripper sends a large GET
// whose caller splices on a connection of its own, whose body splices
// exactly its length (Read taking some first); every other request goes
// through the shared transport.
func TestRoundTripper(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 300_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "f", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	tr, err := New(endpoint.Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: RoundTripper(tr)}
	get := func(ctx context.Context, rg string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/f", nil)
		if rg != "" {
			req.Header.Set("Range", rg)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	splice := endpoint.WithSplice(t.Context())
	for _, tc := range []struct {
		name string
		ctx  context.Context
		rg   string
		own  bool
	}{
		{"not spliced", t.Context(), "", false},
		{"small range", splice, "bytes=0-1000", false},
		{"whole", splice, "", true},
		{"to the end", splice, "bytes=5-", true},
	} {
		resp := get(tc.ctx, tc.rg)
		o, own := resp.Body.(*OwnBody)
		if own != tc.own {
			t.Errorf("%s: body %T, want own=%v", tc.name, resp.Body, tc.own)
		}
		if !own {
			continue
		}
		want := data
		if tc.rg != "" {
			want = data[5:]
		}
		head := make([]byte, 100)
		if _, err := io.ReadFull(o, head); err != nil {
			t.Fatal(err)
		}
		src, dst := testenv.TCPPair(t)
		out := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(dst); out <- b }()
		var n int64
		for {
			k, err := o.Ready()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: Ready after %d bytes: %v", tc.name, n, err)
			}
			m, err := o.SpliceTo(src, k+1000) // never past the body
			n += m
			if err != nil {
				t.Fatalf("%s: SpliceTo after %d bytes: %v", tc.name, n, err)
			}
		}
		src.Close()
		if got := append(head, <-out...); !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes read and spliced, want the %d of the answer", tc.name, len(got), len(want))
		}
		if m, err := o.Read(make([]byte, 10)); m != 0 || err != io.EOF {
			t.Errorf("%s: Read after the body = %d, %v; want io.EOF", tc.name, m, err)
		}
	}
}
