package results

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver (PostgreSQL)
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver, pure Go
)

// A store is SQLite (a file, the embedded default) or PostgreSQL (a
// postgres:// URL, for a fleet of federators and bench agents writing one
// history). The queries are written once, with ? placeholders and SQL
// both engines read the same way; a dialect holds what differs: the
// driver, the column types of the schema, the placeholders, where the
// schema version is kept, and the lock that serialises migrations.
type dialect struct {
	// pg: PostgreSQL; else SQLite.
	pg bool
}

func (d dialect) String() string {
	if d.pg {
		return "postgres"
	}
	return "sqlite"
}

// base is the schema of version 0, created when missing; the migrations
// bring it up to schemaVersion.
func (d dialect) base() string {
	if d.pg {
		return postgresBase
	}
	return sqliteBase
}

// insertOrder is the column that keeps samples in insertion order among
// equal times.
func (d dialect) insertOrder() string {
	if d.pg {
		return "seq"
	}
	return "rowid"
}

// IsURL reports whether path names a PostgreSQL database
// (postgres://... or postgresql://...) rather than a SQLite file.
func IsURL(path string) bool {
	return strings.HasPrefix(path, "postgres://") || strings.HasPrefix(path, "postgresql://")
}

const sqliteBase = `
CREATE TABLE IF NOT EXISTS runs (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	kind TEXT NOT NULL,
	target TEXT NOT NULL,
	site TEXT NOT NULL,
	label TEXT NOT NULL DEFAULT '',
	params TEXT NOT NULL DEFAULT '{}',
	started INTEGER NOT NULL,          -- unix nanoseconds
	ended INTEGER NOT NULL DEFAULT 0,  -- unix nanoseconds, 0 while running
	status TEXT NOT NULL,
	classification TEXT NOT NULL DEFAULT '',
	reasons TEXT NOT NULL DEFAULT '[]',
	summary TEXT NOT NULL DEFAULT '{}',
	error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_site ON runs(site, kind, id);
CREATE INDEX IF NOT EXISTS runs_kind ON runs(kind, id);
CREATE TABLE IF NOT EXISTS steps (
	run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	idx INTEGER NOT NULL,
	t_start REAL NOT NULL, t_end REAL NOT NULL,
	jobs INTEGER NOT NULL,
	expected REAL NOT NULL, observed REAL NOT NULL,
	ops INTEGER NOT NULL, failures INTEGER NOT NULL, fail_frac REAL NOT NULL,
	mean REAL NOT NULL, p50 REAL NOT NULL, p90 REAL NOT NULL, p99 REAL NOT NULL,
	io_wait REAL NOT NULL, sustained INTEGER NOT NULL,
	PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS samples (
	run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	t REAL NOT NULL,
	kind TEXT NOT NULL,
	job INTEGER NOT NULL,
	value REAL NOT NULL,
	bytes INTEGER NOT NULL,
	ok INTEGER NOT NULL,
	err TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS samples_run ON samples(run_id, kind, t);
`

// postgresBase is sqliteBase in PostgreSQL's types: 64-bit integers
// (unix nanoseconds do not fit in INTEGER), DOUBLE PRECISION (REAL is 4
// bytes there), a boolean ok, and a sequence for the insertion order
// SQLite's rowid gives.
const postgresBase = `
CREATE TABLE IF NOT EXISTS lakefed_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
	id BIGSERIAL PRIMARY KEY,
	kind TEXT NOT NULL,
	target TEXT NOT NULL,
	site TEXT NOT NULL,
	label TEXT NOT NULL DEFAULT '',
	params TEXT NOT NULL DEFAULT '{}',
	started BIGINT NOT NULL,
	ended BIGINT NOT NULL DEFAULT 0,
	status TEXT NOT NULL,
	classification TEXT NOT NULL DEFAULT '',
	reasons TEXT NOT NULL DEFAULT '[]',
	summary TEXT NOT NULL DEFAULT '{}',
	error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_site ON runs(site, kind, id);
CREATE INDEX IF NOT EXISTS runs_kind ON runs(kind, id);
CREATE TABLE IF NOT EXISTS steps (
	run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	idx INTEGER NOT NULL,
	t_start DOUBLE PRECISION NOT NULL, t_end DOUBLE PRECISION NOT NULL,
	jobs INTEGER NOT NULL,
	expected DOUBLE PRECISION NOT NULL, observed DOUBLE PRECISION NOT NULL,
	ops BIGINT NOT NULL, failures BIGINT NOT NULL, fail_frac DOUBLE PRECISION NOT NULL,
	mean DOUBLE PRECISION NOT NULL, p50 DOUBLE PRECISION NOT NULL, p90 DOUBLE PRECISION NOT NULL,
	p99 DOUBLE PRECISION NOT NULL, io_wait DOUBLE PRECISION NOT NULL, sustained INTEGER NOT NULL,
	PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS samples (
	seq BIGSERIAL,
	run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	t DOUBLE PRECISION NOT NULL,
	kind TEXT NOT NULL,
	job INTEGER NOT NULL,
	value DOUBLE PRECISION NOT NULL,
	bytes BIGINT NOT NULL,
	ok BOOLEAN NOT NULL,
	err TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS samples_run ON samples(run_id, kind, t);
`

// open opens the database path names: a PostgreSQL URL, ":memory:" (a
// private SQLite store, for tests), or a SQLite file, created with its
// directory when missing.
func open(path string) (*sql.DB, dialect, error) {
	if IsURL(path) {
		db, err := sql.Open("pgx", path)
		return db, dialect{pg: true}, err
	}
	dsn := ":memory:"
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, dialect{}, err
		}
		dsn = "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)" +
			"&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err == nil && path == ":memory:" {
		// Every connection to ":memory:" is a different database.
		db.SetMaxOpenConns(1)
		_, err = db.Exec("PRAGMA foreign_keys = ON")
	}
	return db, dialect{}, err
}

// q is query in the dialect's placeholders.
func (d dialect) q(query string) string {
	if !d.pg {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lock serialises the schema's creation and migration between processes
// opening one database at once (three federators starting together):
// PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe against a
// concurrent one. SQLite's write lock does it there.
func (d dialect) lock(ctx context.Context, tx *sql.Tx) error {
	if !d.pg {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7243019)`) // a constant of lakefed's
	return err
}

// version reads the schema version (0: a database of before versions).
func (d dialect) version(ctx context.Context, tx *sql.Tx) (int, error) {
	var v int
	if !d.pg {
		err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
		return v, err
	}
	err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM lakefed_schema").Scan(&v)
	return v, err
}

// setVersion records the schema version v.
func (d dialect) setVersion(ctx context.Context, tx *sql.Tx, v int) error {
	if !d.pg {
		// PRAGMA takes no parameters; v is a constant of this file.
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v))
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM lakefed_schema"); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO lakefed_schema(version) VALUES ($1)", v)
	return err
}
