package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
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
	for _, want := range []string{"curl -L " + fed + "/demo/", "lakefed cp " + fed + "/demo/events.root", "lakefed ls -l " + fed + "/demo/"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's help lacks %q:\n%s", want, out)
		}
	}
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
