package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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
