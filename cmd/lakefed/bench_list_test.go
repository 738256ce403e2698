package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lakefed/lakefed/internal/results"
)

// TestBenchListHidesFunctional: the scheduled tests' runs (thousands a
// day, same store) do not bury the manual runs: bench list shows the
// manual ones by default, --kind functional or --all the rest.
func TestBenchListHidesFunctional(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "bench.db")
	st, err := results.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{"open", results.KindFunctional, results.KindFunctional, "io", results.KindFunctional}
	for _, k := range kinds {
		if _, err := st.CreateRun(ctx, &results.Run{Kind: k, Target: "http://a/", Site: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	tests := []struct {
		name string
		args []string
		want []string // kinds, newest first
	}{
		{"default: manual runs", nil, []string{"io", "open"}},
		{"kind functional", []string{"--kind", "functional"}, []string{"functional", "functional", "functional"}},
		{"all", []string{"--all"}, []string{"functional", "io", "functional", "functional", "open"}},
		{"kind open", []string{"--kind", "open"}, []string{"open"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRun(t, append([]string{"bench", "list", "--db", db, "--json"}, tt.args...)...)
			var runs []results.Run
			if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
				t.Fatalf("bench list --json: %v\n%s", err, r.stdout)
			}
			var got []string
			for _, run := range runs {
				got = append(got, run.Kind)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("bench list %v = %v, want %v", tt.args, got, tt.want)
			}
		})
	}
	if r := lakefed(t, "bench", "list", "--db", db, "--all", "--kind", "open"); r.code != exitUsage {
		t.Errorf("bench list --all --kind open: exit %d, want %d", r.code, exitUsage)
	}
}
