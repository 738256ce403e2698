package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNamespaceFirst: clean namespace paths go straight to the federator;
// the dashboard, unclean paths (which the mux redirects) and "*" go
// through the mux, so answers are what the mux alone gives.
func TestNamespaceFirst(t *testing.T) {
	var got string
	mark := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = name })
	}
	mux := http.NewServeMux()
	mux.Handle("/", mark("mux-fed"))
	mux.Handle("/ui/", mark("ui"))
	mux.Handle("/ui", mark("ui"))
	h := namespaceFirst(mux, mark("fed"))
	tests := []struct{ path, want string }{
		{"/", "fed"},
		{"/data/d000/f00001", "fed"},
		{"/data/dir/", "fed"},
		{"/uix", "fed"},
		{"/ui", "ui"},
		{"/ui/endpoints", "ui"},
		{"/data//f", "redirect"},
		{"/data/./f", "redirect"},
		{"/data/../f", "redirect"},
		{"/data/f/..", "redirect"},
		{"/data/dir//", "redirect"},
	}
	for _, tt := range tests {
		got = ""
		req := httptest.NewRequest(http.MethodGet, "http://fed"+tt.path, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code == http.StatusMovedPermanently || w.Code == http.StatusTemporaryRedirect {
			got = "redirect"
		}
		if got != tt.want {
			t.Errorf("GET %s went to %q (status %d), want %q", tt.path, got, w.Code, tt.want)
		}
	}
}

// TestServePprofFlag: serve --pprof opens the profiling listener beside
// the federator.
func TestServePprofFlag(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "fed.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nfederation:\n  endpoints: [{name: a, url: \"http://127.0.0.1:1/\"}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lakefedBin, "serve", "--config", cfg, "--pprof", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var addr string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "pprof http://"); ok {
			addr, _, _ = strings.Cut(rest, "/")
			break
		}
	}
	if addr == "" {
		t.Fatal("serve --pprof printed no pprof address")
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "serve") {
		t.Errorf("GET /debug/pprof/cmdline = %d %q, want 200 and the serve command line", resp.StatusCode, b)
	}
}
