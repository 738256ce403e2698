package results

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// oldDatabase makes a database of schema version v as an older lakefed
// left it (the base tables, and the migrations up to v), with a run of
// each status and a sample, and returns its path or URL.
func oldDatabase(t *testing.T, b backend, v int) string {
	t.Helper()
	ctx := context.Background()
	path := b.newDB(t)
	db, d, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	must := func(q string, args ...any) {
		t.Helper()
		if _, err := tx.ExecContext(ctx, d.q(q), args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	must(d.base())
	for _, status := range []string{"done", "canceled", "failed"} {
		must(`INSERT INTO runs(kind, target, site, started, status) VALUES ('open','u','s',1,?)`, status)
	}
	must(`INSERT INTO samples(run_id, t, kind, job, value, bytes, ok) VALUES (1, 0.5, 'open', 0, 0.01, 0, ?)`, true)
	for i := range v {
		must(migrations[i])
	}
	if err := d.setVersion(ctx, tx, v); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMigrate: a database of every older schema version is brought up to
// date when opened, once, keeping every row (the "canceled" runs of
// version 0 renamed "interrupted"; the samples of before version 2 name
// no node); one of a newer version is refused with a message that says
// so, and left as it was.
func TestMigrate(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		for v := range schemaVersion {
			t.Run(fmt.Sprintf("from %d", v), func(t *testing.T) {
				st, err := Open(ctx, oldDatabase(t, b, v))
				if err != nil {
					t.Fatalf("Open(version %d) = %v", v, err)
				}
				defer st.Close()
				want := map[int64]string{1: StatusDone, 2: StatusInterrupted, 3: StatusFailed}
				for id, w := range want {
					if r, err := st.Get(ctx, id); err != nil || r.Status != w {
						t.Errorf("run %d = %q, %v; want %q", id, r.Status, err, w)
					}
				}
				if sm, err := st.Samples(ctx, 1, SampleFilter{}); err != nil || len(sm) != 1 || !sm[0].OK || sm[0].Node != "" {
					t.Errorf("samples of run 1 = %+v, %v; want the one written, with no node", sm, err)
				}
				if got := versionOf(t, st); got != schemaVersion {
					t.Errorf("schema version after Open = %d, want %d", got, schemaVersion)
				}
			})
		}
		t.Run("newer", func(t *testing.T) {
			path := oldDatabase(t, b, schemaVersion)
			db, d, err := open(path)
			if err != nil {
				t.Fatal(err)
			}
			tx, _ := db.Begin()
			if err := d.setVersion(ctx, tx, schemaVersion+1); err != nil || tx.Commit() != nil {
				t.Fatal(err)
			}
			db.Close()
			st, err := Open(ctx, path)
			if err == nil {
				st.Close()
				t.Fatalf("Open(schema version %d) succeeded; want it refused", schemaVersion+1)
			}
			if !errors.Is(err, ErrNewerSchema) || !strings.Contains(err.Error(), "newer") {
				t.Errorf("Open(newer schema) = %v; want ErrNewerSchema, saying so", err)
			}
		})
	})
}

// TestRunLifecycle: a run is visible as running from CreateRun on, and
// FinishRun records its outcome, replacing the parameters only when
// given.
func TestRunLifecycle(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) { testRunLifecycle(t, b.open(t)) })
}

func testRunLifecycle(t *testing.T, st *Store) {
	ctx := context.Background()
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
