package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleRunsAsShipped runs examples/federation.yaml with "lakefed
// serve" as the README says, only with free ports and a temporary
// directory in place of 127.0.0.1:8080, :9001-9003 and /tmp/lakefed:
// nothing made by hand first, every site in the process, no dead
// upstream. A cp, an ls and a GET go through it, and a file under
// /scratch lands on site-c.
func TestExampleRunsAsShipped(t *testing.T) {
	data, err := os.ReadFile("../../examples/federation.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "lakefed") // does not exist: create_root makes it
	text := strings.ReplaceAll(string(data), "/tmp/lakefed", root)
	for _, port := range []string{"127.0.0.1:8080", "127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"} {
		if !strings.Contains(text, port) {
			t.Fatalf("the example no longer uses %s: update this test", port)
		}
		text = strings.ReplaceAll(text, port, deadAddr(t))
	}
	cfg := filepath.Join(dir, "federation.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	fed := "http://" + startServe(t, dir, "--config", cfg)
	src := filepath.Join(dir, "src.txt")
	want := randomFile(t, dir, "src.txt", 5000, 7)

	mustRun(t, "cp", src, fed+"/docs/a.txt")
	mustRun(t, "cp", src, fed+"/scratch/s.txt")
	sameFile(t, filepath.Join(root, "site-a", "docs", "a.txt"), want)
	sameFile(t, filepath.Join(root, "site-c", "s.txt"), want)
	if r := mustRun(t, "ls", fed+"/docs/"); r.stdout != "a.txt\n" {
		t.Errorf("ls /docs/ = %q, want a.txt", r.stdout)
	}
	out := filepath.Join(dir, "back.txt")
	mustRun(t, "cp", fed+"/scratch/s.txt", out)
	sameFile(t, out, want)
	resp, err := http.Get(fed + "/docs/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /docs/a.txt (redirects followed) = %s", resp.Status)
	}
}
