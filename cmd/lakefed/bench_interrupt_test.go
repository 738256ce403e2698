package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/testenv"
)

// TestBenchInterrupted: a bench run is in the store from its start
// (status running: show and export work while it runs); interrupted
// (SIGINT cancels the command's context) it is kept as interrupted with
// the samples it took, and its runs/<tag>/ directory on the target is
// gone. Before, the interruption cancelled the store's own writes too
// ("store: create schema ...: context canceled") and nothing was kept.
func TestBenchInterrupted(t *testing.T) {
	_, dir, h := startStorage(t, nil)
	var opens atomic.Int64 // ranged GETs: the open test's operations
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
			opens.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	db := filepath.Join(t.TempDir(), "bench.db")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	var out bytes.Buffer // the run's stdout; read once done has answered
	go func() {
		done <- benchMain(ctx, &out, []string{"open", "--db", db, "--speed", "10", "--jobs", "4",
			"--ramp-every", "60s", "--hold", "600s", "--files", "10", srv.URL + "/"})
	}()
	if !testenv.Within(30*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("bench open ended before it was interrupted: %v", err)
		default:
		}
		return opens.Load() >= 10
	}) {
		t.Fatalf("bench open made %d opens in 30s", opens.Load())
	}

	// While it runs.
	id := onlyRunID(t, db)
	for _, args := range [][]string{{"show", "--db", db, id}, {"export", "--db", db, "--format", "json", id}} {
		var b bytes.Buffer
		if err := benchMain(t.Context(), &b, args); err != nil {
			t.Fatalf("bench %s during the run: %v", args[0], err)
		}
		if !strings.Contains(b.String(), "running") {
			t.Errorf("bench %s during the run lacks status running:\n%s", args[0], b.String())
		}
	}

	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "interrupted") || strings.Contains(err.Error(), "store") {
			t.Errorf("interrupted bench open = %v, want an interruption error not from the store", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("bench open did not stop within 30s of its interruption")
	}

	st, err := results.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, _ := strconv.ParseInt(id, 10, 64)
	run, err := st.Get(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := st.Samples(t.Context(), n, results.SampleFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != results.StatusInterrupted || len(samples) == 0 || run.Ended.IsZero() {
		t.Errorf("stored run: status %q, %d samples, ended %v; want interrupted, >0 samples, ended", run.Status, len(samples), run.Ended)
	}
	var b bytes.Buffer
	if err := benchMain(t.Context(), &b, []string{"show", "--db", db, id}); err != nil || !strings.Contains(b.String(), "interrupted") {
		t.Errorf("bench show after the interruption = %v:\n%s", err, b.String())
	}
	ents, err := os.ReadDir(filepath.Join(dir, "lakefed-bench", "runs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("the interrupted run left lakefed-bench/runs/%s on the target", e.Name())
	}
}

// onlyRunID returns the ID of the one run in the store at db.
func onlyRunID(t *testing.T, db string) string {
	t.Helper()
	var b bytes.Buffer
	if err := benchMain(t.Context(), &b, []string{"list", "--db", db, "--json"}); err != nil {
		t.Fatalf("bench list during the run: %v", err)
	}
	var runs []results.Run
	if err := json.Unmarshal(b.Bytes(), &runs); err != nil || len(runs) != 1 {
		t.Fatalf("bench list during the run = %s (%v), want one run", b.String(), err)
	}
	return strconv.FormatInt(runs[0].ID, 10)
}
