package xrootd

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCloseDropsConnectionsAndUploads(t *testing.T) {
	ns := newFakeNS()
	tmp := t.TempDir()
	s := New(ns, Options{Log: slog.New(slog.DiscardHandler), TempDir: tmp})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background(), ln) }()

	r := dialRaw(t, ln.Addr().String())
	fh := r.open("/up", 0x0028)
	params := make([]byte, 16)
	binary.BigEndian.PutUint32(params, fh)
	if st, _ := r.answer(r.request(3019, params, []byte("not yet closed"))); st != 0 {
		t.Fatal("write failed")
	}
	if got := s.Stats().Connections; got != 1 {
		t.Errorf("Stats().Connections = %d, want 1", got)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Close = %v, want nil", err)
	}
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("client read after Close: %v, want EOF", err)
	}
	if _, ok := ns.get("/up"); ok {
		t.Error("an upload cut by Close is visible")
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("upload files left after Close: %v", left)
	}
	if err := s.Serve(context.Background(), ln); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Close = %v, want ErrServerClosed", err)
	}
}

func TestServeEndsWithContext(t *testing.T) {
	s := New(newFakeNS(), Options{Log: slog.New(slog.DiscardHandler)})
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	r := dialRaw(t, ln.Addr().String())
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after its context ended = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return when its context ended")
	}
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.c.Read(make([]byte, 1)); err == nil {
		t.Error("connection still open after the context ended")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	ns := newFakeNS()
	ns.set("/f", []byte("data"))
	s, addr := startDoor(t, ns, Options{Registerer: reg})
	r := dialRaw(t, addr)
	r.answer(r.request(3017, nil, []byte("/missing")))
	fh := r.open("/f", 0x10)
	r.answer(r.request(3013, fhParams(fh, 0, 100), nil))

	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[name] = m.GetCounter().GetValue()
		}
	}
	for name, v := range map[string]float64{
		"lakefed_xroot_errors_total{class=notfound}":    1,
		"lakefed_xroot_errors_total{class=unavailable}": 0,
		"lakefed_xroot_opens_total":                     1,
		"lakefed_xroot_redirects_total":                 0,
		"lakefed_xroot_read_bytes_total":                4,
	} {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("metric %s = %v (exported %v), want %v", name, g, ok, v)
		}
	}
	if st := s.Stats(); st.Opens != 1 || st.ReadBytes != 4 || st.Errors[classNotFound] != 1 {
		t.Errorf("Stats() = %+v", st)
	}
}

func ExampleNew() {
	var ns Namespace = newFakeNS() // the federator or the cache
	door := New(ns, Options{OutageWait: 3 * time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	go door.Serve(context.Background(), ln) // xrdcp root://127.0.0.1:PORT//path ...
	defer door.Close()
	_ = door.Stats().Redirects
}
