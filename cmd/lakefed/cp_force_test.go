package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startServe runs "lakefed serve" with args until the test ends and
// returns the federator's address (host:port), as it prints it.
func startServe(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, lakefedBin, append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LAKEFED_BENCH_DB="+filepath.Join(t.TempDir(), "bench.db"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "federator http://"); ok {
				a, _, _ := strings.Cut(rest, "/")
				addr <- a
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("lakefed serve %q printed no federator address", args)
		}
		return a
	case <-time.After(time.Minute):
		t.Fatalf("lakefed serve %q: no federator address within a minute", args)
	}
	return ""
}

// deadAddr returns a loopback host:port nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// TestCpOneEndpointDown: through a federator whose upstream is dead, the
// destination check of cp cannot be answered. Without -f, cp says which
// command failed and why; with -f it skips the check and uploads (issue
// 11, item 3).
func TestCpOneEndpointDown(t *testing.T) {
	base, siteDir, _ := startStorage(t, nil)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fed.yaml")
	yaml := "listen: 127.0.0.1:0\nfederation:\n  endpoints:\n" +
		"    - {name: site-a, url: '" + base + "', writable: true}\n" +
		"    - {name: global, url: 'lakefed://" + deadAddr(t) + "/', priority: 10}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	fed := "http://" + startServe(t, dir, "--config", cfg)
	src := filepath.Join(dir, "src.txt")
	data := randomFile(t, dir, "src.txt", 1000, 11)

	tests := []struct {
		name       string
		args       []string
		code       int
		wantStderr string // substring
	}{
		{"without -f", []string{"cp", src, fed + "/up/a.txt"}, exitUnavailable,
			"lakefed: cp: cannot tell whether the destination exists: "},
		{"with -f", []string{"cp", "-f", src, fed + "/up/b.txt"}, exitOK, ""},
		{"with -f to a directory", []string{"cp", src, fed + "/up/dir/", "-f"}, exitOK, ""},
		{"message", []string{"cp", src, fed + "/up/a.txt"}, exitUnavailable, "unavailable: global; -f overwrites anyway\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := lakefed(t, tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.wantStderr) {
				t.Fatalf("lakefed %q: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, tt.code, tt.wantStderr)
			}
			if tt.code != exitOK {
				for _, w := range []string{"global", "-f overwrites anyway"} {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr %q does not say %q", r.stderr, w)
					}
				}
				if strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("stderr %q: want one line", r.stderr)
				}
			}
		})
	}
	noFile(t, filepath.Join(siteDir, "up", "a.txt"))
	sameFile(t, filepath.Join(siteDir, "up", "b.txt"), data)
	sameFile(t, filepath.Join(siteDir, "up", "dir", "src.txt"), data)
}
