package results

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// backend makes empty databases of one engine for the store suite.
type backend struct {
	name  string
	newDB func(t *testing.T) string
}

// eachBackend runs fn against SQLite and against a real PostgreSQL
// (started once for the test): one store suite for both engines.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, backend{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "bench.db") }})
	})
	t.Run("postgres", func(t *testing.T) {
		pg := testenv.StartPostgres(t)
		fn(t, backend{"postgres", func(t *testing.T) string { return pg.NewDatabase(t) }})
	})
}

// open opens a new empty database of b's engine.
func (b backend) open(t *testing.T) *Store {
	t.Helper()
	st, err := Open(context.Background(), b.newDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestSchema: a new database has the three tables with the columns the
// queries use and the indexes the listings and sample walks rely on, at
// the current schema version, and opening it again changes nothing; a
// SQLite one is in WAL mode.
func TestSchema(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.newDB(t)
		for range 2 { // the second Open finds the schema in place
			st, err := Open(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
		}
		st, err := Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		samples := []string{"run_id", "t", "kind", "job", "value", "bytes", "ok", "err", "node"}
		if st.d.pg {
			samples = append([]string{"seq"}, samples...)
		}
		wantCols := map[string][]string{
			"runs": {"id", "kind", "target", "site", "label", "params", "started", "ended", "status",
				"classification", "reasons", "summary", "error"},
			"steps": {"run_id", "idx", "t_start", "t_end", "jobs", "expected", "observed", "ops", "failures",
				"fail_frac", "mean", "p50", "p90", "p99", "io_wait", "sustained"},
			"samples": samples,
		}
		columns := `SELECT name FROM pragma_table_info(?)`
		indexes := `SELECT COUNT(*) FROM sqlite_master WHERE type='index' AND name=?`
		if st.d.pg {
			columns = `SELECT column_name FROM information_schema.columns WHERE table_name=? ORDER BY ordinal_position`
			indexes = `SELECT COUNT(*) FROM pg_indexes WHERE indexname=?`
		}
		for table, want := range wantCols {
			rows, err := st.db.QueryContext(ctx, st.d.q(columns), table)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
				got = append(got, n)
			}
			rows.Close()
			if !slices.Equal(got, want) {
				t.Errorf("columns of %s = %v, want %v", table, got, want)
			}
		}
		for _, idx := range []string{"runs_site", "runs_kind", "samples_run"} {
			var n int
			if err := st.db.QueryRowContext(ctx, st.d.q(indexes), idx).Scan(&n); err != nil || n != 1 {
				t.Errorf("index %s: count %d, %v; want 1", idx, n, err)
			}
		}
		if v := versionOf(t, st); v != schemaVersion {
			t.Errorf("schema version = %d; want %d", v, schemaVersion)
		}
		if st.d.pg {
			return
		}
		// WAL keeps the dashboard's reads from blocking a run's writes.
		var mode string
		if err := st.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("journal_mode = %q, %v; want wal", mode, err)
		}
	})
}

// versionOf is the schema version st's database records.
func versionOf(t *testing.T, st *Store) int {
	t.Helper()
	tx, err := st.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	v, err := st.d.version(context.Background(), tx)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// seed stores runs of the given kinds at the given sites, oldest first,
// each finished, and returns their IDs.
func seed(t *testing.T, st *Store, runs ...Run) []int64 {
	t.Helper()
	ctx := context.Background()
	var ids []int64
	for i := range runs {
		r := runs[i]
		id, err := st.CreateRun(ctx, &r)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.FinishRun(ctx, id, Finish{Status: StatusDone, Classification: "ok"}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func runIDs(runs []Run) []int64 {
	var ids []int64
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestList: every Filter field selects what it says, newest first, and
// ExceptKind leaves out the scheduled tests' runs (bench list's default).
func TestList(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		ids := seed(t, st,
			Run{Kind: "open", Target: "http://a/", Site: "a"},
			Run{Kind: KindFunctional, Target: "http://a/", Site: "a"},
			Run{Kind: "read", Target: "http://b/", Site: "b"},
			Run{Kind: KindFunctional, Target: "http://b/", Site: "b"},
			Run{Kind: "open", Target: "http://b/", Site: "b"},
		)
		tests := []struct {
			name string
			f    Filter
			want []int64
		}{
			{"all", Filter{}, []int64{ids[4], ids[3], ids[2], ids[1], ids[0]}},
			{"kind", Filter{Kind: "open"}, []int64{ids[4], ids[0]}},
			{"site", Filter{Site: "b"}, []int64{ids[4], ids[3], ids[2]}},
			{"target", Filter{Target: "http://a/"}, []int64{ids[1], ids[0]}},
			{"before", Filter{Before: ids[2]}, []int64{ids[1], ids[0]}},
			{"limit", Filter{Limit: 2}, []int64{ids[4], ids[3]}},
			{"manual only", Filter{ExceptKind: KindFunctional}, []int64{ids[4], ids[2], ids[0]}},
			{"manual at a site", Filter{ExceptKind: KindFunctional, Site: "a"}, []int64{ids[0]}},
			{"functional", Filter{Kind: KindFunctional}, []int64{ids[3], ids[1]}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				runs, err := st.List(ctx, tt.f)
				if err != nil {
					t.Fatal(err)
				}
				if got := runIDs(runs); !slices.Equal(got, tt.want) {
					t.Errorf("List(%+v) = %v, want %v", tt.f, got, tt.want)
				}
			})
		}
	})
}

// TestShowRoundTrip: what bench show and compare read back (Get, Steps)
// is what was written, and an unknown run is ErrNotFound.
func TestShowRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		started := time.Unix(1_700_000_000, 123)
		r := Run{Kind: "open", Target: "http://a/", Site: "a", Label: "after upgrade",
			Params: json.RawMessage(`{"jobs":50}`), Started: started}
		id, err := st.CreateRun(ctx, &r)
		if err != nil {
			t.Fatal(err)
		}
		steps := []Step{
			{Index: 0, Start: 0, End: 30, Jobs: 5, Expected: 10, Observed: 9.5, Ops: 285, Failures: 3, FailFrac: 3.0 / 285,
				Mean: 0.01, P50: 0.009, P90: 0.02, P99: 0.05},
			{Index: 1, Start: 30, End: 90, Jobs: 10, Expected: 20, Observed: 19, Ops: 1140, IOWait: 0.1, Sustained: 10},
		}
		if err := st.SetSteps(ctx, id, steps); err != nil {
			t.Fatal(err)
		}
		ended := started.Add(90 * time.Second)
		if err := st.FinishRun(ctx, id, Finish{Status: StatusDone, Classification: "to debug",
			Reasons: []string{"rate under 10 Hz"}, Summary: map[string]float64{"observed_rate": 19}, Ended: ended}); err != nil {
			t.Fatal(err)
		}
		got, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != "open" || got.Label != "after upgrade" || string(got.Params) != `{"jobs":50}` ||
			!got.Started.Equal(started) || !got.Ended.Equal(ended) || got.Classification != "to debug" ||
			!slices.Equal(got.Reasons, []string{"rate under 10 Hz"}) || string(got.Summary) != `{"observed_rate":19}` {
			t.Errorf("Get = %+v", got)
		}
		gotSteps, err := st.Steps(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gotSteps, steps) {
			t.Errorf("Steps = %+v, want %+v", gotSteps, steps)
		}
		// SetSteps replaces: a run re-aggregated keeps one set.
		if err := st.SetSteps(ctx, id, steps[:1]); err != nil {
			t.Fatal(err)
		}
		if gotSteps, _ := st.Steps(ctx, id); len(gotSteps) != 1 {
			t.Errorf("Steps after SetSteps(1) = %d, want 1", len(gotSteps))
		}
		if _, err := st.Get(ctx, id+1); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
		}
		if err := st.FinishRun(ctx, id+1, Finish{Status: StatusDone}); !errors.Is(err, ErrNotFound) {
			t.Errorf("FinishRun(unknown) = %v, want ErrNotFound", err)
		}
	})
}

// TestExportSamples: the sample walks bench export and the dashboard use
// return every sample in time order, filter by kind, bound by Limit and
// thin series; Delete takes the samples with the run.
func TestExportSamples(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		id, err := st.CreateRun(ctx, &Run{Kind: "root", Target: "u", Site: "s"})
		if err != nil {
			t.Fatal(err)
		}
		// More than one insert batch, written out of time order.
		n := sampleBatch + 10
		var samples []Sample
		for i := range n {
			k := "root-read"
			if i%2 == 0 {
				k = "root-open"
			}
			samples = append(samples, Sample{T: float64(n - i), Kind: k, Job: i % 3, Value: 0.001, Bytes: 10, OK: i%7 != 0, Err: ""})
		}
		if err := st.AddSamples(ctx, id, samples); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			f    SampleFilter
			want int
		}{
			{"all", SampleFilter{}, n},
			{"kind", SampleFilter{Kind: "root-open"}, (n + 1) / 2},
			{"limit", SampleFilter{Limit: 7}, 7},
			{"unknown kind", SampleFilter{Kind: "nope"}, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := st.Samples(ctx, id, tt.f)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != tt.want {
					t.Errorf("Samples(%+v) = %d, want %d", tt.f, len(got), tt.want)
				}
				if !slices.IsSortedFunc(got, func(a, b Sample) int { return int(a.T - b.T) }) {
					t.Errorf("Samples(%+v) not in time order", tt.f)
				}
			})
		}
		stop := errors.New("stop")
		calls := 0
		if err := st.EachSample(ctx, id, SampleFilter{}, func(Sample) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
			t.Errorf("EachSample with an error from fn = %v after %d calls; want it back after 1", err, calls)
		}
		ts, vs, err := st.SampleSeries(ctx, id, "root-read", "", 100)
		if err != nil || len(ts) == 0 || len(ts) > 100 || len(ts) != len(vs) {
			t.Errorf("SampleSeries(max 100) = %d times, %d values, %v", len(ts), len(vs), err)
		}
		if err := st.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.Samples(ctx, id, SampleFilter{}); len(got) != 0 {
			t.Errorf("Samples after Delete = %d, want 0", len(got))
		}
		if err := st.Delete(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Delete twice = %v, want ErrNotFound", err)
		}
	})
}

// TestConcurrentWriters: goroutines writing runs at once — through one
// Store and through Stores of their own on the same file, as bench and
// serve's scheduled tests do — lose nothing and fail no write (WAL and
// the busy timeout serialise them).
func TestConcurrentWriters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		p := b.newDB(t)
		shared, err := Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		defer shared.Close()
		const writers, runsEach, samplesEach = 6, 5, 200
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				st := shared
				if w%2 == 1 { // half the writers open their own connection pool
					own, err := Open(ctx, p)
					if err != nil {
						errs <- err
						return
					}
					defer own.Close()
					st = own
				}
				errs <- writeRuns(ctx, st, fmt.Sprintf("w%d", w), runsEach, samplesEach)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("writer: %v", err)
			}
		}
		runs, err := shared.List(ctx, Filter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != writers*runsEach {
			t.Fatalf("runs = %d, want %d", len(runs), writers*runsEach)
		}
		for _, r := range runs {
			sm, err := shared.Samples(ctx, r.ID, SampleFilter{})
			if err != nil || len(sm) != samplesEach || r.Status != StatusDone {
				t.Errorf("run %d (%s): %d samples, status %s, %v; want %d, done", r.ID, r.Site, len(sm), r.Status, err, samplesEach)
			}
		}
	})
}

func writeRuns(ctx context.Context, st *Store, site string, runs, samples int) error {
	for range runs {
		id, err := st.CreateRun(ctx, &Run{Kind: "open", Target: "u", Site: site})
		if err != nil {
			return err
		}
		sm := make([]Sample, samples)
		for i := range sm {
			sm[i] = Sample{T: float64(i), Kind: "open", Value: 0.01, OK: true}
		}
		if err := st.AddSamples(ctx, id, sm); err != nil {
			return err
		}
		if err := st.SetSteps(ctx, id, []Step{{Jobs: 1}}); err != nil {
			return err
		}
		if err := st.FinishRun(ctx, id, Finish{Status: StatusDone}); err != nil {
			return err
		}
	}
	return nil
}

// TestPrune: Prune deletes the finished runs of one kind older than the
// cut, with their samples and steps, and keeps newer runs, runs of other
// kinds and runs still running.
func TestPrune(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		now := time.Now()
		old := now.Add(-8 * 24 * time.Hour)
		ids := seed(t, st,
			Run{Kind: KindFunctional, Target: "u", Site: "a", Started: old},
			Run{Kind: "open", Target: "u", Site: "a", Started: old},
			Run{Kind: KindFunctional, Target: "u", Site: "a", Started: now},
		)
		running, err := st.CreateRun(ctx, &Run{Kind: KindFunctional, Target: "u", Site: "a", Started: old})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range append(ids, running) {
			if err := st.AddSamples(ctx, id, []Sample{{Kind: "stat", OK: true}}); err != nil {
				t.Fatal(err)
			}
			if err := st.SetSteps(ctx, id, []Step{{Jobs: 1}}); err != nil {
				t.Fatal(err)
			}
		}
		n, err := st.Prune(ctx, KindFunctional, now.Add(-7*24*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v; want 1", n, err)
		}
		runs, _ := st.List(ctx, Filter{})
		if got, want := runIDs(runs), []int64{running, ids[2], ids[1]}; !slices.Equal(got, want) {
			t.Errorf("runs after Prune = %v, want %v", got, want)
		}
		var orphans int
		if err := st.db.QueryRowContext(ctx, st.d.q(`SELECT (SELECT COUNT(*) FROM samples WHERE run_id=?) +
			(SELECT COUNT(*) FROM steps WHERE run_id=?)`), ids[0], ids[0]).Scan(&orphans); err != nil || orphans != 0 {
			t.Errorf("samples and steps of the pruned run = %d, %v; want 0", orphans, err)
		}
	})
}

// TestClaimPeriod: of several stores on one database claiming the same
// period at once, exactly one gets it; the next period is claimed again,
// and other work's periods are apart.
func TestClaimPeriod(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.newDB(t)
		var stores []*Store
		for range 3 {
			st, err := Open(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			stores = append(stores, st)
		}
		const period = time.Hour // all claims below fall in one period
		claim := func(name string) int {
			var won sync.WaitGroup
			var mu sync.Mutex
			n := 0
			for _, st := range stores {
				won.Go(func() {
					got, err := st.ClaimPeriod(ctx, name, period)
					if err != nil {
						t.Error(err)
					}
					if got {
						mu.Lock()
						n++
						mu.Unlock()
					}
				})
			}
			won.Wait()
			return n
		}
		if n := claim("tests"); n != 1 {
			t.Errorf("3 stores claimed one period %d times, want once", n)
		}
		if n := claim("tests"); n != 0 {
			t.Errorf("a period claimed again %d times, want 0", n)
		}
		if n := claim("other"); n != 1 {
			t.Errorf("another work's period claimed %d times, want once", n)
		}
		if got, err := stores[0].ClaimPeriod(ctx, "short", time.Millisecond); err != nil || !got {
			t.Fatalf("ClaimPeriod(1ms) = %v, %v", got, err)
		}
		testenv.Eventually(t, 5*time.Second, "the next 1 ms period is claimed", func() bool {
			got, err := stores[1].ClaimPeriod(ctx, "short", time.Millisecond)
			return err == nil && got
		})
	})
}
