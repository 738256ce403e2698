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
	addr := startServePprof(t)
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

// TestServePprofContention: --pprof-contention makes the block profile
// record (it is empty by default), and needs --pprof.
func TestServePprofContention(t *testing.T) {
	if out, err := exec.Command(lakefedBin, "serve", "--pprof-contention", "x.yaml").CombinedOutput(); err == nil || !strings.Contains(string(out), "--pprof-contention needs --pprof") {
		t.Errorf("serve --pprof-contention without --pprof = %v %q, want a usage error", err, out)
	}
	addr := startServePprof(t, "--pprof-contention")
	// The federator's loops block on timers and channels all the time:
	// some of it must show up.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/debug/pprof/block?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), " @ 0x") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("block profile still empty after 30 s:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startServePprof starts serve with --pprof (and args) and returns the
// profiling listener's address.
func startServePprof(t *testing.T, args ...string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "fed.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nfederation:\n  endpoints: [{name: a, url: \"http://127.0.0.1:1/\"}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, lakefedBin, append([]string{"serve", "--config", cfg, "--pprof", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
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
	return addr
}
