package results

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestMigrateCanceled: a database written before runs could be
// "interrupted" has its "canceled" runs renamed when opened, once, and
// keeps every other row as it was.
func TestMigrateCanceled(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "old.db")
	old, err := sql.Open("sqlite", "file:"+p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, schema); err != nil {
		t.Fatal(err)
	}
	for _, status := range []string{"done", "canceled", "failed"} {
		if _, err := old.ExecContext(ctx, `INSERT INTO runs(kind, target, site, started, status) VALUES ('open','u','s',1,?)`, status); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()

	st, err := Open(ctx, p)
	if err != nil {
		t.Fatalf("Open(old database) = %v", err)
	}
	defer st.Close()
	want := map[int64]string{1: StatusDone, 2: StatusInterrupted, 3: StatusFailed}
	for id, w := range want {
		r, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != w {
			t.Errorf("run %d status = %q, want %q", id, r.Status, w)
		}
	}
	var v int
	if err := st.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Errorf("user_version = %d, %v; want %d", v, err, schemaVersion)
	}
}

// TestRunLifecycle: a run is visible as running from CreateRun on, and
// FinishRun records its outcome, replacing the parameters only when
// given.
func TestRunLifecycle(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tests := []struct {
		name       string
		finish     Finish
		wantParams string
	}{
		{"interrupted with params", Finish{Status: StatusInterrupted, Params: json.RawMessage(`{"jobs":50}`)}, `{"jobs":50}`},
		{"done keeps params", Finish{Status: StatusDone}, `{"jobs":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := st.CreateRun(ctx, &Run{Kind: "open", Target: "u", Site: "s", Params: json.RawMessage(`{"jobs":1}`)})
			if err != nil {
				t.Fatal(err)
			}
			if r, err := st.Get(ctx, id); err != nil || r.Status != StatusRunning {
				t.Fatalf("Get after CreateRun = %+v, %v; want running", r, err)
			}
			if err := st.AddSamples(ctx, id, []Sample{{T: 0.5, Kind: "open", Value: 0.01, OK: true}}); err != nil {
				t.Fatal(err)
			}
			if err := st.FinishRun(ctx, id, tt.finish); err != nil {
				t.Fatal(err)
			}
			r, err := st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tt.finish.Status || string(r.Params) != tt.wantParams || r.Ended.IsZero() {
				t.Errorf("Get = status %q params %s ended %v; want %q, %s, set", r.Status, r.Params, r.Ended, tt.finish.Status, tt.wantParams)
			}
			if sm, err := st.Samples(ctx, id, SampleFilter{}); err != nil || len(sm) != 1 {
				t.Errorf("Samples = %d, %v; want 1", len(sm), err)
			}
		})
	}
}
