package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeReloadRestartNeeded: a reload (POST /api/reload, then SIGHUP)
// of a file whose listen address changed applies the new endpoint list,
// keeps serving on the old port and says the listen change takes effect
// on restart, in its answer and in the log.
func TestServeReloadRestartNeeded(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fed.yaml")
	const eps = "federation:\n  endpoints:\n    - {name: a, url: 'http://127.0.0.1:1/'}\n"
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\n"+eps), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lakefedBin, "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "LAKEFED_BENCH_DB="+filepath.Join(dir, "bench.db"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logLines := make(chan string, 100)
	go func() {
		defer close(logLines)
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			logLines <- sc.Text()
		}
	}()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	addr := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "federator http://"); ok {
			addr, _, _ = strings.Cut(rest, "/")
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if addr == "" {
		t.Fatal("serve printed no federator address")
	}

	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:1\n"+eps+"    - {name: b, url: 'http://127.0.0.1:2/'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "listen changed from 127.0.0.1:0 to 127.0.0.1:1: takes effect on restart"
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/reload", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ans struct {
		Status    string `json:"status"`
		Endpoints []struct {
			Name string `json:"name"`
		} `json:"endpoints"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("POST /api/reload = %d, %v", resp.StatusCode, err)
	}
	if !strings.Contains(ans.Status, want) || len(ans.Endpoints) != 2 {
		t.Errorf("reload answer = %+v, want status with %q and 2 endpoints", ans, want)
	}

	// The old port still serves, with the new endpoint list.
	resp, err = http.Get("http://" + addr + "/api/endpoints")
	if err != nil {
		t.Fatalf("the old address stopped serving: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"name": "b"`) {
		t.Errorf("/api/endpoints after reload = %s, want endpoint b", b)
	}

	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-logLines:
			if !ok {
				t.Fatal("serve exited without logging the SIGHUP reload")
			}
			if strings.Contains(l, "signal=SIGHUP") && strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no log line with %q within 30s of SIGHUP", want)
		}
	}
}
