package buffer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
	sqlite3 "modernc.org/sqlite/lib"
)

// The journal is the buffer's truth; memory mirrors it. Its state
// machine, and what a kill -9 between any two steps leaves:
//
//  1. tmp/X          the upload streams here (adler32 on the way), fsync.
//  2. data/S         rename tmp/X → data/S, fsync data/.
//  3. row pending    INSERT (and DELETE of the path's older rows) commits.
//     Only now is the PUT answered 2xx.
//  4. target done    one UPDATE per target, after its copy is verified.
//  5. row migrated   UPDATE, once every target is done.
//  6. row gone       DELETE (retired, or superseded by a newer version).
//  7. data/S gone    os.Remove once no reader holds it, fsync data/.
//
// A DELETE of a path the buffer holds is a row too (state 2, no file in
// data/): its INSERT deletes the path's older rows in the same
// transaction, like a new version's, and only then is the DELETE
// answered. Step 4 is then one UPDATE per target the path was deleted on
// (or found missing), and step 6 the row's DELETE once every target is
// done. A kill -9 anywhere leaves either the older version (not yet
// answered) or the pending delete, which recovery queues again.
//
// Recovery (Buffer.recover): a file in tmp/ is from step 1 (never
// acknowledged), a file in data/ without a row from step 2 or 6 (never
// acknowledged, or retired): both removed. A pending row is queued again;
// its done targets stay done, the others are sent again (a kill mid-copy
// left at most a hidden temp file or an unverified copy there, which the
// new copy replaces). No file is ever answered 2xx before step 3, and a
// row never exists without its complete, fsynced file.
//
// Durability of the commit: journal_mode=WAL with synchronous=FULL.
// In WAL mode FULL fsyncs the WAL at every commit, so a committed row
// survives power loss, not only a process crash (NORMAL in WAL mode
// would survive kill -9 but may roll the last commits back on power
// loss, and an acknowledged PUT must not go back). The cost is one WAL
// fsync per PUT, small beside the data file's own fsync. Checkpoints are
// SQLite's automatic ones (every 1000 WAL pages, in the committing
// connection); with FULL the WAL is synced before its pages are copied
// and the database synced before the WAL is reset, so a crash during a
// checkpoint loses nothing either. One connection serializes every
// statement: writes take a few milliseconds, and reads are served from
// memory, not from here.
const journalSchema = `
CREATE TABLE IF NOT EXISTS files (
	seq INTEGER PRIMARY KEY AUTOINCREMENT, -- the version; never reused
	path TEXT NOT NULL,                    -- clean request path
	spool TEXT NOT NULL UNIQUE,            -- file name in data/
	size INTEGER NOT NULL,
	adler32 TEXT NOT NULL,
	md5 TEXT NOT NULL DEFAULT '',
	mtime INTEGER NOT NULL,                -- accepted at, unix ns
	state INTEGER NOT NULL,                -- 0 pending, 1 migrated, 2 delete pending (no spool file)
	migrated_at INTEGER NOT NULL DEFAULT 0,
	attempts INTEGER NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT '',
	failing_since INTEGER NOT NULL DEFAULT 0 -- first failure of the run of failures last_error ends, unix ns; 0: none
);
CREATE INDEX IF NOT EXISTS files_path ON files(path);
CREATE TABLE IF NOT EXISTS targets (
	seq INTEGER NOT NULL REFERENCES files(seq) ON DELETE CASCADE,
	target TEXT NOT NULL,                  -- endpoint name
	done INTEGER NOT NULL DEFAULT 0,       -- 1 once verified there
	PRIMARY KEY (seq, target)
);
`

// Row states.
const (
	// statePending is a file not yet verified on every target.
	statePending = 0
	// stateMigrated is a file verified on every target, kept to be read.
	stateMigrated = 1
	// stateDeleting is a DELETE acknowledged but not yet carried out on
	// every target: the path is gone for readers of the buffer.
	stateDeleting = 2
)

// journal is the SQLite database of the buffer's files.
type journal struct {
	db *sql.DB
}

// journalFull reports whether err says the journal's disk is full
// (SQLite turns ENOSPC into SQLITE_FULL): an upload is then answered 507
// as one whose spool write found the disk full is (statusOfFS).
func journalFull(err error) bool {
	var se *sqlite.Error
	return errors.Is(err, syscall.ENOSPC) || errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL
}

func openJournal(ctx context.Context, file string) (*journal, error) {
	dsn := "file:" + file + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)" +
		"&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("buffer: journal %s: %w", file, err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	if _, err := db.ExecContext(ctx, journalSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("buffer: journal %s: schema: %w", file, err)
	}
	if err := addFailingSince(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("buffer: journal %s: %w", file, err)
	}
	var sync int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync < 2 {
		db.Close()
		return nil, fmt.Errorf("buffer: journal %s: synchronous is %d, want FULL (2): %v", file, sync, err)
	}
	return &journal{db: db}, nil
}

// addFailingSince adds the failing_since column to a journal made before
// it existed (CREATE TABLE IF NOT EXISTS leaves an older table as it
// is). Its rows read 0, "time unknown", which recovery counts from the
// start of the process as before.
func addFailingSince(ctx context.Context, db *sql.DB) error {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_info('files') WHERE name = 'failing_since'").Scan(&n); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if n > 0 {
		return nil
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE files ADD COLUMN failing_since INTEGER NOT NULL DEFAULT 0"); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return nil
}

func (j *journal) close() error { return j.db.Close() }

// insert commits e (a file, or a pending delete) as the newest version
// of its path with its targets, deleting the path's older rows (their
// files are the caller's to remove). It sets e.seq and reports whether an
// older version was there.
func (j *journal) insert(ctx context.Context, e *entry) (replaced bool, err error) {
	tx, err := j.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("buffer: journal insert: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, "DELETE FROM files WHERE path = ?", e.path)
	if err != nil {
		return false, fmt.Errorf("buffer: journal insert: %w", err)
	}
	n, _ := res.RowsAffected()
	res, err = tx.ExecContext(ctx, "INSERT INTO files (path, spool, size, adler32, md5, mtime, state) VALUES (?, ?, ?, ?, ?, ?, ?)",
		e.path, e.spool, e.size, e.adler, e.md5, e.mtime.UnixNano(), e.state)
	if err != nil {
		return false, fmt.Errorf("buffer: journal insert: %w", err)
	}
	if e.seq, err = res.LastInsertId(); err != nil {
		return false, fmt.Errorf("buffer: journal insert: %w", err)
	}
	for _, t := range e.targets {
		if _, err = tx.ExecContext(ctx, "INSERT INTO targets (seq, target) VALUES (?, ?)", e.seq, t); err != nil {
			return false, fmt.Errorf("buffer: journal insert: %w", err)
		}
	}
	if err = tx.Commit(); err != nil {
		return false, fmt.Errorf("buffer: journal insert: commit: %w", err)
	}
	return n > 0, nil
}

// targetDone records that target holds a verified copy of version seq.
// A row gone meanwhile (superseded) is not an error.
func (j *journal) targetDone(ctx context.Context, seq int64, target string) error {
	if _, err := j.db.ExecContext(ctx, "UPDATE targets SET done = 1 WHERE seq = ? AND target = ?", seq, target); err != nil {
		return fmt.Errorf("buffer: journal: target done: %w", err)
	}
	return nil
}

// migrated records that every target of seq holds it.
func (j *journal) migrated(ctx context.Context, seq int64, at time.Time) error {
	if _, err := j.db.ExecContext(ctx, "UPDATE files SET state = ?, migrated_at = ?, last_error = '', failing_since = 0 WHERE seq = ?",
		stateMigrated, at.UnixNano(), seq); err != nil {
		return fmt.Errorf("buffer: journal: migrated: %w", err)
	}
	return nil
}

// failed records a failed attempt and since when its file has been
// failing, so failures, and their age, show across restarts: an alert on
// a file failing for an hour must not fall silent because the process
// restarted.
func (j *journal) failed(ctx context.Context, seq int64, attempts int, msg string, since time.Time) error {
	if _, err := j.db.ExecContext(ctx, "UPDATE files SET attempts = ?, last_error = ?, failing_since = ? WHERE seq = ?",
		attempts, msg, since.UnixNano(), seq); err != nil {
		return fmt.Errorf("buffer: journal: failed: %w", err)
	}
	return nil
}

// retire deletes seq if it is migrated, and reports whether it did. A
// pending row is never retired, whatever the caller believed.
func (j *journal) retire(ctx context.Context, seq int64) (bool, error) {
	res, err := j.db.ExecContext(ctx, "DELETE FROM files WHERE seq = ? AND state = ?", seq, stateMigrated)
	if err != nil {
		return false, fmt.Errorf("buffer: journal: retire: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// remove deletes seq whatever its state: a row dropped by recovery, or a
// pending delete carried out on every target.
func (j *journal) remove(ctx context.Context, seq int64) error {
	if _, err := j.db.ExecContext(ctx, "DELETE FROM files WHERE seq = ?", seq); err != nil {
		return fmt.Errorf("buffer: journal: remove: %w", err)
	}
	return nil
}

// load returns every row with its targets.
func (j *journal) load(ctx context.Context) ([]*entry, error) {
	rows, err := j.db.QueryContext(ctx, "SELECT seq, path, spool, size, adler32, md5, mtime, state, migrated_at, attempts, last_error, failing_since FROM files ORDER BY seq")
	if err != nil {
		return nil, fmt.Errorf("buffer: journal load: %w", err)
	}
	defer rows.Close()
	var out []*entry
	bySeq := map[int64]*entry{}
	for rows.Next() {
		e := &entry{done: map[string]bool{}}
		var mtime, mat, since int64
		if err := rows.Scan(&e.seq, &e.path, &e.spool, &e.size, &e.adler, &e.md5, &mtime, &e.state, &mat, &e.attempts, &e.lastErr, &since); err != nil {
			return nil, fmt.Errorf("buffer: journal load: %w", err)
		}
		e.mtime = time.Unix(0, mtime)
		if mat != 0 {
			e.migratedAt = time.Unix(0, mat)
		}
		if since != 0 {
			e.failingSince = time.Unix(0, since)
		}
		out = append(out, e)
		bySeq[e.seq] = e
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("buffer: journal load: %w", err)
	}
	trows, err := j.db.QueryContext(ctx, "SELECT seq, target, done FROM targets ORDER BY seq, target")
	if err != nil {
		return nil, fmt.Errorf("buffer: journal load: %w", err)
	}
	defer trows.Close()
	for trows.Next() {
		var seq int64
		var t string
		var done int
		if err := trows.Scan(&seq, &t, &done); err != nil {
			return nil, fmt.Errorf("buffer: journal load: %w", err)
		}
		e := bySeq[seq]
		if e == nil {
			continue
		}
		e.targets = append(e.targets, t)
		if done != 0 {
			e.done[t] = true
		}
	}
	if err := trows.Err(); err != nil {
		return nil, fmt.Errorf("buffer: journal load: %w", err)
	}
	return out, nil
}

// short keeps an error message to one line for the journal and /api.
func short(msg string) string {
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > 300 {
		msg = msg[:300]
	}
	return msg
}
