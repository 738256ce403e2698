package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemo runs `lakefed demo` as a user would: waits for the printed
// federator URL, reads a file through it (a 302, then the bytes), sends
// SIGINT and expects a clean exit with the temporary directory gone.
func TestDemo(t *testing.T) {
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lakefedBin, "demo", "--listen", "127.0.0.1:0", "--no-bench")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	fedRE := regexp.MustCompile(`^\s*federator\s+(http://127\.0\.0\.1:\d+)/`)
	dataRE := regexp.MustCompile(`^\s*data\s+(\S+)`)
	var fed, dir string
	var printed []string
	timeout := time.After(time.Minute)
	for fed == "" || dir == "" || !strings.Contains(strings.Join(printed, "\n"), "Ctrl-C") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo exited before it was up; stdout:\n%s\nstderr:\n%s", strings.Join(printed, "\n"), stderr.String())
			}
			printed = append(printed, l)
			if m := fedRE.FindStringSubmatch(l); m != nil {
				fed = m[1]
			}
			if m := dataRE.FindStringSubmatch(l); m != nil {
				dir = m[1]
			}
		case <-timeout:
			t.Fatalf("no federator URL and data directory printed within a minute; stdout:\n%s", strings.Join(printed, "\n"))
		}
	}
	out := strings.Join(printed, "\n")
	for _, want := range []string{"curl -L " + fed + "/demo/", lakefedBin + " cp -f " + fed + "/demo/events.root", lakefedBin + " ls -l " + fed + "/demo/"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's help lacks %q:\n%s", want, out)
		}
	}
	runTryLines(t, printed, tmp)
	if !strings.HasPrefix(dir, tmp) {
		t.Fatalf("data directory %q is not a temporary directory under %s", dir, tmp)
	}

	c := &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := c.Get(fed + "/demo/README.txt")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || loc == "" {
		t.Fatalf("GET /demo/README.txt = %s, Location %q; want a 302", resp.Status, loc)
	}
	resp, err = c.Get(loc)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "lakefed demo") {
		t.Fatalf("GET %s = %s, body %q; want 200 and the README", loc, resp.Status, body)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
wait:
	for {
		select {
		case _, ok := <-lines: // drain stdout until it closes
			if !ok {
				lines = nil
			}
		case err := <-exited:
			if err != nil {
				t.Fatalf("demo after SIGINT: %v (want exit 0); stderr:\n%s", err, stderr.String())
			}
			break wait
		case <-deadline:
			t.Fatal("demo did not exit within 30s of SIGINT")
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after exit, %s: %v; want it removed", dir, err)
	}
}

// runTryLines runs every command the demo printed under "Try:" as a user
// would paste it: by sh, from another directory, with no lakefed on PATH.
// Each must exit 0; the cp must leave its file, and
// running it twice must work too.
func runTryLines(t *testing.T, printed []string, tmp string) {
	t.Helper()
	var try []string
	in := false
	for _, l := range printed {
		switch {
		case strings.TrimSpace(l) == "Try:":
			in = true
		case in && strings.TrimSpace(l) == "":
			in = false
		case in:
			try = append(try, strings.TrimSpace(l))
		}
	}
	if len(try) < 3 {
		t.Fatalf("the demo printed %d commands to try, want 3:\n%s", len(try), strings.Join(printed, "\n"))
	}
	for _, line := range append(try, try...) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir = t.TempDir()
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + tmp, "TMPDIR=" + tmp}
		outb, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s: %v\n%s", line, err, outb)
		}
	}
	if st, err := os.Stat(filepath.Join(tmp, "events.root")); err != nil || st.Size() == 0 {
		t.Errorf("after the printed cp, %s/events.root: %v", tmp, err)
	}
}

// TestDemoCommand: the printed commands name this binary the way that
// runs it.
func TestDemoCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "lakefed")
	other := filepath.Join(dir, "other")
	goRun := filepath.Join(dir, "go-build123", "b001", "exe", "lakefed")
	spaced := filepath.Join(dir, "my bin", "lakefed")
	for _, p := range []string{bin, other, goRun, spaced} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		exe    string
		onPath string
		inRepo bool
		want   string
	}{
		{"on PATH", bin, bin, false, "lakefed"},
		{"another lakefed on PATH", bin, other, true, bin},
		{"nothing on PATH", bin, "", true, bin},
		{"go run from the repository", goRun, "", true, "go run ./cmd/lakefed"},
		{"go run elsewhere", goRun, "", false, goRun},
		{"path with a space", spaced, "", false, "'" + spaced + "'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := demoCommand(tt.exe, tt.onPath, tt.inRepo); got != tt.want {
				t.Errorf("demoCommand(%q, %q, %v) = %q, want %q", tt.exe, tt.onPath, tt.inRepo, got, tt.want)
			}
		})
	}
}

// TestDemoPprofFlag: demo --pprof opens the profiling listener of the
// whole demo (its sites and federator run in the one process).
func TestDemoPprofFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lakefedBin, "demo", "--listen", "127.0.0.1:0", "--no-bench", "--pprof", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	var addr string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "pprof http://"); ok {
			addr, _, _ = strings.Cut(rest, "/")
			break
		}
	}
	if addr == "" {
		t.Fatal("demo --pprof printed no pprof address")
	}
	go func() { _, _ = io.Copy(io.Discard, out) }() // the demo keeps printing
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "demo") {
		t.Errorf("GET /debug/pprof/cmdline = %d %q, want 200 and the demo command line", resp.StatusCode, b)
	}
}
