// Package results keeps every benchmark run of lakefed bench — its
// parameters, its per-step aggregates and every sample — in a database,
// so results have a history instead of living in flat text files, and so
// the dashboard and the scheduled tests can query them: an embedded
// SQLite file (modernc.org/sqlite, no cgo) by default, or PostgreSQL
// (pgx) where a fleet of federators and bench agents write one history.
//
//	st, _ := results.Open(ctx, results.DefaultPath())
//	defer st.Close()
//	id, _ := st.CreateRun(ctx, &results.Run{Kind: "open", Target: u, Site: "site-a"})
//	_ = st.AddSamples(ctx, id, samples)
//	_ = st.FinishRun(ctx, id, results.Finish{Status: results.StatusDone, Classification: "ok"})
//	runs, _ := st.List(ctx, results.Filter{Site: "site-a", Limit: 20})
//
// A run is recorded when it starts (status running), so that it can be
// shown while it runs, and finished as done, interrupted or failed.
//
// A Store may be used by many goroutines at once. A SQLite database is in
// WAL mode, so readers (the dashboard) do not block a run that is writing.
package results

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Run statuses.
const (
	// StatusRunning: the run was created and has not finished (or the
	// process died while it ran).
	StatusRunning = "running"
	// StatusDone: the run finished and its results are complete.
	StatusDone = "done"
	// StatusFailed: the run could not complete (target unreachable, bad
	// file); Error says why.
	StatusFailed = "failed"
	// StatusInterrupted: the run was interrupted (SIGINT) before its
	// end; what it measured up to then is kept.
	StatusInterrupted = "interrupted"
)

// KindFunctional is the kind of the scheduled functional tests' runs
// (package sitetest). They come by the thousand a day, so listings leave
// them out unless asked (Filter.ExceptKind) and they are kept for a
// limited time only (Prune).
const KindFunctional = "functional"

// ErrNotFound is returned for a run ID the store does not hold.
var ErrNotFound = errors.New("store: no such run")

// Run is one execution of one benchmark against one target.
type Run struct {
	// ID is assigned by CreateRun.
	ID int64 `json:"id"`
	// Kind is the benchmark: "io", "open", "read", "root" (or a scheduled
	// test's kind).
	Kind string `json:"kind"`
	// Target is the URL the load went to.
	Target string `json:"target"`
	// Site is the site the run is about: the pinned site (--site) or,
	// without one, the target's host. Per-site history groups by it.
	Site string `json:"site"`
	// Label is a free-form note ("after kernel upgrade"); may be empty.
	Label string `json:"label,omitempty"`
	// Params are the run's parameters as JSON (the benchmark's options).
	Params json.RawMessage `json:"params,omitempty"`
	// Started and Ended bound the run; Ended is zero while it runs.
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Status is one of the Status constants.
	Status string `json:"status"`
	// Classification is "ok", "to debug" or "" (kinds that are not
	// classified); Reasons says why a run is "to debug".
	Classification string   `json:"classification,omitempty"`
	Reasons        []string `json:"reasons,omitempty"`
	// Summary is the benchmark's result as JSON (kind-specific).
	Summary json.RawMessage `json:"summary,omitempty"`
	// Error is why a run failed; empty otherwise.
	Error string `json:"error,omitempty"`
}

// Step is one stage of a ramped test (a number of jobs held for a while),
// aggregated: what the observed-against-expected plots draw.
type Step struct {
	// Index counts steps from 0.
	Index int `json:"index"`
	// Start and End are seconds since the run started.
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	// Jobs is the number of jobs running in the step.
	Jobs int `json:"jobs"`
	// Expected and Observed are operation rates per second (opens/s) or,
	// for read tests, bytes per second.
	Expected float64 `json:"expected"`
	Observed float64 `json:"observed"`
	// Ops and Failures count the operations that started in the step.
	Ops      int64 `json:"ops"`
	Failures int64 `json:"failures"`
	// FailFrac is Failures / Ops (0 when no operations).
	FailFrac float64 `json:"fail_frac"`
	// Mean, P50, P90 and P99 are operation times in seconds.
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	// IOWait is the fraction of the jobs' time spent waiting for I/O
	// (read tests; 0 otherwise).
	IOWait float64 `json:"io_wait"`
	// Sustained is the number of jobs that kept their pace in the step
	// (read tests; 0 otherwise).
	Sustained int `json:"sustained"`
}

// Sample is one operation of a run.
type Sample struct {
	// T is when the operation started, in seconds since the run started.
	T float64 `json:"t"`
	// Kind says what was measured: "open", "read", "write", "root-open",
	// "root-read", ... .
	Kind string `json:"kind"`
	// Job is the job (worker) that did it, from 0.
	Job int `json:"job"`
	// Value is the operation's duration in seconds.
	Value float64 `json:"value"`
	// Bytes is how many bytes it moved.
	Bytes int64 `json:"bytes"`
	// OK is false when the operation failed; Err then says why.
	OK  bool   `json:"ok"`
	Err string `json:"err,omitempty"`
	// Node is the node that ran the job: a bench agent's name; "" for
	// a run from one process.
	Node string `json:"node,omitempty"`
}

// Finish is what FinishRun records at the end of a run.
type Finish struct {
	// Status is StatusDone, StatusInterrupted or StatusFailed.
	Status         string
	Classification string
	Reasons        []string
	Summary        any // marshalled to JSON; nil leaves it empty
	Error          string
	// Ended defaults to now.
	Ended time.Time
	// Params, when not nil, replace the parameters the run was created
	// with (a test fills its defaults once it runs).
	Params json.RawMessage
	// Site, when not "", replaces the site the run was created with: a
	// run through a federator learns the site it tested only as it runs.
	Site string
}

// Filter selects runs for List. Zero fields match everything.
type Filter struct {
	Kind string
	Site string
	// Target matches the target URL exactly.
	Target string
	// ExceptKind leaves out the runs of this kind ("" leaves out none):
	// a listing of manual runs is not buried under KindFunctional ones.
	ExceptKind string
	// Before, when non-zero, keeps runs with ID < Before (paging).
	Before int64
	// Limit bounds the answer; 0 means 100.
	Limit int
}

// SampleFilter selects samples for Samples and EachSample.
type SampleFilter struct {
	// Kind keeps samples of that kind; "" keeps all.
	Kind string
	// Limit bounds Samples' answer; 0 means no bound. EachSample ignores it.
	Limit int
}

// SiteStatus is one row of the dashboard's site table: the latest
// classification of one kind of test at one site, and how the runs there
// were classified over time.
type SiteStatus struct {
	Site string `json:"site"`
	Kind string `json:"kind"`
	// Last is the latest finished run.
	Last Run `json:"last"`
	// OK and ToDebug count the classified runs.
	OK      int `json:"ok"`
	ToDebug int `json:"to_debug"`
}

// Store is an open results database. Safe for concurrent use.
type Store struct {
	db *sql.DB
	d  dialect
}

// DefaultPath is where the results live unless told otherwise:
// $LAKEFED_BENCH_DB, else ~/.local/share/lakefed/bench.db (XDG_DATA_HOME
// respected).
func DefaultPath() string {
	if p := os.Getenv("LAKEFED_BENCH_DB"); p != "" {
		return p
	}
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "."
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(dir, "lakefed", "bench.db")
}

// Open opens the results database path names, creating it when missing
// and bringing its schema up to date: a PostgreSQL URL
// (postgres://user@host:port/db), a SQLite file (created with its
// directory), or ":memory:", a private in-memory store (tests). A
// database whose schema is newer than this binary's is refused.
func Open(ctx context.Context, path string) (*Store, error) {
	db, d, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", Redact(path), err)
	}
	if err := migrate(ctx, db, d); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %s: %w", Redact(path), err)
	}
	return &Store{db: db, d: d}, nil
}

// Redact is path without the password of a URL, for messages.
func Redact(path string) string {
	if !IsURL(path) {
		return path
	}
	if u, err := url.Parse(path); err == nil {
		return u.Redacted()
	}
	return "postgres://..."
}

// schemaVersion is the version of the schema this binary reads and
// writes. The migrations below bring a database of any older version up
// to it, once, in one transaction.
const schemaVersion = 3

// migrations[v] brings a database from version v to v+1.
var migrations = [schemaVersion]string{
	// 0 → 1: the status of interrupted runs was "canceled".
	`UPDATE runs SET status='interrupted' WHERE status='canceled'`,
	// 1 → 2: samples name the node (bench agent) that ran their job.
	`ALTER TABLE samples ADD COLUMN node TEXT NOT NULL DEFAULT ''`,
	// 2 → 3: the periods of scheduled work a process claimed (ClaimPeriod).
	`CREATE TABLE IF NOT EXISTS claims (name TEXT NOT NULL, period BIGINT NOT NULL, PRIMARY KEY (name, period))`,
}

// ErrNewerSchema: the database was written by a newer lakefed.
var ErrNewerSchema = errors.New("the database's schema is newer than this lakefed")

// migrate creates the schema when missing and brings it up to
// schemaVersion, holding the dialect's lock so that processes opening
// one database at once do it once.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // no-op after Commit
	if err := d.lock(ctx, tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, d.base()); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	v, err := d.version(ctx, tx)
	switch {
	case err != nil:
		return err
	case v > schemaVersion:
		return fmt.Errorf("%w: schema version %d, this lakefed reads up to %d; run a newer lakefed, or use another database",
			ErrNewerSchema, v, schemaVersion)
	case v == schemaVersion:
		return nil
	}
	for ; v < schemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate from schema version %d: %w", v, err)
		}
	}
	if err := d.setVersion(ctx, tx, schemaVersion); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// CreateRun records the start of r (Status defaults to running, Started
// to now) and returns its ID, also set in r.ID.
func (s *Store) CreateRun(ctx context.Context, r *Run) (int64, error) {
	if r.Started.IsZero() {
		r.Started = time.Now()
	}
	if r.Status == "" {
		r.Status = StatusRunning
	}
	params := string(r.Params)
	if params == "" {
		params = "{}"
	}
	var id int64
	err := s.db.QueryRowContext(ctx,
		s.d.q(`INSERT INTO runs(kind, target, site, label, params, started, status) VALUES (?,?,?,?,?,?,?) RETURNING id`),
		r.Kind, r.Target, r.Site, r.Label, params, r.Started.UnixNano(), r.Status).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store: create run: %w", err)
	}
	r.ID = id
	return id, nil
}

// FinishRun records the outcome of run id.
func (s *Store) FinishRun(ctx context.Context, id int64, f Finish) error {
	if f.Ended.IsZero() {
		f.Ended = time.Now()
	}
	summary := []byte("{}")
	if f.Summary != nil {
		b, err := json.Marshal(f.Summary)
		if err != nil {
			return fmt.Errorf("store: summary of run %d: %w", id, err)
		}
		summary = b
	}
	reasons, _ := json.Marshal(nonNil(f.Reasons))
	var params *string // nil: keep (COALESCE)
	if f.Params != nil {
		p := string(f.Params)
		params = &p
	}
	res, err := s.db.ExecContext(ctx,
		s.d.q(`UPDATE runs SET ended=?, status=?, classification=?, reasons=?, summary=?, error=?, params=COALESCE(?, params), site=COALESCE(NULLIF(?, ''), site) WHERE id=?`),
		f.Ended.UnixNano(), f.Status, f.Classification, string(reasons), string(summary), f.Error, params, f.Site, id)
	if err != nil {
		return fmt.Errorf("store: finish run %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("finish run %d: %w", id, ErrNotFound)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// sampleBatch is how many samples one transaction inserts: large enough
// that a 10,000-opens/s run costs a few ms of SQLite per second.
const sampleBatch = 5000

// AddSamples appends samples to run id, in transactions of a few
// thousand rows.
func (s *Store) AddSamples(ctx context.Context, id int64, samples []Sample) error {
	for len(samples) > 0 {
		n := min(len(samples), sampleBatch)
		if err := s.addSampleBatch(ctx, id, samples[:n]); err != nil {
			return err
		}
		samples = samples[n:]
	}
	return nil
}

func (s *Store) addSampleBatch(ctx context.Context, id int64, samples []Sample) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: add samples: %w", err)
	}
	defer tx.Rollback() // no-op after Commit
	st, err := tx.PrepareContext(ctx,
		s.d.q(`INSERT INTO samples(run_id, t, kind, job, value, bytes, ok, err, node) VALUES (?,?,?,?,?,?,?,?,?)`))
	if err != nil {
		return fmt.Errorf("store: add samples: %w", err)
	}
	defer st.Close()
	for _, sm := range samples {
		if _, err := st.ExecContext(ctx, id, sm.T, sm.Kind, sm.Job, sm.Value, sm.Bytes, sm.OK, sm.Err, sm.Node); err != nil {
			return fmt.Errorf("store: add samples to run %d: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: add samples to run %d: %w", id, err)
	}
	return nil
}

// SetSteps replaces the steps of run id.
func (s *Store) SetSteps(ctx context.Context, id int64, steps []Step) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: set steps: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.d.q(`DELETE FROM steps WHERE run_id=?`), id); err != nil {
		return fmt.Errorf("store: set steps of run %d: %w", id, err)
	}
	for _, p := range steps {
		if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`),
			id, p.Index, p.Start, p.End, p.Jobs, p.Expected, p.Observed, p.Ops, p.Failures, p.FailFrac,
			p.Mean, p.P50, p.P90, p.P99, p.IOWait, p.Sustained); err != nil {
			return fmt.Errorf("store: set steps of run %d: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: set steps of run %d: %w", id, err)
	}
	return nil
}

const runColumns = `id, kind, target, site, label, params, started, ended, status, classification, reasons, summary, error`

func scanRun(sc interface{ Scan(...any) error }) (Run, error) {
	var (
		r                        Run
		params, reasons, summary string
		started, ended           int64
	)
	if err := sc.Scan(&r.ID, &r.Kind, &r.Target, &r.Site, &r.Label, &params, &started, &ended,
		&r.Status, &r.Classification, &reasons, &summary, &r.Error); err != nil {
		return Run{}, err
	}
	r.Params = json.RawMessage(params)
	r.Summary = json.RawMessage(summary)
	r.Started = time.Unix(0, started)
	if ended != 0 {
		r.Ended = time.Unix(0, ended)
	}
	if err := json.Unmarshal([]byte(reasons), &r.Reasons); err != nil {
		return Run{}, fmt.Errorf("reasons of run %d: %w", r.ID, err)
	}
	if len(r.Reasons) == 0 {
		r.Reasons = nil
	}
	return r, nil
}

// Get returns run id, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (Run, error) {
	row := s.db.QueryRowContext(ctx, s.d.q(`SELECT `+runColumns+` FROM runs WHERE id=?`), id)
	r, err := scanRun(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("store: get run %d: %w", id, err)
	}
	return r, nil
}

// List returns the runs f selects, newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Run, error) {
	var (
		where []string
		args  []any
	)
	if f.Kind != "" {
		where, args = append(where, "kind=?"), append(args, f.Kind)
	}
	if f.Site != "" {
		where, args = append(where, "site=?"), append(args, f.Site)
	}
	if f.Target != "" {
		where, args = append(where, "target=?"), append(args, f.Target)
	}
	if f.ExceptKind != "" {
		where, args = append(where, "kind!=?"), append(args, f.ExceptKind)
	}
	if f.Before > 0 {
		where, args = append(where, "id<?"), append(args, f.Before)
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit)
	return s.queryRuns(ctx, q, args...)
}

func (s *Store) queryRuns(ctx context.Context, q string, args ...any) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, s.d.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list runs: %w", err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	return runs, nil
}

// SiteHistory returns the finished runs of kind ("" for every kind) at
// site, oldest first, at most limit (0: 100) of the newest: the history a
// site's row in the dashboard draws.
func (s *Store) SiteHistory(ctx context.Context, site, kind string, limit int) ([]Run, error) {
	if limit <= 0 {
		limit = 100
	}
	runs, err := s.queryRuns(ctx, `SELECT `+runColumns+` FROM runs
		WHERE site=? AND (?='' OR kind=?) AND status!='running' ORDER BY id DESC LIMIT ?`,
		site, kind, kind, limit)
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	return runs, nil
}

// Sites returns, for every (site, kind) with a finished run, its latest
// run and the count of "ok" and "to debug" runs: the dashboard's site
// table. Sorted by site, then kind.
func (s *Store) Sites(ctx context.Context) ([]SiteStatus, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT site, kind, MAX(id),
		SUM(CASE WHEN classification='ok' THEN 1 ELSE 0 END), SUM(CASE WHEN classification='to debug' THEN 1 ELSE 0 END)
		FROM runs WHERE status!='running' GROUP BY site, kind ORDER BY site, kind`)
	if err != nil {
		return nil, fmt.Errorf("store: sites: %w", err)
	}
	var out []SiteStatus
	var ids []int64
	for rows.Next() {
		var st SiteStatus
		var id int64
		if err := rows.Scan(&st.Site, &st.Kind, &id, &st.OK, &st.ToDebug); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: sites: %w", err)
		}
		out = append(out, st)
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: sites: %w", err)
	}
	for i, id := range ids {
		r, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i].Last = r
	}
	return out, nil
}

// Steps returns the steps of run id in order.
func (s *Store) Steps(ctx context.Context, id int64) ([]Step, error) {
	rows, err := s.db.QueryContext(ctx, s.d.q(`SELECT idx, t_start, t_end, jobs, expected, observed, ops,
		failures, fail_frac, mean, p50, p90, p99, io_wait, sustained FROM steps WHERE run_id=? ORDER BY idx`), id)
	if err != nil {
		return nil, fmt.Errorf("store: steps of run %d: %w", id, err)
	}
	defer rows.Close()
	var out []Step
	for rows.Next() {
		var p Step
		if err := rows.Scan(&p.Index, &p.Start, &p.End, &p.Jobs, &p.Expected, &p.Observed, &p.Ops,
			&p.Failures, &p.FailFrac, &p.Mean, &p.P50, &p.P90, &p.P99, &p.IOWait, &p.Sustained); err != nil {
			return nil, fmt.Errorf("store: steps of run %d: %w", id, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: steps of run %d: %w", id, err)
	}
	return out, nil
}

// EachSample calls fn for every sample of run id that f selects, in time
// order, without holding them all in memory (exports of long runs). An
// error from fn stops the walk and is returned.
func (s *Store) EachSample(ctx context.Context, id int64, f SampleFilter, fn func(Sample) error) error {
	q := `SELECT t, kind, job, value, bytes, ok, err, node FROM samples WHERE run_id=? AND (?='' OR kind=?) ORDER BY t, ` + s.d.insertOrder()
	rows, err := s.db.QueryContext(ctx, s.d.q(q), id, f.Kind, f.Kind)
	if err != nil {
		return fmt.Errorf("store: samples of run %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var sm Sample
		if err := rows.Scan(&sm.T, &sm.Kind, &sm.Job, &sm.Value, &sm.Bytes, &sm.OK, &sm.Err, &sm.Node); err != nil {
			return fmt.Errorf("store: samples of run %d: %w", id, err)
		}
		if err := fn(sm); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: samples of run %d: %w", id, err)
	}
	return nil
}

// errEnough stops EachSample when Samples has its Limit.
var errEnough = errors.New("enough")

// Samples returns the samples of run id that f selects, in time order.
func (s *Store) Samples(ctx context.Context, id int64, f SampleFilter) ([]Sample, error) {
	var out []Sample
	err := s.EachSample(ctx, id, f, func(sm Sample) error {
		if f.Limit > 0 && len(out) >= f.Limit {
			return errEnough
		}
		out = append(out, sm)
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	return out, nil
}

// SampleSeries returns (t, value) of run id's successful samples of kind
// (those of node only, unless node is ""), thinned to at most max points
// (0: 2000) by keeping every k-th: the time series the dashboard plots
// without shipping a million rows.
func (s *Store) SampleSeries(ctx context.Context, id int64, kind, node string, max int) (t, v []float64, err error) {
	if max <= 0 {
		max = 2000
	}
	var n int64
	if err := s.db.QueryRowContext(ctx, s.d.q(`SELECT COUNT(*) FROM samples WHERE run_id=? AND kind=? AND ok AND (?='' OR node=?)`),
		id, kind, node, node).Scan(&n); err != nil {
		return nil, nil, fmt.Errorf("store: series of run %d: %w", id, err)
	}
	step := n/int64(max) + 1
	rows, err := s.db.QueryContext(ctx, s.d.q(`SELECT t, value FROM
		(SELECT t, value, ROW_NUMBER() OVER (ORDER BY t) AS rn FROM samples
		 WHERE run_id=? AND kind=? AND ok AND (?='' OR node=?)) AS thinned
		WHERE (rn-1) % ? = 0 ORDER BY t`), id, kind, node, node, step)
	if err != nil {
		return nil, nil, fmt.Errorf("store: series of run %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var a, b float64
		if err := rows.Scan(&a, &b); err != nil {
			return nil, nil, fmt.Errorf("store: series of run %d: %w", id, err)
		}
		t, v = append(t, a), append(v, b)
	}
	return t, v, rows.Err()
}

// Nodes returns the nodes whose samples run id holds, sorted; none for
// a run from one process.
func (s *Store) Nodes(ctx context.Context, id int64) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.d.q(`SELECT DISTINCT node FROM samples WHERE run_id=? AND node!='' ORDER BY node`), id)
	if err != nil {
		return nil, fmt.Errorf("store: nodes of run %d: %w", id, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("store: nodes of run %d: %w", id, err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Delete removes run id with its steps and samples.
func (s *Store) Delete(ctx context.Context, id int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: delete run %d: %w", id, err)
	}
	defer tx.Rollback()
	for _, q := range []string{`DELETE FROM samples WHERE run_id=?`, `DELETE FROM steps WHERE run_id=?`} {
		if _, err := tx.ExecContext(ctx, s.d.q(q), id); err != nil {
			return fmt.Errorf("store: delete run %d: %w", id, err)
		}
	}
	res, err := tx.ExecContext(ctx, s.d.q(`DELETE FROM runs WHERE id=?`), id)
	if err != nil {
		return fmt.Errorf("store: delete run %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("delete run %d: %w", id, ErrNotFound)
	}
	return tx.Commit()
}

// Prune deletes the finished runs of kind that started before before,
// with their steps and samples, in one transaction, and returns how many
// runs it deleted. Running runs are kept: their writer still holds them.
func (s *Store) Prune(ctx context.Context, kind string, before time.Time) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: prune %s runs: %w", kind, err)
	}
	defer tx.Rollback() // no-op after Commit
	const old = `SELECT id FROM runs WHERE kind=? AND started<? AND status!='running'`
	cut := before.UnixNano()
	for _, q := range []string{`DELETE FROM samples WHERE run_id IN (` + old + `)`,
		`DELETE FROM steps WHERE run_id IN (` + old + `)`} {
		if _, err := tx.ExecContext(ctx, s.d.q(q), kind, cut); err != nil {
			return 0, fmt.Errorf("store: prune %s runs: %w", kind, err)
		}
	}
	res, err := tx.ExecContext(ctx, s.d.q(`DELETE FROM runs WHERE id IN (`+old+`)`), kind, cut)
	if err != nil {
		return 0, fmt.Errorf("store: prune %s runs: %w", kind, err)
	}
	n, _ := res.RowsAffected()
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: prune %s runs: %w", kind, err)
	}
	return n, nil
}

// ClaimPeriod claims the current period of scheduled work name (a round
// of the site tests) for the caller, and reports whether it got it: of
// all the processes sharing the store, one gets each period, so work
// scheduled on every federator of a fleet runs once per period between
// them. Periods are counted on the database's clock, so the processes'
// clocks need not agree; a caller should ask in the middle of its own
// period (PeriodStart), where a skew of less than half a period does not
// matter.
func (s *Store) ClaimPeriod(ctx context.Context, name string, period time.Duration) (bool, error) {
	ms := max(period.Milliseconds(), 1)
	now := `CAST(unixepoch('subsec') * 1000 AS INTEGER)`
	if s.d.pg {
		now = `CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)`
	}
	var got int64
	err := s.db.QueryRowContext(ctx, s.d.q(`INSERT INTO claims(name, period) VALUES (?, `+now+` / ?)
		ON CONFLICT DO NOTHING RETURNING period`), name, ms).Scan(&got)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store: claim %s: %w", name, err)
	}
	// Older claims are of no use: keep the newest 1,000 periods of this work
	// (under 17 hours at the site tests' default minute).
	_, _ = s.db.ExecContext(ctx, s.d.q(`DELETE FROM claims WHERE name=? AND period < ?`), name, got-1000)
	return true, nil
}
