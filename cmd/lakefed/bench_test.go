package main

import (
	"encoding/json"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBenchCLI drives the bench command end to end against the storage
// role: prepare, two short open runs, io, root, then list, show,
// compare and export from the store.
func TestBenchCLI(t *testing.T) {
	url, _, _ := startStorage(t, nil)
	db := filepath.Join(t.TempDir(), "bench.db")

	if code := run([]string{"bench"}, io.Discard); code != exitUsage {
		t.Errorf("bench without subcommand: exit %d, want %d", code, exitUsage)
	}
	if code := run([]string{"bench", "nope"}, io.Discard); code != exitUsage {
		t.Errorf("bench nope: exit %d, want %d", code, exitUsage)
	}
	if code := run([]string{"bench", "show", "--db", db, "999"}, io.Discard); code != exitNotFound {
		t.Errorf("bench show 999: exit %d, want %d", code, exitNotFound)
	}
	if code := run([]string{"bench", "open", "--speed", "0", url}, io.Discard); code != exitUsage {
		t.Errorf("bench open --speed 0: exit %d, want %d", code, exitUsage)
	}
	if code := run([]string{"bench", "prepare", "--db", db, "--open-files", "10", "--read-files", "2",
		"--read-size", "1MiB", "--root-events", "2000", url}, io.Discard); code != exitOK {
		t.Fatalf("bench prepare: exit %d", code)
	}

	var ids []string
	for range 2 {
		r := mustRun(t, "bench", "open", "--db", db, "--json", "--speed", "100", "--jobs", "8", "--ramp-step", "4",
			"--ramp-every", "10s", "--hold", "10s", "--files", "10", url)
		var out struct {
			ID      int64 `json:"id"`
			Verdict struct {
				Class string `json:"class"`
			} `json:"verdict"`
			Summary struct {
				Opens    int64 `json:"opens"`
				Failures int64 `json:"failures"`
			} `json:"summary"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("bench open --json: %v\n%s", err, r.stdout)
		}
		if out.ID == 0 || out.Summary.Opens == 0 || out.Summary.Failures != 0 || out.Verdict.Class != "ok" {
			t.Errorf("bench open --json = %+v", out)
		}
		ids = append(ids, strconv.FormatInt(out.ID, 10))
	}
	r := mustRun(t, "bench", "read", "--db", db, "--reuse", "--speed", "100", "--jobs", "2", "--hold", "10s",
		"--ramp-every", "10s", "--block", "64KiB", "--vector", "4", url)
	for _, want := range []string{"classification", "waiting for I/O", "sustained"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("bench read output lacks %q:\n%s", want, r.stdout)
		}
	}
	// Flags after the URL, as users of xrdcp and curl write them.
	r = mustRun(t, "bench", "io", url, "--db", db, "--size", "2MiB")
	if !strings.Contains(r.stdout, "verified        true") {
		t.Errorf("bench io output:\n%s", r.stdout)
	}
	r = mustRun(t, "bench", "root", "--db", db, url)
	if strings.Count(r.stdout, "reads by groot") != 2 || !strings.Contains(r.stdout, "multi-range requests") {
		t.Errorf("bench root output (want a run without and one with prefetch):\n%s", r.stdout)
	}

	r = mustRun(t, "bench", "list", "--db", db)
	if n := strings.Count(r.stdout, "\n"); n != 1+6 {
		t.Errorf("bench list: %d lines, want header + 6 runs:\n%s", n, r.stdout)
	}
	r = mustRun(t, "bench", "list", "--db", db, "--kind", "open", "--json")
	var runs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil || len(runs) != 2 {
		t.Errorf("bench list --kind open --json: %v, %d runs", err, len(runs))
	}
	r = mustRun(t, "bench", "show", "--db", db, ids[0])
	if !strings.Contains(r.stdout, "open rate") || !strings.Contains(r.stdout, "expected Hz") {
		t.Errorf("bench show:\n%s", r.stdout)
	}
	r = mustRun(t, "bench", "compare", "--db", db, ids[0], ids[1])
	if !strings.Contains(r.stdout, "observed_rate") {
		t.Errorf("bench compare:\n%s", r.stdout)
	}
	r = mustRun(t, "bench", "export", ids[1], "--db", db, "--format", "csv")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) < 2 || !strings.HasPrefix(lines[0], "run_id,") {
		t.Errorf("bench export csv: %d lines, first %q", len(lines), lines[0])
	}
	r = mustRun(t, "bench", "export", "--db", db, "--format", "json", ids[1])
	var doc struct {
		Samples []any `json:"samples"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Samples) == 0 {
		t.Errorf("bench export json: %v, %d samples", err, len(doc.Samples))
	}
	if r := lakefed(t, "bench", "export", "--db", db, "--format", "xml", ids[1]); r.code != exitUsage {
		t.Errorf("bench export --format xml: exit %d, want %d", r.code, exitUsage)
	}
}
