package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestServePprof: the opt-in profiling listener answers pprof requests and
// stops when its context ends.
func TestServePprof(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		servePprof(ctx, ln, slog.New(slog.DiscardHandler))
		close(done)
	}()
	resp, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "test") {
		t.Errorf("GET /debug/pprof/cmdline = %d %q, want 200 and the test binary's command line", resp.StatusCode, b)
	}
	cancel()
	<-done
	if _, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/"); err == nil {
		t.Error("pprof still answers after cancel")
	}
}
