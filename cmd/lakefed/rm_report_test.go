package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRmReport: rm through a federator of a file whose only replica is on
// a read-only endpoint says that no replica was deleted, which was
// refused and why, in its one line.
func TestRmReport(t *testing.T) {
	baseA, _, _ := startStorage(t, nil)
	baseC, dirC, _ := startStorage(t, nil)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fed.yaml")
	yaml := "listen: 127.0.0.1:0\nfederation:\n  endpoints:\n" +
		"    - {name: site-a, url: '" + baseA + "', writable: true}\n" +
		"    - {name: site-c, url: '" + baseC + "'}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	randomFile(t, dirC, "f.txt", 10, 3)
	fed := "http://" + startServe(t, dir, cfg)
	r := lakefed(t, "rm", fed+"/f.txt")
	const want = "no replica was deleted; refused: site-c (read-only in the federation)"
	if r.code != exitRefused || !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("rm: exit %d, stderr %q; want %d and one line saying %q", r.code, r.stderr, exitRefused, want)
	}
	if _, err := os.Stat(filepath.Join(dirC, "f.txt")); err != nil {
		t.Errorf("the read-only replica: %v", err)
	}
}
