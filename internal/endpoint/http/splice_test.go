package http_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/endpointtest"
	httpep "github.com/lakefed/lakefed/internal/endpoint/http"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/testenv"
)

// spliceEP opens every read as a caller that splices does
// (endpoint.WithSplice): large ranges go on connections of their own.
type spliceEP struct{ *httpep.Endpoint }

func (e spliceEP) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	return e.Endpoint.Open(endpoint.WithSplice(ctx), p, off, n)
}

// The reads of a caller that splices pass the suite every kind passes.
func TestStorageSpliceWanted(t *testing.T) {
	base := startStorage(t, storage.Config{})
	endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
		return endpointtest.Target{Endpoint: spliceEP{newEP(t, endpoint.Config{URL: base})}, Caps: storageCaps}
	})
}

// spliceAll moves what is left of sp's range to dst, as the root://
// door does, and returns the bytes moved.
func spliceAll(sp endpoint.Splicer, dst *net.TCPConn) (int64, error) {
	var done int64
	for {
		n, err := sp.Ready()
		if err == io.EOF {
			return done, nil
		}
		if err != nil {
			return done, err
		}
		m, err := sp.SpliceTo(dst, n)
		done += m
		if err != nil {
			return done, err
		}
	}
}

// Large ranges of a plain-HTTP server, read by a caller that splices,
// come on a connection of their own whose bytes splice to a socket, the
// same bytes as Read gives; small ranges, TLS servers and callers that
// do not splice read through the shared pool (ErrNoSplice).
func TestSplice(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 5<<20+123)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ep := newEP(t, endpoint.Config{URL: startStorage(t, storage.Config{Root: dir})})
	ctx := endpoint.WithSplice(t.Context())
	for _, rg := range [][2]int64{{0, -1}, {1000, -1}, {7, 2 << 20}, {int64(len(data)) - (1 << 20), 1 << 20}} {
		rc, err := ep.Open(ctx, "/f", rg[0], rg[1])
		if err != nil {
			t.Fatalf("Open(%v) = %v", rg, err)
		}
		sp, ok := rc.(endpoint.Splicer)
		if !ok {
			t.Fatalf("Open(%v): reader %T is no endpoint.Splicer", rg, rc)
		}
		want := data[rg[0]:]
		if rg[1] >= 0 {
			want = want[:rg[1]]
		}
		// A little through Read first, the rest spliced.
		head := make([]byte, 100)
		if _, err := io.ReadFull(rc, head); err != nil {
			t.Fatalf("Open(%v): Read: %v", rg, err)
		}
		src, dst := testenv.TCPPair(t)
		got := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(dst); got <- b }()
		n, err := spliceAll(sp, src)
		src.Close()
		rc.Close()
		if err != nil || n != int64(len(want)-100) {
			t.Fatalf("Open(%v): spliced %d bytes, %v; want %d", rg, n, err, len(want)-100)
		}
		if b := <-got; !bytes.Equal(append(head, b...), want) {
			t.Fatalf("Open(%v): spliced bytes differ from the file", rg)
		}
	}
	small, err := ep.Open(ctx, "/f", 10, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if _, err := small.(endpoint.Splicer).Ready(); !errors.Is(err, endpoint.ErrNoSplice) {
		t.Errorf("Ready of a 4 KiB range = %v, want ErrNoSplice (shared connections)", err)
	}
	plain, err := ep.Open(t.Context(), "/f", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.(endpoint.Splicer).Ready(); !errors.Is(err, endpoint.ErrNoSplice) {
		t.Errorf("Ready without WithSplice = %v, want ErrNoSplice", err)
	}

	tl := testenv.NewTLS(t)
	sdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(sdir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sep := newEP(t, endpoint.Config{URL: startStorage(t, storage.Config{Root: sdir, TLSCert: tl.CertFile, TLSKey: tl.KeyFile}), CAFile: tl.CAFile})
	rc, err := sep.Open(ctx, "/f", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := rc.(endpoint.Splicer).Ready(); !errors.Is(err, endpoint.ErrNoSplice) {
		t.Errorf("Ready over https = %v, want ErrNoSplice (TLS bytes are decrypted in user space)", err)
	}
	if b, err := io.ReadAll(rc); err != nil || !bytes.Equal(b, data) {
		t.Errorf("Read over https: %d bytes, %v", len(b), err)
	}
}

// A connection of its own follows redirects as the shared ones do, and
// a body cut short is an error of Ready, as of Read.
func TestSpliceRedirectAndShortBody(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 300_000)
	short := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/f", http.StatusFound)
		case "/f":
			http.ServeContent(w, r, "f", time.Time{}, bytes.NewReader(data))
		case "/short":
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Write(data[:1<<20])
			w.(http.Flusher).Flush()
			<-short // then the handler returns: net/http closes the connection
		}
	}))
	t.Cleanup(srv.Close)
	ep := newEP(t, endpoint.Config{URL: srv.URL})
	ctx := endpoint.WithSplice(t.Context())
	rc, err := ep.Open(ctx, "/moved", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := testenv.TCPPair(t)
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(dst); got <- b }()
	n, err := spliceAll(rc.(endpoint.Splicer), src)
	src.Close()
	rc.Close()
	if b := <-got; err != nil || n != int64(len(data)) || !bytes.Equal(b, data) {
		t.Fatalf("redirected read: spliced %d bytes, %v; want the %d bytes of the file", n, err, len(data))
	}

	rc, err = ep.Open(ctx, "/short", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	src, dst = testenv.TCPPair(t)
	go func() { _, _ = io.Copy(io.Discard, dst) }()
	close(short)
	n, err = spliceAll(rc.(endpoint.Splicer), src)
	if !errors.Is(err, endpoint.ErrUnavailable) || !errors.Is(err, io.ErrUnexpectedEOF) || n != 1<<20 {
		t.Errorf("body cut after 1 MiB: spliced %d bytes, %v; want 1 MiB, then ErrUnexpectedEOF in ErrUnavailable", n, err)
	}
}

// Ready waits for the server in the network poller, and the read's
// context ends the wait.
func TestSpliceReadyEndsWithContext(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(4<<20))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	ep := newEP(t, endpoint.Config{URL: srv.URL})
	ctx, cancel := context.WithCancel(endpoint.WithSplice(t.Context()))
	rc, err := ep.Open(ctx, "/f", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	done := make(chan error, 1)
	go func() {
		_, err := rc.(endpoint.Splicer).Ready()
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Ready returned %v before the server sent anything", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, endpoint.ErrUnavailable) {
			t.Errorf("Ready after the context ended = %v, want ErrUnavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ready still waiting 10 s after its context ended")
	}
}
